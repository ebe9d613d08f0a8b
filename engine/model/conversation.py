"""A conversation bound to a journal: the only way engine code appends events.

``Conversation`` keeps a ``StateBuilder`` in step with the stream and appends
an event only after the lifecycle accepts it, so the journal never holds an
impossible history. One ``append`` is one journal transaction, however many
events; if the lifecycle refuses any of them, or another writer got there
first (``ConcurrencyError``), nothing is written and the state is reloaded
from the journal.

>>> from turnlog.journal import Journal
>>> from turnlog.engine.model.events import ConversationStarted, UserMessage
>>> j = Journal(":memory:")
>>> c = Conversation.start(j, ConversationStarted(conversation_id="c1", provider="scripted", model="m"))
>>> _ = c.append(UserMessage.of("hi"))
>>> c.state.lifecycle.value, j.last_seq("c1")
('awaiting_model', 2)
"""

from __future__ import annotations

from collections.abc import Sequence

from turnlog.journal import JournalLockedError, JournalProtocol, StoredEvent

from turnlog.engine.errors import ConversationNotFound
from .events import ConversationStarted, Event, ForkRef, encode_event
from . import snapshots
from .snapshots import open_builder, open_state
from .state import ConversationState, StateBuilder

__all__ = ["Conversation", "load_state", "require_conversation"]


def require_conversation(journal: JournalProtocol, conversation_id: str) -> int:
    """The conversation's last seq; ``ConversationNotFound`` if it has no events."""
    # last_seq is one index lookup; stream() would aggregate the whole stream first
    last = journal.last_seq(conversation_id)
    if not last:
        raise ConversationNotFound(f"no conversation {conversation_id!r} in {journal.path}")
    return last


def load_state(journal: JournalProtocol, conversation_id: str,
               to_seq: int | None = None) -> ConversationState:
    """The state of ``conversation_id`` (forks folded over their parents), up to ``to_seq``.

    Folded from the events after the conversation's snapshot when one holds
    (``engine.snapshots``), else from its whole history.
    """
    return open_state(journal, conversation_id, to_seq)


class Conversation:
    """One conversation's writer. Build it with ``start`` (new) or ``open`` (existing)."""

    def __init__(self, journal: JournalProtocol, conversation_id: str, builder: StateBuilder,
                 last_seq: int) -> None:
        self.journal = journal
        self.id = conversation_id
        self.builder = builder
        self.last_seq = last_seq
        self._staged: list[Event] = []
        # the seq up to which a later open folds few events (a snapshot, or an open that
        # folded fewer than SNAPSHOT_AFTER past one): ``save_snapshot_if_due`` counts from it
        self.snapshot_seq = last_seq

    @classmethod
    def start(cls, journal: JournalProtocol, started: ConversationStarted,
              recorded_at: str | None = None, *, rest: Sequence[Event] = (),
              rest_recorded_at: Sequence[str | None] | None = None) -> Conversation:
        """Record ``started`` as the first event of a new stream.

        For a fork (``started.fork`` set) the parent's history up to the fork
        seq is folded first and the journal links the new stream to the
        parent's hash there; no parent event is copied. ``rest`` are events
        appended in the same transaction (an import writes a whole history
        at once, or nothing).
        """
        fork: ForkRef | None = started.fork
        builder = (open_builder(journal, fork.conversation_id, fork.seq)
                   if fork else StateBuilder())
        conv = cls(journal, started.conversation_id, builder, 0)
        parent = (fork.conversation_id, fork.seq) if fork else None
        rest = list(rest)
        conv._append([started, *rest], [recorded_at, *(rest_recorded_at or [None] * len(rest))],
                     parent)
        return conv

    @classmethod
    def open(cls, journal: JournalProtocol, conversation_id: str) -> Conversation:
        """The writer for an existing conversation, its state folded from the journal."""
        builder = open_builder(journal, conversation_id)
        return cls(journal, conversation_id, builder, builder.seq)

    @property
    def state(self) -> ConversationState:
        """A frozen snapshot of the current state (O(messages); the loop uses ``builder``)."""
        return self.builder.state()

    def save_snapshot_if_due(self) -> bool:
        """Save the conversation's snapshot (``engine.snapshots``) when ``SNAPSHOT_AFTER``
        or more events were written since this writer's last one.

        The loops call it when a run ends, so the next open (``resume``, ``send``,
        ``show``) reads the state instead of refolding the run. The state saved is
        folded from the journal (``refresh_snapshot``), exactly what an open would
        fold, never this writer's in-memory one. A cache: a journal that is locked by
        another writer or read-only, or a state that cannot be encoded, is left
        alone. Returns whether it saved.
        """
        if self._staged or self.last_seq - self.snapshot_seq < snapshots.SNAPSHOT_AFTER:
            return False
        try:
            saved = snapshots.refresh_snapshot(self.journal, self.id)
        except JournalLockedError:
            return False
        if saved is None:
            return False
        self.snapshot_seq = saved.seq
        return True

    def append(self, *events: Event,
               recorded_at: Sequence[str | None] | None = None) -> list[StoredEvent]:
        """Append ``events`` in one transaction, each checked by the lifecycle first.

        Staged events (``stage``) are flushed first. Raises ``InvalidTransition``
        (nothing written) or ``ConcurrencyError`` (nothing written; the state
        now includes the other writer's events).
        """
        self.flush()
        return self._append(list(events), list(recorded_at or [None] * len(events)), None)

    def stage(self, *events: Event) -> None:
        """Apply ``events`` to the state now; ``flush`` writes them later, in one transaction.

        A writer groups the events that precede one outside action (a model
        call, a tool run) and flushes them just before it, so the journal
        still holds every step before the next starts, with fewer commits.
        Each event is checked by the lifecycle as it is staged
        (``InvalidTransition``: that event is not staged, earlier ones stay).
        """
        for event in events:
            self.builder.apply(event, self.last_seq + len(self._staged) + 1)
            self._staged.append(event)

    @property
    def staged(self) -> int:
        """How many staged events await ``flush``."""
        return len(self._staged)

    def flush(self) -> list[StoredEvent]:
        """Write the staged events in one transaction (nothing to do if none are staged).

        On any error nothing is written, the staged events are dropped and
        the state is reloaded from the journal.
        """
        events, self._staged = self._staged, []
        if not events:
            return []
        try:
            rows = self.journal.append(self.id, [encode_event(e) for e in events], self.last_seq)
        except BaseException:
            self._reload(None)
            raise
        self.last_seq += len(events)
        return rows

    def _append(self, events: list[Event], stamps: list[str | None],
                parent: tuple[str, int] | None) -> list[StoredEvent]:
        if not events:
            return []
        builder = self.builder
        try:
            for i, event in enumerate(events):
                builder.apply(event, self.last_seq + 1 + i)
            rows = self.journal.append(
                self.id, [encode_event(e, stamp) for e, stamp in zip(events, stamps)],
                self.last_seq, parent=parent)
        except BaseException:
            self._reload(parent)
            raise
        self.last_seq += len(events)
        return rows

    def _reload(self, parent: tuple[str, int] | None) -> None:
        self._staged = []
        try:  # state and last seq from the same read
            builder = open_builder(self.journal, self.id)
        except ConversationNotFound:
            builder = None
        if builder is not None:
            self.builder, self.last_seq = builder, builder.seq
        elif parent is not None:
            self.builder = open_builder(self.journal, parent[0], parent[1])
        else:
            self.builder = StateBuilder()


