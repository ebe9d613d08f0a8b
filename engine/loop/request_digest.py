"""``ModelRequest.digest()`` in O(new messages) per turn instead of O(all messages).

The digest is SHA-256 over the request's canonical JSON, whose sorted keys
put ``messages`` first: ``{"messages":[m1,m2,…],"model":…}``. A
conversation's message list only grows, so the hash state after
``{"messages":[m1,…,mk`` is kept and extended with each new message; a copy
of it is finished with the rest of the request. The result equals
``request.digest()`` byte for byte (a test checks it on every turn), and the
live loop's per-turn cost stays flat over thousands of turns.
"""

from __future__ import annotations

import hashlib
from operator import is_
from typing import Any

import msgspec

from turnlog.engine.model.canonical import canonical_bytes
from turnlog.engine.tools.duplicates import _flat_and_plain
from turnlog.engine.model.messages import Text, ToolCall, ToolResult
from turnlog.engine.providers.base import ModelRequest

__all__ = ["RequestDigest"]

_sorted = msgspec.json.Encoder(order="sorted")


def _plain_part(part: Any) -> bool:
    kind = type(part)
    if kind is Text:
        return part.text.isascii()
    if kind is ToolResult:
        return part.content.isascii() and part.name.isascii() and part.call_id.isascii()
    if kind is ToolCall:
        return (part.id.isascii() and part.name.isascii() and part.raw_arguments.isascii()
                and (part.invalid is None or part.invalid.isascii())
                and _flat_and_plain(part.arguments))
    return False


def _message_bytes(message: Any) -> bytes:
    """A message's canonical bytes; msgspec's sorted output when that already is canonical.

    It is when every string is ASCII (nothing to NFC-normalise) and tool
    arguments are flat ints, bools, nulls and ASCII strings (no float that
    canonical form would rewrite).
    """
    if (all(map(_plain_part, message.parts)) and (message.provider or "").isascii()
            and (message.model or "").isascii()):
        return _sorted.encode(message)
    return canonical_bytes(msgspec.to_builtins(message))


class RequestDigest:
    """Digests successive requests of one conversation, hashing each message once.

    >>> from turnlog.engine.model.messages import Message, Text
    >>> m = Message(role="user", parts=(Text(text="hi"),))
    >>> r = ModelRequest(model="x", messages=(m,))
    >>> RequestDigest().digest(r) == r.digest()
    True
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._hash = hashlib.sha256(b'{"messages":[')
        self._count = 0
        self._seen: list[Any] = []
        # the rest (model, system, tools, parameters) rarely changes between turns: its
        # sorted JSON (C speed) keys its canonical bytes (Python speed, tool schemas)
        self._rest_key = b""
        self._rest = b""

    def digest(self, request: ModelRequest) -> str:
        """``request.digest()``, reusing the hash of messages seen in earlier requests."""
        messages = request.messages
        if not messages:
            return request.digest()
        n = self._count
        # every hashed message must be the same object (not merely equal: 1 == True, yet
        # their canonical JSON differs); checking only the last one let a reordered
        # history that ends in a seen message reuse the wrong prefix
        if n > len(messages) or not all(map(is_, self._seen, messages)):
            self._reset()  # a different conversation or history: start over
            n = 0
        h = self._hash
        for i in range(n, len(messages)):
            if i:
                h.update(b",")
            h.update(_message_bytes(messages[i]))
        self._count = len(messages)
        self._seen.extend(messages[n:])
        rest = msgspec.structs.replace(request, messages=())
        key = _sorted.encode(rest)
        if key != self._rest_key:
            # '{"model":…}': never empty, model is required
            self._rest_key, self._rest = key, canonical_bytes(msgspec.to_builtins(rest))
        tail = self._rest
        final = h.copy()
        final.update(b"],")
        final.update(tail[1:])
        return final.hexdigest()
