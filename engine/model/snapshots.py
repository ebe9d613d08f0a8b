"""Opening a conversation without refolding its history: the folded state, saved at its head.

Opening a conversation (to continue it, resume it, show its state) used to fold
its whole lineage. :func:`open_builder` reads the journal's snapshot of the
conversation instead — the head of its ``ConversationState`` at some seq, saved by
an earlier open — and folds only the events after it: O(events since the snapshot),
whatever the conversation's length. The snapshot holds no bodies and no gates:

- it is the state's head (:meth:`~engine.model.state.StateBuilder.head`): lifecycle, turns,
  usage, the run's counters, without the messages, the tool results and the facts that
  gate a side effect (:data:`~engine.model.state.DEFERRED`: which tools need approval, the
  duplicate rule and its record of calls, the approval requests and decisions, the
  calls started and pending). Those stay unread in the opened builder until something
  needs them (a request, a tool call, an approval, ``state()``), and are then folded
  from the conversation's events up to the seq the open read — the messages are the
  message events of its lineage, so the events are their only copy. A snapshot, forged
  or not, can neither supply nor bypass a gate: it has nothing to say about one;
- the journal returns it only while the conversation's event at its seq still
  has the hash recorded with it (:meth:`journal.JournalProtocol.read_snapshot`);
- its ``kind`` names the state's shape (a digest of ``ConversationState``'s
  schema), so a turnlog whose state has another shape ignores it (a journal saved
  with whole states is re-snapshotted by its next long open);
- bytes that do not decode (or that would inflate past :func:`inflate`'s cap: a
  zlib bomb), or decode to another conversation or seq, are ignored; in each
  case the state is folded from the events, as before;
- ``verify`` folds every conversation through the lifecycle, reporting an
  illegal history at its seq, and compares each saved snapshot with the head of
  the fold of its events by canonical bytes (``true`` is not ``1``, nor ``1.0``),
  so a snapshot carrying any body or gate is reported
  (:func:`check_snapshots`, run by ``Journal.verify`` through the engine's
  journal extension).

A snapshot is written when an open had to fold at least :data:`SNAPSHOT_AFTER`
events past the last one, on a writable journal: opening a long conversation
twice folds it once.

>>> from turnlog.journal import Journal
>>> from turnlog.engine.model.conversation import Conversation
>>> from turnlog.engine.model.events import ConversationStarted, UserMessage
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
from collections.abc import Callable, Iterable, Iterator
from functools import cache

import msgspec

from turnlog.journal import (
    JournalError,
    JournalProtocol,
    ProjectionMismatch,
    Snapshot,
    StoredEvent,
    TurnlogError,
)

from turnlog.engine.errors import ConversationNotFound, InvalidTransition
from turnlog.engine.tools.duplicates import call_key
from .events import (
    VERSIONS,
    ApprovalDecided,
    ApprovalRequested,
    ConversationStarted,
    ModelResponded,
    decode_event,
    tool_calls,
)
from .messages import ToolCall
from .state import ConversationState, StateBuilder, fold_stored

__all__ = [
    "MAX_EXPANSION",
    "SNAPSHOT_AFTER",
    "check_snapshots",
    "decode_state",
    "encode_state",
    "gates_from_events",
    "inflate",
    "open_builder",
    "open_state",
    "refresh_snapshot",
    "save_snapshot",
    "snapshot_kind",
]

SNAPSHOT_AFTER = 256
"""Events an open may fold past the last snapshot before it saves a new one."""

MAX_EXPANSION = 64
"""How many times its compressed size (plus 1 MiB) a snapshot may inflate to: a state
compresses about tenfold, a zlib bomb a thousandfold. A state beyond it is not saved."""

_FLOOR = 1 << 20
_ENCODER = msgspec.msgpack.Encoder()
_CANONICAL = msgspec.msgpack.Encoder(order="deterministic")
_DECODER = msgspec.msgpack.Decoder(ConversationState)


@cache
def snapshot_kind() -> str:
    """``engine.state-head+zlib/`` and a digest of ``ConversationState``'s schema: a new shape
    (or encoding), a new kind."""
    schema = msgspec.json.encode(msgspec.json.schema(ConversationState), order="sorted")
    return "engine.state-head+zlib/" + hashlib.sha256(schema).hexdigest()[:16]


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
    raw = inflate(data)
    if raw is None:
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


def inflate(data: bytes) -> bytes | None:
    """A snapshot's bytes decompressed, or ``None``: not zlib, cut short, or inflating past
    ``MAX_EXPANSION`` times their size plus 1 MiB (decompression stops there)."""
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(data, _FLOOR + MAX_EXPANSION * len(data))
    except (zlib.error, TypeError):
        return None
    if inflater.unconsumed_tail or not inflater.eof:
        return None
    return raw


class _Tracked:
    """Rows as they are folded: how many, and the seq the builder holds before each."""

    __slots__ = ("count", "upto")

    def __init__(self, upto: int) -> None:
        self.count = 0
        self.upto = upto

    def rows(self, rows: Iterable[StoredEvent]) -> Iterator[StoredEvent]:
        for row in rows:
            self.count += 1
            yield row
            self.upto = row.seq


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

    Opened from a snapshot, the builder holds its head only: the messages, results and
    everything that gates a side effect (:data:`~engine.model.state.DEFERRED`) are folded from
    the events when first read (a request, a tool call, an approval), never taken from
    the snapshot, which holds none of them. The open itself costs the snapshot and the
    events after it, whatever the conversation's length.
    """
    opened = _open(journal, conversation_id, to_seq)
    return opened


def open_state(journal: JournalProtocol, conversation_id: str,
               to_seq: int | None = None) -> ConversationState:
    """As :func:`open_builder`, the frozen state: every message and fact read (O(events))."""
    return _open(journal, conversation_id, to_seq).state()


def refresh_snapshot(journal: JournalProtocol, conversation_id: str) -> Snapshot | None:
    """Save the conversation's state at its last event, folded from the journal (the
    snapshot and the events after it): what any later open would fold, never a
    writer's in-memory state. ``None`` when nothing was saved (see :func:`save_snapshot`)
    or the snapshot already is at the last event."""
    saved = _from_snapshot(journal, conversation_id, None)
    opened = _open(journal, conversation_id, None, save=False)
    if saved is not None and opened.seq == saved.seq:
        return None
    return save_snapshot(journal, conversation_id, opened)


def _open(journal: JournalProtocol, conversation_id: str, to_seq: int | None,
          save: bool = True) -> StateBuilder:
    saved = _from_snapshot(journal, conversation_id, to_seq)
    if saved is None:
        tracked = _Tracked(0)
        builder = fold_stored(tracked.rows(journal.lineage(conversation_id, to_seq)))
        base = 0
    else:
        base = saved.seq
        tail = list(journal.read(conversation_id, base + 1, to_seq))
        tracked = _Tracked(base)
        gated = _past_snapshot(journal, saved, tail, tracked)
        if gated is None:  # the events past it need facts older than their turn: all read
            tracked = _Tracked(base)
            gated = fold_stored(tracked.rows(tail), StateBuilder.deferred(
                saved, _loader(journal, conversation_id, tracked)))
        builder = gated
    if not builder.seq:
        raise ConversationNotFound(f"no conversation {conversation_id!r} in {journal.path}")
    if save and to_seq is None and tracked.count >= SNAPSHOT_AFTER and builder.seq > base:
        save_snapshot(journal, conversation_id, builder)
    return builder


def _past_snapshot(journal: JournalProtocol, saved: ConversationState,
                   tail: list[StoredEvent], tracked: _Tracked) -> StateBuilder | None:
    """The builder of a snapshot's ``saved`` head with the ``tail`` of events after it folded,
    its :data:`~engine.model.state.DEFERRED` attributes unread: O(tail), whatever the
    conversation's length.

    The tail's lifecycle reads the facts that gate it (the calls pending and started, the
    approvals and decisions) as of the snapshot: they are those of the conversation's
    events since its last model response at or before the snapshot (a response replaces
    the calls pending, and none of them has started), read from the journal, never from
    the snapshot. ``None`` when those facts need more than that: no own response at or
    before the snapshot (a fork's first turn), or a tail the lifecycle refuses with them
    (a call id a response reused, asked for approval in an earlier turn); the caller
    then folds with every fact read. Everything else is read, and the whole history
    checked again, when first needed (``_loader``).
    """
    if not tail:
        return StateBuilder.deferred(saved, _loader(journal, saved.conversation_id, tracked))
    turn: list[StoredEvent] = []
    for row in journal.read(saved.conversation_id, 1, saved.seq, reverse=True):
        turn.append(row)
        if row.type == "model_responded":
            break
    else:
        return None
    where = f"stream {saved.conversation_id!r} seq {{}}"
    responded = decode_event(turn[-1].type, turn[-1].version, turn[-1].payload,
                             where=where.format(turn[-1].seq))
    pending = {c.id: c for c in tool_calls(responded)} if isinstance(responded,
                                                                      ModelResponded) else {}
    started: set[str] = set()
    approvals: dict[str, ApprovalRequested] = {}
    decisions: dict[str, ApprovalDecided] = {}
    for row in reversed(turn[:-1]):
        if row.type in _CALL_EVENTS:
            call_id = _call_id(row)
            if row.type == "tool_started":
                started.add(call_id)
            else:
                started.discard(call_id)
                pending.pop(call_id, None)
        elif row.type in ("approval_requested", "approval_decided"):
            event = decode_event(row.type, row.version, row.payload, where=where.format(row.seq))
            if isinstance(event, ApprovalRequested):
                approvals[event.call_id] = event
            elif isinstance(event, ApprovalDecided):
                decisions[event.call_id] = event
    gated = StateBuilder(msgspec.structs.replace(
        saved, pending_calls=tuple(pending.values()), started_calls=frozenset(started),
        approvals=approvals, decisions=decisions))
    try:
        fold_stored(tracked.rows(tail), gated)
    except InvalidTransition:
        return None
    return StateBuilder.deferred(gated.head(), _loader(journal, saved.conversation_id, tracked))


def _loader(journal: JournalProtocol, conversation_id: str,
            tracked: _Tracked) -> Callable[[StateBuilder], None]:
    """Set a deferred builder's unread attributes from the fold of the events it holds.

    The seq is the last row the open folded into it (``tracked.upto``: the one before
    the row being applied, when a row of the open's fold first reads one), never the
    builder's own seq, which a fork's or a writer's later events move on. Only the events
    are read: a snapshot can neither supply nor bypass what gates a side effect.
    """
    def load(builder: StateBuilder) -> None:
        full = fold_stored(journal.lineage(conversation_id, tracked.upto))
        for name in builder.unset():
            setattr(builder, name, getattr(full, name))
    return load


def _from_snapshot(journal: JournalProtocol, conversation_id: str,
                   to_seq: int | None) -> ConversationState | None:
    snapshot = journal.read_snapshot(conversation_id, snapshot_kind())
    if snapshot is None or (to_seq is not None and snapshot.seq > to_seq):
        return None
    state = decode_state(snapshot.data)
    if state is None or state.seq != snapshot.seq or state.conversation_id != conversation_id:
        return None  # not a state, or another conversation's (a row copied over)
    return state


#: The events whose fold decides whether a tool call may run: read from the journal, never
#: from a snapshot (which anyone who can write the file can forge).
_GATES = frozenset({"conversation_started", "model_responded", "tool_started", "tool_completed",
                    "tool_call_rejected", "approval_requested", "approval_decided"})


_CALL_EVENTS = frozenset({"tool_started", "tool_completed", "tool_call_rejected"})


class _CallRef(msgspec.Struct):
    call_id: str


_CALL_REF = msgspec.json.Decoder(_CallRef)


def _call_id(row: StoredEvent) -> str:
    """The ``call_id`` of a tool event's payload: read alone from a current-version payload,
    else from the upcast event (an upcaster may have moved it)."""
    if row.version == VERSIONS.get(row.type):
        try:
            return _CALL_REF.decode(row.payload).call_id
        except msgspec.DecodeError:  # say where, as a full decode does below
            pass
    event = decode_event(row.type, row.version, row.payload,
                         where=f"stream {row.stream_id!r} seq {row.seq}")
    return str(getattr(event, "call_id"))


def gates_from_events(journal: JournalProtocol, state: ConversationState) -> ConversationState:
    """``state`` with what gates side effects folded from the events up to its seq.

    The tools that need approval (``approve``), the duplicate rule (a forged one could
    name any callable to import) and its record of the calls made (``call_index``,
    ``call_count``: every model response is decoded for them), the approval requests and
    decisions,
    the calls started and the calls pending (answered calls are not, so a call never
    runs twice) come from the conversation's events, whatever the snapshot holds;
    a result's content is never parsed. Raises what decoding a stored
    event raises (``CorruptEventError``).
    """
    approve: tuple[str, ...] = ()
    policy = state.duplicate_policy
    calls: dict[str, ToolCall] = {}  # call id -> ToolCall, from every model response
    index: dict[str, int] = {}  # the duplicate rule's record of calls made, as the fold keeps it
    count = 0
    approvals: dict[str, ApprovalRequested] = {}
    decisions: dict[str, ApprovalDecided] = {}
    started: set[str] = set()
    answered: set[str] = set()
    response: StoredEvent | None = None
    for row in journal.lineage(state.conversation_id, state.seq):
        kind = row.type
        if kind not in _GATES:
            continue
        if kind == "model_responded":
            response, answered = row, set()
            made = decode_event(kind, row.version, row.payload,
                                where=f"stream {row.stream_id!r} seq {row.seq}")
            if isinstance(made, ModelResponded):
                calls.update((c.id, c) for c in tool_calls(made))
            continue
        if kind in _CALL_EVENTS:  # only the call id: a result's content is not parsed
            call_id = _call_id(row)
            if kind == "tool_started" or call_id not in started:  # as StateBuilder._register
                call = calls.get(call_id)
                if call is not None:
                    raw = call.raw_arguments if call.invalid else None
                    index[call_key(call.name, call.arguments, policy, raw)] = count
                    count += 1
            if kind == "tool_started":
                started.add(call_id)
            else:
                started.discard(call_id)
                answered.add(call_id)
            continue
        event = decode_event(kind, row.version, row.payload,
                             where=f"stream {row.stream_id!r} seq {row.seq}")
        if isinstance(event, ConversationStarted):
            approve, policy = event.approve, event.duplicate_policy
        elif isinstance(event, ApprovalRequested):
            approvals[event.call_id] = event
        elif isinstance(event, ApprovalDecided):
            decisions[event.call_id] = event
    pending: tuple[ToolCall, ...] = ()
    if response is not None:
        responded = decode_event(response.type, response.version, response.payload,
                                 where=f"stream {response.stream_id!r} seq {response.seq}")
        if isinstance(responded, ModelResponded):
            pending = tuple(c for c in tool_calls(responded) if c.id not in answered)
    return msgspec.structs.replace(state, approve=approve, duplicate_policy=policy,
                                   call_index=index, call_count=count, approvals=approvals,
                                   decisions=decisions, started_calls=frozenset(started),
                                   pending_calls=pending)


def save_snapshot(journal: JournalProtocol, conversation_id: str,
                  builder: StateBuilder) -> Snapshot | None:
    """Save the builder's state as the conversation's snapshot at ``builder.seq``.

    A cache, so never an error: ``None`` when it was not saved — a read-only journal,
    one another writer holds locked or that refuses the write, a state MessagePack
    cannot hold (an integer beyond 64 bits in a tool's result, say), or one that
    compresses more than ``MAX_EXPANSION`` times; the next open then folds the events.
    """
    if journal.readonly:
        return None
    try:
        raw = _ENCODER.encode(builder.head())
    except (msgspec.EncodeError, OverflowError, TypeError, ValueError):
        return None
    data = zlib.compress(raw, 1)
    if len(raw) > _FLOOR + MAX_EXPANSION * len(data):
        return None  # a reader would refuse to inflate it (a zlib bomb looks the same)
    try:
        return journal.write_snapshot(conversation_id, snapshot_kind(), builder.seq, data)
    except JournalError:
        return None


def check_snapshots(journal: JournalProtocol,
                    stream_id: str | None = None) -> list[ProjectionMismatch]:
    """Every conversation (or one) folded through the lifecycle: each illegal history (at
    its seq, ``object="history"``) and each saved state that differs from its events' fold
    (compared by canonical bytes: ``true``, ``1`` and ``1.0`` differ; ``object="snapshots"``).

    Snapshots the journal no longer returns (their chain changed) are never used,
    so they are not checked; one that does not decode is reported.
    """
    ids = [stream_id] if stream_id is not None else [s.stream_id for s in journal.streams()]
    found: list[ProjectionMismatch] = []
    seen: set[tuple[str, int]] = set()
    for conversation_id in ids:
        snapshot = journal.read_snapshot(conversation_id, snapshot_kind())
        last: list[StoredEvent] = []
        try:
            if snapshot is None:
                fold_stored(_tracked(journal.lineage(conversation_id), last))
                continue
            builder = fold_stored(_tracked(journal.lineage(conversation_id, snapshot.seq), last))
            problem = _snapshot_problem(snapshot, builder.head())
            fold_stored(_tracked(journal.read(conversation_id, snapshot.seq + 1), last), builder)
        except TurnlogError as exc:
            row = last[0] if last else None
            if row is not None and (row.stream_id, row.seq) not in seen:
                seen.add((row.stream_id, row.seq))
                found.append(_illegal(row, exc))
            if snapshot is not None and row is not None and (
                    row.stream_id != conversation_id or row.seq <= snapshot.seq):
                found.append(_snapshot_mismatch(
                    conversation_id, snapshot,
                    f"cannot be checked: its events no longer fold ({exc})"))
            continue
        if problem is not None:
            found.append(_snapshot_mismatch(conversation_id, snapshot, problem))
    return found


def _tracked(rows: Iterable[StoredEvent], last: list[StoredEvent]) -> Iterator[StoredEvent]:
    """``rows``, keeping the one being folded in ``last`` (to say where a fold failed)."""
    for row in rows:
        last[:] = [row]
        yield row


def _illegal(row: StoredEvent, exc: TurnlogError) -> ProjectionMismatch:
    what = ("an illegal history" if isinstance(exc, InvalidTransition)
            else "an event that does not decode")
    return ProjectionMismatch("engine.state", "history", row.stream_id, row.position, None,
                              f"{what} at seq {row.seq}: {exc}", seq=row.seq)


def _snapshot_problem(snapshot: Snapshot, folded: ConversationState) -> str | None:
    """Why the saved state differs from ``folded`` (by canonical bytes), or ``None``."""
    saved = decode_state(snapshot.data)
    if saved is None:
        return "its bytes are not a conversation state"
    if _CANONICAL.encode(saved) == _CANONICAL.encode(folded):
        return None
    fields = [f for f in ConversationState.__struct_fields__
              if _CANONICAL.encode(getattr(saved, f)) != _CANONICAL.encode(getattr(folded, f))]
    return f"differs from the fold of its events in {', '.join(fields) or 'its encoding'}"


def _snapshot_mismatch(conversation_id: str, snapshot: Snapshot,
                       reason: str) -> ProjectionMismatch:
    return ProjectionMismatch("engine.state", "snapshots", conversation_id, None, None,
                              f"the saved state at seq {snapshot.seq} {reason}")
