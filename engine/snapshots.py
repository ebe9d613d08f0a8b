"""Opening a conversation without refolding its history: the folded state, saved at its head.

Opening a conversation (to continue it, resume it, show its state) used to fold
its whole lineage. :func:`open_builder` reads the journal's snapshot of the
conversation instead — the ``ConversationState`` at some seq, saved by an
earlier open — and folds only the events after it. The snapshot is a cache and
never trusted over the events:

- the journal returns it only while the conversation's event at its seq still
  has the hash recorded with it (:meth:`journal.JournalProtocol.read_snapshot`);
- its ``kind`` names the state's shape (a digest of ``ConversationState``'s
  schema), so a turnlog whose state has another shape ignores it;
- bytes that do not decode, or decode to another conversation or seq, are
  ignored; in each case the state is folded from the events, as before;
- ``verify`` refolds every saved snapshot's events and reports one that
  differs (:func:`check_snapshots`, run by ``Journal.verify`` through the
  engine's journal extension).

A snapshot is written when an open had to fold at least :data:`SNAPSHOT_AFTER`
events past the last one, on a writable journal: opening a long conversation
twice folds it once.

>>> from turnlog.journal import Journal
>>> from turnlog.engine.conversation import Conversation
>>> from turnlog.engine.events import ConversationStarted, UserMessage
>>> j = Journal(":memory:")
>>> c = Conversation.start(j, ConversationStarted(conversation_id="c", provider="p", model="m"))
>>> _ = c.append(UserMessage.of("hi"))
>>> save_snapshot(j, "c", c.builder).seq
2
>>> open_builder(j, "c").state() == c.state
True
"""

from __future__ import annotations

import gc
import hashlib
import zlib
from collections.abc import Iterable, Iterator
from functools import cache
from itertools import chain

import msgspec

from turnlog.journal import (
    JournalError,
    JournalProtocol,
    ProjectionMismatch,
    Snapshot,
    StoredEvent,
    TurnlogError,
)

from .errors import ConversationNotFound
from .state import ConversationState, StateBuilder, fold_stored

__all__ = [
    "SNAPSHOT_AFTER",
    "check_snapshots",
    "decode_state",
    "encode_state",
    "open_builder",
    "open_state",
    "refresh_snapshot",
    "save_snapshot",
    "snapshot_kind",
]

SNAPSHOT_AFTER = 256
"""Events an open may fold past the last snapshot before it saves a new one."""

_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(ConversationState)


@cache
def snapshot_kind() -> str:
    """``engine.state+zlib/`` and a digest of ``ConversationState``'s schema: a new shape
    (or encoding), a new kind."""
    schema = msgspec.json.encode(msgspec.json.schema(ConversationState), order="sorted")
    return "engine.state+zlib/" + hashlib.sha256(schema).hexdigest()[:16]


def encode_state(state: ConversationState) -> bytes:
    """The state as a snapshot's bytes: MessagePack, zlib-compressed at level 1.

    A state repeats its conversation's messages, so uncompressed it would add a
    fifth to a long conversation's file; compressed, a few percent (about ten
    times smaller for the benches' turns), for some 20 ms per 100,000 events
    each way.
    """
    return zlib.compress(_ENCODER.encode(state), 1)


def decode_state(data: bytes) -> ConversationState | None:
    """The state in a snapshot's bytes; ``None`` when they are not one.

    The garbage collector is paused while the objects are built: a long
    conversation's state is hundreds of thousands of acyclic objects, and the
    collections their allocation would trigger cost more than the decoding.
    """
    try:
        raw = zlib.decompress(data)
    except (zlib.error, TypeError):
        return None
    paused = gc.isenabled()
    gc.disable()
    try:
        return _DECODER.decode(raw)
    except (msgspec.DecodeError, ValueError, TypeError):
        return None
    finally:
        if paused:
            gc.enable()


def _counted(rows: Iterable[StoredEvent], counter: list[int]) -> Iterator[StoredEvent]:
    for row in rows:
        counter[0] += 1
        yield row


def open_builder(journal: JournalProtocol, conversation_id: str,
                 to_seq: int | None = None) -> StateBuilder:
    """The conversation's state up to ``to_seq`` (default: its last event), as a builder.

    From the snapshot when one holds (its seq at or before ``to_seq``), folding the
    events after it; else from the whole lineage. ``builder.seq`` is the last own
    seq folded: state and seq come from the same rows, so no writer committing
    meanwhile can make the seq newer than the state. An open of the whole
    conversation that folded ``SNAPSHOT_AFTER`` events or more saves a new snapshot
    (:func:`save_snapshot`); one up to an earlier seq never replaces it with an
    older one. Raises ``ConversationNotFound``.
    """
    opened = _open(journal, conversation_id, to_seq)
    return opened if isinstance(opened, StateBuilder) else StateBuilder(opened)


def open_state(journal: JournalProtocol, conversation_id: str,
               to_seq: int | None = None) -> ConversationState:
    """As :func:`open_builder`, the frozen state (the snapshot's own when no event follows it)."""
    opened = _open(journal, conversation_id, to_seq)
    return opened.state() if isinstance(opened, StateBuilder) else opened


def refresh_snapshot(journal: JournalProtocol, conversation_id: str) -> Snapshot | None:
    """Save the conversation's state at its last event, folded from the journal (the
    snapshot and the events after it): what any later open would fold, never a
    writer's in-memory state. ``None`` when nothing was saved (see :func:`save_snapshot`)
    or the snapshot already is at the last event."""
    opened = _open(journal, conversation_id, None, save=False)
    if not isinstance(opened, StateBuilder):
        return None
    return save_snapshot(journal, conversation_id, opened)


def _open(journal: JournalProtocol, conversation_id: str, to_seq: int | None,
          save: bool = True) -> StateBuilder | ConversationState:
    folded = [0]
    saved = _from_snapshot(journal, conversation_id, to_seq)
    if saved is None:
        base = 0
        builder = fold_stored(_counted(journal.lineage(conversation_id, to_seq), folded))
    else:
        base = saved.seq
        rows = iter(journal.read(conversation_id, base + 1, to_seq))
        first = next(rows, None)
        if first is None:
            return saved
        builder = fold_stored(_counted(chain([first], rows), folded), StateBuilder(saved))
    if not builder.seq:
        raise ConversationNotFound(f"no conversation {conversation_id!r} in {journal.path}")
    if save and to_seq is None and folded[0] >= SNAPSHOT_AFTER and builder.seq > base:
        save_snapshot(journal, conversation_id, builder)
    return builder


def _from_snapshot(journal: JournalProtocol, conversation_id: str,
                   to_seq: int | None) -> ConversationState | None:
    snapshot = journal.read_snapshot(conversation_id, snapshot_kind())
    if snapshot is None or (to_seq is not None and snapshot.seq > to_seq):
        return None
    state = decode_state(snapshot.data)
    if state is None or state.seq != snapshot.seq or state.conversation_id != conversation_id:
        return None  # not a state, or another conversation's (a row copied over)
    return state


def save_snapshot(journal: JournalProtocol, conversation_id: str,
                  builder: StateBuilder) -> Snapshot | None:
    """Save the builder's state as the conversation's snapshot at ``builder.seq``.

    A cache, so never an error: ``None`` when it was not saved — a read-only journal,
    one another writer holds locked or that refuses the write, or a state MessagePack
    cannot hold (an integer beyond 64 bits in a tool's result, say); the next open
    then folds the events.
    """
    if journal.readonly:
        return None
    try:
        data = encode_state(builder.state())
    except (msgspec.EncodeError, OverflowError, TypeError, ValueError):
        return None
    try:
        return journal.write_snapshot(conversation_id, snapshot_kind(), builder.seq, data)
    except JournalError:
        return None


def check_snapshots(journal: JournalProtocol,
                    stream_id: str | None = None) -> list[ProjectionMismatch]:
    """Every saved state (of every conversation, or one) that differs from its events' fold.

    Snapshots the journal no longer returns (their chain changed) are never used,
    so they are not checked; one that does not decode is reported.
    """
    ids = [stream_id] if stream_id is not None else [s.stream_id for s in journal.streams()]
    found = []
    for conversation_id in ids:
        snapshot = journal.read_snapshot(conversation_id, snapshot_kind())
        if snapshot is None:
            continue
        saved = decode_state(snapshot.data)
        try:
            folded = fold_stored(journal.lineage(conversation_id, snapshot.seq)).state()
        except TurnlogError as exc:  # the chain check names the event; say why here
            folded, problem = None, str(exc)
        if folded is None:
            reason = f"cannot be checked: its events no longer fold ({problem})"
        elif saved is None:
            reason = "its bytes are not a conversation state"
        elif saved != folded:
            fields = [f for f in ConversationState.__struct_fields__
                      if getattr(saved, f) != getattr(folded, f)]
            reason = f"differs from the fold of its events in {', '.join(fields)}"
        else:
            continue
        found.append(ProjectionMismatch("engine.state", "snapshots", conversation_id, None, None,
                                        f"the saved state at seq {snapshot.seq} {reason}"))
    return found
