"""A conversation's events as the exports read them: its lineage (forks folded over their
parents, a fork's own restart event left out), each stored row with its decoded event.

Both the exporter and the OTLP export read through here (neither imports the other for it).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from turnlog.journal import JournalProtocol

from turnlog.engine.model.conversation import load_state
from turnlog.engine.model.events import ConversationStarted, Event, decode_event

__all__ = ["iter_lineage_rows", "lineage_events", "lineage_rows"]


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
    """The conversation's stored rows with their events, as ``lineage_events`` chooses them.

    Raises ``ConversationNotFound`` for an unknown id.
    """
    return list(iter_lineage_rows(journal, conversation_id))


def lineage_events(journal: JournalProtocol, conversation_id: str) -> list[Event]:
    """The conversation's events, forks folded over their parents (fork restarts left out)."""
    return [event for _, event in iter_lineage_rows(journal, conversation_id)]
