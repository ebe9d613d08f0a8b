"""Export a conversation: provider request messages, turnlog JSONL, Data Machine text, Markdown.

>>> from turnlog.journal import Journal
>>> from turnlog.engine.formats.importer import import_entries
>>> j = Journal(":memory:")
>>> _ = import_entries(j, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
...                    conversation_id="c1")
>>> print(export_conversation(j, "c1", "datamachine"))
[
  {
    "role": "user",
    "content": "hi"
  },
  {
    "role": "assistant",
    "content": "hello"
  }
]

Formats:

- each wire of ``engine.providers.registry`` (``openai`` / ``openai-responses`` /
  ``anthropic`` / ``gemini`` ...): the messages of a request, made by
  the wire module's own ``export_body`` (``{"messages": [...]}``, plus
  ``"system"`` for Anthropic; ``{"contents": [...], "systemInstruction"?}``
  for Gemini; ``{"input": [...], "instructions"?}`` for ``openai-responses``, the
  OpenAI Responses API), ready to merge with a model and tools and re-importable;
- ``jsonl``: every event of the conversation's lineage, one
  ``{"seq", "type", "version", "recorded_at", "payload"}`` object per line —
  re-importable as the same events (a fork's own restart event is left out,
  so the history reads as one conversation);
- ``datamachine``: the reference's role/content messages as a JSON array
  (``engine.formats.datamachine.render_events``), byte-exact texts;
- ``markdown``: a readable transcript;
- ``otlp``: the conversation as an OpenTelemetry trace, OTLP/JSON
  (``engine.formats.otlp``); ``content=True`` adds the messages.
"""

from __future__ import annotations

import json
from typing import Any

from turnlog.journal import JournalProtocol

from turnlog.engine.model.conversation import load_state
from turnlog.engine.model.events import ConversationStarted, Event, decode_event
from ..providers.registry import WIRES, wire
from .datamachine import render_events
from .markdown import render_markdown

__all__ = ["EXPORT_FORMATS", "export_conversation", "export_data", "lineage_events",
           "lineage_rows"]

#: The formats ``export_conversation`` writes.
EXPORT_FORMATS = (*WIRES, "jsonl", "datamachine", "markdown", "otlp")


def _rows(journal: JournalProtocol, conversation_id: str) -> list[tuple[Any, Event]]:
    load_state(journal, conversation_id)  # ConversationNotFound for an unknown id
    out = []
    for row in journal.lineage(conversation_id):
        event = decode_event(row.type, row.version, row.payload,
                             where=f"stream {row.stream_id!r} seq {row.seq}")
        if out and type(event) is ConversationStarted and event.fork is not None:
            continue
        out.append((row, event))
    return out


def lineage_rows(journal: JournalProtocol, conversation_id: str) -> list[tuple[Any, Event]]:
    """The conversation's stored rows with their events, as ``lineage_events`` chooses them."""
    return _rows(journal, conversation_id)


def lineage_events(journal: JournalProtocol, conversation_id: str) -> list[Event]:
    """The conversation's events, forks folded over their parents (fork restarts left out)."""
    return [event for _, event in _rows(journal, conversation_id)]


def export_data(journal: JournalProtocol, conversation_id: str, fmt: str, *, content: bool = False,
                semconv: str | None = None) -> Any:
    """The export of ``conversation_id`` in ``fmt`` as JSON-ready data (``markdown``: text).

    ``content`` and ``semconv`` are for ``otlp`` only: put the messages on the
    spans; the generation of the GenAI conventions (default the newest).
    """
    if content and fmt != "otlp":
        from ..errors import FormatError

        raise FormatError(f"message content is an option of the otlp format, not {fmt!r} "
                          "(every other format is the content)")
    if fmt in WIRES:
        state = load_state(journal, conversation_id)
        return wire(fmt).export_body(state.system, state.messages)
    if fmt == "jsonl":
        return [{"seq": row.seq, "type": row.type, "version": row.version,
                 "recorded_at": row.recorded_at, "payload": json.loads(row.payload)}
                for row, _ in _rows(journal, conversation_id)]
    if fmt == "datamachine":
        return render_events(lineage_events(journal, conversation_id))
    if fmt == "markdown":
        return render_markdown(lineage_events(journal, conversation_id))
    if fmt == "otlp":
        from .otlp import otlp_request

        if semconv is None:
            return otlp_request(journal, conversation_id, content=content)
        return otlp_request(journal, conversation_id, content=content, semconv=semconv)
    from ..errors import FormatError

    raise FormatError(f"unknown export format {fmt!r}; expected one of {', '.join(EXPORT_FORMATS)}")


def export_conversation(journal: JournalProtocol, conversation_id: str, fmt: str, *,
                        content: bool = False, semconv: str | None = None) -> str:
    """The export of ``conversation_id`` in ``fmt`` as text (see the module doc)."""
    data = export_data(journal, conversation_id, fmt, content=content, semconv=semconv)
    if fmt == "markdown":
        return data
    if fmt == "jsonl":
        return "".join(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"
                       for line in data)
    return json.dumps(data, ensure_ascii=False, indent=2)
