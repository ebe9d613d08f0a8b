"""The loop's rules as one sans-I/O step: given the state, what to do next.

``Step`` holds every decision of the agent loop (``engine.loop``) and does no
I/O: it reads the conversation's live state and answers with an *action*;
a shell performs it and, for the actions with an outcome, hands the outcome
back (the style of h11 and httpcore). It knows nothing of its caller: its
configuration is one frozen ``StepSettings`` (``LoopBase.step_settings``
builds it from a loop's options at the start of each run). ``Loop`` is the
synchronous shell, ``AsyncLoop`` (``engine.aloop``) the asynchronous one;
neither holds a rule, and what they share beyond I/O is ``engine.loop``'s
``Drive``::

    step = Step(settings, conv)
    while True:
        action = step.next()
        match action:
            case Record():    stage / append the events, flush, tell observers
            case CallModel(): response = provider.complete(action.request)
                              perform step.responded(action, response, seconds)
                              (or step.failed(action, provider_error, seconds))
            case RunTools():  run the calls; perform step.tool_done(run, outcome, left)
                              for each as it completes
            case Wait():      sleep action.delay seconds (a retry's back-off)
            case RunRunner(): perform step.ran(runner.run(action.request))
            case Stop():      return the result

The events of a ``Record`` are staged on the ``Conversation`` (applied to its
state at once, written at the next flush); ``flush`` writes everything staged
before the observers hear ``notices``. A shell flushes before every outside
action (a model call, a tool run), so the journal holds each step before the
next starts.

Tool calls of one response are answered in call order. Consecutive accepted
calls whose tools are ``read_only`` or ``idempotent`` (or declared
``parallel_safe``) form one batch when ``max_parallel_tools`` > 1: their
``tool_started`` events are all written, in call order, before any of them
runs; they then run concurrently (at most ``max_parallel_tools`` at a time)
and each result is recorded as it completes. Any other call runs alone, so
``side_effecting`` calls run one at a time, in call order. An executor may
dictate the schedule instead (replay repeats the recorded one): see
``ToolExecutor`` in ``engine.executor``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from turnlog.engine.tools.approvals import (
    approved_call,
    arguments_hash,
    awaiting,
    needs_approval,
    reason_for,
    request_for,
    spec_hash,
)
from turnlog.engine.tools.calls import assign_call_ids
from turnlog.engine.model.canonical import valid_unicode
from turnlog.engine.tools.duplicates import DuplicatePredicate, check_duplicate, resolve_predicate
from turnlog.engine.errors import (
    EngineError,
    InvalidTransition,
    NestingError,
    ProviderError,
    RunnerError,
    StreamInterrupted,
)
from turnlog.engine.model.events import (
    Charge,
    ConversationCompleted,
    ConversationFailed,
    ConversationHalted,
    Event,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    Refusal,
    RejectReason,
    ToolCallRejected,
    ToolCompleted,
    ToolProgressed,
    ToolStarted,
    TurnLimitReached,
    check_json_data,
    decode_event,
    with_valid_unicode,
)
from turnlog.engine.tools.executor import ToolExecution
from turnlog.engine.model.machine import Lifecycle
from turnlog.engine.model.messages import ToolCall
from turnlog.engine.model.nesting import check_depth, too_deep
from turnlog.engine.providers.base import ModelRequest, ModelResponse
from .request_digest import RequestDigest
from .resume import INTERRUPTED, idempotency_key
from .runners import RunnerResult, RunRequest, runner_events
from turnlog.engine.model.state import StateBuilder
from .texts import refusal_message, tool_failed_message
from turnlog.engine.tools.registry import Tool, ToolContext, ToolRegistry

__all__ = ["Action", "CallModel", "Record", "RunRunner", "RunTools", "Step", "StepSettings", "Stop",
           "ToolRun", "Wait", "check_result_json", "concurrent", "context_of", "executor_failure",
           "ordered", "progress_of", "refusal_of", "request_of"]

L = Lifecycle
R = RejectReason

#: an observer notification: (event name, payload)
Notice = tuple[str, dict[str, Any]]


class Record(msgspec.Struct, frozen=True):
    """Stage ``events`` (or, with ``now``, append them at once in one transaction), then
    ``flush`` if asked, then tell observers ``notices``."""

    events: tuple[Event, ...] = ()
    flush: bool = False
    notices: tuple[Notice, ...] = ()
    now: bool = False


class CallModel(msgspec.Struct, frozen=True):
    """Flush, send ``request`` to the provider, and hand back its response or ``ProviderError``."""

    request: ModelRequest
    turn: int


class ToolRun(msgspec.Struct, frozen=True):
    """One accepted call, ready to run: the tool, the validated arguments, the context."""

    call: ToolCall
    tool: Tool
    validated: dict[str, Any]
    context: ToolContext


class RunTools(msgspec.Struct, frozen=True):
    """Flush, then run ``runs``: at most ``concurrency`` at a time, or, when ``order`` is
    given, one at a time in that order (indexes into ``runs``). Hand back each outcome as
    it completes (``Step.tool_done``)."""

    runs: tuple[ToolRun, ...]
    concurrency: int = 1
    order: tuple[int, ...] | None = None


class Wait(msgspec.Struct, frozen=True):
    """Wait ``delay`` seconds (with the loop's retry policy) before the next action."""

    delay: float


class RunRunner(msgspec.Struct, frozen=True):
    """Flush, offer the run to the loop's runner, and hand back its result (``Step.ran``)."""

    request: RunRequest


class Stop(msgspec.Struct, frozen=True):
    """The run is over (or paused, for a single-turn run); the shell returns its result."""


Action = Record | CallModel | RunTools | Wait | RunRunner | Stop
_STOP = Stop()


@dataclass(frozen=True, slots=True)
class StepSettings:
    """Everything a ``Step`` reads besides the conversation: a run's configuration, frozen.

    ``tools`` the registry; ``provider`` the provider's name (recorded with each request
    and failure); ``model`` overrides the conversation's model in requests; ``digest``
    computes request digests (anything with ``digest(request) -> str``, such as
    ``RequestDigest``); ``retry`` anything with ``RetryPolicy.delay``; ``clock`` the wall
    clock tools see and responses are priced at; ``refuse`` the ``RefusalHook``;
    ``executor`` the ``ToolExecutor`` whose optional scheduling hooks (``keep_open``,
    ``joins``, ``order``) the step consults (it never runs a tool); ``predicate`` the
    custom duplicate rule (else the policy's reference is resolved once per step);
    ``approve`` and ``approve_reason`` the loop's approval marks; ``prices`` what
    responses are charged at (``None``: genai-prices); ``runner`` the runner's class name
    when a runner is offered each run, else ``None``; ``progress(conv, call)`` the
    ``ToolContext.progress`` hook of a call (``LoopBase.progress_writer``), ``traceparent
    (conversation_id)`` the W3C trace context tools see, and ``recorded_progress
    (conversation_id, call_id)`` the recorded ``tool_progressed`` data of a call a crash
    interrupted (``progress_of`` over the journal); each ``None`` when not offered.
    """

    tools: ToolRegistry
    provider: str
    digest: Any
    retry: Any
    clock: Callable[[], datetime]
    model: str | None = None
    refuse: Any = None
    executor: Any = None
    max_parallel_tools: int = 1
    predicate: DuplicatePredicate | None = None
    approve: frozenset[str] = frozenset()
    approve_reason: str | None = None
    prices: Any = None
    runner: str | None = None
    progress: Any = None
    traceparent: Any = None
    recorded_progress: Any = None


def concurrent(tool: Tool) -> bool:
    """Whether calls of ``tool`` may run at the same time as other such calls."""
    return tool.effect != "side_effecting" or bool(getattr(tool, "parallel_safe", False))


def executor_failure(exc: Exception) -> ToolExecution:
    """The outcome of a call whose executor raised: an executor bug is only this call's failure."""
    return ToolExecution(success=False, error=str(exc) or type(exc).__name__)


def _validate(tool: Tool, call: ToolCall) -> tuple[dict[str, Any], str | None]:
    try:
        return tool.validate(call.arguments), None
    except EngineError as exc:
        return {}, str(exc)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def context_of(settings: StepSettings, b: Any, call: ToolCall, key: str | None,
               conv: Any = None, resumed: tuple[Any, ...] = ()) -> ToolContext:
    """The ``ToolContext`` a call of ``b``'s last response runs with (with ``conv``, the
    conversation it runs in: the settings' ``progress`` hook, if any, and the
    ``traceparent`` of an observer that has one)."""
    progress = traceparent = None
    if conv is not None:
        if settings.progress is not None:
            progress = settings.progress(conv, call)
        if settings.traceparent is not None:
            traceparent = settings.traceparent(b.conversation_id)
    return ToolContext(conversation_id=b.conversation_id, turn=b.turn_count, mode=b.mode,
                       call_id=call.id, metadata=b.metadata, data=b.metadata.get("data"),
                       now=settings.clock(), idempotency_key=key, traceparent=traceparent,
                       progress=progress, resumed=resumed)


def progress_of(journal: Any, conversation_id: str, call_id: str) -> tuple[dict[str, Any], ...]:
    """The ``data`` of call ``call_id``'s ``tool_progressed`` events, in order."""
    found = []
    for row in journal.read(conversation_id):
        if row.type != "tool_progressed":
            continue
        event = decode_event(row.type, row.version, row.payload,
                             where=f"stream {conversation_id!r} seq {row.seq}")
        if isinstance(event, ToolProgressed) and event.call_id == call_id:
            found.append(event.data)
    return tuple(found)


def request_of(settings: StepSettings, b: Any) -> ModelRequest:
    """The request for the next turn, from the live state (never re-read from the journal)."""
    return ModelRequest(model=settings.model or b.model, system=b.system,
                        messages=tuple(b.message_list), tools=b.tools, parameters=b.parameters)


def refusal_of(settings: StepSettings, b: Any, call: ToolCall,
               tool: Tool | None) -> Refusal | None:
    """Why ``call`` must not run (before its arguments are validated), or ``None``.

    The built-in rules, in order: the run is halted, the arguments are
    invalid or cut off, the tool is unknown, the tool is disabled; then the
    settings' ``refuse`` hook, if any.
    """
    limit = b.duplicate_policy.max_refusals
    if limit is not None and b.refusals >= limit:
        return Refusal(reason=R.HALTED, details={"refusals": b.refusals})
    if call.invalid:
        if call.invalid.startswith("cut off"):
            return Refusal(reason=R.CUT_OFF)
        return Refusal(reason=R.INVALID_ARGUMENTS,
                       details={"problem": call.invalid, "stage": "parse"})
    if tool is None:
        return Refusal(reason=R.UNKNOWN, details={"available": list(settings.tools.names())})
    disabled = tool.disabled_reason(context_of(settings, b, call, None))
    if disabled:
        return Refusal(reason=R.DISABLED, details={"why": disabled})
    return settings.refuse(b, call, tool) if settings.refuse is not None else None


@dataclass(slots=True)
class _Batch:
    runs: list[ToolRun] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    open: bool = True


class Step:
    """The next action of one run of ``conv`` (see the module docstring).

    ``settings`` is the run's configuration (``StepSettings``); ``conv`` is
    read for its live state (``conv.builder``), never written: the shell
    stages what a ``Record`` holds. ``single_turn`` stops after one model turn.
    """

    def __init__(self, settings: StepSettings, conv: Any, *, single_turn: bool = False) -> None:
        self.settings, self.conv, self.single_turn = settings, conv, single_turn
        self.turns = 0
        self._queue: deque[Action] = deque()
        self._batch = _Batch()
        self._offer_runner = settings.runner is not None
        self._done = False
        self._broke = False  # a stream broke in this run (it then stops; a resume re-sends)
        #: tools the settings mark for approval (``Loop(approve=...)``), besides the recorded ones
        self._marked = frozenset(settings.approve)
        self._predicate = settings.predicate
        self._prices = settings.prices
        #: the request the last ``model_requested`` was built from (sent by the next CallModel)
        self._built: ModelRequest | None = None
        self._source: list[Any] | None = None  # the builder's message list ...
        self._sent: tuple[Any, ...] | None = None  # ... as the last request's tuple
        executor = settings.executor
        self._keep_open = getattr(executor, "keep_open", None)
        self._joins_hook = getattr(executor, "joins", None)
        self._order = getattr(executor, "order", None)

    # --- what next ---------------------------------------------------------------

    def next(self) -> Action:
        """The next action, from the live state (and what this step already decided)."""
        if self._queue:
            return self._queue.popleft()
        if self._done:
            return _STOP
        b = self.conv.builder
        if self._offer_runner:
            self._offer_runner = False
            if b.lifecycle is L.AWAITING_MODEL:
                return RunRunner(RunRequest(
                    conversation_id=b.conversation_id, messages=tuple(b.message_list),
                    tools=b.tools, provider=b.provider, model=b.model, mode=b.mode,
                    system=b.system, metadata=b.metadata, max_turns=b.max_turns,
                    single_turn=self.single_turn))
        state = b.lifecycle
        if state is L.AWAITING_MODEL:
            return self._before_turn(b) or self._request(b)
        if state is L.REQUESTED:
            request, self._built = self._built or request_of(self.settings, b), None
            return CallModel(request, b.requested_turn)
        if state is L.AWAITING_TOOLS:
            return self._tools(b)
        if state is L.ANSWERED:
            return Record((ConversationCompleted(final_content=b.final_content),), flush=True,
                          notices=(("completed", {"final_content": b.final_content}),))
        return _STOP  # READY (no user message yet) or a finished run

    # --- model turns -------------------------------------------------------------

    def _before_turn(self, b: Any) -> Action | None:
        """The action that ends (or retries) the run before another request, if any."""
        if b.error is not None:  # a model_failed answered the last request
            retry = self._retry(b)
            if retry is not None:
                return retry
            if b.failure is not None and b.failure.interrupted:
                return self._broken_stream(b)
            error = b.error + (f" (gave up after {b.attempt} attempts)" if b.attempt > 1 else "")
            return Record((ConversationFailed(error=error, error_type="model_failed"),),
                          flush=True, notices=(("failed", {"error": error}),))
        limit = b.duplicate_policy.max_refusals
        if limit is not None and b.refusals >= limit:
            reason = (f"halted after {b.refusals} refused duplicate tool call(s) in this run "
                      f"(max_refusals={limit})")
            return Record((ConversationHalted(reason=reason, refusals=b.refusals),), flush=True,
                          notices=(("budget_exceeded", {"kind": "refusals", "limit": limit,
                                                        "reason": reason}),))
        if b.run_turns >= b.max_turns:
            pending = bool(b.last_tool_calls)
            warning = (f"max turns ({b.max_turns}) reached"
                       + (" with tool calls still pending" if pending else ""))
            return Record((TurnLimitReached(turn_count=b.turn_count, max_turns=b.max_turns,
                                            pending_tool_calls=pending, warning=warning),),
                          flush=True, notices=(("budget_exceeded", {
                              "kind": "turns", "limit": b.max_turns,
                              "pending_tool_calls": pending, "reason": warning}),))
        if self.single_turn and self.turns:
            return _STOP
        return None

    def _retry(self, b: Any) -> Action | None:
        """Request the failed turn again if the policy says so, after its wait."""
        failure = b.failure
        if failure is None:
            return None
        delay = self.settings.retry.delay(retryable=failure.retryable, attempt=b.attempt,
                                      retry_after=failure.retry_after)
        if delay is None:
            return None
        attempt = b.attempt + 1
        self._queue.append(Wait(delay))  # the failure is durable before the wait
        self._queue.append(self._request(b, attempt))
        return Record(flush=True, notices=(("model_retry", {
            "turn": failure.turn, "attempt": attempt, "delay": delay, "error": b.error}),))

    def _broken_stream(self, b: Any) -> Action:
        """A stream this run saw break stops the run unfinished; a later run sends again."""
        if self._broke:
            self._done = True
            return Record(flush=True, notices=(("failed", {"error": b.error,
                                                           "interrupted": True}),))
        return self._request(b, b.attempt + 1)

    def _request(self, b: Any, attempt: int = 1) -> Record:
        # built once: staging model_requested changes no part of the request, so the
        # CallModel that follows sends this same object (a shell or provider that digests
        # it again can reuse the digest computed here)
        settings = self.settings
        messages, extends = self._messages(b)
        request = self._built = ModelRequest(
            model=settings.model or b.model, system=b.system, messages=messages, tools=b.tools,
            parameters=b.parameters)
        digest = (settings.digest.digest(request, extends=extends)
                  if isinstance(settings.digest, RequestDigest)
                  else settings.digest.digest(request))
        turn = b.turn_count + 1
        event = ModelRequested(turn=turn, digest=digest,
                               provider=self.settings.provider, model=request.model,
                               parameters=b.parameters, attempt=attempt)
        return Record((event,), notices=(("turn_started", {"turn": turn}),) if attempt == 1 else ())

    def _messages(self, b: Any) -> tuple[tuple[Any, ...], tuple[Any, ...] | None]:
        """The request's messages, and the earlier tuple they extend (``None`` if built anew).

        The builder's list only grows (``StateBuilder.message_list``), so the last tuple
        is extended by the new messages rather than copied whole every turn.
        """
        messages = b.message_list
        last = self._sent
        if last is not None and self._source is messages and len(last) <= len(messages):
            if len(last) < len(messages):
                self._sent = last + tuple(messages[len(last):])
            return self._sent, last
        self._source, self._sent = messages, tuple(messages)
        return self._sent, None

    def responded(self, action: CallModel, response: ModelResponse, seconds: float) -> Record:
        """Record the provider's ``response`` to ``action`` (``seconds`` it took)."""
        self.turns += 1
        b, request = self.conv.builder, action.request
        event = with_valid_unicode(ModelResponded(
            turn=action.turn, parts=response.parts, stop_reason=response.stop_reason,
            usage=response.usage, provider=response.provider or self.settings.provider,
            model=response.model or request.model, response_id=response.response_id,
            raw=response.raw, latency_ms=_ms(seconds), replaced=response.replaced))
        event = msgspec.structs.replace(event, charge=self._charge(event))
        parts = assign_call_ids(event.parts, b.call_ids)  # call ids unique in the conversation
        if parts != event.parts:
            event = msgspec.structs.replace(event, parts=parts)
        calls = [p.name for p in parts if type(p) is ToolCall]
        return Record((event,), notices=(("model_responded", {
            "turn": action.turn, "stop_reason": response.stop_reason, "tool_calls": calls}),))

    def _charge(self, event: ModelResponded) -> Charge:
        """What the response cost, priced now by the settings' prices (genai-prices by default)."""
        if self._prices is None:
            from turnlog.engine.audit.prices import Prices  # the audit package imports the engine

            self._prices = Prices.default()
        when = self.settings.clock().astimezone(UTC).isoformat()
        return self._prices.charge(event.provider, event.model, when, event.usage)

    def failed(self, action: CallModel, exc: ProviderError, seconds: float) -> Record:
        """Record the provider's failure to answer ``action`` (only a ``ProviderError`` is one)."""
        self.turns += 1
        broke = isinstance(exc, StreamInterrupted)
        self._broke = self._broke or broke
        return Record((with_valid_unicode(ModelFailed(
            turn=action.turn, error_type=type(exc).__name__, message=str(exc) or repr(exc),
            provider=self.settings.provider, model=action.request.model, status=exc.status,
            retryable=exc.retryable, latency_ms=_ms(seconds), retry_after=exc.retry_after,
            interrupted=broke, partial=exc.partial if broke else ())),))

    # --- runners -------------------------------------------------------------------

    def ran(self, result: RunnerResult | None) -> Record:
        """The runner's answer: ``None`` lets the built-in rules run (an empty ``Record``); a
        result is recorded in one transaction (``RunnerError`` if the lifecycle cannot accept
        it; nothing written)."""
        if result is None:
            return Record()
        b = self.conv.builder
        events = runner_events(result, b.turn_count + 1, b.provider, b.model)
        probe = StateBuilder(b.state())
        try:
            for event in events:
                probe.apply(event)
        except InvalidTransition as exc:
            raise RunnerError(f"the runner's result cannot be recorded: {exc}") from None
        self._done = True
        name = "completed" if probe.lifecycle is L.COMPLETED else "failed"
        return Record(tuple(events), now=True, notices=((name, {
            "runner": self.settings.runner, "error": probe.error}),))

    # --- tool calls ----------------------------------------------------------------

    def _tools(self, b: Any) -> Action:
        """The next tool action: answer, start or reject the next call, or run the batch."""
        batch = self._batch
        waiting = False
        for call in b.pending.values():
            if call.id in batch.ids:
                continue
            tool = self.settings.tools.get(call.name)
            if call.id in b.started:  # its process died while it ran
                return self._interrupted(b, approved_call(b, call), tool)
            if waiting:  # an earlier call waits: only ask for the later calls' approvals now
                ask = self._ask_early(b, call, tool)
                if ask is not None:
                    return ask
                continue
            refusal = refusal_of(self.settings, b, call, tool)
            if refusal is not None:
                return self._reject(b, call, refusal, tool)
            assert tool is not None
            validated, problem = _validate(tool, call)
            if problem is not None:
                return self._reject(b, call, Refusal(
                    reason=R.INVALID_ARGUMENTS, details={"problem": problem, "stage": "schema"}),
                    tool)
            duplicate = self._is_duplicate(b, call)
            notices: tuple[Notice, ...] = ()
            if duplicate:
                observe = b.duplicate_policy.observe_only
                notices = (("duplicate_prevented", {"call_id": call.id, "name": call.name,
                                                    "arguments": call.arguments,
                                                    "observe_only": observe}),)
                if not observe:
                    return self._reject(b, call, Refusal(reason=R.DUPLICATE), tool,
                                        notices)
            if call.id in b.approvals or needs_approval(b, call, tool, validated,
                                                        self._marked):
                gate = self._approval(b, call, tool)
                if gate is not None:
                    return gate
                if call.id not in b.decisions:
                    waiting = True
                    continue
                call = approved_call(b, call)
                validated, problem = _validate(tool, call)
                if problem is not None:  # the approver's edited arguments fail the schema
                    return self._reject(b, b.pending[call.id], Refusal(
                        reason=R.INVALID_ARGUMENTS,
                        details={"problem": problem, "stage": "approval"}), tool)
            if batch.runs and not self._joins(call, tool):
                return self._dispatch()
            key = idempotency_key(b, call) if tool.effect != "side_effecting" else None
            started = ToolStarted(call_id=call.id, name=call.name, arguments=call.arguments,
                                  idempotency_key=key, duplicate=duplicate)
            self._add(ToolRun(call, tool, validated,
                              context_of(self.settings, b, call, key, self.conv)))
            if not batch.open:
                self._queue.append(self._dispatch())
            return Record((started,), notices=notices)
        if waiting and not batch.runs:  # every other call is answered: wait for the decisions
            self._done = True
            return Record(flush=True, notices=(("awaiting_approval", {
                "call_ids": list(awaiting(b))}),))
        return self._dispatch()

    def _ask_early(self, b: Any, call: ToolCall, tool: Tool | None) -> Action | None:
        """``approval_requested`` for a call behind a waiting one, so one pause collects every
        decision the response needs; ``None`` if it is not (yet) asked for."""
        if tool is None or call.id in b.approvals or self._batch.runs:
            return None
        if refusal_of(self.settings, b, call, tool) is not None:
            return None
        validated, problem = _validate(tool, call)
        if problem is not None or not needs_approval(b, call, tool, validated, self._marked):
            return None
        return self._approval(b, call, tool)

    def _approval(self, b: Any, call: ToolCall, tool: Tool) -> Action | None:
        """Ask for approval, answer a denial, or refuse a stale approval; ``None`` when the
        call may run (approved, tool unchanged) or still waits."""
        asked = b.approvals.get(call.id)
        if asked is None:
            if self._batch.runs:  # the batch before it runs first
                return self._dispatch()
            event = request_for(call, tool, reason_for(
                b, call, self._marked, self.settings.approve_reason))
            return Record((event,), notices=(("approval_requested", {
                "call_id": call.id, "name": call.name, "arguments": call.arguments,
                "reason": event.reason}),))
        decision = b.decisions.get(call.id)
        if decision is None:
            return None
        if self._batch.runs and decision.decision == "deny":
            return self._dispatch()
        if decision.decision == "deny":
            why = f"denied by {decision.approver}" + (f": {decision.reason}"
                                                      if decision.reason else "")
            return self._reject(b, call, Refusal(reason=R.DENIED, details={
                "approver": decision.approver, "reason": decision.reason, "why": why}), tool)
        if (arguments_hash(call.name, call.arguments) != asked.arguments_hash
                or arguments_hash(call.name, approved_call(b, call).arguments)
                != decision.arguments_hash):
            return self._reject(b, call, Refusal(reason=R.STALE_APPROVAL, details={
                "why": "approved, but its arguments do not match the approved hash; not run"}),
                tool)
        now = spec_hash(tool.spec)
        if now != asked.spec_hash:
            return self._reject(b, call, Refusal(reason=R.STALE_APPROVAL, details={
                "why": "approved, but the tool changed since approval was asked; not run",
                "spec_hash": now, "approved_spec_hash": asked.spec_hash}), tool)
        return None

    def _interrupted(self, b: Any, call: ToolCall, tool: Tool | None) -> Action:
        """A call whose process died mid-run: re-run if safe, or if the tool can pick it up
        from what it recorded (``Tool.picks_up``), else record the unknown outcome."""
        recorded = self.settings.recorded_progress
        progress = recorded(self.conv.id, call.id) if tool and recorded is not None else ()
        if tool is not None and (tool.effect != "side_effecting"
                                 or (progress and tool.picks_up(progress))):
            validated, problem = _validate(tool, call)
            if problem is None:
                if self._batch.runs and not self._joins(call, tool):
                    return self._dispatch()
                key = idempotency_key(b, call) if tool.effect != "side_effecting" else None
                self._add(ToolRun(call, tool, validated,
                                  context_of(self.settings, b, call, key, self.conv, progress)))
                return self._dispatch() if not self._batch.open else self.next()
        return self._completion(call, tool, ToolExecution(
            success=False, error=INTERRUPTED, source="interrupted"))

    def _add(self, run: ToolRun) -> None:
        batch = self._batch
        batch.runs.append(run)
        batch.ids.add(run.call.id)
        default = self._parallel() and all(concurrent(r.tool) for r in batch.runs)
        hook = self._keep_open
        batch.open = default if hook is None else bool(hook([r.call for r in batch.runs], default))

    def _joins(self, call: ToolCall, tool: Tool) -> bool:
        """Whether ``call`` is started with the open batch before any of it runs."""
        runs = self._batch.runs
        default = self._batch.open and concurrent(tool)
        hook = self._joins_hook
        return default if hook is None else bool(hook([r.call for r in runs], call, default))

    def _parallel(self) -> bool:
        return self.settings.max_parallel_tools > 1

    def _dispatch(self) -> RunTools:
        runs = tuple(self._batch.runs)
        self._batch = _Batch()
        order = None
        hook = self._order
        if hook is not None and len(runs) > 1:
            chosen = hook([r.call for r in runs])
            if chosen is not None:
                index = {r.call.id: i for i, r in enumerate(runs)}
                order = tuple(index[c.id] for c in chosen)
        width = max(1, min(len(runs), self.settings.max_parallel_tools))
        return RunTools(runs, concurrency=width, order=order)

    def _is_duplicate(self, b: Any, call: ToolCall) -> bool:
        policy = b.duplicate_policy
        if policy.rule == "custom" and self._predicate is None and policy.custom:
            self._predicate = resolve_predicate(policy.custom)
        return check_duplicate(policy, b, call.name, call.arguments, self._predicate)

    def _reject(self, b: Any, call: ToolCall, refusal: Refusal, tool: Tool | None,
                notices: tuple[Notice, ...] = ()) -> Record:
        content = refusal_message(refusal.reason, call.name, refusal.details, mode=b.mode,
                                  display=tool.spec.display_name if tool is not None else None,
                                  arguments=call.arguments)
        event = ToolCallRejected(call_id=call.id, name=call.name, reason=refusal.reason,
                                 content=content, arguments=call.arguments,
                                 details=refusal.details)
        return Record((event,), notices=(*notices, ("tool_executed", {
            "call_id": call.id, "name": call.name, "success": False,
            "rejected": str(refusal.reason)})))

    def tool_done(self, run: ToolRun, outcome: ToolExecution, running: int = 0) -> Record:
        """Record ``run``'s outcome; ``running`` calls of its batch are still running (then the
        result is written at once, so a crash re-runs only the unfinished calls)."""
        record = self._completion(run.call, run.tool, outcome)
        return Record(record.events, flush=running > 0, notices=record.notices)

    def _completion(self, call: ToolCall, tool: Tool | None, outcome: ToolExecution) -> Record:
        data = outcome.data
        try:
            data = _builtins(data)
            check_depth(data, "result")  # the one nesting limit (engine.nesting), before walks
            check_result_json(data)  # invalid Unicode: replaced below
        except (TypeError, ValueError, NestingError) as exc:
            error = str(exc) if isinstance(exc, NestingError) else f"result is not JSON data: {exc}"
            outcome = ToolExecution(success=False, error=error,
                                    duration_ms=outcome.duration_ms, source=outcome.source)
            data = None
        content = outcome.content
        if content is None:
            content = (tool.render(success=outcome.success, data=data, error=outcome.error,
                                   arguments=call.arguments) if tool is not None
                       else tool_failed_message(call.name, outcome.error or "unknown error"))
        event = with_valid_unicode(ToolCompleted(
            call_id=call.id, name=call.name, success=outcome.success, content=content, data=data,
            error=outcome.error, duration_ms=outcome.duration_ms, source=outcome.source,
            replaced=outcome.replaced))
        return Record((event,), notices=(("tool_executed", {
            "call_id": call.id, "name": call.name, "success": outcome.success,
            "rejected": None}),))


def ordered(runs: Sequence[ToolRun], order: Sequence[int] | None) -> list[ToolRun]:
    """``runs`` in the order a ``RunTools`` asks for (call order if none)."""
    return list(runs) if order is None else [runs[i] for i in order]


def check_result_json(data: Any) -> None:
    """``check_json_data`` of a tool result's ``data`` with its invalid Unicode replaced (the
    event replaces it): checked as it is first, in C; walked for lone surrogates only when
    the encoder meets one."""
    try:
        check_json_data(data)
    except UnicodeEncodeError:
        check_json_data(valid_unicode(data)[0])


def _builtins(data: Any) -> Any:
    """A tool's result data as JSON builtins (``None`` stays ``None``)."""
    try:
        return msgspec.to_builtins(data) if data is not None else None
    except RecursionError:  # deeper than msgspec walks: far past the limit
        raise NestingError(too_deep("result")) from None
