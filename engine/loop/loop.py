"""The agent loop: model turns and tool calls, each step an event appended before the next.

``Loop`` drives a conversation from whatever its journal says is next, so the
same code starts a run, continues a chat and resumes after a crash::

    >>> from turnlog.journal import Journal
    >>> from turnlog.engine.providers.scripted import ScriptedProvider
    >>> from turnlog.engine.demo import demo_tools
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
``clock`` make timings and tool clocks deterministic; ``digest`` computes the
recorded request digests.

The rules are ``engine.step``'s (one sans-I/O step over a frozen
``StepSettings``); ``Drive`` is what the two shells share (it performs the
step's records and flushes before each outside action), and ``Loop`` only
does the I/O, as ``engine.aloop.AsyncLoop`` does for asyncio programs.
"""

from __future__ import annotations

import functools
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from datetime import UTC, datetime
from typing import Any

from turnlog.journal import ConcurrencyError, JournalProtocol, StoredEvent

from turnlog.engine.tools.approvals import check_approve, decide
from turnlog.engine.model.conversation import Conversation
from .directives import Directives
from turnlog.engine.tools.duplicates import DuplicatePredicate
from turnlog.engine.errors import (
    ConversationExistsError,
    EngineError,
    ProviderError,
    StreamInterrupted,
    TranscriptLockContention,
)
from turnlog.engine.model.events import (
    ApprovalDecided,
    ConversationStarted,
    DuplicatePolicy,
    Event,
    Refusal,
    ToolProgressed,
    UserMessage,
    with_valid_unicode,
)
from turnlog.engine.tools.executor import LocalExecutor, ToolExecution, ToolExecutor
from turnlog.engine.model.messages import ToolCall
from .observers import Observer, Observers
from turnlog.engine.providers.base import ModelRequest, Provider
from .request_digest import RequestDigest
from .result import RunResult, result_of
from .retry import NO_RETRY, RetryPolicy
from .runners import Runner
from .step import (
    CallModel,
    Record,
    RunRunner,
    RunTools,
    Step,
    StepSettings,
    Stop,
    ToolRun,
    Wait,
    executor_failure,
    ordered,
    progress_of,
    refusal_of,
    request_of,
)
from turnlog.engine.tools.registry import Tool, ToolRegistry

__all__ = ["Drive", "Loop", "LoopBase", "RefusalHook", "new_conversation_id", "run"]

#: ``refuse(state, call, tool) -> Refusal | None``: refuse a call the loop's own rules accept.
#: ``state`` is the live ``StateBuilder`` (read it, never write); ``tool`` is the registered tool.
RefusalHook = Callable[[Any, ToolCall, Tool], "Refusal | None"]


def new_conversation_id() -> str:
    """A fresh conversation id, ``c-`` and 12 hex digits."""
    return f"c-{uuid.uuid4().hex[:12]}"


class LoopBase:
    """What ``Loop`` and ``AsyncLoop`` share: configuration, appends and observers (no rules:
    those are ``engine.step``'s).

    Runs conversations on ``journal`` with ``provider`` and ``tools``.

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
    policy refuses this way); ``max_parallel_tools`` bounds how many calls of
    one batch run at once (default 8; 1 runs one call at a time; batches are
    ``engine.step``'s rule). Tools of a batch run in worker threads.
    ``stream=True`` streams model calls (when the
    provider has ``stream``): observers hear ``model_delta`` pieces as they
    arrive, the journal gets the same ``model_responded`` as unstreamed, and
    a stream that breaks is a ``model_failed`` marked ``interrupted`` with
    the partial parts (the run stops unfinished; ``resume`` sends again).
    ``approve`` names tools whose calls wait for a person's decision (recorded
    in ``conversation_started.approve`` of the conversations it starts; see
    ``engine.approvals`` and ``decide``); ``approve_reason`` says why, for the
    approver (recorded with it and with each approval request). ``prices`` (an
    ``engine.audit.prices.Prices``; default genai-prices) prices each
    response; the cost, its source and version are recorded with it.
    ``digest`` computes the digest recorded with each request (anything with
    ``RequestDigest.digest``; default one ``RequestDigest`` per ``Loop``, one
    per run for ``AsyncLoop``, whose conversations interleave). ``snapshots``
    (default on) saves a conversation's snapshot when a run ends if one is due
    (``engine.model.snapshots``); replay turns it off, its journal is thrown away.
    """

    def __init__(self, journal: JournalProtocol, provider: Provider,
                 tools: ToolRegistry | Iterable[Tool | Callable[..., Any]] = (), *,
                 observers: Iterable[Observer] = (), executor: ToolExecutor | None = None,
                 runner: Runner | None = None, clock: Callable[[], datetime] | None = None,
                 timer: Callable[[], float] = time.perf_counter,
                 predicate: DuplicatePredicate | None = None,
                 directives: Directives | None = None, model: str | None = None,
                 retry: RetryPolicy | None = None,
                 refuse: RefusalHook | None = None, max_parallel_tools: int = 8,
                 stream: bool = False, approve: Iterable[str] = (),
                 approve_reason: str | None = None, prices: Any = None,
                 digest: Any = None, snapshots: bool = True) -> None:
        if not isinstance(max_parallel_tools, int) or max_parallel_tools < 1:
            raise EngineError(f"max_parallel_tools must be a positive integer, "
                              f"got {max_parallel_tools!r}")
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
        self.max_parallel_tools = max_parallel_tools
        self.stream = stream
        #: tools whose calls wait for a person's decision (``engine.approvals``); each must be
        #: an offered tool (``check_approve``: a misspelt name would approve nothing)
        self.approve = check_approve(approve, self.tools.names())
        if approve_reason is not None and (not isinstance(approve_reason, str)
                                           or not approve_reason.strip()):
            raise EngineError(f"approve_reason must be a non-empty text, got {approve_reason!r}")
        #: why the ``approve`` tools' calls wait (shown to the approver)
        self.approve_reason = approve_reason
        #: computes request digests (``None``: the shell's default, see the class docstring)
        self.digest = digest
        self._digest = digest or RequestDigest()
        #: whether a run's end saves the conversation's snapshot when one is due
        self.snapshots = snapshots
        #: what each response is charged at (``engine.audit.prices.Prices``; ``None``: the
        #: default, genai-prices), recorded with it as ``model_responded.charge``
        self.prices = prices
        #: the thread that drives the run, and the progress writes handed to it
        self._driver: int | None = None
        self._desk: queue.SimpleQueue[Any] = queue.SimpleQueue()
        if getattr(provider, "name", "") != "scripted" and getattr(prices, "database", True):
            from turnlog.engine.audit.prices import warm_up  # the audit package imports the engine

            warm_up()

    def step_settings(self, digest: Any = None) -> StepSettings:
        """This loop's configuration as the frozen ``StepSettings`` a run's ``Step`` reads
        (taken at the start of each run, so an option changed between runs applies to the
        next one); ``digest`` overrides the loop's request digest for this run."""
        return StepSettings(
            tools=self.tools, provider=self.provider.name, digest=digest or self._digest,
            retry=self.retry, clock=self.clock, model=self.model, refuse=self.refuse,
            executor=self.executor, max_parallel_tools=self.max_parallel_tools,
            predicate=self.predicate, approve=frozenset(self.approve),
            approve_reason=self.approve_reason, prices=self.prices,
            runner=type(self.runner).__name__ if self.runner is not None else None,
            progress=self.progress_writer,
            traceparent=self.observers.traceparent if self.observers else None,
            recorded_progress=functools.partial(progress_of, self.journal))

    def build_request(self, b: Any) -> ModelRequest:
        """The request for the next turn, from the live state (never re-read from the journal)."""
        return request_of(self.step_settings(), b)

    def refusal(self, b: Any, call: ToolCall, tool: Tool | None) -> Refusal | None:
        """Why ``call`` must not run (before its arguments are validated), or ``None``.

        The built-in rules, in order: the run is halted, the arguments are
        invalid or cut off, the tool is unknown, the tool is disabled; then
        the ``refuse`` hook, if any. Schema validation and the duplicate
        policy come after this. ``b`` is the live state.
        """
        return refusal_of(self.step_settings(), b, call, tool)

    def decide(self, conversation_id: str, call_id: str, approve: bool, approver: str,
               reason: str | None = None, arguments: dict[str, Any] | None = None
               ) -> ApprovalDecided:
        """Record a person's decision on a call awaiting approval (``engine.approvals.decide``:
        refused with an ``ApprovalError``, nothing written, when it cannot be recorded).
        ``resume`` then runs or answers the call."""
        return decide(self.journal, conversation_id, call_id, approve, approver, reason,
                      arguments, clock=self.clock)

    # --- entry points' shared parts ---------------------------------------------

    def _begin(self, prompt: str | None, *, conversation_id: str | None, model: str | None,
               mode: str, max_turns: int, system: str,
               duplicate_policy: DuplicatePolicy | None, parameters: Mapping[str, Any] | None,
               metadata: Mapping[str, Any] | None,
               started: ConversationStarted | None) -> Conversation:
        """Record a new conversation (``started``, or one built from the options)."""
        if started is None:
            cid = conversation_id or new_conversation_id()
            text, layers = self.directives.render(
                {"mode": mode, "conversation_id": cid, "metadata": dict(metadata or {})}, system)
            started = ConversationStarted(
                conversation_id=cid, provider=self.provider.name,
                model=model or self.model or getattr(self.provider, "model", "") or self.provider.name,
                mode=mode, max_turns=max_turns, system=text, directives=layers,
                tools=self.tools.specs(), duplicate_policy=duplicate_policy or DuplicatePolicy(),
                parameters=dict(parameters or {}), metadata=dict(metadata or {}),
                approve=self.approve, approve_reason=self.approve_reason)
        if self.journal.last_seq(started.conversation_id):
            raise ConversationExistsError(
                f"conversation {started.conversation_id!r} already exists in {self.journal.path}; "
                "use send() to add a message or resume() to finish it")
        then = [with_valid_unicode(UserMessage.of(prompt))] if prompt is not None else []
        try:
            conv = Conversation.start(self.journal, started, rest=then)
        except ConcurrencyError as exc:
            raise self._contention(started.conversation_id, exc) from exc
        if self.observers:  # the read-back serves only observers of ``recorded``
            self._recorded(conv, list(self.journal.read(conv.id)))
        return conv

    def _sent(self, conversation: Conversation | str, text: str) -> Conversation:
        """Add ``text`` as the next user message."""
        conv = self._open(conversation)
        self._append_now(conv, with_valid_unicode(UserMessage.of(text)))
        return conv

    # --- appends and observers ------------------------------------------------------

    def progress_writer(self, conv: Conversation, call: ToolCall) -> Callable[..., None]:
        """The ``progress`` hook of ``call``'s ``ToolContext``: ``write(data)`` appends a
        ``tool_progressed`` event at once (durable when it returns). From a tool running on
        the loop's thread pool, the write is handed to the thread that drives the run (a
        SQLite connection belongs to its thread) and waited for. ``of`` (a replay serving
        recorded news in its recorded order) names another call of the same batch: its
        ``call_id`` and ``name`` are used instead."""
        def write(data: dict[str, Any], of: Any = None) -> None:
            call_id, name = (call.id, call.name) if of is None else (of.call_id, of.name)
            event = with_valid_unicode(ToolProgressed(call_id=call_id, name=name,
                                                      data=dict(data)))
            if threading.get_ident() == self._driver:
                self._append_now(conv, event)
                return
            done = threading.Event()
            failed: list[BaseException] = []
            self._desk.put((conv, event, done, failed))
            done.wait()
            if failed:
                raise failed[0]

        return write

    def _serve_desk(self) -> None:
        """Write the progress events tools on the thread pool handed over (``progress_writer``)."""
        while True:
            try:
                conv, event, done, failed = self._desk.get_nowait()
            except queue.Empty:
                return
            try:
                self._append_now(conv, event)
            except BaseException as exc:  # handed back to the tool that wrote it
                failed.append(exc)
            finally:
                done.set()

    def _perform(self, conv: Conversation, record: Record) -> None:
        """Do what a ``Record`` says: stage (or append) its events, flush, notify."""
        if record.now:
            self._append_now(conv, *record.events)
        elif record.events:
            conv.stage(*record.events)
        if record.flush:
            self._flush(conv)
        if record.notices and self.observers:
            for name, payload in record.notices:
                self.observers.emit(name, conversation_id=conv.id, **payload)

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
        if rows and self.observers:
            self.observers.emit("recorded", conversation_id=conv.id, rows=rows)

    def _contention(self, conversation_id: str, exc: ConcurrencyError) -> TranscriptLockContention:
        self.observers.emit("transcript_lock_contention", conversation_id=conversation_id,
                            error=str(exc))
        return TranscriptLockContention(
            f"conversation {conversation_id!r} was written by another runner at the same time; "
            f"this run stopped without writing ({exc})")

    @property
    def streams(self) -> bool:
        """Whether model calls stream (``stream=True`` and the provider can)."""
        return self.stream and callable(getattr(self.provider, "stream", None))

    def _delta(self, conv: Conversation, turn: int, delta: Any) -> None:
        """Tell observers one streamed piece (``model_delta``); nothing is journaled."""
        self.observers.emit("model_delta", conversation_id=conv.id, turn=turn, kind=delta.kind,
                            text=delta.text, index=delta.index, name=delta.name,
                            call_id=delta.call_id)

    def _open(self, conversation: Conversation | str) -> Conversation:
        if isinstance(conversation, Conversation):
            return conversation
        return Conversation.open(self.journal, conversation)


class Drive:
    """One run of ``conv`` as both shells see it: everything but the I/O.

    ``Loop`` and ``AsyncLoop`` ask ``next()`` for the next outside action, do
    it (a model call, tool runs, a wait, a runner), and hand each outcome back
    with ``responded``, ``failed``, ``stopped``, ``tool_done`` or ``ran``.
    ``Drive`` performs the step's ``Record`` actions (stage or append, flush,
    notify), flushes before every outside action but a wait, counts a batch's
    unfinished calls, and ends the run (``close``)::

        drive = Drive(loop, conv, single_turn)
        try:
            while (action := drive.next()) is not None:
                ...  # perform action, hand back its outcome
        finally:
            drive.close()
        return drive.result()
    """

    def __init__(self, loop: LoopBase, conv: Conversation, single_turn: bool = False, *,
                 digest: Any = None) -> None:
        self.loop, self.conv = loop, conv
        self.step = Step(loop.step_settings(digest), conv, single_turn=single_turn)
        self._left = 0

    def next(self) -> CallModel | RunTools | Wait | RunRunner | None:
        """The next outside action (its journal flushed first), or ``None``: the run is over."""
        step, conv, perform = self.step, self.conv, self.loop._perform
        while True:
            action = step.next()
            kind = type(action)
            if kind is Record:
                perform(conv, action)  # type: ignore[arg-type]
                continue
            if kind is Stop:
                return None
            if kind is not Wait:  # the request, tool_started, the run so far: durable first
                self.loop._flush(conv)
            if kind is RunTools:
                self._left = len(action.runs)  # type: ignore[union-attr]
            return action  # type: ignore[return-value]

    def serial(self, action: RunTools) -> list[ToolRun] | None:
        """The batch's runs in the order to run them one at a time, or ``None``: run them
        concurrently, at most ``action.concurrency`` at a time."""
        runs = action.runs
        if action.order is not None or action.concurrency < 2 or len(runs) < 2:
            return ordered(runs, action.order)
        return None

    def responded(self, action: CallModel, response: Any, seconds: float) -> None:
        """Record the provider's response to ``action``."""
        self.loop._perform(self.conv, self.step.responded(action, response, seconds))

    def failed(self, action: CallModel, exc: ProviderError, seconds: float) -> None:
        """Record the provider's failure to answer ``action``."""
        self.loop._perform(self.conv, self.step.failed(action, exc, seconds))

    def delta(self, action: CallModel, delta: Any) -> None:
        """Tell observers one streamed piece (``model_delta``); nothing is journaled."""
        self.loop._delta(self.conv, action.turn, delta)

    def stopped(self, action: CallModel, handle: Any, seconds: float) -> None:
        """Record the partial response of a stream the process was stopped in (if one began)."""
        partial = handle.partial() if handle is not None else None
        if partial is None:
            return  # nothing arrived: the journal ends at model_requested, resume sends again
        stop = StreamInterrupted("the run was stopped mid-stream",
                                 provider=self.step.settings.provider, partial=partial.parts)
        self.failed(action, stop, seconds)
        self.loop._flush(self.conv)

    def tool_done(self, run: ToolRun, outcome: ToolExecution) -> None:
        """Record one call's outcome as it completes (at once while others still run)."""
        self._left -= 1
        self.loop._perform(self.conv, self.step.tool_done(run, outcome, self._left))

    def ran(self, result: Any) -> None:
        """Record the runner's answer (``None``: the built-in rules run)."""
        self.loop._perform(self.conv, self.step.ran(result))

    def close(self) -> None:
        """Write what is still staged (the run ended, or stopped with an error)."""
        if self.conv.staged:
            self.loop._flush(self.conv)

    def result(self) -> RunResult:
        """The run's result, after saving the conversation's snapshot if one is due (and
        the loop saves snapshots)."""
        if self.loop.snapshots:
            self.conv.save_snapshot_if_due()
        return result_of(self.conv.builder)


class Loop(LoopBase):
    """The synchronous loop: ``start``, ``send`` and ``resume`` run a conversation to its end.

    Constructor: see ``LoopBase``. ``max_parallel_tools`` calls of one batch
    (``engine.step``) run at once, on a thread pool.
    """

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
        conv = self._begin(prompt, conversation_id=conversation_id, model=model, mode=mode,
                           max_turns=max_turns, system=system, duplicate_policy=duplicate_policy,
                           parameters=parameters, metadata=metadata, started=started)
        return self.drive(conv, single_turn=single_turn)

    def send(self, conversation: Conversation | str, text: str, *,
             single_turn: bool = False) -> RunResult:
        """Add ``text`` as the next user message (a chat continues after it ended) and run."""
        return self.drive(self._sent(conversation, text), single_turn=single_turn)

    def resume(self, conversation: Conversation | str, *, single_turn: bool = False) -> RunResult:
        """Finish a conversation a crash left unfinished (see ``engine.resume`` for the rules).

        A finished conversation is left as it is and its result returned.
        """
        return self.drive(self._open(conversation), single_turn=single_turn)

    def drive(self, conv: Conversation, *, single_turn: bool = False) -> RunResult:
        """Take every step the journal says is next until the run ends (or one turn, if asked)."""
        self._driver = threading.get_ident()
        drive = Drive(self, conv, single_turn)
        try:
            while (action := drive.next()) is not None:
                kind = type(action)
                if kind is CallModel:
                    self._call_model(drive, action)  # type: ignore[arg-type]
                elif kind is RunTools:
                    self._run_tools(drive, action)  # type: ignore[arg-type]
                elif kind is Wait:
                    self.retry.wait(action.delay)  # type: ignore[union-attr]
                else:
                    drive.ran(self.runner.run(action.request))  # type: ignore[union-attr]
        finally:
            drive.close()
        return drive.result()

    def _call_model(self, drive: Drive, action: CallModel) -> None:
        start = self.timer()
        handle = None
        try:
            if self.streams:
                handle = self.provider.stream(action.request)  # type: ignore[attr-defined]
                for delta in handle:
                    drive.delta(action, delta)
                response = handle.response
            else:
                response = self.provider.complete(action.request)
        except ProviderError as exc:  # anything else is a bug: it propagates, the run resumes
            drive.failed(action, exc, self.timer() - start)
        except KeyboardInterrupt:  # stopped mid-stream: what arrived is kept, marked
            drive.stopped(action, handle, self.timer() - start)
            raise
        else:
            drive.responded(action, response, self.timer() - start)

    def _run_tools(self, drive: Drive, action: RunTools) -> None:
        """Run a batch: one at a time when asked (or alone), else on a thread pool."""
        serial = drive.serial(action)
        if serial is not None:
            for run in serial:
                drive.tool_done(run, self._execute(run))
            return
        pool = ThreadPoolExecutor(max_workers=action.concurrency,
                                  thread_name_prefix="turnlog-tool")
        try:
            futures = {pool.submit(self._execute, run): run for run in action.runs}
            waiting = set(futures)
            while waiting:  # progress writes of the running tools are made on this thread
                finished, waiting = wait(waiting, timeout=0.02, return_when=FIRST_COMPLETED)
                self._serve_desk()
                for future in finished:
                    drive.tool_done(futures[future], future.result())
        finally:  # a crash (KeyboardInterrupt, SystemExit) leaves the unfinished to resume
            pool.shutdown(wait=False, cancel_futures=True)

    def _execute(self, run: ToolRun) -> ToolExecution:
        try:
            return self.executor.execute(run.call, run.tool, run.context, run.validated)
        except Exception as exc:  # an executor bug is still only this call's failure
            return executor_failure(exc)


def run(journal: JournalProtocol, prompt: str, *, provider: Provider,
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


def _exists(journal: JournalProtocol, conversation_id: str) -> bool:
    return journal.last_seq(conversation_id) > 0
