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

from turnlog.engine.model.canonical import canonical_bytes, sorted_json_bytes
from turnlog.engine.tools.duplicates import _flat_and_plain
from turnlog.engine.model.messages import Text, ToolCall, ToolResult
from turnlog.engine.providers.base import ModelRequest

__all__ = ["RequestDigest"]

_plain_encoder = msgspec.json.Encoder()

def _plain_part(part: Any) -> bool:
    """Whether ``part``'s sorted JSON is canonical once all its text is ASCII: text and tool
    results hold only strings and a flag; a call's arguments must also be flat and plain
    (no float that canonical form would rewrite). Other parts take the canonical walk."""
    kind = type(part)
    if kind is Text or kind is ToolResult:
        return True
    if kind is ToolCall:
        return _flat_and_plain(part.arguments)
    return False


def _message_bytes(message: Any) -> bytes:
    """A message's canonical bytes; its sorted JSON when that already is canonical.

    It is when the sorted JSON is ASCII (no string to NFC-normalise: msgspec writes other
    characters as UTF-8, so one ASCII check in C covers every field) and every part is a
    ``_plain_part``.
    """
    try:
        encoded = sorted_json_bytes(message)
    except UnicodeEncodeError:  # a lone surrogate: the canonical walk names it
        return canonical_bytes(msgspec.to_builtins(message))
    if encoded.isascii() and all(map(_plain_part, message.parts)):
        return encoded  # canonical already: nothing to normalise
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
        # JSON (C speed) keys its canonical bytes (Python speed, tool schemas)
        self._rest_key = b""
        self._rest = b""
        #: the messages of the request digested last (what ``extends`` may name)
        self._last: tuple[Any, ...] | None = None

    def digest(self, request: ModelRequest, *, extends: tuple[Any, ...] | None = None) -> str:
        """``request.digest()``, reusing the hash of messages seen in earlier requests.

        ``extends`` is the caller's word that ``request.messages`` begins with the very
        objects of that tuple (it built one from the other, as ``engine.step`` does): when
        it is the messages of the request digested last, the prefix is not compared
        again, so a turn costs O(new messages) instead of O(all).
        """
        messages = request.messages
        if not messages:
            return request.digest()
        n = self._count
        # every hashed message must be the same object (not merely equal: 1 == True, yet
        # their canonical JSON differs); checking only the last one let a reordered
        # history that ends in a seen message reuse the wrong prefix
        vouched = extends is not None and extends is self._last and n <= len(messages)
        if not vouched and (n > len(messages) or not all(map(is_, self._seen, messages))):
            self._reset()  # a different conversation or history: start over
            n = 0
        h = self._hash
        for i in range(n, len(messages)):
            if i:
                h.update(b",")
            h.update(_message_bytes(messages[i]))
        self._count = len(messages)
        self._seen.extend(messages[n:])
        self._last = messages
        rest = msgspec.structs.replace(request, messages=())
        # the key only tells a changed rest from the last one: JSON in insertion order says
        # that as surely as sorted JSON, without sorting every schema's keys each turn
        key = _plain_encoder.encode(rest)
        if key != self._rest_key:
            # '{"model":…}': never empty, model is required
            self._rest_key, self._rest = key, canonical_bytes(msgspec.to_builtins(rest))
        tail = self._rest
        final = h.copy()
        final.update(b"],")
        final.update(tail[1:])
        return final.hexdigest()
