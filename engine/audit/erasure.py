"""Erasure and retention of conversations' content: ``turnlog erase``, ``prune`` and ``hold``.

Erasing an event replaces its payload (``journal.erase``) by one that keeps the
SHA-256 of the original and the event's structure (type, turn, call ids, tool names,
usage, outcomes) with every piece of content (texts, arguments, results, raw bodies,
system prompt, metadata) replaced by ``"erased"`` or emptied. So the lifecycle still
folds, every view, export and the viewer show "erased" where the content was, and
every hash, the log tree, checkpoints and proofs stay valid (chain version 2). An
``erasure_recorded`` event says who erased which seqs, when and why. A conversation
with an erased event (or a fork of one) is never replayed, forked or continued
(:class:`ConversationErasedError`).

A legal hold (``hold_placed``, lifted by ``hold_released``) keeps ``prune`` away.
"""

from __future__ import annotations

import getpass
import socket
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from itertools import chain
from typing import Any

import msgspec

from turnlog.journal import ConcurrencyError, JournalProtocol, NewEvent, StoredEvent

from ..errors import ConversationErasedError, ConversationNotFound, InvalidEventError
from turnlog.engine.model.events import (
    MARKERS,
    ApprovalDecided,
    ApprovalRequested,
    ConversationCompleted,
    ConversationFailed,
    ConversationHalted,
    ConversationStarted,
    ErasureRecorded,
    Event,
    HoldPlaced,
    HoldReleased,
    ModelFailed,
    ModelResponded,
    ToolCallRejected,
    ToolCompleted,
    ToolProgressed,
    ToolStarted,
    UserMessage,
    decode_event,
    encode_event,
)
from turnlog.engine.model.messages import Part, Text, ToolCall, ToolResult

__all__ = [
    "ERASED",
    "PruneResult",
    "default_by",
    "erase_conversation",
    "erasure_summary",
    "first_erased",
    "held",
    "hold",
    "prune",
    "redact",
    "refuse_erased",
]

ERASED = "erased"
"""What an erased text reads as, everywhere the content was."""


class PruneResult(msgspec.Struct, frozen=True):
    """What :func:`prune` did (or, ``dry_run``, would do): conversations ``erased`` (id ->
    seqs), those ``held`` (skipped), and those already erased (``unchanged``)."""

    erased: dict[str, list[int]]
    held: list[str]
    unchanged: list[str]
    dry_run: bool = False


def default_by() -> str:
    """Who erases when ``--by`` is not given: ``user@host`` of this process."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def _part(part: Part) -> Part:
    if type(part) is ToolCall:  # the call stays (its id and tool); its arguments go
        return msgspec.structs.replace(part, arguments={}, raw_arguments="{}",
                                      invalid=_text(part.invalid))
    if type(part) is ToolResult:
        return msgspec.structs.replace(part, content=ERASED)
    return Text(text=ERASED)


def _parts(parts: Sequence[Part]) -> tuple[Part, ...]:
    return tuple(_part(p) for p in parts)


def _text(value: str | None) -> str | None:
    return None if value is None else ERASED


def redact(event: Event) -> Event:
    """``event`` without its content: the same type and structure (what the lifecycle, the
    views' counts and the audit's figures read), every text ``"erased"``, every argument,
    result body, raw response and metadata emptied."""
    replace = msgspec.structs.replace
    match event:
        case ConversationStarted():
            return replace(event, system=ERASED if event.system else "", directives=(),
                           metadata={}, approve_reason=_text(event.approve_reason))
        case UserMessage():
            return replace(event, parts=_parts(event.parts), context=_text(event.context))
        case ModelResponded():
            return replace(event, parts=_parts(event.parts), raw=None)
        case ModelFailed():
            return replace(event, message=ERASED, partial=_parts(event.partial))
        case ToolCallRejected():
            return replace(event, content=ERASED, arguments={}, details={})
        case ToolStarted():
            return replace(event, arguments={})
        case ToolProgressed():  # the step's kind stays, what it said goes
            kind = event.data.get("kind")
            return replace(event, data={} if kind is None else {"kind": kind})
        case ToolCompleted():
            return replace(event, content=ERASED, data=None, error=_text(event.error))
        case ApprovalRequested():
            return replace(event, reason=_text(event.reason))
        case ApprovalDecided():
            return replace(event, reason=_text(event.reason),
                           arguments=None if event.arguments is None else {})
        case ConversationCompleted():
            return replace(event, final_content=ERASED if event.final_content else "")
        case ConversationFailed():
            return replace(event, error=ERASED)
        case ConversationHalted():
            return replace(event, reason=ERASED)
    return event  # no content: model_requested, turn_limit_reached, run_interrupted


def _kept(row: StoredEvent) -> str:
    """The JSON object an erased payload keeps of ``row``: its redacted event."""
    event = decode_event(row.type, row.version, row.payload,
                         where=f"conversation {row.stream_id!r} seq {row.seq}")
    return encode_event(redact(event)).payload


def _check_id(journal: JournalProtocol, conversation_id: str) -> int:
    last = journal.last_seq(conversation_id)
    if not last:
        raise ConversationNotFound(f"{journal.path} has no conversation {conversation_id!r}")
    return last


def erase_conversation(journal: JournalProtocol, conversation_id: str, *, reason: str,
                       seq: int | None = None, by: str | None = None,
                       via: str = "erase", expected_seq: int | None = None) -> list[int]:
    """Erase the content of ``conversation_id``'s events (or only the one at ``seq``) and
    record it (:class:`ErasureRecorded`), in one transaction: all or nothing.

    Returns the seqs erased (none: everything asked was erased already). Raises
    :class:`ConversationNotFound`, ``InvalidEventError`` for an empty ``reason`` or a
    ``seq`` that is an annotation (an erasure or hold record) or past the end,
    ``journal.NotErasableError`` on a journal of chain version 1; with ``expected_seq`` (the
    last seq the caller decided on), ``journal.ConcurrencyError`` when another writer
    appended since (nothing erased).
    """
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidEventError("an erasure needs a reason (--reason TEXT): it is recorded")
    last = _check_id(journal, conversation_id)
    who = by or default_by()
    if seq is not None:
        if type(seq) is not int or not 1 <= seq <= last:
            raise InvalidEventError(
                f"conversation {conversation_id!r} has seqs 1 to {last}, not {seq!r}")
        rows = list(journal.read(conversation_id, seq, limit=1))
        if rows[0].type in MARKERS:
            raise InvalidEventError(
                f"conversation {conversation_id!r} seq {seq} is a {rows[0].type} record, which "
                "holds no conversation content and is kept")
    else:
        rows = [r for r in journal.read(conversation_id) if r.type not in MARKERS]
    kept = {row.seq: _kept(row) for row in rows if not row.erased}

    def record(erased: Mapping[int, str]) -> NewEvent:
        return encode_event(ErasureRecorded(by=who, reason=reason, seqs=tuple(erased),
                                            via=via, kept=tuple(erased.values())))

    if not kept:
        return []
    return journal.erase(conversation_id, kept, record, expected_seq)


def first_erased(journal: JournalProtocol, conversation_id: str, to_seq: int | None = None, *,
                 own: Sequence[StoredEvent] | None = None) -> StoredEvent | None:
    """The first erased event of the conversation's history (its fork ancestors' prefix
    included, up to ``to_seq``), ``None`` if nothing of it was erased.

    ``own`` is the conversation's own stream as the caller already read it (whole, or up
    to ``to_seq``): only its fork ancestors are read then.
    """
    if own is None:
        rows: Iterable[StoredEvent] = journal.lineage(conversation_id, to_seq)
    else:
        above = journal.ancestry(conversation_id, to_seq)[:-1]
        rows = chain.from_iterable([*(journal.read(s, 1, upto) for s, upto in above), own])
    for row in rows:
        if row.erased:
            return row
    return None


def refuse_erased(journal: JournalProtocol, conversation_id: str, action: str,
                  to_seq: int | None = None, *,
                  own: Sequence[StoredEvent] | None = None) -> None:
    """Raise :class:`ConversationErasedError` when the history ``action`` (``replay``,
    ``fork``, ...) would use holds an erased event (``own``: see :func:`first_erased`)."""
    row = first_erased(journal, conversation_id, to_seq, own=own)
    if row is not None:
        where = ("" if row.stream_id == conversation_id
                 else f" (in its fork parent {row.stream_id!r})")
        raise ConversationErasedError(
            f"cannot {action} conversation {conversation_id!r}: the content of its event at "
            f"seq {row.seq}{where} was erased (turnlog erase), so what the model was sent is "
            "gone", conversation_id=row.stream_id, seq=row.seq)


def held(journal: JournalProtocol, conversation_id: str) -> HoldPlaced | None:
    """The conversation's legal hold in force (its last hold record placed one), or ``None``."""
    return _hold_in(journal.read(conversation_id))


def _hold_in(rows: Iterable[StoredEvent]) -> HoldPlaced | None:
    hold_now: HoldPlaced | None = None
    for row in rows:
        if row.type in ("hold_placed", "hold_released"):
            event = decode_event(row.type, row.version, row.payload)
            hold_now = event if isinstance(event, HoldPlaced) else None
    return hold_now


def hold(journal: JournalProtocol, conversation_id: str, *, reason: str,
         by: str | None = None, release: bool = False) -> StoredEvent:
    """Place (or, ``release``, lift) a legal hold on the conversation: a ``hold_placed``
    (``hold_released``) record appended to it. A held conversation is never pruned."""
    if not release and (not isinstance(reason, str) or not reason.strip()):
        raise InvalidEventError("a legal hold needs a reason (--reason TEXT): it is recorded")
    last = _check_id(journal, conversation_id)
    who = by or default_by()
    event: Event = (HoldReleased(by=who, reason=reason or "") if release
                    else HoldPlaced(by=who, reason=reason))
    return journal.append(conversation_id, [encode_event(event)], last)[0]


def _parse_before(before: str | datetime) -> str:
    """``before`` as a ``recorded_at`` text to compare with (a date means its midnight, UTC)."""
    if isinstance(before, datetime):
        moment = before
    else:
        try:
            moment = datetime.fromisoformat(str(before).replace("Z", "+00:00"))
        except ValueError:
            raise InvalidEventError(
                f"--before takes a date or time (2025-01-31, 2025-01-31T12:00:00Z), "
                f"got {before!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds")[:26] + "Z"


def prune(journal: JournalProtocol, before: str | datetime, *, reason: str = "retention",
          holds: Iterable[str] = (), by: str | None = None,
          dry_run: bool = False) -> PruneResult:
    """Erase the content of every conversation whose last event with content (erasure and
    hold records aside) is older than ``before``, except those held (a ``hold_placed`` in force, or named in ``holds``).

    Each conversation is erased as :func:`erase_conversation` does (one transaction per
    conversation, recorded with ``via="prune"``); one already erased is left as it is.
    ``dry_run`` changes nothing and says what would be erased.
    """
    limit = _parse_before(before)
    named = set(holds)
    erased: dict[str, list[int]] = {}
    kept_held: list[str] = []
    unchanged: list[str] = []
    for sid in sorted(info.stream_id for info in journal.streams()):
        while True:  # decided on the rows read; again if another writer appended meanwhile
            rows = list(journal.read(sid))
            content = [r for r in rows if r.type not in MARKERS]
            if not content or content[-1].recorded_at >= limit:
                break  # its last event with content is not older than the date
            if sid in named or _hold_in(rows) is not None:
                kept_held.append(sid)
                break
            pending = [r.seq for r in content if not r.erased]
            if not pending:
                unchanged.append(sid)
                break
            if dry_run:
                erased[sid] = pending
                break
            try:  # refused if the stream grew since it was read (a hold placed meanwhile)
                erased[sid] = erase_conversation(journal, sid, reason=reason, by=by, via="prune",
                                                 expected_seq=rows[-1].seq)
            except ConcurrencyError:
                continue
            break
    return PruneResult(erased, kept_held, unchanged, dry_run)


def erasure_summary(journal: JournalProtocol) -> dict[str, Any]:
    """What the audit shows of erasures and holds: the conversations whose content was
    erased (with how many events), the erasures recorded, and the conversations held now."""
    erased: dict[str, int] = {}
    records = 0
    holding: dict[str, bool] = {}
    for row in journal.read_all(types=sorted(MARKERS)):
        event = decode_event(row.type, row.version, row.payload,
                             where=f"conversation {row.stream_id!r} seq {row.seq}")
        if isinstance(event, ErasureRecorded):
            records += 1
            erased[row.stream_id] = erased.get(row.stream_id, 0) + len(event.seqs)
        else:
            holding[row.stream_id] = isinstance(event, HoldPlaced)
    return {"erased_conversations": dict(sorted(erased.items())),
            "erasures": records, "erased_events": sum(erased.values()),
            "held": sorted(sid for sid, on in holding.items() if on)}
