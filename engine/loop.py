"""The agent loop: model turns and tool calls, each step an event appended before the next.

``Loop`` drives a conversation from whatever its journal says is next, so the
same code starts a run, continues a chat and resumes after a crash::

    >>> from journal import Journal
    >>> from engine.providers.scripted import ScriptedProvider
    >>> from engine.demo import demo_tools
    >>> loop = Loop(Journal(":memory:"), ScriptedProvider([
    ...     {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
    ...     {"text": "2 + 3 = 5."}]), demo_tools())
    >>> r = loop.start("What is 2 + 3?", conversation_id="c1")
    >>> r.status, r.turn_count, r.final_content
    ('completed', 2, '2 + 3 = 5.')

A turn is one model request/response; tool calls do not count. A run ends
when the model answers without tool calls (``conversation_completed``), when
the provider fails (``model_failed`` then ``conversation_failed``) and the
``retry`` policy (``engine.retry``; none by default) does not try again, at
``max_turns`` (``turn_limit_reached``) or when the duplicate policy's
``max_refusals`` is reached (``conversation_halted``). Every tool call gets
exactly one answer: ``tool_started`` + ``tool_completed`` when it runs, or
``tool_call_rejected`` (unknown, disabled, invalid arguments, cut off,
duplicate, halted) whose correction text is that call's result.

Only a ``ProviderError`` is a model failure. Any other exception from the
provider (a bug in mapping code, replay's ``Divergence``) propagates: the
journal then ends at ``model_requested`` and ``resume`` sends it again. A
retried failure is journaled like any other (``model_failed`` with
``retryable`` and ``retry_after``), then the same turn's next
``model_requested`` (``attempt`` 2, 3 ...) after the policy's wait.

Seams for other drivers (replay): ``start(..., started=ConversationStarted)``
records a given configuration; ``provider`` is anything with ``complete``;
``refuse`` may refuse calls the built-in rules accept (``Loop.refusal``);
``executor`` decides how accepted calls become outcomes (``engine.executor``);
``runner`` may take a whole run over (``engine.runners``); ``timer`` and
``clock`` make timings and tool clocks deterministic.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

from journal import ConcurrencyError, Journal, StoredEvent

from .conversation import Conversation
from .directives import Directives
from .calls import assign_call_ids
from .canonical import valid_unicode
from .duplicates import DuplicatePredicate, check_duplicate, resolve_predicate
from .errors import ConversationExistsError, EngineError, ProviderError, TranscriptLockContention
from .events import (
    ConversationCompleted,
    ConversationFailed,
    ConversationHalted,
    ConversationStarted,
    DuplicatePolicy,
    Event,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    Refusal,
    RejectReason,
    ToolCallRejected,
    ToolCompleted,
    ToolStarted,
    TurnLimitReached,
    UserMessage,
    with_valid_unicode,
)
from .executor import LocalExecutor, ToolExecution, ToolExecutor
from .machine import Lifecycle
from .messages import ToolCall
from .observers import Observer, Observers
from .providers.base import ModelRequest, Provider
from .request_digest import RequestDigest
from .result import RunResult, result_of
from .resume import INTERRUPTED, idempotency_key
from .retry import NO_RETRY, RetryPolicy
from .runners import Runner, RunRequest, apply_runner_result
from .texts import refusal_message, tool_failed_message
from .tools import Tool, ToolContext, ToolRegistry

__all__ = ["Loop", "RefusalHook", "new_conversation_id", "run"]

L = Lifecycle
R = RejectReason

#: ``refuse(state, call, tool) -> Refusal | None``: refuse a call the loop's own rules accept.
#: ``state`` is the live ``StateBuilder`` (read it, never write); ``tool`` is the registered tool.
RefusalHook = Callable[[Any, ToolCall, Tool], "Refusal | None"]


def new_conversation_id() -> str:
    """A fresh conversation id, ``c-`` and 12 hex digits."""
    return f"c-{uuid.uuid4().hex[:12]}"


class Loop:
    """Runs conversations on ``journal`` with ``provider`` and ``tools``.

    ``observers`` are callables ``(event, payload)`` (``engine.observers``);
    ``executor`` defaults to ``LocalExecutor``; ``runner`` may take runs over;
    ``clock`` is the wall clock tools see (``ToolContext.now``); ``timer``
    measures latencies; ``predicate`` is the custom duplicate rule (else the
    policy's ``custom`` reference is resolved); ``directives`` render the
    system text of new conversations; ``retry`` decides whether a retryable
    model failure is tried again and waits (default ``NO_RETRY``; anything
    with ``RetryPolicy``'s ``delay`` and ``wait`` will do); ``refuse`` (a
    ``RefusalHook``) may refuse a call the built-in rules accept, with a
    ``Refusal`` the loop records like its own (replay refuses what its tool
    policy refuses this way).
    """

    def __init__(self, journal: Journal, provider: Provider,
                 tools: ToolRegistry | Iterable[Tool | Callable[..., Any]] = (), *,
                 observers: Iterable[Observer] = (), executor: ToolExecutor | None = None,
                 runner: Runner | None = None, clock: Callable[[], datetime] | None = None,
                 timer: Callable[[], float] = time.perf_counter,
                 predicate: DuplicatePredicate | None = None,
                 directives: Directives | None = None, model: str | None = None,
                 retry: RetryPolicy | None = None,
                 refuse: RefusalHook | None = None) -> None:
        self.journal = journal
        self.provider = provider
        self.tools = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self.observers = Observers(observers)
        self.executor: ToolExecutor = executor or LocalExecutor(timer)
        self.runner = runner
        self.clock = clock or (lambda: datetime.now(UTC))
        self.timer = timer
        self.predicate = predicate
        self.directives = directives or Directives()
        self.model = model
        self.retry = retry or NO_RETRY
        self.refuse = refuse
        self._digest = RequestDigest()

    # --- entry points ---------------------------------------------------------

    def start(self, prompt: str | None, *, conversation_id: str | None = None,
              model: str | None = None, mode: str = "chat", max_turns: int = 8,
              system: str = "", duplicate_policy: DuplicatePolicy | None = None,
              parameters: Mapping[str, Any] | None = None,
              metadata: Mapping[str, Any] | None = None, single_turn: bool = False,
              started: ConversationStarted | None = None) -> RunResult:
        """Record a new conversation (``started``, or one built from the options) and run it.

        ``system`` is the per-run directive layer, rendered after the
        registered directives. ``prompt`` (if not ``None``) is the first user
        message, recorded in the same transaction as ``conversation_started``.
        """
        if started is None:
            cid = conversation_id or new_conversation_id()
            text, layers = self.directives.render(
                {"mode": mode, "conversation_id": cid, "metadata": dict(metadata or {})}, system)
            started = ConversationStarted(
                conversation_id=cid, provider=self.provider.name,
                model=model or self.model or getattr(self.provider, "model", "") or self.provider.name,
                mode=mode, max_turns=max_turns, system=text, directives=layers,
                tools=self.tools.specs(), duplicate_policy=duplicate_policy or DuplicatePolicy(),
                parameters=dict(parameters or {}), metadata=dict(metadata or {}))
        if self.journal.last_seq(started.conversation_id):
            raise ConversationExistsError(
                f"conversation {started.conversation_id!r} already exists in {self.journal.path}; "
                "use send() to add a message or resume() to finish it")
        then = [with_valid_unicode(UserMessage.of(prompt))] if prompt is not None else []
        try:
            conv = Conversation.start(self.journal, started, rest=then)
        except ConcurrencyError as exc:
            raise self._contention(started.conversation_id, exc) from exc
        self._recorded(conv, list(self.journal.read(conv.id)))
        return self.drive(conv, single_turn=single_turn)

    def send(self, conversation: Conversation | str, text: str, *,
             single_turn: bool = False) -> RunResult:
        """Add ``text`` as the next user message (a chat continues after it ended) and run."""
        conv = self._open(conversation)
        self._append_now(conv, with_valid_unicode(UserMessage.of(text)))
        return self.drive(conv, single_turn=single_turn)

    def resume(self, conversation: Conversation | str, *, single_turn: bool = False) -> RunResult:
        """Finish a conversation a crash left unfinished (see ``engine.resume`` for the rules).

        A finished conversation is left as it is and its result returned.
        """
        return self.drive(self._open(conversation), single_turn=single_turn)

    def drive(self, conv: Conversation, *, single_turn: bool = False) -> RunResult:
        """Take every step the journal says is next until the run ends (or one turn, if asked)."""
        try:
            return self._drive(conv, single_turn)
        finally:
            if conv.staged:
                self._flush(conv)

    def _drive(self, conv: Conversation, single_turn: bool) -> RunResult:
        turns = 0
        if self.runner is not None and conv.builder.lifecycle is L.AWAITING_MODEL:
            self._flush(conv)
            if self._try_runner(conv, single_turn):
                return result_of(conv.builder)
        while True:
            b = conv.builder
            state = b.lifecycle
            if state is L.AWAITING_MODEL:
                if self._before_turn(conv):
                    continue
                if single_turn and turns:
                    break
                self._request(conv)
            elif state is L.REQUESTED:
                self._call_model(conv)
                turns += 1
            elif state is L.AWAITING_TOOLS:
                self._answer(conv, next(iter(b.pending.values())))
            elif state is L.ANSWERED:
                self._append(conv, ConversationCompleted(final_content=b.final_content))
                self._flush(conv)  # the run's end is durable before it is announced
                self._emit("completed", conv, final_content=b.final_content)
            else:  # READY (no user message yet) or a finished run
                break
        return result_of(conv.builder)

    # --- model turns ----------------------------------------------------------

    def _before_turn(self, conv: Conversation) -> bool:
        """End the run if it must end before another request; ``True`` if it did."""
        b = conv.builder
        if b.error is not None:  # a model_failed answered the last request
            if self._retry(conv):
                return True
            error = b.error + (f" (gave up after {b.attempt} attempts)" if b.attempt > 1 else "")
            self._append(conv, ConversationFailed(error=error, error_type="model_failed"))
            self._flush(conv)
            self._emit("failed", conv, error=error)
            return True
        limit = b.duplicate_policy.max_refusals
        if limit is not None and b.refusals >= limit:
            reason = (f"halted after {b.refusals} refused duplicate tool call(s) in this run "
                      f"(max_refusals={limit})")
            self._append(conv, ConversationHalted(reason=reason, refusals=b.refusals))
            self._flush(conv)
            self._emit("budget_exceeded", conv, kind="refusals", limit=limit, reason=reason)
            return True
        if b.run_turns >= b.max_turns:
            pending = bool(b.last_tool_calls)
            warning = (f"max turns ({b.max_turns}) reached"
                       + (" with tool calls still pending" if pending else ""))
            self._append(conv, TurnLimitReached(turn_count=b.turn_count, max_turns=b.max_turns,
                                                pending_tool_calls=pending, warning=warning))
            self._flush(conv)
            self._emit("budget_exceeded", conv, kind="turns", limit=b.max_turns,
                       pending_tool_calls=pending, reason=warning)
            return True
        return False

    def build_request(self, b: Any) -> ModelRequest:
        """The request for the next turn, from the live state (never re-read from the journal)."""
        return ModelRequest(model=self.model or b.model, system=b.system,
                            messages=tuple(b.message_list), tools=b.tools,
                            parameters=b.parameters)

    def _retry(self, conv: Conversation) -> bool:
        """Request the failed turn again if the policy says so (after its wait); ``True`` if so."""
        b = conv.builder
        failure = b.failure
        if failure is None:
            return False
        delay = self.retry.delay(retryable=failure.retryable, attempt=b.attempt,
                                 retry_after=failure.retry_after)
        if delay is None:
            return False
        attempt = b.attempt + 1
        self._flush(conv)  # the failure is durable before the wait
        self._emit("model_retry", conv, turn=failure.turn, attempt=attempt, delay=delay,
                   error=b.error)
        self.retry.wait(delay)
        self._request(conv, attempt)
        return True

    def _request(self, conv: Conversation, attempt: int = 1) -> None:
        b = conv.builder
        request = self.build_request(b)
        turn = b.turn_count + 1
        self._append(conv, ModelRequested(turn=turn, digest=self._digest.digest(request),
                                          provider=self.provider.name, model=request.model,
                                          parameters=b.parameters, attempt=attempt))
        if attempt == 1:
            self._emit("turn_started", conv, turn=turn)

    def _call_model(self, conv: Conversation) -> None:
        b = conv.builder
        request = self.build_request(b)
        turn = b.requested_turn
        self._flush(conv)  # the request is durable before it goes out
        start = self.timer()
        try:
            response = self.provider.complete(request)
        except ProviderError as exc:  # anything else is a bug: it propagates, the run resumes
            self._append(conv, with_valid_unicode(ModelFailed(
                turn=turn, error_type=type(exc).__name__, message=str(exc) or repr(exc),
                provider=self.provider.name, model=request.model, status=exc.status,
                retryable=exc.retryable, latency_ms=_ms(self.timer() - start),
                retry_after=exc.retry_after)))
            return
        self._append(conv, self._admit(b, ModelResponded(
            turn=turn, parts=response.parts, stop_reason=response.stop_reason,
            usage=response.usage, provider=response.provider or self.provider.name,
            model=response.model or request.model, response_id=response.response_id,
            raw=response.raw, latency_ms=_ms(self.timer() - start), replaced=response.replaced)))
        self._emit("model_responded", conv, turn=turn, stop_reason=response.stop_reason,
                   tool_calls=[c.name for c in conv.builder.last_tool_calls])

    @staticmethod
    def _admit(b: Any, event: ModelResponded) -> ModelResponded:
        """A provider's response as the engine keeps it: valid Unicode, call ids unique."""
        event = with_valid_unicode(event)
        parts = assign_call_ids(event.parts, b.call_ids)
        return event if parts == event.parts else msgspec.structs.replace(event, parts=parts)

    # --- tool calls -----------------------------------------------------------

    def _context(self, b: Any, call: ToolCall, key: str | None) -> ToolContext:
        return ToolContext(conversation_id=b.conversation_id, turn=b.turn_count, mode=b.mode,
                           call_id=call.id, metadata=b.metadata, data=b.metadata.get("data"),
                           now=self.clock(), idempotency_key=key)

    def _answer(self, conv: Conversation, call: ToolCall) -> None:
        """Give ``call`` its one answer: a rejection, or tool_started + tool_completed."""
        b = conv.builder
        if call.id in b.started:
            return self._interrupted(conv, call)
        tool = self.tools.get(call.name)
        refusal = self.refusal(b, call, tool)
        if refusal is not None:
            return self._reject(conv, call, refusal, tool)
        assert tool is not None
        validated, problem = _validate(tool, call)
        if problem is not None:
            return self._reject(conv, call, Refusal(
                reason=R.INVALID_ARGUMENTS, details={"problem": problem, "stage": "schema"}), tool)
        duplicate = self._is_duplicate(b, call)
        if duplicate:
            observe = b.duplicate_policy.observe_only
            self._emit("duplicate_prevented", conv, call_id=call.id, name=call.name,
                       arguments=call.arguments, observe_only=observe)
            if not observe:
                return self._reject(conv, call, Refusal(reason=R.DUPLICATE), tool)
        key = idempotency_key(b, call) if tool.effect != "side_effecting" else None
        self._append(conv, ToolStarted(call_id=call.id, name=call.name, arguments=call.arguments,
                                       idempotency_key=key, duplicate=duplicate))
        self._run(conv, call, tool, validated, key)

    def refusal(self, b: Any, call: ToolCall, tool: Tool | None) -> Refusal | None:
        """Why ``call`` must not run (before its arguments are validated), or ``None``.

        The built-in rules, in order: the run is halted, the arguments are
        invalid or cut off, the tool is unknown, the tool is disabled; then
        the ``refuse`` hook, if any. Schema validation and the duplicate
        policy come after this. ``b`` is the live state.
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
            return Refusal(reason=R.UNKNOWN, details={"available": list(self.tools.names())})
        disabled = tool.disabled_reason(self._context(b, call, None))
        if disabled:
            return Refusal(reason=R.DISABLED, details={"why": disabled})
        return self.refuse(b, call, tool) if self.refuse is not None else None

    def _is_duplicate(self, b: Any, call: ToolCall) -> bool:
        policy = b.duplicate_policy
        if policy.rule == "custom" and self.predicate is None and policy.custom:
            self.predicate = resolve_predicate(policy.custom)
        return check_duplicate(policy, b, call.name, call.arguments, self.predicate)

    def _reject(self, conv: Conversation, call: ToolCall, refusal: Refusal,
                tool: Tool | None) -> None:
        b = conv.builder
        content = refusal_message(refusal.reason, call.name, refusal.details, mode=b.mode,
                                  display=tool.spec.display_name if tool is not None else None,
                                  arguments=call.arguments)
        self._append(conv, ToolCallRejected(
            call_id=call.id, name=call.name, reason=refusal.reason, content=content,
            arguments=call.arguments, details=refusal.details))
        self._emit("tool_executed", conv, call_id=call.id, name=call.name, success=False,
                   rejected=str(refusal.reason))

    def _run(self, conv: Conversation, call: ToolCall, tool: Tool, validated: dict[str, Any],
             key: str | None) -> None:
        context = self._context(conv.builder, call, key)
        self._flush(conv)  # tool_started is durable before the tool runs
        try:
            outcome = self.executor.execute(call, tool, context, validated)
        except Exception as exc:  # an executor bug is still only this call's failure
            outcome = ToolExecution(success=False, error=str(exc) or type(exc).__name__)
        self._complete(conv, call, tool, outcome)

    def _complete(self, conv: Conversation, call: ToolCall, tool: Tool | None,
                  outcome: ToolExecution) -> None:
        data = outcome.data
        try:
            data = msgspec.to_builtins(data) if data is not None else None
            msgspec.json.encode(valid_unicode(data)[0])  # invalid Unicode: replaced below
        except (TypeError, ValueError) as exc:
            outcome = ToolExecution(success=False, error=f"result is not JSON data: {exc}",
                                    duration_ms=outcome.duration_ms, source=outcome.source)
            data = None
        content = outcome.content
        if content is None:
            content = (tool.render(success=outcome.success, data=data, error=outcome.error,
                                   arguments=call.arguments) if tool is not None
                       else tool_failed_message(call.name, outcome.error or "unknown error"))
        self._append(conv, with_valid_unicode(ToolCompleted(
            call_id=call.id, name=call.name, success=outcome.success, content=content, data=data,
            error=outcome.error, duration_ms=outcome.duration_ms, source=outcome.source,
            replaced=outcome.replaced)))
        self._emit("tool_executed", conv, call_id=call.id, name=call.name,
                   success=outcome.success, rejected=None)

    def _interrupted(self, conv: Conversation, call: ToolCall) -> None:
        """A call whose process died mid-run: re-run if safe, else record the unknown outcome."""
        b = conv.builder
        tool = self.tools.get(call.name)
        if tool is not None and tool.effect != "side_effecting":
            validated, problem = _validate(tool, call)
            if problem is None:
                key = idempotency_key(b, call)
                return self._run(conv, call, tool, validated, key)
        self._complete(conv, call, tool, ToolExecution(
            success=False, error=INTERRUPTED, source="interrupted"))

    # --- runners, appends, observers -------------------------------------------

    def _try_runner(self, conv: Conversation, single_turn: bool) -> bool:
        b = conv.builder
        request = RunRequest(conversation_id=b.conversation_id, messages=tuple(b.message_list),
                             tools=b.tools, provider=b.provider, model=b.model, mode=b.mode,
                             system=b.system, metadata=b.metadata, max_turns=b.max_turns,
                             single_turn=single_turn)
        result = self.runner.run(request)
        if result is None:
            return False
        apply_runner_result(conv, result, self._append_now)
        self._emit("completed" if conv.builder.lifecycle is L.COMPLETED else "failed", conv,
                   runner=type(self.runner).__name__, error=conv.builder.error)
        return True

    def _append(self, conv: Conversation, *events: Event) -> None:
        """Stage ``events``; they are written together just before the next outside action."""
        conv.stage(*events)

    def _append_now(self, conv: Conversation, *events: Event) -> None:
        """Write ``events`` at once, in one transaction (all or nothing)."""
        self._flush(conv)
        try:
            rows = conv.append(*events)
        except ConcurrencyError as exc:
            raise self._contention(conv.id, exc) from exc
        self._recorded(conv, rows)

    def _flush(self, conv: Conversation) -> None:
        try:
            rows = conv.flush()
        except ConcurrencyError as exc:
            raise self._contention(conv.id, exc) from exc
        self._recorded(conv, rows)

    def _recorded(self, conv: Conversation, rows: list[StoredEvent]) -> None:
        """Tell observers which events just became durable (``recorded``, with their rows)."""
        if rows:
            self.observers.emit("recorded", conversation_id=conv.id, rows=rows)

    def _contention(self, conversation_id: str, exc: ConcurrencyError) -> TranscriptLockContention:
        self.observers.emit("transcript_lock_contention", conversation_id=conversation_id,
                            error=str(exc))
        return TranscriptLockContention(
            f"conversation {conversation_id!r} was written by another runner at the same time; "
            f"this run stopped without writing ({exc})")

    def _emit(self, event: str, conv: Conversation, **payload: Any) -> None:
        self.observers.emit(event, conversation_id=conv.id, **payload)

    def _open(self, conversation: Conversation | str) -> Conversation:
        if isinstance(conversation, Conversation):
            return conversation
        return Conversation.open(self.journal, conversation)


def _validate(tool: Tool, call: ToolCall) -> tuple[dict[str, Any], str | None]:
    try:
        return tool.validate(call.arguments), None
    except EngineError as exc:
        return {}, str(exc)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def run(journal: Journal, prompt: str, *, provider: Provider,
        tools: ToolRegistry | Iterable[Tool | Callable[..., Any]] = (), max_turns: int = 8,
        single_turn: bool = False, mode: str = "chat", system: str = "",
        conversation_id: str | None = None, duplicate_policy: DuplicatePolicy | None = None,
        parameters: Mapping[str, Any] | None = None, metadata: Mapping[str, Any] | None = None,
        model: str | None = None, observers: Iterable[Observer] = (),
        executor: ToolExecutor | None = None, retry: RetryPolicy | None = None) -> RunResult:
    """Run one conversation from ``prompt`` to its end; the convenience form of ``Loop.start``.

    If ``conversation_id`` names an existing conversation, ``prompt`` is added
    as its next user message instead (a chat continues after it ended).
    """
    loop = Loop(journal, provider, tools, observers=observers, executor=executor, model=model,
                retry=retry)
    if conversation_id is not None and _exists(journal, conversation_id):
        return loop.send(conversation_id, prompt, single_turn=single_turn)
    return loop.start(prompt, conversation_id=conversation_id, model=model, mode=mode,
                      max_turns=max_turns, system=system, duplicate_policy=duplicate_policy,
                      parameters=parameters, metadata=metadata, single_turn=single_turn)


def _exists(journal: Journal, conversation_id: str) -> bool:
    return journal.last_seq(conversation_id) > 0
