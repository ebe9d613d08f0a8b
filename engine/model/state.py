"""Conversation state and the pure reducer that folds events into it.

``reduce(state, event)`` returns a new ``ConversationState`` and never
touches its input; ``fold(events)`` folds a whole history. Both run the same
code: a mutable ``StateBuilder`` applies events in place (so folding is O(n),
not O(n²)), and ``state`` freezes it. The live loop keeps a builder and
applies each event it appends, so it never re-reads the stream.

Each event is first checked against the lifecycle (``engine.machine``): an
event the machine does not accept raises ``InvalidTransition`` naming the
state, the event and the seq, and the builder is left as it was.

>>> from turnlog.engine.model.events import ConversationStarted, UserMessage
>>> s = fold([ConversationStarted(conversation_id="c1", provider="scripted", model="m"),
...           UserMessage.of("hi")])
>>> s.lifecycle, s.messages[0].parts[0].text
(<Lifecycle.AWAITING_MODEL: 'awaiting_model'>, 'hi')
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from turnlog.journal import StoredEvent

from turnlog.engine.tools.duplicates import call_key, is_duplicate
from turnlog.engine.errors import InvalidTransition
from .events import (
    DECODER,
    EVENT_TYPES,
    VERSIONS,
    ApprovalDecided,
    ApprovalRequested,
    ConversationCompleted,
    ConversationFailed,
    ConversationHalted,
    ConversationStarted,
    DuplicatePolicy,
    Event,
    ForkRef,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ReplayRef,
    RunInterrupted,
    ToolCallRejected,
    ToolCompleted,
    ToolSpec,
    ToolProgressed,
    ToolStarted,
    TurnLimitReached,
    UserMessage,
    decode_event,
)
from .machine import Lifecycle, next_state
from .messages import Message, Text, ToolCall, ToolResult, Usage

__all__ = ["DEFERRED", "ConversationState", "StateBuilder", "ToolOutcome", "fold", "fold_stored",
           "reduce"]

_TERMINAL = (Lifecycle.COMPLETED, Lifecycle.FAILED, Lifecycle.HALTED)
_RUN_START = (Lifecycle.READY, Lifecycle.ANSWERED) + _TERMINAL


class ToolOutcome(msgspec.Struct, frozen=True, kw_only=True, gc=False, omit_defaults=True):
    """What became of one tool call: run (``success``), failed, or ``rejected`` (the reason)."""

    call_id: str
    name: str
    arguments: dict[str, Any] = {}
    success: bool = False
    content: str = ""
    data: Any = None
    error: str | None = None
    rejected: str | None = None


class ConversationState(msgspec.Struct, frozen=True, kw_only=True):
    """Everything known about a conversation after some prefix of its events.

    The fields of the reference loop's result are here: ``messages``,
    ``final_content``, ``turn_count``, ``completed``, ``last_tool_calls``,
    ``tool_execution_results`` (of the current run), ``has_pending_tools``,
    ``usage``, ``error``, ``warning`` and ``max_turns_reached``. ``attempt``
    is the last model request's attempt number and ``failure`` the
    ``model_failed`` that answered it, until a retry or a new run.
    ``interrupted``: the last event is a ``run_interrupted`` marker (Ctrl-C).
    """

    conversation_id: str = ""
    lifecycle: Lifecycle = Lifecycle.NEW
    seq: int = 0
    mode: str = "chat"
    provider: str = ""
    model: str = ""
    max_turns: int = 8
    system: str = ""
    tools: tuple[ToolSpec, ...] = ()
    duplicate_policy: DuplicatePolicy = DuplicatePolicy()
    parameters: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    fork: ForkRef | None = None
    replay_of: ReplayRef | None = None
    messages: tuple[Message, ...] = ()
    turn_count: int = 0
    run_start_turn: int = 0
    requested_turn: int | None = None
    attempt: int = 0
    failure: ModelFailed | None = None
    request_digest: str = ""
    response_id: str | None = None
    pending_calls: tuple[ToolCall, ...] = ()
    started_calls: frozenset[str] = frozenset()
    call_ids: frozenset[str] = frozenset()
    last_tool_calls: tuple[ToolCall, ...] = ()
    tool_execution_results: tuple[ToolOutcome, ...] = ()
    usage: Usage = Usage()
    run_usage: Usage = Usage()
    final_content: str = ""
    error: str | None = None
    warning: str | None = None
    interrupted: bool = False
    max_turns_reached: bool = False
    pending_at_limit: bool = False
    refusals: int = 0
    call_count: int = 0
    call_index: dict[str, int] = {}
    approve: tuple[str, ...] = ()
    #: why the run's marked tools need a decision (``conversation_started.approve_reason``)
    approve_reason: str | None = None
    #: ``approval_requested`` by call id (every call of the conversation that asked)
    approvals: dict[str, ApprovalRequested] = {}
    #: ``approval_decided`` by call id
    decisions: dict[str, ApprovalDecided] = {}

    @property
    def awaiting_approval(self) -> tuple[str, ...]:
        """The pending calls that asked for approval and have no decision yet, in call order."""
        return tuple(c.id for c in self.pending_calls
                     if c.id in self.approvals and c.id not in self.decisions)

    @property
    def completed(self) -> bool:
        """Whether the last run finished with the model's final answer."""
        return self.lifecycle is Lifecycle.COMPLETED

    @property
    def finished(self) -> bool:
        """Whether the last run ended (completed, failed or halted): nothing to resume."""
        return self.lifecycle in _TERMINAL

    @property
    def status(self) -> str:
        """``completed``, ``failed`` or ``halted``; for an unfinished conversation
        ``awaiting_approval`` when a pending call waits for a person's decision,
        ``interrupted`` when its last event is a ``run_interrupted`` marker, else ``active``.

        The ``conversations`` view's ``status`` column says the same.
        """
        if self.lifecycle in _TERMINAL:
            return self.lifecycle.value
        if self.lifecycle is Lifecycle.AWAITING_TOOLS and self.awaiting_approval:
            return "awaiting_approval"
        return "interrupted" if self.interrupted else "active"

    @property
    def has_pending_tools(self) -> bool:
        """Whether the model still wanted tools when the run stopped (or calls await answers)."""
        return bool(self.pending_calls) or self.pending_at_limit

    @property
    def run_turns(self) -> int:
        """Turns taken in the current run (a chat's later user message starts a new run)."""
        return self.turn_count - self.run_start_turn

    def is_duplicate(self, name: str, arguments: dict[str, Any]) -> bool:
        """Whether the conversation's duplicate policy refuses this call as the next one."""
        return is_duplicate(self.duplicate_policy, self.call_index, self.call_count, name, arguments)


_STATE_FIELDS = ConversationState.__struct_fields__
_NO_USAGE = Usage()

#: The builder's attributes an open may leave unread (:meth:`StateBuilder.deferred`): the
#: message and result bodies, and every fact that gates a tool call (which tools need
#: approval, the duplicate rule and its record of calls, the approvals, decisions, started
#: and pending calls). They are read from the events when first needed, never from a snapshot.
DEFERRED = ("_messages", "_results", "approve", "approvals", "call_count", "call_ids",
            "call_index", "decisions", "duplicate_policy", "pending", "started")
_DEFERRED = frozenset(DEFERRED)
#: ConversationState's fields a builder holds as a deferred attribute (by another name or
#: shape for some), left at their defaults in a head state (:meth:`StateBuilder.head`).
_HEAD_DEFAULTS: dict[str, Any] = {
    "messages": (), "tool_execution_results": (), "approve": (), "approvals": {}, "call_count": 0,
    "call_ids": frozenset(), "call_index": {}, "decisions": {},
    "duplicate_policy": DuplicatePolicy(), "pending_calls": (), "started_calls": frozenset()}
_HEAD_FIELDS = tuple(f for f in _STATE_FIELDS if f not in _HEAD_DEFAULTS)
_LOADING = threading.RLock()


class StateBuilder:
    """The mutable twin of ``ConversationState``: applies events in place, O(1) each.

    >>> b = StateBuilder()
    >>> b.apply(ConversationStarted(conversation_id="c", provider="p", model="m"), seq=1)
    >>> b.state().lifecycle
    <Lifecycle.READY: 'ready'>
    """

    __slots__ = (*_STATE_FIELDS, "pending", "started", "_messages", "_results", "_loader")
    # ConversationState's fields, as the builder holds them (set in __init__ by name)
    conversation_id: str
    lifecycle: Lifecycle
    seq: int
    mode: str
    provider: str
    model: str
    max_turns: int
    system: str
    tools: tuple[ToolSpec, ...]
    duplicate_policy: DuplicatePolicy
    parameters: dict[str, Any]
    metadata: dict[str, Any]
    fork: ForkRef | None
    replay_of: ReplayRef | None
    turn_count: int
    run_start_turn: int
    requested_turn: int | None
    attempt: int
    failure: ModelFailed | None
    request_digest: str
    response_id: str | None
    last_tool_calls: tuple[ToolCall, ...]
    usage: Usage
    run_usage: Usage
    final_content: str
    error: str | None
    warning: str | None
    interrupted: bool
    max_turns_reached: bool
    pending_at_limit: bool
    refusals: int
    call_count: int
    call_ids: set[str]
    call_index: dict[str, int]
    approve: tuple[str, ...]
    approve_reason: str | None
    approvals: dict[str, ApprovalRequested]
    decisions: dict[str, ApprovalDecided]

    def __init__(self, state: ConversationState | None = None) -> None:
        state = state or ConversationState()
        for name in _STATE_FIELDS:
            setattr(self, name, getattr(state, name))
        self.pending: dict[str, ToolCall] = {c.id: c for c in state.pending_calls}
        self.started: set[str] = set(state.started_calls)
        #: every tool call id of the conversation so far (new calls get ids not in it)
        self.call_ids = set(state.call_ids)
        self._messages: list[Message] = list(state.messages)
        self._results: list[ToolOutcome] = list(state.tool_execution_results)
        self.call_index = dict(state.call_index)
        self.approvals = dict(state.approvals)
        self.decisions = dict(state.decisions)
        self._loader: Callable[[StateBuilder], None] | None = None

    @classmethod
    def deferred(cls, head: ConversationState,
                 loader: Callable[[StateBuilder], None]) -> StateBuilder:
        """A builder with ``head``'s fields and every :data:`DEFERRED` attribute unread.

        The first read of one calls ``loader(builder)`` once, which must set each deferred
        attribute still unset to its value as of the events folded so far (one the
        builder's own events replaced since, as ``_new_run`` replaces the results, it
        keeps). Until then nothing of them is held: opening costs the head, not the
        conversation's length. An event that changes a deferred attribute reads it first,
        so a value the loader sets is the one the builder would have held.
        """
        builder = cls(head)
        for name in DEFERRED:
            delattr(builder, name)
        builder._loader = loader
        return builder

    def __getattr__(self, name: str) -> Any:
        """A deferred attribute, loaded on its first read (:meth:`deferred`); one load, even
        when threads (parallel tools) read at once."""
        if name in _DEFERRED:
            with _LOADING:
                loader = self._loader
                if loader is not None:
                    loader(self)
                    self._loader = None
            try:
                return object.__getattribute__(self, name)
            except AttributeError:
                pass
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def unset(self) -> tuple[str, ...]:
        """The deferred attributes not read yet (all set: ``()``)."""
        missing = []
        for name in DEFERRED:
            try:
                object.__getattribute__(self, name)
            except AttributeError:
                missing.append(name)
        return tuple(missing)

    def head(self) -> ConversationState:
        """The state without reading what :data:`DEFERRED` holds: those fields at their
        defaults (what a snapshot saves; O(1))."""
        return ConversationState(**{name: getattr(self, name) for name in _HEAD_FIELDS},
                                 **_HEAD_DEFAULTS)

    @property
    def message_list(self) -> list[Message]:
        """The messages so far (the builder's own list: read, do not modify)."""
        return self._messages

    @property
    def run_turns(self) -> int:
        """Turns taken in the current run (as ``ConversationState.run_turns``)."""
        return self.turn_count - self.run_start_turn

    def is_duplicate(self, name: str, arguments: dict[str, Any]) -> bool:
        """Whether the duplicate policy refuses this call as the next one (O(1))."""
        return is_duplicate(self.duplicate_policy, self.call_index, self.call_count, name, arguments)

    def accepts(self, event: Event) -> bool:
        """Whether the lifecycle accepts ``event`` now (nothing changes)."""
        return next_state(self.lifecycle, _TAGS[type(event)], self, event) is not None

    def apply(self, event: Event, seq: int | None = None) -> None:
        """Apply ``event`` (at ``seq``, default the next one) or raise ``InvalidTransition``."""
        kind = type(event)
        tag = _TAGS[kind]
        dest = next_state(self.lifecycle, tag, self, event)
        if dest is None:
            seq = self.seq + 1 if seq is None else seq
            raise InvalidTransition(self.lifecycle.value, tag, seq, _why(self, tag, event))
        _APPLY[kind](self, event)
        self.lifecycle = dest
        self.interrupted = kind is RunInterrupted
        self.seq = self.seq + 1 if seq is None else seq

    def state(self) -> ConversationState:
        """A frozen snapshot of the current state."""
        values = {name: getattr(self, name) for name in _STATE_FIELDS}
        values.update(
            messages=tuple(self._messages),
            pending_calls=tuple(self.pending.values()),
            started_calls=frozenset(self.started),
            call_ids=frozenset(self.call_ids),
            tool_execution_results=tuple(self._results),
            call_index=dict(self.call_index),
            approvals=dict(self.approvals),
            decisions=dict(self.decisions),
        )
        return ConversationState(**values)

    # --- per-event mutations -------------------------------------------------

    def _started(self, e: ConversationStarted) -> None:
        self.conversation_id, self.provider, self.model = e.conversation_id, e.provider, e.model
        self.mode, self.max_turns, self.system, self.tools = e.mode, e.max_turns, e.system, e.tools
        self.duplicate_policy, self.parameters, self.metadata = (
            e.duplicate_policy, e.parameters, e.metadata)
        self.fork, self.replay_of = e.fork, e.replay_of
        self.approve, self.approve_reason = e.approve, e.approve_reason

    def _user(self, e: UserMessage) -> None:
        if self.lifecycle in _RUN_START:
            self._new_run()
        # the escalation count is of refusals since the user last spoke: a message that
        # joins a run (a fork's message mid-run, a send while the model was due) resets it
        self.refusals = 0
        self._messages.append(Message(role="user", parts=e.parts))

    def _new_run(self) -> None:
        self.run_start_turn = self.turn_count
        self._results = []
        self.refusals = 0
        self.run_usage = Usage()
        self.error = self.warning = self.failure = None
        self.max_turns_reached = self.pending_at_limit = False
        self.final_content = ""

    def _requested(self, e: ModelRequested) -> None:
        self.requested_turn, self.attempt = e.turn, e.attempt
        self.error = self.failure = None  # a retry: the failure it answers is behind us
        self.request_digest = e.digest

    def _responded(self, e: ModelResponded) -> None:
        if self.requested_turn is None:  # an imported or runner message: no request of its own
            self.request_digest = ""
        self.response_id = e.response_id
        self.turn_count = e.turn
        self.requested_turn = None
        self._messages.append(Message(role="assistant", parts=e.parts, provider=e.provider or None,
                                      model=e.model or None))
        calls: list[ToolCall] = []
        texts: list[str] = []
        for part in e.parts:  # one pass: this runs for every response of every fold
            if isinstance(part, ToolCall):
                calls.append(part)
            elif isinstance(part, Text):
                texts.append(part.text)
        self.pending = {c.id: c for c in calls}
        if calls:
            self.call_ids.update(self.pending)
        self.last_tool_calls = tuple(calls)
        if e.usage != _NO_USAGE:
            self.usage = self.usage + e.usage
            self.run_usage = self.run_usage + e.usage
        text = "".join(texts)
        if text:
            self.final_content = text

    def _failed_model(self, e: ModelFailed) -> None:
        self.requested_turn, self.failure = None, e
        self.error = f"{e.error_type}: {e.message}" if e.error_type else e.message

    def _register(self, call_id: str) -> None:
        call = self.pending[call_id]
        raw = call.raw_arguments if call.invalid else None
        self.call_index[call_key(call.name, call.arguments, self.duplicate_policy, raw)] = (
            self.call_count)
        self.call_count += 1

    def _tool_started(self, e: ToolStarted) -> None:
        self._register(e.call_id)
        self.started.add(e.call_id)

    def _answer(self, call_id: str, name: str, content: str, is_error: bool,
                outcome: ToolOutcome) -> None:
        if call_id not in self.started:
            self._register(call_id)
        self.started.discard(call_id)
        del self.pending[call_id]
        self._messages.append(Message(role="tool", parts=(
            ToolResult(call_id=call_id, name=name, content=content, is_error=is_error),)))
        self._results.append(outcome)

    def _tool_completed(self, e: ToolCompleted) -> None:
        call = self.pending[e.call_id]
        self._answer(e.call_id, e.name, e.content, not e.success, ToolOutcome(
            call_id=e.call_id, name=e.name, arguments=call.arguments, success=e.success,
            content=e.content, data=e.data, error=e.error))

    def _rejected(self, e: ToolCallRejected) -> None:
        call = self.pending[e.call_id]
        if e.reason == "duplicate":
            self.refusals += 1
        self._answer(e.call_id, e.name, e.content, True, ToolOutcome(
            call_id=e.call_id, name=e.name, arguments=call.arguments, content=e.content,
            error=e.content, rejected=e.reason))

    def _tool_progressed(self, e: ToolProgressed) -> None:
        """News of a running call: the state is unchanged (resume reads it from the journal)."""

    def _approval_requested(self, e: ApprovalRequested) -> None:
        self.approvals[e.call_id] = e

    def _approval_decided(self, e: ApprovalDecided) -> None:
        self.decisions[e.call_id] = e

    def _turn_limit(self, e: TurnLimitReached) -> None:
        self.max_turns_reached = True
        self.pending_at_limit = e.pending_tool_calls
        self.warning = e.warning or f"max turns ({e.max_turns}) reached"

    def _halted(self, e: ConversationHalted) -> None:
        self.warning = e.reason

    def _completed(self, e: ConversationCompleted) -> None:
        if e.final_content:
            self.final_content = e.final_content

    def _failed(self, e: ConversationFailed) -> None:
        self.error = e.error

    def _interrupted(self, e: RunInterrupted) -> None:
        """A marker: the run continues from exactly the same state."""


#: Each event class's handler (the event is of that class).
_APPLY: dict[type[Event], Callable[[StateBuilder, Any], None]] = {
    ConversationStarted: StateBuilder._started,
    UserMessage: StateBuilder._user,
    ModelRequested: StateBuilder._requested,
    ModelResponded: StateBuilder._responded,
    ModelFailed: StateBuilder._failed_model,
    ToolStarted: StateBuilder._tool_started,
    ToolCompleted: StateBuilder._tool_completed,
    ToolCallRejected: StateBuilder._rejected,
    TurnLimitReached: StateBuilder._turn_limit,
    ConversationHalted: StateBuilder._halted,
    ConversationCompleted: StateBuilder._completed,
    ConversationFailed: StateBuilder._failed,
    RunInterrupted: StateBuilder._interrupted,
    ApprovalRequested: StateBuilder._approval_requested,
    ApprovalDecided: StateBuilder._approval_decided,
    ToolProgressed: StateBuilder._tool_progressed,
}


_TAGS: dict[type[Event], str] = {cls: tag for tag, cls in EVENT_TYPES.items()}


def _why(b: StateBuilder, tag: str, event: Any) -> str:
    """A human reason for a refusal, for the common cases."""
    call_id = getattr(event, "call_id", None)
    if call_id is not None and call_id not in b.pending:
        return f"no pending tool call has id {call_id!r}"
    if call_id is not None and tag == "tool_started" and call_id in b.started:
        return f"tool call {call_id!r} was already started"
    if call_id is not None and tag == "tool_started":
        return f"tool call {call_id!r} awaits approval (no approving decision recorded)"
    if tag == "approval_requested":
        return f"tool call {call_id!r} already asked for approval or was started"
    if tag == "approval_decided" and call_id not in b.approvals:
        return f"tool call {call_id!r} did not ask for approval"
    if tag == "approval_decided":
        return f"tool call {call_id!r} was already decided"
    turn = getattr(event, "turn", None)
    if turn is not None and tag == "model_requested" and turn != b.turn_count + 1:
        return f"turn {turn} requested but the next turn is {b.turn_count + 1}"
    if tag == "model_requested" and b.lifecycle is Lifecycle.AWAITING_MODEL:
        want = f"1 or {b.attempt + 1}" if b.failure is not None else "1"
        return f"attempt {event.attempt} requested but the next attempt is {want}"
    if turn is not None and b.requested_turn is not None and turn != b.requested_turn:
        return f"answers turn {turn} but turn {b.requested_turn} was requested"
    if tag == "model_responded":
        ids = [p.id for p in event.parts if type(p) is ToolCall]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            return (f"tool call id {repeated[0]!r} appears more than once in one response "
                    "(engine.calls.assign_call_ids makes ids unique)")
    if tag == "model_responded" and b.lifecycle is Lifecycle.AWAITING_MODEL:
        return "a live model response needs a model_requested before it"
    if tag == "user_message" and b.lifecycle in _TERMINAL:
        return f"a {b.mode} conversation cannot continue after it ended"
    if tag == "conversation_started" and b.lifecycle is not Lifecycle.NEW:
        return "only a fork's first event may restart a conversation, at its fork point"
    if b.pending:
        return f"{len(b.pending)} tool call(s) still await results"
    return ""


def reduce(state: ConversationState, event: Event) -> ConversationState:
    """The state after ``event``; ``state`` is not modified.

    Raises ``InvalidTransition`` if the lifecycle does not accept the event.
    """
    builder = StateBuilder(state)
    builder.apply(event)
    return builder.state()


def fold(events: Iterable[Event], initial: ConversationState | None = None) -> ConversationState:
    """The state after all ``events``, in order, starting from ``initial``."""
    builder = StateBuilder(initial)
    for event in events:
        builder.apply(event)
    return builder.state()


def fold_stored(stored: Iterable[StoredEvent], builder: StateBuilder | None = None) -> StateBuilder:
    """Decode and apply journal rows (keeping their seq) to ``builder``; returns the builder.

    Rows at their type's current version take a fast path (one union decode
    and a tag check); anything else goes through ``decode_event``, which
    upcasts old versions and raises ``CorruptEventError`` naming stream and seq.
    """
    builder = builder or StateBuilder()
    apply = builder.apply
    decode, current, tags = DECODER.decode, VERSIONS, _TAGS
    for row in stored:
        type_ = row.type
        try:
            event = decode(row.payload) if current.get(type_) == row.version else None
        except msgspec.DecodeError:  # msgspec.ValidationError is a subclass
            event = None
        if event is None or tags[type(event)] != type_:
            event = decode_event(type_, row.version, row.payload,
                                 where=f"stream {row.stream_id!r} seq {row.seq}")
        apply(event, row.seq)
    return builder
