"""``turnlog proxy --replay``: answer from the journal, with no upstream at all.

Every proxied conversation is read once, at start, into a ``ReplayBook``:
each recorded request (its history's item chain, ``threads``) with its
answer. A request whose history and settings (model, tools, parameters)
match a recorded point gets the recorded answer, streamed when it asks for
a stream. Any other request gets a ``Divergence``: which conversation it
follows furthest, the first message that differs and how. Fields that carry
no meaning never count (``IGNORED``, and those given with ``--ignore``);
headers are never compared.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from turnlog.engine.errors import TurnlogError
from turnlog.engine.model.events import (
    ConversationStarted,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ToolCompleted,
    UserMessage,
    decode_event,
)
from turnlog.engine.model.messages import Message, Text, ToolCall, ToolResult
from turnlog.journal import JournalProtocol

from .recorder import proxied
from .threads import ThreadIndex, chain, item_key, message_items
from .wires import WIRES, ParsedRequest, error_body

__all__ = ["IGNORED", "Divergence", "ReplayBook", "describe"]

#: Request fields that never count as a difference.
IGNORED = frozenset({"user", "metadata", "stream_options", "request_id", "store"})


class Divergence(TurnlogError):
    """A request that matches no recorded point; the message says where it departs."""


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[:limit - 1] + "…")


def describe(kind: str, value: Any) -> str:
    """One item in words: ``user message 'hi'``, ``tool result '…'`` …"""
    if kind == "system":
        return f"system prompt {_short(value[1])}"
    if kind == "result":
        return f"tool result for {value.name or value.call_id} {_short(value.content)}"
    text = "".join(p.text for p in value if type(p) is Text)
    if kind == "assistant":
        calls = [p.name for p in value if type(p) is ToolCall]
        said = f" {_short(text)}" if text else ""
        return f"assistant message{said}" + (f" calling {', '.join(calls)}" if calls else "")
    return f"user message {_short(text)}"


@dataclass
class _Point:
    conversation_id: str
    wire: str
    settings: dict[str, Any]
    status: int = 200
    body: Any = None


def _tools(tools: Iterable[Any]) -> list[Any]:
    return sorted(([t.name, t.parameters] for t in tools), key=lambda t: t[0])


class ReplayBook:
    """The recorded requests of every proxied conversation and their answers."""

    def __init__(self, journal: JournalProtocol, ignore: Iterable[str] = ()) -> None:
        self.ignore = IGNORED | set(ignore)
        self.index = ThreadIndex()
        self.points: dict[bytes, list[_Point]] = {}
        self.items: dict[str, list[tuple[str, Any]]] = {}
        for info in sorted(journal.streams(), key=lambda s: s.first_recorded_at):
            self._load(journal, info.stream_id)

    def settings(self, model: str, tools: Iterable[Any], parameters: dict[str, Any]) -> dict:
        """What besides the history must match: model, tools, parameters not ignored."""
        return {"model": model, "tools": _tools(tools),
                **{k: v for k, v in parameters.items() if k not in self.ignore}}

    def _load(self, journal: JournalProtocol, stream_id: str) -> None:
        rows = [(row.stream_id, row.seq, decode_event(row.type, row.version, row.payload))
                for row in journal.lineage(stream_id)]
        own = next((e for s, _, e in rows if s == stream_id and type(e) is ConversationStarted),
                   None)
        meta = proxied(own) if own is not None else None
        if meta is None or meta.get("unparsed"):
            return
        wire = meta.get("wire", own.provider)
        items: list[tuple[str, Any]] = []
        points: list[tuple[str, int]] = []
        tools: tuple = ()
        pending: _Point | None = None
        for stream, seq, event in rows:
            kind = type(event)
            new: list[tuple[str, Any]] = []
            if kind is ConversationStarted:
                tools = event.tools
                if event.fork is None:
                    new = [("system", (wire, event.system))]
            elif kind is UserMessage:
                new = message_items(Message(role="user", parts=event.parts))
            elif kind is ToolCompleted:
                new = [("result", ToolResult(call_id=event.call_id, name=event.name,
                                             content=event.content))]
            elif kind is ModelRequested:
                pending = _Point(stream_id, wire, self.settings(event.model, tools,
                                                                event.parameters))
                at = chain([item_key(*i) for i in items])[-1]
                self.points.setdefault(at, []).append(pending)
            elif kind is ModelResponded:
                if pending is not None and event.source == "provider":
                    pending.body = event.raw
                pending = None
                new = [("assistant", event.parts)]
            elif kind is ModelFailed and pending is not None:
                pending.status = event.status or 502
                pending.body = error_body(WIRES[wire], pending.status, event.message)
                pending = None
            items += new
            points += [(stream, seq)] * len(new)
        self.items[stream_id] = items
        self.index.add(stream_id, [item_key(*i) for i in items], points)

    def answer(self, wire: str, parsed: ParsedRequest) -> tuple[int, Any]:
        """``(status, body)`` recorded for this request; ``Divergence`` when there is none."""
        items = [("system", (wire, parsed.system))] + [i for m in parsed.messages
                                               for i in message_items(m)]
        keys = [item_key(*i) for i in items]
        settings = self.settings(parsed.model, parsed.tools, parsed.parameters)
        found = [p for p in self.points.get(chain(keys)[-1], []) if p.body is not None]
        same = [p for p in found if p.wire == wire and p.settings == settings]
        if same:
            best = max(same, key=lambda p: p.status == 200)  # a success over a failed attempt
            return best.status, best.body
        if found:
            raise Divergence(self._settings_differ(found[-1], wire, settings))
        raise Divergence(self._history_differs(items, keys))

    def _settings_differ(self, point: _Point, wire: str, settings: dict[str, Any]) -> str:
        head = f"the request follows conversation {point.conversation_id} to its end, but"
        if point.wire != wire:
            return f"{head} that was recorded on the {point.wire} wire, not {wire}"
        for key in sorted(set(point.settings) | set(settings)):
            if point.settings.get(key) != settings.get(key):
                return (f"{head} its {key} differs: recorded {_short(repr(point.settings.get(key)))}, "
                        f"got {_short(repr(settings.get(key)))} (--ignore {key} to disregard it)")
        return f"{head} differs from the recording"  # pragma: no cover - equal settings match

    def _history_differs(self, items: list[tuple[str, Any]], keys: list[bytes]) -> str:
        match = self.index.match(keys)
        if match is None:
            return (f"no conversation recorded on the {items[0][1][0]} wire has this system "
                    f"prompt ({describe(*items[0])})")
        recorded = self.items[match.conversation_id]
        n = match.matched
        where = f"conversation {match.conversation_id}, message {n}"
        if n >= len(items):
            return (f"the request stops at message {n - 1} of conversation "
                    f"{match.conversation_id}, where no answer was recorded")
        if n >= len(recorded):
            return (f"the request goes past the end of conversation {match.conversation_id}: "
                    f"message {n} ({describe(*items[n])}) was never recorded")
        return (f"the request departs from {where}: recorded {describe(*recorded[n])}, "
                f"got {describe(*items[n])}")
