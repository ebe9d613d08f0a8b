"""The reducer: pure, refuses impossible histories with a precise message, and rejects bad rows."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnlog.engine.model.conversation import Conversation, load_state
from turnlog.engine.errors import ConversationNotFound, CorruptEventError, InvalidTransition
from turnlog.engine.model.events import (
    ConversationStarted,
    ModelRequested,
    ModelResponded,
    ToolCompleted,
    UserMessage,
    encode_event,
)
from turnlog.engine.model.messages import USAGE_COUNTS, Text, ToolCall, Usage
from turnlog.engine.model.state import ConversationState, fold, reduce
from turnlog.journal import GENESIS_HASH, event_hash

START = ConversationStarted(conversation_id="c", provider="scripted", model="m")


def test_reduce_never_modifies_its_input():
    before = fold([START, UserMessage.of("hi")])
    snapshot = (before.messages, before.lifecycle, before.seq)
    after = reduce(before, ModelRequested(turn=1, digest="d", provider="p", model="m"))
    assert (before.messages, before.lifecycle, before.seq) == snapshot
    assert after.lifecycle.value == "requested" and after.seq == 3


def test_a_tool_result_for_a_call_nobody_made_names_state_event_and_seq():
    state = fold([START, UserMessage.of("hi")])
    with pytest.raises(InvalidTransition) as info:
        reduce(state, ToolCompleted(call_id="ghost", name="t", success=True, content="x"))
    message = str(info.value)
    assert "'tool_completed'" in message and "'awaiting_model'" in message and "seq 3" in message


def test_a_second_response_to_one_request_is_refused():
    state = fold([START, UserMessage.of("hi"), ModelRequested(turn=1, digest="d", provider="p", model="m"),
                  ModelResponded(turn=1, parts=(Text(text="a"),))])
    with pytest.raises(InvalidTransition, match="model_responded"):
        reduce(state, ModelResponded(turn=1, parts=(Text(text="again"),)))


def test_the_result_shape_of_the_reference_is_in_the_state():
    call = ToolCall(id="c1", name="add", arguments={"a": 1})
    state = fold([START, UserMessage.of("hi"), ModelRequested(turn=1, digest="d", provider="p", model="m"),
                  ModelResponded(turn=1, parts=(Text(text="adding"), call), stop_reason="tool_use")])
    assert state.has_pending_tools and state.last_tool_calls == (call,)
    state = reduce(state, ToolCompleted(call_id="c1", name="add", success=True, content="2", data={"sum": 2}))
    assert not state.has_pending_tools and state.turn_count == 1
    assert [m.role for m in state.messages] == ["user", "assistant", "tool"]
    assert state.tool_execution_results[0].data == {"sum": 2}
    assert state.final_content == "adding" and not state.completed


def _insert_raw(db_path, type_, payload):
    con = sqlite3.connect(db_path)
    prev = con.execute("SELECT lower(hex(hash)) FROM events WHERE stream_id='c' "
                       "ORDER BY seq DESC LIMIT 1").fetchone()[0]
    stamp = "2026-01-01T00:00:00.000000Z"
    con.execute("INSERT INTO events (stream_id, seq, type, version, recorded_at, payload, prev_hash, hash) "
                "VALUES ('c', 2, ?, 1, ?, ?, ?, ?)",
                (type_, stamp, payload, bytes.fromhex(prev),
                 bytes.fromhex(event_hash(prev, "c", 2, type_, 1, stamp, payload))))
    con.commit()
    con.close()


@pytest.mark.parametrize(("type_", "payload", "match"), [
    ("mystery", '{"type":"mystery"}', "unknown event type 'mystery' at stream 'c' seq 2"),
    ("user_message", '{"type":"user_message"}', "cannot decode 'user_message' at stream 'c' seq 2"),
    ("conversation_failed", encode_event(UserMessage.of("x")).payload, "says type 'user_message'"),
])
def test_a_stored_row_that_cannot_be_decoded_is_a_typed_error_naming_stream_and_seq(
        journal, db_path, type_, payload, match):
    Conversation.start(journal, START)
    _insert_raw(db_path, type_, payload)
    with pytest.raises(CorruptEventError, match=match):
        load_state(journal, "c")


def test_unknown_conversation_is_a_typed_error(journal):
    with pytest.raises(ConversationNotFound, match="no conversation 'nope'"):
        load_state(journal, "nope")


def test_a_refused_append_writes_nothing_and_keeps_the_state(journal):
    conv = Conversation.start(journal, START)
    before = conv.state
    with pytest.raises(InvalidTransition):
        conv.append(UserMessage.of("ok"), ToolCompleted(call_id="x", name="t", success=True, content=""))
    assert journal.last_seq("c") == 1 and conv.state == before and conv.last_seq == 1


def test_genesis_and_default_state():
    assert GENESIS_HASH == "0" * 64
    assert ConversationState().status == "active"


_COUNT = st.integers(min_value=0, max_value=10**12)
_USAGE = st.builds(lambda counts, raw: Usage(**dict(zip(USAGE_COUNTS, counts)), raw=raw),
                   st.lists(_COUNT, min_size=len(USAGE_COUNTS), max_size=len(USAGE_COUNTS)),
                   st.none() | st.just({"wire": 1}))


@settings(max_examples=200)
@given(a=_USAGE, b=_USAGE)
def test_usages_add_up_field_by_field_and_drop_raw(a, b):
    """``Usage.__add__`` spells its fields out (speed): it must sum every count there is."""
    total = a + b
    assert set(USAGE_COUNTS) == set(Usage.__struct_fields__) - {"raw"}
    for name in USAGE_COUNTS:
        assert getattr(total, name) == getattr(a, name) + getattr(b, name)
    assert total.raw is None
