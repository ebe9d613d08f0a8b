"""Deterministic replay: re-run the engine over a recording and prove it does the same.

The recorded conversation's configuration (its ``conversation_started``) and
user inputs are fed to the agent loop again, into a journal that keeps the
re-run's rows in memory only (``replay._scratch.RerunJournal``: no database,
no hash chain), with a ``RecordedProvider`` (the recorded responses, served
only to requests with the recorded digest) and ``RecordedTools`` (the
recorded results, served only to calls with the recorded tool name and
canonical arguments). Every event the loop appends is compared in memory with
the recorded event at the same seq, as it is appended, ignoring only
wall-clock fields (``recorded_at``, ``duration_ms``, ``latency_ms``) and the
price charged (``charge``); the first difference stops the re-run with a
``Divergence``::

    result = replay(journal, "c-1a2b", collect=True)
    if not result.ok:
        print(result.divergence.render())

This is how a change to directives, tools, the duplicate rule or the loop is
checked against every past run: ``replay_all(journal)``. A conversation whose
recording ends mid-run (a crash) replays up to its last recorded event.
Conversations holding imported or external-runner messages are skipped
(those events were not produced by the loop), and say so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from turnlog.engine.audit.erasure import refuse_erased
from turnlog.engine.errors import ConversationNotFound
from turnlog.engine.model.events import (
    ConversationCompleted,
    ConversationFailed,
    ConversationHalted,
    ModelFailed,
    ModelResponded,
    ToolCompleted,
    TurnLimitReached,
    decode_event,
    encode_event,
    payload_of,
)
from turnlog.journal import JournalProtocol, NewEvent, StoredEvent

from ._scratch import RerunJournal
from .driver import loop_driver
from .errors import Divergence, ReplayError, RunPaused
from .recorded import REPLAY_LATENCY_MS, RecordedProvider, RecordedTools, Recording, event_dict

__all__ = ["REPLAY_LATENCY_MS", "WALL_CLOCK_FIELDS", "Driver", "ReplayResult", "RunPaused", "replay",
           "same_event"]

#: Payload fields that hold measurements of the run's surroundings (the wall clock, and
#: ``charge``: the price list of the day); replay ignores them (and ``recorded_at``).
WALL_CLOCK_FIELDS = frozenset({"charge", "duration_ms", "latency_ms"})

#: the events that end a run: a recording ending elsewhere was cut short (a crash)
_RUN_ENDS = (ConversationCompleted, ConversationFailed, ConversationHalted, TurnLimitReached)

#: ``driver(rerun_journal, recording, provider, tools)`` re-runs the recording's inputs,
#: appending to ``rerun_journal`` (each append to the replayed stream is checked at once).
Driver = Callable[[RerunJournal, Recording, RecordedProvider, RecordedTools], None]


class ReplayResult(msgspec.Struct, kw_only=True):
    """The outcome of replaying one conversation.

    ``ok`` when every recorded event was produced again; ``checked`` counts
    the events compared; ``skipped`` says why a conversation was not re-run.
    """

    conversation_id: str
    ok: bool
    checked: int = 0
    divergence: Divergence | None = None
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``ok``, ``divergence`` (``seq``, ``expected``, ``actual``...) or null."""
        return {"conversation_id": self.conversation_id, "ok": self.ok, "checked": self.checked,
                "skipped": self.skipped,
                "divergence": self.divergence.to_dict() if self.divergence else None}


def _strip(payload: str) -> dict[str, Any]:
    return _stripped(msgspec.json.decode(payload))


def _stripped(data: dict[str, Any]) -> dict[str, Any]:
    for key in WALL_CLOCK_FIELDS:
        data.pop(key, None)
    return data


def same_event(recorded: StoredEvent | NewEvent, produced: NewEvent) -> bool:
    """Whether two events are equal but for wall-clock fields (fast path: equal payload text).

    A recording written at an older version of the type is compared as upcast
    (``payload_of``): the re-run writes the current version.
    """
    if recorded.type != produced.type:
        return False
    if recorded.version != produced.version:
        return _stripped(payload_of(recorded.type, recorded.version, recorded.payload)) == \
            _stripped(payload_of(produced.type, produced.version, produced.payload))
    return recorded.payload == produced.payload or _strip(recorded.payload) == _strip(
        produced.payload)


class _RecordingEnd(ReplayError):
    """The re-run went past the end of an unfinished recording: nothing left to compare."""


def _as_dict(event: StoredEvent | NewEvent) -> dict[str, Any]:
    try:
        return event_dict(decode_event(event.type, event.version, event.payload))
    except ReplayError:
        raise
    except Exception:  # noqa: BLE001 - show what was written even if it does not decode
        return {"type": event.type, "payload": event.payload}


def _expected_payload(event: object, row: StoredEvent) -> str:
    """The payload a faithful re-run writes: the recorded one, with the replay's latency."""
    if type(event) in (ModelResponded, ModelFailed) and event.latency_ms is not None:
        event = msgspec.structs.replace(event, latency_ms=REPLAY_LATENCY_MS)
        return encode_event(event).payload
    return row.payload


class _Checker:
    """Compares each event appended to the replayed stream with the recording.

    The fast path compares payload text with the recorded payload (normalised
    to the replay's stopped timer); anything else is decoded and compared
    without the wall-clock fields.
    """

    def __init__(self, recording: Recording, finished: bool) -> None:
        self.recording, self.finished = recording, finished
        self.checked = 0
        self.expected = [_expected_payload(event, row)
                         for row, (_seq, event) in zip(recording.rows, recording.events)]

    def check(self, events: Sequence[NewEvent], expected_seq: int) -> None:
        rec = self.recording
        for i, produced in enumerate(events):
            seq = expected_seq + 1 + i
            if seq > len(rec.rows):
                if not self.finished:
                    raise _RecordingEnd(f"the recording ends at seq {len(rec.rows)}")
                raise rec.diverged(Divergence(
                    rec.conversation_id, seq, None, _as_dict(produced),
                    f"the re-run appends a {produced.type} after the recording's last event"))
            recorded = rec.rows[seq - 1]
            if recorded.type == "user_message" and produced.type != "user_message":
                raise RunPaused(f"the recorded run paused before seq {seq}")
            if produced.payload == self.expected[seq - 1] and produced.type == recorded.type:
                self.checked += 1
                continue
            if not same_event(recorded, produced):
                both_requests = recorded.type == produced.type == "model_requested"
                request_diff = (rec.request_diff(seq, rec.last_request)
                                if both_requests and rec.last_request is not None else "")
                raise rec.diverged(Divergence(
                    rec.conversation_id, seq, _as_dict(recorded), _as_dict(produced),
                    f"recorded {recorded.type}, re-run produced {produced.type}"
                    if recorded.type != produced.type else
                    f"the {produced.type} differs from the recorded one", request_diff))
            self.checked += 1


def _not_replayable(recording: Recording) -> str | None:
    for seq, event in recording.events:
        if type(event) is ModelResponded and event.source != "provider":
            article = "an" if event.source[:1] in "aeiou" else "a"
            return (f"seq {seq} holds {article} {event.source} model message, "
                    "not one the loop produced")
        if type(event) is ToolCompleted and event.source in ("imported",):
            return f"seq {seq} holds an imported tool result, not one the loop produced"
    return None


def replay(journal: JournalProtocol, conversation_id: str, *, collect: bool = False,
           driver: Driver | None = None, check_digest: bool = True) -> ReplayResult:
    """Re-run ``conversation_id`` against its recording; the result says whether it held.

    With ``collect=False`` (default) a difference raises the ``Divergence``;
    with ``collect=True`` it is returned in the result. ``driver`` replaces
    the default (the engine's loop) for custom runners. ``check_digest=False``
    skips re-hashing each request in the provider (the loop's recorded
    ``model_requested`` digest is still compared). Raises
    ``ConversationNotFound`` for an unknown id, ``RecordingError`` for a
    stream that is not a conversation, ``ConversationErasedError`` for one whose
    content (or its fork parent's) was erased.
    """
    if not journal.last_seq(conversation_id):
        raise ConversationNotFound(f"no conversation {conversation_id!r} in {journal.path}")
    rows = list(journal.read(conversation_id))  # read once: checked for erasures, then indexed
    refuse_erased(journal, conversation_id, "replay", own=rows)
    recording = Recording(journal, conversation_id, rows)
    reason = _not_replayable(recording)
    if reason is not None:
        return ReplayResult(conversation_id=conversation_id, ok=True, skipped=reason)
    checker = _Checker(recording, finished=type(recording.events[-1][1]) in _RUN_ENDS)
    divergence = _run(journal, recording, checker, driver, check_digest)
    if divergence is None and checker.checked < len(recording.rows):
        seq = checker.checked + 1
        divergence = Divergence(conversation_id, seq, _as_dict(recording.rows[seq - 1]), None,
                                "the re-run stopped before this recorded event")
    if divergence is not None and not collect:
        raise divergence
    return ReplayResult(conversation_id=conversation_id, ok=divergence is None,
                        checked=checker.checked, divergence=divergence)


def _run(journal: JournalProtocol, recording: Recording, checker: _Checker, driver: Driver | None,
         check_digest: bool) -> Divergence | None:
    # a fork's ancestors are read from the recorded journal; nothing is copied
    with RerunJournal(journal, checker) as scratch:
        provider = RecordedProvider(recording, check_digest=check_digest)
        try:
            (driver or loop_driver)(scratch, recording, provider, RecordedTools(recording))
        except Divergence as exc:
            return recording.divergence or exc
        except (_RecordingEnd, RunPaused):
            pass
    # a divergence the loop caught and turned into something else is still the first one
    return recording.divergence
