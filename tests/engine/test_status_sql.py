"""The ``conversations`` view's status is ``ConversationState.status``, on SQLite and on
PostgreSQL, for random histories with forks of any depth (the SQL is generated from the
Python rule: ``engine.audit.status``)."""

from __future__ import annotations

import itertools
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnlog.engine.audit import EXTENSIONS, connect_readonly
from turnlog.engine.audit.status import ENDED_BY
from turnlog.engine.model.conversation import Conversation, load_state
from turnlog.engine.model.events import (
    ApprovalDecided,
    ApprovalRequested,
    ConversationCompleted,
    ConversationFailed,
    ConversationHalted,
    ConversationStarted,
    HoldPlaced,
    HoldReleased,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    RunInterrupted,
    ToolCallRejected,
    ToolCompleted,
    ToolStarted,
    TurnLimitReached,
    UserMessage,
)
from turnlog.engine.model.machine import Lifecycle as L
from turnlog.engine.model.messages import Text, ToolCall
from turnlog.journal import Journal
from turnlog.replay import fork

from tests.pgcluster import fresh_url

_ids = itertools.count()


def _candidates(state) -> list:
    """Events that may follow the builder ``state`` (the machine's guards decide; these are shaped to pass)."""
    life = state.lifecycle
    out: list = []
    if life is not L.NEW:  # annotations: a fork may be taken at one, the state stays
        out += [HoldPlaced(by="me", reason="litigation"), HoldReleased(by="me", reason="")]
    if life is not L.NEW and life not in (L.COMPLETED, L.FAILED, L.HALTED):
        out.append(RunInterrupted())
    if life in (L.READY, L.AWAITING_MODEL, L.ANSWERED, L.COMPLETED, L.FAILED, L.HALTED):
        out.append(UserMessage(parts=(Text(text="go"),)))
    if life in (L.READY, L.AWAITING_MODEL, L.ANSWERED):
        out.append(ConversationFailed(error="boom"))
    if life is L.AWAITING_MODEL:
        out += [ModelRequested(turn=state.turn_count + 1, digest="d", provider="p", model="m",
                               attempt=state.attempt + 1 if state.failure is not None else 1),
                TurnLimitReached(turn_count=state.turn_count, max_turns=state.turn_count),
                ConversationHalted(reason="stop")]
    if life is L.REQUESTED:
        turn = state.requested_turn
        calls = tuple(ToolCall(id=f"c{next(_ids)}", name="t", arguments={}) for _ in range(2))
        out += [ModelResponded(turn=turn, parts=(Text(text="done"),)),
                ModelResponded(turn=turn, parts=calls[:1]), ModelResponded(turn=turn, parts=calls),
                ModelFailed(turn=turn, error_type="x", message="no")]
    if life is L.ANSWERED:
        out.append(ConversationCompleted(final_content="done"))
    if life is L.AWAITING_TOOLS:
        for call in list(state.pending.values()):
            asked, decided = call.id in state.approvals, call.id in state.decisions
            if not asked and call.id not in state.started:
                out.append(ApprovalRequested(call_id=call.id, name=call.name, arguments_hash="a",
                                             spec_hash="s"))
            if asked and not decided:
                out += [ApprovalDecided(call_id=call.id, decision=d, approver="me",
                                        decided_at="2026-01-01T00:00:00Z", arguments_hash="a")
                        for d in ("approve", "deny")]
            if call.id not in state.started and (
                    not asked or getattr(state.decisions.get(call.id), "decision", None) == "approve"):
                out.append(ToolStarted(call_id=call.id, name=call.name))
            out += [ToolCompleted(call_id=call.id, name=call.name, success=True, content="ok"),
                    ToolCallRejected(call_id=call.id, name=call.name, reason="denied", content="no")]
    return out


def _grow(journal, conversation_id: str, choices: list[int]) -> None:
    conv = Conversation.open(journal, conversation_id)
    for choice in choices:
        options = _candidates(conv.builder)
        if not options:
            return
        conv.append(options[choice % len(options)])


#: A history: the root's steps, then forks, each (which earlier conversation, where, its steps).
_HISTORIES = st.tuples(
    st.lists(st.integers(0, 50), max_size=25),
    st.lists(st.tuples(st.integers(0, 50), st.integers(0, 10**6), st.lists(st.integers(0, 50), max_size=6)),
             max_size=5))


def _record(journal, history) -> list[str]:
    root_steps, forks = history
    root = f"r{uuid.uuid4().hex[:10]}"
    Conversation.start(journal, ConversationStarted(conversation_id=root, provider="p", model="m"))
    _grow(journal, root, root_steps)
    made = [root]
    for which, where, steps in forks:
        parent = made[which % len(made)]
        at = 1 + where % journal.last_seq(parent)
        child = fork(journal, parent, at)
        _grow(journal, child, steps)
        made.append(child)
    return made


def _check(journal, target: str, history) -> None:
    made = _record(journal, history)
    conn = connect_readonly(target)
    try:
        for cid in made:
            [(status,)] = conn.execute(
                "SELECT status FROM conversations WHERE conversation_id = ?", (cid,)).fetchall()
            assert status == load_state(journal, cid).status, cid
    finally:
        conn.close()


_SETTINGS = settings(max_examples=60, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@_SETTINGS
@given(history=_HISTORIES)
def test_the_sqlite_view_says_the_status_the_reducer_says_at_every_fork_depth(tmp_path, history):
    path = str(tmp_path / "status.db")
    with Journal(path, extensions=EXTENSIONS) as journal:
        _check(journal, path, history)


@pytest.fixture(scope="module")
def pg_url():
    return fresh_url()


@_SETTINGS
@given(history=_HISTORIES)
def test_the_postgresql_view_says_the_status_the_reducer_says_at_every_fork_depth(pg_url, history):
    with Journal.open(pg_url, extensions=EXTENSIONS) as journal:
        _check(journal, pg_url, history)


def test_a_fork_of_a_fork_at_its_start_has_its_grandparents_status(tmp_path):
    """The case the one-level view got wrong: a fork of a fork, at the fork's own start, of a
    completed conversation is completed; one of a conversation waiting for approval waits."""
    path = str(tmp_path / "j.db")
    with Journal(path, extensions=EXTENSIONS) as journal:
        root = "root"
        conv = Conversation.start(journal, ConversationStarted(conversation_id=root, provider="p", model="m"))
        conv.append(UserMessage(parts=(Text(text="hi"),)),
                    ModelRequested(turn=1, digest="d", provider="p", model="m"),
                    ModelResponded(turn=1, parts=(ToolCall(id="c1", name="t", arguments={}),)),
                    ApprovalRequested(call_id="c1", name="t", arguments_hash="a", spec_hash="s"))
        waiting = fork(journal, fork(journal, root, 5), 1)
        conv.append(ToolCompleted(call_id="c1", name="t", success=True, content="ok"),
                    ModelRequested(turn=2, digest="d", provider="p", model="m"),
                    ModelResponded(turn=2, parts=(Text(text="done"),)),
                    ConversationCompleted(final_content="done"))
        done = fork(journal, fork(journal, root, 9), 1)
        conn = connect_readonly(path)
        got = dict(conn.execute("SELECT conversation_id, status FROM conversations").fetchall())
        conn.close()
        assert got[waiting] == load_state(journal, waiting).status == "awaiting_approval"
        assert got[done] == load_state(journal, done).status == "completed"
        assert got[root] == "completed"


def test_the_ended_statuses_come_from_the_machine():
    assert ENDED_BY == {"completed": ("conversation_completed",), "failed": ("conversation_failed",),
                        "halted": ("conversation_halted", "turn_limit_reached")}
