"""Each guard of the lifecycle, accepted and refused at its boundary, through the reducer."""

from __future__ import annotations

import pytest

from turnlog.engine.errors import InvalidTransition
from turnlog.engine.model.events import (
    ConversationCompleted,
    ConversationStarted,
    ForkRef,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ToolCallRejected,
    ToolCompleted,
    ToolStarted,
    UserMessage,
)
from turnlog.engine.model.machine import Lifecycle as L
from turnlog.engine.model.messages import Text, ToolCall
from turnlog.engine.model.state import StateBuilder, fold

START = ConversationStarted(conversation_id="c", provider="p", model="m")


def req(turn: int, attempt: int = 1) -> ModelRequested:
    return ModelRequested(turn=turn, digest="d", provider="p", model="m", attempt=attempt)


def calls(*ids: str) -> ModelResponded:
    return ModelResponded(turn=1, parts=tuple(ToolCall(id=i, name="t") for i in ids))


def done(call_id: str) -> ToolCompleted:
    return ToolCompleted(call_id=call_id, name="t", success=True, content="ok")


def accepts(events, event) -> bool:
    b = StateBuilder()
    for e in events:
        b.apply(e)
    ok = b.accepts(event)
    try:
        b.apply(event)
    except InvalidTransition:
        assert not ok
        return False
    assert ok
    return True


ASKED = [START, UserMessage.of("hi"), req(1)]


def test_a_conversation_starts_fresh_or_as_a_fork_at_exactly_its_fork_point():
    fork = ForkRef(conversation_id="c", seq=2, hash="h")
    assert accepts([], START)
    assert not accepts([], ConversationStarted(conversation_id="d", provider="p", model="m",
                                               fork=fork))
    parent = [START, UserMessage.of("hi")]
    child = ConversationStarted(conversation_id="d", provider="p", model="m", fork=fork)
    assert accepts(parent, child)
    assert fold([*parent, child]).lifecycle is L.AWAITING_MODEL  # the fork keeps the state
    for wrong in (ForkRef(conversation_id="x", seq=2, hash="h"),
                  ForkRef(conversation_id="c", seq=1, hash="h"),
                  ForkRef(conversation_id="c", seq=3, hash="h")):
        assert not accepts(parent, ConversationStarted(conversation_id="d", provider="p",
                                                       model="m", fork=wrong))
    assert not accepts(parent, START)


def test_only_a_chat_continues_after_its_run_ended():
    ended = [*ASKED, ModelResponded(turn=1, parts=(Text(text="a"),)), ConversationCompleted()]
    assert accepts(ended, UserMessage.of("more"))
    pipeline = ConversationStarted(conversation_id="c", provider="p", model="m", mode="pipeline")
    assert not accepts([pipeline, *ended[1:]], UserMessage.of("more"))
    assert accepts([START], UserMessage.of("first"))


@pytest.mark.parametrize(("turn", "ok"), [(1, True), (0, False), (2, False)])
def test_a_request_asks_for_exactly_the_next_turn(turn, ok):
    assert accepts([START, UserMessage.of("hi")], req(turn)) is ok


@pytest.mark.parametrize(("turn", "ok"), [(1, True), (0, False), (2, False)])
def test_a_response_or_failure_answers_exactly_the_requested_turn(turn, ok):
    assert accepts(ASKED, ModelResponded(turn=turn, parts=(Text(text="a"),))) is ok
    assert accepts(ASKED, calls("a").__class__(turn=turn, parts=calls("a").parts)) is ok
    assert accepts(ASKED, ModelFailed(turn=turn, error_type="E", message="x")) is ok


@pytest.mark.parametrize(("attempt", "after_failure", "ok"), [
    (1, False, True), (2, False, False), (1, True, True), (2, True, True), (3, True, False),
    (0, True, False)])
def test_a_retry_counts_its_attempt_on_by_one_and_only_after_a_failure(attempt, after_failure, ok):
    history = [*ASKED, ModelFailed(turn=1, error_type="E", message="x")] if after_failure else [
        START, UserMessage.of("hi")]
    assert accepts(history, req(1, attempt)) is ok
    second = [*history, req(1, 2), ModelFailed(turn=1, error_type="E", message="x")]
    if after_failure:
        assert accepts(second, req(1, 3)) and not accepts(second, req(1, 2))


def test_a_new_turn_starts_at_attempt_1_even_after_a_turn_that_succeeded():
    answered = [*ASKED, calls("a"), done("a")]
    assert fold(answered).attempt == 1 and fold(answered).failure is None
    assert accepts(answered, req(2)) and not accepts(answered, req(2, 2))
    retried = [*ASKED, ModelFailed(turn=1, error_type="E", message="x"), req(1, 2), calls("a"),
               done("a")]
    assert fold(retried).attempt == 2
    assert accepts(retried, req(2)) and not accepts(retried, req(2, 3))


def test_only_a_recorded_response_may_come_without_a_request():
    waiting = [START, UserMessage.of("hi")]
    for source, ok in (("imported", True), ("runner", True), ("provider", False)):
        answer = ModelResponded(turn=1, parts=(Text(text="a"),), source=source)
        assert accepts(waiting, answer) is ok
        with_calls = ModelResponded(turn=1, parts=calls("a").parts, source=source)
        assert accepts(waiting, with_calls) is ok
        assert accepts(waiting, ModelResponded(turn=2, parts=(Text(text="a"),),
                                               source=source)) is False
    assert fold([*waiting, ModelResponded(turn=1, parts=calls("a").parts,
                                          source="imported")]).lifecycle is L.AWAITING_TOOLS
    assert fold([*waiting, ModelResponded(turn=1, parts=(Text(text="a"),),
                                          source="imported")]).lifecycle is L.ANSWERED


def test_tool_calls_lead_to_their_answers_and_text_to_the_end():
    assert fold([*ASKED, calls("a")]).lifecycle is L.AWAITING_TOOLS
    assert fold([*ASKED, ModelResponded(turn=1, parts=(Text(text="a"),))]).lifecycle is L.ANSWERED


@pytest.mark.parametrize(("ids", "ok"), [(("a",), True), (("a", "b"), True), (("a", "a"), False),
                                         (("a", "b", "a"), False), (("a", "b", "c"), True)])
def test_the_calls_of_one_response_have_distinct_ids(ids, ok):
    assert accepts(ASKED, calls(*ids)) is ok
    imported = ModelResponded(turn=1, parts=calls(*ids).parts, source="imported")
    assert accepts([START, UserMessage.of("hi")], imported) is ok


def test_each_pending_call_is_started_once_and_answered_once_the_last_one_ending_the_batch():
    two = [*ASKED, calls("a", "b")]
    assert not accepts(two, done("x"))
    assert not accepts(two, ToolStarted(call_id="x", name="t"))
    assert accepts(two, ToolStarted(call_id="a", name="t"))
    assert not accepts([*two, ToolStarted(call_id="a", name="t")], ToolStarted(call_id="a", name="t"))
    assert fold([*two, done("a")]).lifecycle is L.AWAITING_TOOLS
    assert fold([*two, done("a"), done("b")]).lifecycle is L.AWAITING_MODEL
    assert not accepts([*two, done("a")], done("a"))
    refuse = ToolCallRejected(call_id="b", name="t", reason="duplicate", content="no")
    assert fold([*two, refuse]).lifecycle is L.AWAITING_TOOLS
    assert fold([*two, done("a"), refuse]).lifecycle is L.AWAITING_MODEL
    assert not accepts([*two, refuse], refuse)
    assert fold([*two, refuse]).refusals == 1
    answer = fold([*two, refuse]).messages[-1].parts[0]
    assert answer.is_error and answer.call_id == "b" and answer.content == "no"
    assert fold([*two, refuse]).tool_execution_results[0].rejected == "duplicate"
    other = ToolCallRejected(call_id="b", name="t", reason="unknown", content="no")
    assert fold([*two, other]).refusals == 0


def test_approval_is_asked_once_for_a_pending_call_that_has_not_started():
    from turnlog.engine.model.events import ApprovalRequested

    def ask(call_id: str) -> ApprovalRequested:
        return ApprovalRequested(call_id=call_id, name="t", arguments_hash="a", spec_hash="s")

    batch = [*ASKED, calls("a", "b")]
    assert accepts(batch, ask("a"))
    assert not accepts([*batch, ask("a")], ask("a"))  # asked already
    assert not accepts(batch, ask("x"))  # no such pending call
    assert not accepts([*batch, ToolStarted(call_id="b", name="t")], ask("b"))  # started
    assert not accepts([*batch, done("a")], ask("a"))  # answered: no longer pending
    assert accepts([*batch, ask("a")], ask("b"))  # another call of the batch may ask too


def _ask(call_id: str):
    from turnlog.engine.model.events import ApprovalRequested

    return ApprovalRequested(call_id=call_id, name="t", arguments_hash="a", spec_hash="s")


def _decide(call_id: str, decision: str = "approve"):
    from turnlog.engine.model.events import ApprovalDecided

    return ApprovalDecided(call_id=call_id, decision=decision, approver="ann",
                           decided_at="2026-01-01T00:00:00Z", arguments_hash="a")


def test_a_call_that_asked_for_approval_starts_only_once_approved():
    batch = [*ASKED, calls("a", "b"), _ask("a")]
    assert not accepts(batch, ToolStarted(call_id="a", name="t"))  # undecided
    assert not accepts([*batch, _decide("a", "deny")], ToolStarted(call_id="a", name="t"))
    assert accepts([*batch, _decide("a")], ToolStarted(call_id="a", name="t"))
    assert accepts(batch, ToolStarted(call_id="b", name="t"))  # b never asked


def test_a_decision_answers_an_asked_undecided_pending_call():
    batch = [*ASKED, calls("a", "b"), _ask("a")]
    assert accepts(batch, _decide("a")) and accepts(batch, _decide("a", "deny"))
    assert not accepts([*batch, _decide("a")], _decide("a"))  # decided already
    assert not accepts(batch, _decide("b"))  # pending, but it never asked
    assert not accepts(batch, _decide("x"))  # no such call
    # answered without a decision (a resume recording an interrupted call): not pending
    assert not accepts([*batch, done("a")], _decide("a"))
    # another call's decision is its own
    assert accepts([*ASKED, calls("a", "b"), _ask("a"), _ask("b"), _decide("a")], _decide("b"))


def test_a_refused_call_goes_back_to_the_model_as_an_error_result():
    refused = ToolCallRejected(call_id="a", name="t", reason="duplicate",
                               content="already called")
    state = fold([*ASKED, calls("a"), refused])
    (result,) = state.messages[-1].parts
    assert (result.call_id, result.content, result.is_error) == ("a", "already called", True)
    assert state.refusals == 1
