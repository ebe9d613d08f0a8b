"""The reference's ``_build_conversation_context`` as a deterministic projection.

The last ``last`` entries of a history (API ``{role, content}`` or
orchestrator ``{input, context}`` entries, mixed freely) become one line each,
numbered from 1 within that window and cut per role, exactly as the
reference's orchestrator writes them — including its habit of appending
``...`` whether or not anything was cut::

    >>> build_context([{"role": "user", "content": "draft 5 claims"},
    ...                {"input": "refine claim 2", "context": "patent_streaming"}])
    'USER REQUEST 1: draft 5 claims...\\nPrevious request 2: refine claim 2...\\nPrevious context 2: patent_streaming...'

An assistant entry holding the section ``marker`` keeps that section (from
the marker on, the marker renamed to ``marker_label``) up to ``section_limit``
characters instead of ``assistant_limit``. ``context_entries`` turns a
conversation's events into such entries, so a journal conversation projects
the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from turnlog.engine.model.events import Event, ModelResponded, UserMessage
from turnlog.engine.model.messages import text_of

__all__ = ["ContextLimits", "build_context", "context_entries"]


class ContextLimits(msgspec.Struct, frozen=True, kw_only=True):
    """How much of each entry a summary keeps (the reference's numbers are the defaults)."""

    last: int = 5
    user_limit: int = 200
    assistant_limit: int = 300
    section_limit: int = 800
    request_limit: int = 200
    context_limit: int = 200
    marker: str | None = "Generated Patent Claims:"
    marker_label: str = "PREVIOUSLY GENERATED CLAIMS:"
    separator: str = "\n"


def _assistant_line(n: int, content: str, limits: ContextLimits) -> str:
    marker = limits.marker
    if marker and marker in content:
        section = content[content.find(marker):].replace(marker, limits.marker_label)
        return f"ASSISTANT RESPONSE {n}: {section[:limits.section_limit]}..."
    return f"ASSISTANT RESPONSE {n}: {content[:limits.assistant_limit]}..."


def _lines(n: int, entry: Mapping[str, Any], limits: ContextLimits) -> list[str]:
    out: list[str] = []
    request = entry.get("input")
    content = entry.get("content")
    if request:
        out.append(f"Previous request {n}: {str(request)[:limits.request_limit]}...")
    elif content:
        content = str(content)
        role = entry.get("role", "unknown")
        if role == "user":
            out.append(f"USER REQUEST {n}: {content[:limits.user_limit]}...")
        elif role == "assistant":
            out.append(_assistant_line(n, content, limits))
    context = entry.get("context")
    if context:
        out.append(f"Previous context {n}: {str(context)[:limits.context_limit]}...")
    return out


def build_context(entries: Sequence[Mapping[str, Any]], limits: ContextLimits | None = None,
                  **overrides: Any) -> str:
    """The context summary of the last ``limits.last`` entries (keyword ``overrides`` allowed).

    Entries of other roles (system, tool) add no line but keep their number,
    as in the reference, whose numbering is the position in the window.
    """
    limits = msgspec.structs.replace(limits or ContextLimits(), **overrides)
    window = list(entries)[-limits.last:] if limits.last > 0 else []
    lines: list[str] = []
    for i, entry in enumerate(window):
        lines.extend(_lines(i + 1, entry, limits))
    return limits.separator.join(lines)


def context_entries(events: Iterable[Event]) -> list[dict[str, Any]]:
    """A conversation's user messages and model answers as reference entries.

    A user message that carries an orchestrator ``context`` becomes
    ``{input, context}``; other user messages and every model response with
    text become ``{role, content}`` (tool calls and results are not part of
    the reference's summary).
    """
    out: list[dict[str, Any]] = []
    for event in events:
        if type(event) is UserMessage:
            text = text_of(event.parts)
            if event.context is not None:
                out.append({"input": text, "context": event.context})
            else:
                out.append({"role": "user", "content": text})
        elif type(event) is ModelResponded:
            text = text_of(event.parts)
            if text:
                out.append({"role": "assistant", "content": text})
    return out
