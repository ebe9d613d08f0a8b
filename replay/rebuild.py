"""Rebuild: the state of any conversation at any seq, forks included, nothing copied.

A fork's own stream starts with a ``conversation_started`` that names its
parent and fork seq; its history is the parent's lineage up to that seq, then
its own events. ``rebuild`` folds exactly that (``Journal.lineage``), so a
fork of a fork of a 100,000-event conversation costs one fold and no copy::

    >>> from turnlog.journal import Journal
    >>> from turnlog.engine.model.conversation import Conversation
    >>> from turnlog.engine.model.events import ConversationStarted, UserMessage
    >>> j = Journal(":memory:")
    >>> c = Conversation.start(j, ConversationStarted(conversation_id="c", provider="p", model="m"))
    >>> _ = c.append(UserMessage.of("hi"))
    >>> rebuild(j, "c", at_seq=1).lifecycle.value, rebuild(j, "c").lifecycle.value
    ('ready', 'awaiting_model')
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from turnlog.engine.model.conversation import load_state
from turnlog.engine.errors import CorruptEventError
from turnlog.engine.model.events import ConversationStarted, Event, UserMessage, decode_event
from turnlog.engine.model.state import ConversationState
from turnlog.journal import JournalProtocol, StoredEvent

from .errors import ReplayError

__all__ = ["decode_stored", "lineage_events", "own_events", "rebuild", "user_runs_of"]


def _check_seq(journal: JournalProtocol, conversation_id: str, at_seq: int | None) -> None:
    if at_seq is None:
        return
    last = journal.last_seq(conversation_id)
    if type(at_seq) is not int or not 1 <= at_seq <= last:
        raise ReplayError(f"conversation {conversation_id!r} in {journal.path} has seqs 1..{last}; "
                          f"cannot rebuild it at seq {at_seq!r}")


def rebuild(journal: JournalProtocol, conversation_id: str, at_seq: int | None = None) -> ConversationState:
    """The state of ``conversation_id`` after its own seq ``at_seq`` (default: its last).

    For a fork, the parent's history up to the fork point is folded first
    (recursively for forks of forks). Raises ``ConversationNotFound`` for an
    unknown id and ``ReplayError`` for a seq the conversation does not have.
    """
    state = load_state(journal, conversation_id, at_seq)
    _check_seq(journal, conversation_id, at_seq)
    return state


def decode_stored(row: StoredEvent) -> Event:
    """The event a journal row holds (``CorruptEventError`` naming the stream and seq)."""
    try:
        return decode_event(row.type, row.version, row.payload)
    except CorruptEventError:
        return decode_event(row.type, row.version, row.payload,
                            where=f"stream {row.stream_id!r} seq {row.seq}")


def lineage_events(journal: JournalProtocol, conversation_id: str,
                   to_seq: int | None = None) -> Iterator[tuple[StoredEvent, Event]]:
    """Every (row, event) of the conversation's history: fork ancestors first, then its own."""
    for row in journal.lineage(conversation_id, to_seq):
        yield row, decode_stored(row)


def own_events(journal: JournalProtocol, conversation_id: str,
               rows: Iterable[StoredEvent] | None = None) -> list[tuple[StoredEvent, Event]]:
    """The (row, event) pairs of the conversation's own stream (no ancestors); ``rows``
    are that stream's rows when the caller already read them."""
    if rows is None:
        rows = journal.read(conversation_id)
    return [(row, decode_stored(row)) for row in rows]


def user_runs_of(events: Iterable[Event]) -> list[list[UserMessage]]:
    """A recording's user messages grouped by run: consecutive messages went in together.

    ``conversation_started`` events (a fork's own, or its ancestors') neither
    start nor end a run; any other event ends one.
    """
    runs: list[list[UserMessage]] = []
    fresh = True
    for event in events:
        if type(event) is UserMessage:
            if fresh:
                runs.append([])
            runs[-1].append(event)
            fresh = False
        elif type(event) is not ConversationStarted:
            fresh = True
    return runs
