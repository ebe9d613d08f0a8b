"""What a deterministic replay serves from the recording: model responses and tool results.

``Recording`` reads one conversation's own events once and indexes them:
the model exchanges in order (each ``model_requested`` with the response or
failure that answered it) and the tool results by call id. ``RecordedProvider``
answers the re-run's requests from it, after checking that the request the
re-run would send has the recorded digest; ``RecordedTools`` answers tool
calls, after checking the tool name and canonical arguments. Either one
reports a mismatch as a ``Divergence`` (kept on the ``Recording`` too, so the
first one wins even if the loop swallows an exception).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from typing import Any

import msgspec

from turnlog.engine import errors as engine_errors
from turnlog.engine.tools.duplicates import call_key
from turnlog.engine.model.events import (
    ApprovalDecided,
    ConversationStarted,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    RunInterrupted,
    ToolCompleted,
    ToolProgressed,
)
from turnlog.engine.model.messages import ToolCall
from turnlog.engine.providers.base import ModelRequest, ModelResponse
from turnlog.engine.loop.request_digest import RequestDigest
from turnlog.journal import JournalProtocol, StoredEvent

from .errors import Divergence, RecordingError
from .rebuild import lineage_events, own_events, rebuild

__all__ = ["REPLAY_LATENCY_MS", "Exchange", "RecordedProvider", "RecordedRetries", "RecordedTools",
           "Recording", "event_dict", "request_of"]


#: the latency a replay's loop measures (its timer is stopped): recordings are compared as if
REPLAY_LATENCY_MS = 0.0


def event_dict(event: Any) -> dict[str, Any]:
    """An event as the plain dict a ``Divergence`` shows (its ``type`` included)."""
    return msgspec.to_builtins(event)


def request_of(state: Any) -> ModelRequest:
    """The request a conversation in ``state`` sends next (what the loop builds from the builder)."""
    return ModelRequest(model=state.model, system=state.system, messages=tuple(state.messages),
                        tools=tuple(state.tools), parameters=dict(state.parameters))


class Exchange(msgspec.Struct, kw_only=True):
    """One recorded model call: the request's seq and event, and its outcome."""

    seq: int
    requested: ModelRequested
    outcome: ModelResponded | ModelFailed | None = None


class Recording:
    """One recorded conversation's own events, indexed for replay.

    ``events`` are ``(seq, event)`` pairs; ``started`` the first event;
    ``user_inputs`` the recorded user messages with their seqs; ``divergence``
    the first mismatch found by the provider or the tools (``None`` so far). ``rows``
    are the conversation's own rows when the caller already read them (else read here).
    """

    def __init__(self, journal: JournalProtocol, conversation_id: str,
                 rows: Sequence[StoredEvent] | None = None) -> None:
        self.journal, self.conversation_id = journal, conversation_id
        # an interruption marker is no step of the loop: the re-run goes straight through,
        # as a resumed run did after it
        pairs = [p for p in own_events(journal, conversation_id, rows)
                 if type(p[1]) is not RunInterrupted]
        self.rows = [row for row, _ in pairs]
        self.events = [(row.seq, event) for row, event in pairs]
        started = self.events[0][1] if self.events else None
        if type(started) is not ConversationStarted:
            raise RecordingError(f"conversation {conversation_id!r} in {journal.path} does not "
                                 "start with conversation_started")
        self.started: ConversationStarted = started
        self.exchanges: list[Exchange] = []
        self.results: dict[str, tuple[int, ToolCompleted]] = {}
        self.calls: dict[str, ToolCall] = {}
        self.divergence: Divergence | None = None
        #: the request the re-run built last (set by the driver), for request diffs
        self.last_request: ModelRequest | None = None
        fork = self.started.fork
        if fork is not None:  # calls made before the fork point may be answered after it
            for _row, event in lineage_events(journal, fork.conversation_id, fork.seq):
                if type(event) is ModelResponded:
                    self.calls.update((p.id, p) for p in event.parts if type(p) is ToolCall)
        for seq, event in self.events:
            kind = type(event)
            if kind is ModelRequested:
                self.exchanges.append(Exchange(seq=seq, requested=event))
            elif kind in (ModelResponded, ModelFailed) and self.exchanges and (
                    self.exchanges[-1].outcome is None
                    and self.exchanges[-1].requested.turn == event.turn):
                self.exchanges[-1].outcome = event
                if kind is ModelResponded:
                    self.calls.update((p.id, p) for p in event.parts if type(p) is ToolCall)
            elif kind is ToolCompleted:
                self.results[event.call_id] = (seq, event)
            elif kind is ApprovalDecided and event.arguments is not None \
                    and event.call_id in self.calls:  # the call ran as the approver edited it
                self.calls[event.call_id] = msgspec.structs.replace(
                    self.calls[event.call_id], arguments=event.arguments)

    @property
    def last_seq(self) -> int:
        """The recording's last seq."""
        return self.events[-1][0]

    def diverged(self, divergence: Divergence) -> Divergence:
        """Keep the first divergence found; return it (to raise)."""
        if self.divergence is None:
            self.divergence = divergence
        return self.divergence

    def recorded_request(self, seq: int) -> ModelRequest:
        """The request recorded at ``seq``, rebuilt by folding the recording up to it."""
        return request_of(rebuild(self.journal, self.conversation_id, seq - 1))

    def request_diff(self, seq: int, actual: ModelRequest) -> str:
        """A unified diff of ``actual`` against the request recorded at ``seq``."""
        def lines(request: ModelRequest) -> list[str]:
            return json.dumps(msgspec.to_builtins(request), indent=2, sort_keys=True,
                              ensure_ascii=False).splitlines(keepends=True)
        return "".join(difflib.unified_diff(
            lines(self.recorded_request(seq)), lines(actual),
            fromfile=f"recorded request (seq {seq})", tofile="re-run request"))


class RecordedProvider:
    """Answers each request with the recorded response, in order, after checking its digest.

    ``name`` is the recorded provider's name, so the events it causes match
    the recording. A recorded ``model_failed`` is raised again as the
    ``ProviderError`` subclass it names, with the recorded message and status.
    """

    def __init__(self, recording: Recording, *, check_digest: bool = True) -> None:
        self.recording = recording
        self.name = recording.started.provider
        self.check_digest = check_digest
        #: hashes each message once, as the loop does (a driver may share the loop's own)
        self.digests: Any = RequestDigest()
        self._next = 0

    def complete(self, request: ModelRequest) -> ModelResponse:
        """The recorded answer to the next request (``Divergence`` on a miss)."""
        rec = self.recording
        if self._next >= len(rec.exchanges):
            raise rec.diverged(Divergence(
                rec.conversation_id, rec.last_seq + 1, None,
                {"type": "model_requested", "model": request.model, "digest": request.digest()},
                "the re-run sends a model request the recording does not have"))
        exchange = rec.exchanges[self._next]
        if self.check_digest:
            digest = self.digests.digest(request)
            if digest != exchange.requested.digest:
                actual = {**event_dict(exchange.requested), "digest": digest,
                          "model": request.model}
                raise rec.diverged(Divergence(
                    rec.conversation_id, exchange.seq, event_dict(exchange.requested), actual,
                    f"the request for turn {exchange.requested.turn} differs from the recorded "
                    "one (digest mismatch)", rec.request_diff(exchange.seq, request)))
        self._next += 1
        outcome = exchange.outcome
        if outcome is None:
            raise rec.diverged(Divergence(
                rec.conversation_id, exchange.seq + 1, None, None,
                f"the recording has no answer to turn {exchange.requested.turn}'s request"))
        if type(outcome) is ModelFailed:
            raise _provider_error(outcome)
        return ModelResponse(parts=outcome.parts, stop_reason=outcome.stop_reason,
                             usage=outcome.usage, provider=outcome.provider,
                             model=outcome.model, response_id=outcome.response_id,
                             raw=outcome.raw, replaced=outcome.replaced)

    def retried(self) -> bool:
        """Whether the recording tried the failure just served again (its next request is a retry)."""
        exchanges, i = self.recording.exchanges, self._next
        return (0 < i < len(exchanges) and type(exchanges[i - 1].outcome) is ModelFailed
                and exchanges[i].requested.attempt == exchanges[i - 1].requested.attempt + 1)


class RecordedRetries:
    """The replay loop's retry policy: retry exactly where the recording did, without waiting."""

    def __init__(self, provider: RecordedProvider) -> None:
        self.provider = provider

    def delay(self, *, retryable: bool, attempt: int, retry_after: float | None = None
              ) -> float | None:
        """``0`` if the recording retried the failure just served, else ``None`` (give up)."""
        return 0.0 if self.provider.retried() else None

    def wait(self, seconds: float) -> None:
        """Replays never wait."""


def _provider_error(failed: ModelFailed) -> Exception:
    """The exception the recorded failure came from, as far as the loop can see it.

    Same class name, message, status and ``retryable`` as recorded; an error
    type turnlog does not define (a bug's ``ValueError``) is rebuilt as a
    ``ProviderError`` subclass of that name.
    """
    base = getattr(engine_errors, failed.error_type, None)
    if not (isinstance(base, type) and issubclass(base, engine_errors.ProviderError)):
        base = engine_errors.ProviderError
    cls = _replayed_error(failed.error_type, base, failed.retryable)
    error = cls.__new__(cls)
    # the recorded message already carries the provider's prefix: keep it byte for byte
    Exception.__init__(error, failed.message)
    error.provider, error.status = failed.provider, failed.status
    error.retry_after = failed.retry_after
    return error


_REPLAYED: dict[tuple[str, type, bool], type] = {}


def _replayed_error(name: str, base: type, retryable: bool) -> type:
    if base.__name__ == name and base.retryable == retryable:
        return base
    key = (name, base, retryable)
    if key not in _REPLAYED:
        _REPLAYED[key] = type(name, (base,), {"retryable": retryable,
                                              "__doc__": "A recorded provider failure, replayed."})
    return _REPLAYED[key]


class RecordedTools:
    """Serves recorded tool results by call id, after checking name and canonical arguments."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording

    def news(self) -> list[tuple[int, ToolProgressed]]:
        """The recorded ``tool_progressed`` events (news of running calls), with their seqs."""
        return [(seq, event) for seq, event in self.recording.events
                if type(event) is ToolProgressed]

    def result(self, call: ToolCall) -> ToolCompleted:
        """The recorded ``tool_completed`` for ``call`` (``Divergence`` when none fits)."""
        rec = self.recording
        found = rec.results.get(call.id)
        if found is None:
            raise rec.diverged(Divergence(
                rec.conversation_id, rec.last_seq + 1, None,
                {"type": "tool_started", "call_id": call.id, "name": call.name,
                 "arguments": call.arguments},
                f"the re-run runs tool call {call.id!r} ({call.name}) but the recording has no "
                "result for it"))
        seq, completed = found
        recorded = rec.calls.get(call.id)
        # the re-run's call is usually the recorded object itself (served by the provider)
        same_call = recorded is call or (recorded is not None and _key(recorded) == _key(call))
        if completed.name != call.name or not same_call:
            raise rec.diverged(Divergence(
                rec.conversation_id, seq, event_dict(completed),
                {"type": "tool_started", "call_id": call.id, "name": call.name,
                 "arguments": call.arguments},
                f"tool call {call.id!r} is {call.name}({_shown(call.arguments)}) but the "
                f"recording answered {completed.name}"
                f"({_shown(recorded.arguments) if recorded else '?'})"))
        return completed


def _shown(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=repr)


def _key(call: ToolCall) -> str:
    # exact: no volatile keys are left out when checking a replayed call against its recording
    return call_key(call.name, call.arguments, None, call.raw_arguments if call.invalid else None)
