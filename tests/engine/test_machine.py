"""The compiled lookup table and the live ``transitions`` machine agree everywhere."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from turnlog import testing as shipped
from transitions import MachineError

from turnlog.engine.model.events import EVENT_TYPES, ForkRef
from turnlog.engine.model.machine import TABLE, TRANSITIONS, Lifecycle, build_machine, next_state
from turnlog.engine.model.state import StateBuilder

events = shipped.events()
ids = shipped.identifiers()
tool_calls = shipped.tool_calls()


@st.composite
def contexts(draw):
    """A builder in an arbitrary situation, and an event that may or may not fit it."""
    b = StateBuilder()
    b.conversation_id = draw(st.sampled_from(["c1", "c2"]))
    b.seq = draw(st.integers(0, 5))
    b.mode = draw(st.sampled_from(["chat", "pipeline"]))
    b.turn_count = draw(st.integers(0, 3))
    b.requested_turn = draw(st.none() | st.integers(0, 4))
    calls = draw(st.lists(tool_calls, max_size=3, unique_by=lambda c: c.id))
    b.pending = {c.id: c for c in calls}
    b.started = {c.id for c in calls if draw(st.booleans())}
    event = draw(events)
    if hasattr(event, "call_id") and calls and draw(st.booleans()):
        event = type(event)(**{**_fields(event), "call_id": draw(st.sampled_from(calls)).id})
    if hasattr(event, "turn") and draw(st.booleans()):
        event = type(event)(**{**_fields(event), "turn": draw(st.integers(0, 4))})
    if type(event).__name__ == "ConversationStarted" and draw(st.booleans()):
        fork = ForkRef(conversation_id=draw(st.sampled_from(["c1", "c2"])), seq=draw(st.integers(0, 5)),
                       hash=draw(ids))
        event = type(event)(**{**_fields(event), "fork": draw(st.none() | st.just(fork))})
    return b, event


def _fields(event):
    return {f: getattr(event, f) for f in event.__struct_fields__}


@settings(max_examples=300)
@given(contexts(), st.sampled_from(list(Lifecycle)))
def test_table_and_machine_agree_on_every_state_and_event(ctx, state):
    builder, event = ctx
    tag = event.__struct_config__.tag
    model, _ = build_machine(builder, initial=state)
    try:
        moved = getattr(model, tag)(event)
    except MachineError:
        moved = False
    expected = model.state if moved else None
    assert next_state(state, tag, builder, event) == expected


def test_every_event_type_is_a_trigger_and_every_pair_is_compiled():
    assert {t[0] for t in TRANSITIONS} == set(EVENT_TYPES)
    _, machine = build_machine()
    compiled = {(Lifecycle[s], trig) for trig, ev in machine.events.items() for s in ev.transitions}
    assert compiled == set(TABLE)


def test_terminal_states_only_reopen_for_chat():
    b = StateBuilder()
    b.mode = "pipeline"
    from turnlog.engine.model.events import UserMessage

    for state in (Lifecycle.COMPLETED, Lifecycle.FAILED, Lifecycle.HALTED):
        assert next_state(state, "user_message", b, UserMessage.of("x")) is None
    b.mode = "chat"
    assert next_state(Lifecycle.COMPLETED, "user_message", b, UserMessage.of("x")) is Lifecycle.AWAITING_MODEL
