"""A conversation as a readable Markdown transcript (for people, not for re-import)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from turnlog.engine.model.events import (
    ConversationCompleted,
    ConversationFailed,
    ConversationHalted,
    ConversationStarted,
    Event,
    ModelFailed,
    ModelResponded,
    ToolCallRejected,
    ToolCompleted,
    TurnLimitReached,
    UserMessage,
)
from turnlog.engine.model.messages import Image, Text, Thinking, ToolCall

__all__ = ["iter_markdown", "render_markdown"]


def _fence(text: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text}\n{ticks}"


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.splitlines() or [""])


def _parts(parts: Iterable) -> list[str]:
    out = []
    for part in parts:
        if type(part) is Text:
            out.append(part.text)
        elif type(part) is Thinking:
            out.append(_quote(f"(thinking) {part.text}"))
        elif type(part) is ToolCall:
            args = json.dumps(part.arguments, ensure_ascii=False, indent=2)
            out.append(f"**Tool call** `{part.name}` (id `{part.id}`)\n\n{_fence(args, 'json')}")
        elif type(part) is Image:
            out.append(f"*[image {part.media_type}{' ' + part.url if part.url else ''}]*")
    return out


def _event(event: Event) -> list[str]:
    match event:
        case ConversationStarted():
            head = [f"# Conversation `{event.conversation_id}`", "",
                    f"- provider: {event.provider or '—'}, model: {event.model or '—'}, "
                    f"mode: {event.mode}"]
            if event.system:
                head += ["", "## System", "", event.system]
            return head
        case UserMessage():
            ctx = [f"*context: {event.context}*"] if event.context else []
            when = f" — {event.timestamp}" if event.timestamp else ""
            return [f"## User{when}", "", "\n\n".join(_parts(event.parts)), *ctx]
        case ModelResponded():
            who = "/".join(x for x in (event.provider, event.model) if x)
            # a blank line between parts: a tool call never runs on from the text before it
            return [f"## Assistant (turn {event.turn}{', ' + who if who else ''})", "",
                    "\n\n".join(_parts(event.parts))]
        case ToolCompleted():
            status = "ok" if event.success else "failed"
            return [f"**Tool result** `{event.name}` ({status})", "", _fence(event.content)]
        case ToolCallRejected():
            return [f"**Tool call refused** `{event.name}` ({event.reason})", "",
                    _fence(event.content)]
        case ModelFailed():
            return [f"*model failed on turn {event.turn}: {event.error_type}: {event.message}*"]
        case TurnLimitReached():
            return [f"*turn limit reached ({event.max_turns})*"]
        case ConversationHalted():
            return [f"*halted: {event.reason}*"]
        case ConversationCompleted():
            return ["---", "*completed*"]
        case ConversationFailed():
            return ["---", f"*failed: {event.error}*"]
    return []


def render_markdown(events: Iterable[Event]) -> str:
    """The events as Markdown: a heading per message, tool calls and results fenced.

    >>> print(render_markdown([UserMessage.of("hi")]))
    ## User
    <BLANKLINE>
    hi
    <BLANKLINE>
    """
    return "".join(iter_markdown(events))


def iter_markdown(events: Iterable[Event]) -> Iterator[str]:
    """:func:`render_markdown`'s text in pieces, one per event that shows, as ``events``
    are read: their concatenation is ``render_markdown(events)``."""
    separator = ""
    for event in events:
        lines = _event(event)
        if lines:
            yield separator + "\n".join(lines)
            separator = "\n\n"
    yield "\n"
