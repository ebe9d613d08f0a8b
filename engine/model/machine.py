"""The conversation lifecycle: which event may follow which.

The ``transitions`` machine below is the single definition. Folding thousands
of events per second must not pay for a ``transitions`` trigger per event, so
``TABLE`` is compiled from the machine once, at import, into plain dicts; the
reducer uses ``next_state`` and a test checks the table and the machine agree
on every (state, event) pair.

Guards are plain functions ``guard(state, event) -> bool`` over the reducer's
state, named in the machine's ``conditions``/``unless`` lists.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from transitions import Machine

from .messages import ToolCall

__all__ = ["GUARDS", "TABLE", "TRANSITIONS", "Lifecycle", "build_machine", "next_state"]


class Lifecycle(enum.Enum):
    """Where a conversation is, as far as the next event is concerned."""

    #: Nothing recorded yet; only ``conversation_started`` may come.
    NEW = "new"
    #: Started; waiting for the first user message.
    READY = "ready"
    #: The next step is a model request (after a user message, or once every tool call is answered).
    AWAITING_MODEL = "awaiting_model"
    #: A request is out; its response or failure comes next.
    REQUESTED = "requested"
    #: The model called tools; each pending call gets exactly one result or rejection.
    AWAITING_TOOLS = "awaiting_tools"
    #: The model answered without tool calls; completion (or, in chat, another user message) comes next.
    ANSWERED = "answered"
    #: The run finished: the model gave its final answer. A chat may continue with a user message.
    COMPLETED = "completed"
    #: The run failed (provider error). A chat may continue with a user message.
    FAILED = "failed"
    #: The run was stopped: turn limit or escalation. A chat may continue with a user message.
    HALTED = "halted"


L = Lifecycle
_LIVE = [L.READY, L.AWAITING_MODEL, L.REQUESTED, L.AWAITING_TOOLS, L.ANSWERED,
         L.COMPLETED, L.FAILED, L.HALTED]


def _distinct_ids(parts: Any) -> bool:
    ids = [p.id for p in parts if type(p) is ToolCall]
    return len(ids) < 2 or len(set(ids)) == len(ids)


#: A guard: ``guard(state, event) -> bool``.
Guard = Callable[[Any, Any], bool]

GUARDS: dict[str, Guard] = {
    # a fresh conversation, not a fork's continuation
    "fresh_start": lambda s, e: e.fork is None,
    # a fork's first own event: it must branch from exactly where the fold is
    "fork_start": lambda s, e: (e.fork is not None and e.fork.conversation_id == s.conversation_id
                                and e.fork.seq == s.seq),
    "chat_mode": lambda s, e: s.mode == "chat",
    "next_turn": lambda s, e: e.turn == s.turn_count + 1,
    "requested_turn": lambda s, e: e.turn == s.requested_turn,
    # a turn's first request is attempt 1; a retry after its model_failed counts on by one
    # (or is unnumbered, 1, as journals written before attempts were numbered have it)
    "next_attempt": lambda s, e: e.attempt == 1 or (s.failure is not None
                                                    and e.attempt == s.attempt + 1),
    "not_live": lambda s, e: e.source != "provider",
    "has_tool_calls": lambda s, e: ToolCall in map(type, e.parts),
    # every call of a response is answered by its id, so no two may share one
    "distinct_call_ids": lambda s, e: _distinct_ids(e.parts),
    "answers_pending": lambda s, e: e.call_id in s.pending,
    "last_pending": lambda s, e: len(s.pending) == 1,
    "not_started": lambda s, e: e.call_id in s.pending and e.call_id not in s.started,
    # news of a call comes while it runs: started, not yet answered
    "running": lambda s, e: e.call_id in s.pending and e.call_id in s.started,
    # approval is asked once, before the call starts
    "not_asked": lambda s, e: (e.call_id in s.pending and e.call_id not in s.started
                               and e.call_id not in s.approvals),
    # a call that asked for approval starts only once approved
    "approved_if_asked": lambda s, e: (e.call_id not in s.approvals
                                       or getattr(s.decisions.get(e.call_id), "decision",
                                                  None) == "approve"),
    # a decision answers an asked, undecided, pending call
    "undecided": lambda s, e: (e.call_id in s.pending and e.call_id in s.approvals
                               and e.call_id not in s.decisions),
}

# (trigger, sources, dest, conditions, unless) — order matters: the first match wins.
TRANSITIONS: list[tuple[str, list[Lifecycle], Lifecycle | None, list[str], list[str]]] = [
    ("conversation_started", [L.NEW], L.READY, ["fresh_start"], []),
    # a fork keeps the state it branched in (dest None = stay)
    ("conversation_started", _LIVE, None, ["fork_start"], []),
    ("user_message", [L.READY, L.AWAITING_MODEL, L.ANSWERED], L.AWAITING_MODEL, [], []),
    ("user_message", [L.COMPLETED, L.FAILED, L.HALTED], L.AWAITING_MODEL, ["chat_mode"], []),
    ("model_requested", [L.AWAITING_MODEL], L.REQUESTED, ["next_turn", "next_attempt"], []),
    ("model_responded", [L.REQUESTED], L.AWAITING_TOOLS,
     ["requested_turn", "has_tool_calls", "distinct_call_ids"], []),
    ("model_responded", [L.REQUESTED], L.ANSWERED, ["requested_turn"], ["has_tool_calls"]),
    ("model_responded", [L.AWAITING_MODEL], L.AWAITING_TOOLS,
     ["not_live", "next_turn", "has_tool_calls", "distinct_call_ids"], []),
    ("model_responded", [L.AWAITING_MODEL], L.ANSWERED, ["not_live", "next_turn"], ["has_tool_calls"]),
    ("model_failed", [L.REQUESTED], L.AWAITING_MODEL, ["requested_turn"], []),
    ("tool_started", [L.AWAITING_TOOLS], L.AWAITING_TOOLS, ["not_started", "approved_if_asked"], []),
    ("tool_progressed", [L.AWAITING_TOOLS], L.AWAITING_TOOLS, ["running"], []),
    ("approval_requested", [L.AWAITING_TOOLS], L.AWAITING_TOOLS, ["not_asked"], []),
    ("approval_decided", [L.AWAITING_TOOLS], L.AWAITING_TOOLS, ["undecided"], []),
    ("tool_completed", [L.AWAITING_TOOLS], L.AWAITING_MODEL, ["answers_pending", "last_pending"], []),
    ("tool_completed", [L.AWAITING_TOOLS], L.AWAITING_TOOLS, ["answers_pending"], ["last_pending"]),
    ("tool_call_rejected", [L.AWAITING_TOOLS], L.AWAITING_MODEL,
     ["answers_pending", "last_pending"], []),
    ("tool_call_rejected", [L.AWAITING_TOOLS], L.AWAITING_TOOLS, ["answers_pending"], ["last_pending"]),
    ("turn_limit_reached", [L.AWAITING_MODEL], L.HALTED, [], []),
    ("conversation_halted", [L.AWAITING_MODEL], L.HALTED, [], []),
    ("conversation_completed", [L.ANSWERED], L.COMPLETED, [], []),
    ("conversation_failed", [L.READY, L.AWAITING_MODEL, L.ANSWERED], L.FAILED, [], []),
    # a marker on an unfinished run (Ctrl-C): the run resumes from exactly where it was
    ("run_interrupted", [L.READY, L.AWAITING_MODEL, L.REQUESTED, L.AWAITING_TOOLS, L.ANSWERED],
     None, [], []),
]


class _Model:
    """The object ``transitions`` drives; its guards read ``self.data`` (the reducer's state)."""

    def __init__(self, data: Any = None) -> None:
        self.data = data


def _bind_guards() -> None:
    for name, fn in GUARDS.items():
        setattr(_Model, name, lambda self, event, _fn=fn: bool(_fn(self.data, event)))


_bind_guards()


def build_machine(data: Any = None, initial: Lifecycle = Lifecycle.NEW) -> tuple[_Model, Machine]:
    """A live ``transitions`` machine over ``data`` (slow; for tests and diagrams).

    >>> model, machine = build_machine()
    >>> model.state
    <Lifecycle.NEW: 'new'>
    """
    model = _Model(data)
    machine = Machine(model=model, states=Lifecycle, initial=initial, auto_transitions=False,
                      ignore_invalid_triggers=False)
    for trigger, sources, dest, conditions, unless in TRANSITIONS:
        machine.add_transition(trigger, [*sources], dest if dest is not None else "=",
                               conditions=[*conditions], unless=[*unless])
    return model, machine


#: A candidate transition: (dest, guards that must hold, guards that must not).
Candidate = tuple[Lifecycle, tuple[Guard, ...], tuple[Guard, ...]]


def _guard(func: object) -> Guard:
    """The guard a machine condition names (conditions are named by GUARDS' keys)."""
    if not isinstance(func, str):
        raise TypeError(f"a lifecycle condition must name a guard, not {func!r}")
    return GUARDS[func]


def _compile() -> dict[tuple[Lifecycle, str], tuple[Candidate, ...]]:
    _, machine = build_machine()
    table: dict[tuple[Lifecycle, str], list[Candidate]] = {}
    for trigger, event in machine.events.items():
        for source_name, transitions in event.transitions.items():
            source = Lifecycle[source_name]
            for t in transitions:
                conds = tuple(_guard(c.func) for c in t.conditions if c.target)
                unless = tuple(_guard(c.func) for c in t.conditions if not c.target)
                # no dest (an internal transition) or its own: the state stays
                dest = source if t.dest is None or t.dest == source_name else Lifecycle[t.dest]
                table.setdefault((source, trigger), []).append((dest, conds, unless))
    return {k: tuple(v) for k, v in table.items()}


#: (state, event type) -> candidate transitions (dest, guards, unless-guards), compiled once.
TABLE = _compile()
# The same as {event type: {state value: candidates}}: hashing a str is C, hashing an
# Enum member (or building a tuple key) is Python, and this runs once per folded event.
_FAST: dict[str, dict[str, tuple[Candidate, ...]]] = {}
for (_state, _tag), _candidates in TABLE.items():
    _FAST.setdefault(_tag, {})[_state.value] = _candidates
_NONE: dict[str, tuple[Candidate, ...]] = {}


def next_state(state: Lifecycle, event_type: str, data: Any, event: Any) -> Lifecycle | None:
    """The state after ``event`` in ``state``, or ``None`` if the lifecycle refuses it."""
    for dest, conds, unless in _FAST.get(event_type, _NONE).get(state._value_, ()):
        for cond in conds:
            if not cond(data, event):
                break
        else:
            for cond in unless:
                if cond(data, event):
                    break
            else:
                return dest
    return None
