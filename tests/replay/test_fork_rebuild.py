"""rebuild and fork: lineage folding, no copying, verification, bad input."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnlog.engine.model.conversation import Conversation
from turnlog.engine.errors import ConversationExistsError, ConversationNotFound
from turnlog.engine.model.events import ConversationStarted, ToolCompleted, UserMessage, encode_event
from turnlog.engine.model.state import StateBuilder, fold
from turnlog.journal import Journal
from turnlog.replay import ForkPointError, ReplayError, fork, rebuild
from turnlog.replay.rebuild import own_events
from turnlog.replay.testing import conversations
from tests.conftest import FixedClock


def record(journal: Journal, events) -> str:
    conv = Conversation.start(journal, events[0])
    if len(events) > 1:
        conv.append(*events[1:])
    return events[0].conversation_id


def rows(path) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*) FROM events").fetchone()[0]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=conversations(conversation_id="parent"), data=st.data())
def test_rebuild_of_a_fork_equals_the_parents_prefix_folded_then_the_forks_events(
        tmp_path_factory, events, data):
    path = tmp_path_factory.mktemp("fork") / "t.db"
    with Journal(path, clock=FixedClock()) as journal:
        record(journal, events)
        k = data.draw(st.integers(1, len(events)), label="k")
        fid = fork(journal, "parent", k, new_id="child", model="other-model")
        assert journal.last_seq("child") == 1
        builder = StateBuilder(fold(events[:k]))
        for row, event in own_events(journal, "child"):
            builder.apply(event, row.seq)  # the fork's events keep their own seqs
        expected = builder.state()
        assert rebuild(journal, fid) == expected
        assert rebuild(journal, "parent", k).messages == expected.messages
        assert journal.verify().ok
        # a fork of the fork, at its only event, still folds the grandparent's prefix
        grand = fork(journal, "child", 1, new_id="grandchild", system="new directive")
        state = rebuild(journal, grand)
        assert state.messages == expected.messages and state.system == "new directive"
        assert state.model == "other-model"
        assert journal.verify().ok


def test_fork_of_a_1000_event_conversation_adds_only_its_own_rows(db_path):
    with Journal(db_path, clock=FixedClock()) as journal:
        conv = Conversation.start(journal, ConversationStarted(
            conversation_id="big", provider="scripted", model="m", mode="chat"))
        conv.append(*[UserMessage.of(f"message {i}") for i in range(999)])
        assert journal.last_seq("big") == 1000
        before = rows(db_path)
        fid = fork(journal, "big", 1000, new_id="small", message="and now?")
        assert rows(db_path) == before + 2
        assert len(rebuild(journal, fid).messages) == 1000
        assert journal.stream(fid).parent_stream_id == "big"
        assert journal.verify().ok


def test_fork_copies_the_parents_configuration_and_applies_overrides(journal):
    record(journal, [ConversationStarted(conversation_id="p", provider="openai", model="gpt",
                                         system="be brief", max_turns=3, metadata={"k": 1}),
                     UserMessage.of("hi")])
    started_seq = fork(journal, "p", 2, new_id="f", provider="anthropic", model="claude")
    state = rebuild(journal, started_seq)
    assert (state.provider, state.model, state.system, state.max_turns, state.metadata) == (
        "anthropic", "claude", "be brief", 3, {"k": 1})
    assert state.fork.conversation_id == "p" and state.fork.seq == 2
    assert state.fork.hash == journal.hash_at("p", 2)


def test_fork_point_outside_the_parent_is_refused_and_nothing_is_written(journal, db_path):
    record(journal, [ConversationStarted(conversation_id="p", provider="s", model="m")])
    before = rows(db_path)
    for bad in (0, 2, -1, "1"):
        with pytest.raises(ForkPointError, match="seqs 1..1"):
            fork(journal, "p", bad)
    with pytest.raises(ConversationNotFound, match="'nope'"):
        fork(journal, "nope", 1)
    assert rows(db_path) == before


def test_fork_with_a_message_where_tools_are_pending_is_refused_atomically(journal, db_path):
    from turnlog.engine.model.events import ModelRequested, ModelResponded
    from turnlog.engine.model.messages import ToolCall
    record(journal, [ConversationStarted(conversation_id="p", provider="s", model="m"),
                     UserMessage.of("hi"),
                     ModelRequested(turn=1, digest="d", provider="s", model="m"),
                     ModelResponded(turn=1, parts=(ToolCall(id="c1", name="t"),))])
    before = rows(db_path)
    with pytest.raises(ForkPointError, match="seq 4"):
        fork(journal, "p", 4, new_id="f", message="hello")
    assert rows(db_path) == before and journal.last_seq("f") == 0
    # without a message, a fork at a pending call is fine: it answers the call itself
    fork(journal, "p", 4, new_id="f")
    conv = Conversation.open(journal, "f")
    conv.append(ToolCompleted(call_id="c1", name="t", success=True, content="ok"))
    assert rebuild(journal, "f").lifecycle.value == "awaiting_model"


def test_fork_into_an_existing_id_is_refused(journal):
    record(journal, [ConversationStarted(conversation_id="p", provider="s", model="m")])
    with pytest.raises(ConversationExistsError, match="already exists"):
        fork(journal, "p", 1, new_id="p")


def test_rebuild_at_a_seq_the_conversation_lacks_is_refused(journal):
    record(journal, [ConversationStarted(conversation_id="p", provider="s", model="m")])
    with pytest.raises(ReplayError, match="seqs 1..1"):
        rebuild(journal, "p", 5)
    with pytest.raises(ConversationNotFound):
        rebuild(journal, "q")


def test_tampering_with_the_parent_before_the_fork_point_fails_the_forks_verification(db_path):
    with Journal(db_path, clock=FixedClock()) as journal:
        record(journal, [ConversationStarted(conversation_id="p", provider="s", model="m"),
                         UserMessage.of("hi")])
        fork(journal, "p", 2, new_id="f")
    with sqlite3.connect(db_path) as db:
        db.execute("DROP TRIGGER events_refuse_update")
        db.execute("UPDATE events SET payload = ? WHERE stream_id = 'p' AND seq = 2",
                   (encode_event(UserMessage.of("HI")).payload,))
    with Journal(db_path) as journal:
        report = journal.verify()
    assert not report.ok
