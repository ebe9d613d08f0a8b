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
from typing import Any

import msgspec

from .canonical import canonical_bytes
from .providers.base import ModelRequest

__all__ = ["RequestDigest"]


class RequestDigest:
    """Digests successive requests of one conversation, hashing each message once.

    >>> from engine.messages import Message, Text
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
        self._last: Any = None

    def digest(self, request: ModelRequest) -> str:
        """``request.digest()``, reusing the hash of messages seen in earlier requests."""
        messages = request.messages
        if not messages:
            return request.digest()
        n = self._count
        if n > len(messages) or (n and messages[n - 1] is not self._last):
            self._reset()  # a different conversation or history: start over
            n = 0
        h = self._hash
        for i in range(n, len(messages)):
            if i:
                h.update(b",")
            h.update(canonical_bytes(msgspec.to_builtins(messages[i])))
        self._count = len(messages)
        self._last = messages[-1]
        rest = msgspec.to_builtins(msgspec.structs.replace(request, messages=()))
        tail = canonical_bytes(rest)  # '{"model":…}': never empty, model is required
        final = h.copy()
        final.update(b"],")
        final.update(tail[1:])
        return final.hexdigest()
