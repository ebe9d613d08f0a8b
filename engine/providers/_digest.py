"""``ModelRequest.digest()`` without re-hashing the whole history every turn.

A request's digest is the SHA-256 of its canonical JSON. Its keys sort as
``messages``, ``model``, ``parameters``, ``system``, ``tools``, so the
canonical bytes are ``{"messages":[m1,m2,...]`` followed by the rest, and
each message's canonical bytes are the same inside the request as alone.
A conversation's requests grow by appending messages, so each thread keeps a
running SHA-256 over the messages it has hashed (a new request continues it
when its first messages are those very objects; messages are frozen) and
only hashes the new ones: O(new messages) per turn instead of
O(history), with exactly the same digest.
"""

from __future__ import annotations

import hashlib
import threading
from operator import is_
from typing import Any

import msgspec

from ..canonical import canonical_bytes
from ..duplicates import _flat_and_plain
from ..messages import Text, ToolCall, ToolResult

__all__ = ["request_digest"]

_HEAD = b'{"messages":['
_sorted = msgspec.json.Encoder(order="sorted")


class _Running(threading.local):
    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.hasher = hashlib.sha256(_HEAD)
        # the rest of the request (model, system, tools, parameters) rarely changes:
        # its plain sorted JSON (C speed) keys its canonical bytes (Python speed)
        self.rest_key = b""
        self.rest = b""


_running = _Running()


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
    """A message's canonical bytes; sorted msgspec output when it is already canonical.

    It is when every string is ASCII (nothing to NFC-normalise) and no float
    hides in tool arguments (an integral float would become an int).
    """
    if (all(map(_plain_part, message.parts)) and (message.provider or "").isascii()
            and (message.model or "").isascii()):
        return _sorted.encode(message)
    return canonical_bytes(msgspec.to_builtins(message))


def request_digest(request: Any) -> str:
    """The SHA-256 of ``request``'s canonical JSON (what ``ModelRequest.digest`` returns)."""
    messages = request.messages
    if not messages:
        return hashlib.sha256(canonical_bytes(msgspec.to_builtins(request))).hexdigest()
    state = _running
    done = state.messages
    n = len(done)
    # identity, not equality: 1 == True, yet their canonical JSON differs
    if n > len(messages) or not all(map(is_, done, messages)):
        done, n = [], 0
        state.messages, state.hasher = done, hashlib.sha256(_HEAD)
    hasher = state.hasher
    for message in messages[n:]:
        data = _message_bytes(message)
        if done:
            hasher.update(b",")
        hasher.update(data)
        done.append(message)
    others = msgspec.structs.replace(request, messages=())
    key = _sorted.encode(others)
    if key != state.rest_key:
        state.rest_key, state.rest = key, canonical_bytes(msgspec.to_builtins(others))
    rest = state.rest
    final = hasher.copy()
    final.update(b"]}" if rest == b"{}" else b"]," + rest[1:])
    return final.hexdigest()
