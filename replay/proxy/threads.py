"""Threading: which recorded conversation a request's history extends.

A client resends the whole history with every request. The history is cut
into items (the system prompt, each user message, each assistant message,
each tool result) and each item gets a key that both sides of the wire agree
on: an assistant message is keyed by its text and its calls' names and
arguments (never thinking or ids, which clients drop or Gemini invents), a
tool result by its content. A conversation's keys are chained (each hash
covers all before it), so the longest recorded prefix of a request is found
with one dictionary lookup per item, however many conversations there are.

>>> from turnlog.engine.model.messages import Message, Text
>>> index = ThreadIndex()
>>> keys = history_keys("openai", "sys", [Message(role="user", parts=(Text(text="hi"),))])
>>> index.add("c1", keys, [("c1", 1), ("c1", 2)])
>>> index.match(keys + history_keys("openai", "", [Message(role="user", parts=(Text(text="more"),))])[1:])
Match(conversation_id='c1', matched=2, extends=True, at=('c1', 2))
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from turnlog.engine.model.messages import Message, Part, Text, ToolCall, ToolResult

__all__ = ["KeyMemo", "Match", "ThreadIndex", "chain", "history_keys", "item_key", "message_items",
           "message_keys"]

_encode = msgspec.json.Encoder(order="sorted").encode


def _assistant_key(parts: Sequence[Part]) -> bytes:
    text = "".join(p.text for p in parts if type(p) is Text).strip()
    calls = [(p.name, p.arguments if p.invalid is None else p.raw_arguments)
             for p in parts if type(p) is ToolCall]
    return _encode(["a", text, calls])


def message_items(message: Message) -> list[tuple[str, Any]]:
    """One neutral message as items: ``("assistant", parts)``, ``("result", ToolResult)``
    (one per result) and ``("user", parts)`` (its other parts)."""
    if message.role == "assistant":
        return [("assistant", message.parts)]
    items: list[tuple[str, Any]] = [("result", p) for p in message.parts if type(p) is ToolResult]
    rest = tuple(p for p in message.parts if type(p) is not ToolResult)
    return items + ([("user", rest)] if rest else [])


def item_key(kind: str, value: Any) -> bytes:
    """The key of one item (``message_items``; ``("system", (wire, text))`` for the system
    prompt: a request threads only onto conversations recorded on its own wire)."""
    if kind == "assistant":
        return _assistant_key(value)
    if kind == "result":
        return _encode(["r", value.content])
    if kind == "system":
        return _encode(["s", *value])
    return _encode(["u", msgspec.to_builtins(value)])


def message_keys(message: Message) -> list[bytes]:
    """The item keys of one neutral message (a tool message has one per result)."""
    return [item_key(kind, value) for kind, value in message_items(message)]


def history_keys(wire: str, system: str, messages: Sequence[Message]) -> list[bytes]:
    """The item keys of a whole history sent on ``wire``: the system prompt first."""
    keys = [item_key("system", (wire, system))]
    for message in messages:
        keys.extend(message_keys(message))
    return keys


class KeyMemo:
    """``history_keys`` that keys each message object once.

    A request that resends a history read before holds the very ``Message``
    objects of that reading (``wires.HistoryCache``), so their keys are looked
    up by identity (the object is kept beside its keys: an id is never taken
    for another's); the memo is emptied when it holds ``size`` messages.
    """

    def __init__(self, size: int = 1 << 16) -> None:
        self.size = size
        self._memo: dict[int, tuple[Message, list[bytes]]] = {}

    def history_keys(self, wire: str, system: str, messages: Sequence[Message]) -> list[bytes]:
        """``history_keys(wire, system, messages)``."""
        memo = self._memo
        keys = [item_key("system", (wire, system))]
        for message in messages:
            held = memo.get(id(message))
            if held is None or held[0] is not message:
                if len(memo) >= self.size:
                    memo.clear()
                held = memo[id(message)] = (message, message_keys(message))
            keys += held[1]
        return keys


def chain(keys: Sequence[bytes], start: bytes = b"") -> list[bytes]:
    """Each prefix of ``keys`` as one hash (``chain(k)[i]`` covers ``k[:i + 1]``)."""
    out, h = [], start
    for key in keys:
        h = hashlib.sha256(h + key).digest()
        out.append(h)
    return out


@dataclass(frozen=True)
class Match:
    """The conversation a request threads onto and how far it matched.

    ``extends``: the request continues it from its end; otherwise it departs
    after ``matched`` items, at ``at`` (the stream and seq that recorded the
    last matched item: the fork point).
    """

    conversation_id: str
    matched: int
    extends: bool
    at: tuple[str, int]


@dataclass
class _Thread:
    hashes: list[bytes] = field(default_factory=list)
    points: list[tuple[str, int]] = field(default_factory=list)
    order: int = 0


class ThreadIndex:
    """Every recorded conversation's item chain, and the longest-match lookup."""

    def __init__(self) -> None:
        self._threads: dict[str, _Thread] = {}
        self._by_hash: dict[bytes, dict[str, int]] = {}
        #: each conversation's last hash -> the conversations that end there (a request
        #: that extends one is found without scanning every holder of a shared prefix)
        self._ends: dict[bytes, set[str]] = {}
        self._order = 0

    def __contains__(self, conversation_id: object) -> bool:
        return conversation_id in self._threads

    def length(self, conversation_id: str) -> int:
        """How many items ``conversation_id`` holds."""
        return len(self._threads[conversation_id].hashes)

    def add(self, conversation_id: str, keys: Sequence[bytes],
            points: Sequence[tuple[str, int]]) -> None:
        """Append items to ``conversation_id`` (new or known).

        ``points[i]`` is the (stream, seq) of the event that recorded item i.
        """
        thread = self._threads.setdefault(conversation_id, _Thread())
        self._order += 1
        thread.order = self._order
        start = thread.hashes[-1] if thread.hashes else b""
        self._unend(conversation_id, thread)
        for h, point in zip(chain(keys, start), points, strict=True):
            self._by_hash.setdefault(h, {})[conversation_id] = len(thread.hashes)
            thread.hashes.append(h)
            thread.points.append(point)
        if thread.hashes:
            self._ends.setdefault(thread.hashes[-1], set()).add(conversation_id)

    def _unend(self, conversation_id: str, thread: _Thread) -> None:
        if thread.hashes:
            ending = self._ends.get(thread.hashes[-1])
            if ending is not None:
                ending.discard(conversation_id)

    def branch(self, parent: str, matched: int, child: str) -> None:
        """Start ``child`` (a fork) with the first ``matched`` items of ``parent``."""
        source = self._threads[parent]
        self._order += 1
        thread = self._threads[child] = _Thread(source.hashes[:matched], source.points[:matched],
                                                self._order)
        for i, h in enumerate(thread.hashes):
            self._by_hash.setdefault(h, {})[child] = i
        if thread.hashes:
            self._ends.setdefault(thread.hashes[-1], set()).add(child)

    def match(self, keys: Sequence[bytes], only: str | None = None,
              least: int = 1) -> Match | None:
        """The conversation ``keys`` threads onto (``None``: none shares even the system prompt).

        A conversation whose whole recorded history the request extends wins
        (the longest such; a rerun of a recorded session stays one
        conversation rather than forking at every turn that happens to
        repeat the earlier run). Otherwise the longest match is a departure
        from it. Ties go to the most recently recorded. ``only`` restricts
        the search to that conversation (the ``x-turnlog-conversation`` header);
        a departure that shares fewer than ``least`` items is no match.
        """
        hashes = chain(keys)
        departure: Match | None = None
        for n in range(len(hashes), 0, -1):
            ends = [c for c in self._ends.get(hashes[n - 1], ()) if only is None or c == only]
            if ends:
                best = max(ends, key=lambda c: self._threads[c].order)
                return Match(best, n, True, self._threads[best].points[n - 1])
            if departure is None and n >= least:
                holders = self._by_hash.get(hashes[n - 1])
                if not holders:
                    continue
                candidates = [c for c in holders if only is None or c == only]
                if not candidates:
                    continue
                best = max(candidates, key=lambda c: self._threads[c].order)
                departure = Match(best, n, False, self._threads[best].points[n - 1])
        return departure
