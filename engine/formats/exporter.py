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

import itertools
import json
from collections.abc import Iterable, Iterator
from typing import Any

from turnlog.journal import JournalProtocol

from turnlog.engine.model.conversation import load_state
from turnlog.engine.model.events import ConversationStarted, Event, decode_event
from ..providers.registry import WIRES, wire
from .datamachine import iter_messages, render_events
from .markdown import iter_markdown, render_markdown

__all__ = ["EXPORT_FORMATS", "STREAMED_FORMATS", "export_conversation", "export_data",
           "iter_export", "iter_lineage_rows", "lineage_events", "lineage_rows"]

#: The formats ``export_conversation`` writes.
EXPORT_FORMATS = (*WIRES, "jsonl", "datamachine", "markdown", "otlp")

#: The formats :func:`iter_export` writes piece by piece, in memory bounded by one event.
STREAMED_FORMATS = ("jsonl", "datamachine", "markdown")


def _rows(journal: JournalProtocol, conversation_id: str) -> list[tuple[Any, Event]]:
    return list(iter_lineage_rows(journal, conversation_id))


def iter_lineage_rows(journal: JournalProtocol,
                      conversation_id: str) -> Iterator[tuple[Any, Event]]:
    """:func:`lineage_rows` one at a time, read as they are consumed (the journal's cursor):
    ``ConversationNotFound`` for an unknown id before the first."""
    if journal.last_seq(conversation_id) == 0:
        load_state(journal, conversation_id)  # raises ConversationNotFound, naming the journal
    first = True
    for row in journal.lineage(conversation_id):
        event = decode_event(row.type, row.version, row.payload,
                             where=f"stream {row.stream_id!r} seq {row.seq}")
        if not first and type(event) is ConversationStarted and event.fork is not None:
            continue
        first = False
        yield row, event


def lineage_rows(journal: JournalProtocol, conversation_id: str) -> list[tuple[Any, Event]]:
    """The conversation's stored rows with their events, as ``lineage_events`` chooses them."""
    return _rows(journal, conversation_id)


def lineage_events(journal: JournalProtocol, conversation_id: str) -> list[Event]:
    """The conversation's events, forks folded over their parents (fork restarts left out)."""
    return [event for _, event in _rows(journal, conversation_id)]


def _lineage(journal: JournalProtocol, conversation_id: str) -> Iterator[Event]:
    return (event for _, event in iter_lineage_rows(journal, conversation_id))


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
    if fmt in STREAMED_FORMATS and not content:  # (content: export_data refuses it)
        return "".join(iter_export(journal, conversation_id, fmt))
    data = export_data(journal, conversation_id, fmt, content=content, semconv=semconv)
    if fmt == "markdown":
        return data
    if fmt == "jsonl":
        return "".join(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"
                       for line in data)
    return json.dumps(data, ensure_ascii=False, indent=2)


def _json_array(items: Iterable[Any]) -> Iterator[str]:
    """``json.dumps(list(items), ensure_ascii=False, indent=2)`` in pieces, one per item."""
    opened = False
    for item in items:
        text = json.dumps(item, ensure_ascii=False, indent=2).replace("\n", "\n  ")
        yield ("[\n  " if not opened else ",\n  ") + text
        opened = True
    yield "\n]" if opened else "[]"


def iter_export(journal: JournalProtocol, conversation_id: str, fmt: str) -> Iterator[str]:
    """The text :func:`export_conversation` returns for ``fmt``, in pieces read as they are
    written: one event's line (``jsonl``), block (``markdown``) or message (``datamachine``)
    in memory at a time, whatever the conversation's length. ``fmt`` is one of
    :data:`STREAMED_FORMATS`: a wire's request body is built from the folded state, and an
    OTLP trace from its spans' nesting, so those are whole documents.

    ``ConversationNotFound`` for an unknown id is raised before the first piece.
    """
    if fmt not in STREAMED_FORMATS:
        from ..errors import FormatError

        raise FormatError(f"{fmt!r} is not streamed (one of {', '.join(STREAMED_FORMATS)} is): "
                          "use export_conversation")
    rows = iter_lineage_rows(journal, conversation_id)
    first = next(rows, None)  # an unknown id fails here, before anything is written
    rows = itertools.chain([first] if first is not None else [], rows)
    if fmt == "jsonl":
        for row, _ in rows:
            yield json.dumps({"seq": row.seq, "type": row.type, "version": row.version,
                              "recorded_at": row.recorded_at, "payload": json.loads(row.payload)},
                             ensure_ascii=False, separators=(",", ":")) + "\n"
    elif fmt == "markdown":
        yield from iter_markdown(event for _, event in rows)
    else:
        yield from _json_array(iter_messages(event for _, event in rows))
