"""Human approval of tool calls: asked, decided (from any process), then run once or denied."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnlog.engine.tools.approvals import (
    AlreadyDecidedError,
    ApprovalMismatchError,
    NotAwaitingApprovalError,
    UnknownApprovalToolError,
    UnknownCallError,
    arguments_hash,
    decide,
)
from turnlog.engine.model.events import ToolStarted
from turnlog.engine.loop import Loop
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.engine.tools import tool
from turnlog.journal import Journal


def make_pay(ran):
    @tool(needs_approval=lambda a: a["amount"] > 100)
    def pay(amount: int) -> dict:
        """Pay an amount."""
        ran.append(amount)
        return {"paid": amount}

    return pay


def script(*amounts):
    return [{"tool_calls": [{"name": "pay", "arguments": {"amount": a}} for a in amounts]},
            {"text": "done"}]


def paused(journal, *amounts, ran=None):
    ran = [] if ran is None else ran
    loop = Loop(journal, ScriptedProvider(script(*amounts)), [make_pay(ran)])
    return loop, loop.start("pay", conversation_id="c1"), ran


def rows(journal, kind):
    return [json.loads(e.payload) for e in journal.read("c1") if e.type == kind]


def snapshot(journal):
    return [(e.seq, e.type, e.payload) for e in journal.read("c1")]


def test_pause_then_approve_runs_the_call_once(journal):
    loop, result, ran = paused(journal, 500)
    assert result.status == "awaiting_approval" and result.awaiting_approval == ("call_1_1",)
    assert ran == [] and len(rows(journal, "approval_requested")) == 1
    loop.decide("c1", "call_1_1", True, "ann")
    assert loop.resume("c1").status == "completed"
    assert ran == [500]
    assert loop.resume("c1").status == "completed" and ran == [500]


def test_a_call_under_the_threshold_runs_without_approval(journal):
    _, result, ran = paused(journal, 5)
    assert result.status == "completed" and ran == [5]
    assert rows(journal, "approval_requested") == []


def test_deny_answers_the_model(journal):
    loop, _, ran = paused(journal, 500)
    loop.decide("c1", "call_1_1", False, "bob", reason="too much")
    result = loop.resume("c1")
    assert result.status == "completed" and ran == []
    (rejected,) = rows(journal, "tool_call_rejected")
    assert rejected["reason"] == "denied" and rejected["content"] == "denied by bob: too much"


def test_edited_arguments_run_as_edited_and_are_recorded(journal):
    loop, _, ran = paused(journal, 500)
    decision = loop.decide("c1", "call_1_1", True, "ann", arguments={"amount": 200})
    assert decision.arguments_hash == arguments_hash("pay", {"amount": 200})
    loop.resume("c1")
    assert ran == [200]
    assert rows(journal, "tool_started")[0]["arguments"] == {"amount": 200}
    assert rows(journal, "approval_decided")[0]["arguments"] == {"amount": 200}


def test_every_call_of_a_response_asks_in_one_pause_and_waits_for_all(journal):
    loop, result, ran = paused(journal, 500, 700)
    assert result.awaiting_approval == ("call_1_1", "call_1_2")
    loop.decide("c1", "call_1_1", True, "ann")
    result = loop.resume("c1")
    assert result.status == "awaiting_approval" and result.awaiting_approval == ("call_1_2",)
    assert ran == [500]
    loop.decide("c1", "call_1_2", False, "ann")
    assert loop.resume("c1").status == "completed" and ran == [500]


@pytest.mark.parametrize("call_id, approve, error", [
    ("call_9_9", True, UnknownCallError),
    ("call_1_1", True, AlreadyDecidedError),
    ("call_1_1", False, AlreadyDecidedError),
])
def test_refused_decisions_leave_the_journal_untouched(journal, call_id, approve, error):
    loop, _, _ = paused(journal, 500)
    loop.decide("c1", "call_1_1", True, "ann")
    before = snapshot(journal)
    with pytest.raises(error, match="call"):
        loop.decide("c1", call_id, approve, "eve")
    assert snapshot(journal) == before


def test_a_call_not_awaiting_approval_is_refused(journal):
    loop, _, _ = paused(journal, 5)
    before = snapshot(journal)
    with pytest.raises(NotAwaitingApprovalError, match="does not await approval"):
        loop.decide("c1", "call_1_1", True, "ann")
    assert snapshot(journal) == before


def test_a_changed_call_is_refused(journal):
    loop, _, _ = paused(journal, 500)
    conv_row = rows(journal, "approval_requested")[0]
    from turnlog.engine.model.conversation import Conversation

    conv = Conversation.open(journal, "c1")
    conv.builder.approvals["call_1_1"] = conv.builder.approvals["call_1_1"].__class__(
        call_id="call_1_1", name="pay", arguments_hash="0" * 64, spec_hash=conv_row["spec_hash"])
    import turnlog.engine.model.conversation as conversation_module

    real_open = conversation_module.Conversation.open
    conversation_module.Conversation.open = classmethod(lambda cls, j, cid: conv)
    try:
        before = snapshot(journal)
        with pytest.raises(ApprovalMismatchError, match="no longer match"):
            decide(journal, "c1", "call_1_1", True, "ann")
        assert snapshot(journal) == before
    finally:
        conversation_module.Conversation.open = real_open


def test_crash_between_decision_and_execution_runs_once(journal):
    loop, _, ran = paused(journal, 500)
    loop.decide("c1", "call_1_1", True, "ann")
    # a resume that died after tool_started: the side-effecting call is not run again
    conv_loop = Loop(journal, ScriptedProvider(script(500)), [make_pay(ran)])
    from turnlog.engine.model.conversation import Conversation

    conv = Conversation.open(journal, "c1")
    conv.append(ToolStarted(call_id="call_1_1", name="pay", arguments={"amount": 500}))
    result = conv_loop.resume("c1")
    assert result.status == "completed" and ran == []
    assert rows(journal, "tool_completed")[0]["source"] == "interrupted"


def test_crash_after_decision_before_start_runs_exactly_once(journal):
    loop, _, ran = paused(journal, 500)
    loop.decide("c1", "call_1_1", True, "ann")
    fresh = Loop(journal, ScriptedProvider(script(500)), [make_pay(ran)])
    assert fresh.resume("c1").status == "completed" and ran == [500]
    assert fresh.resume("c1").status == "completed" and ran == [500]


def test_loop_approve_marks_a_tool_and_is_recorded(journal):
    ran = []

    @tool
    def note(text: str) -> dict:
        """Write a note."""
        ran.append(text)
        return {}

    provider = ScriptedProvider([{"tool_calls": [{"name": "note", "arguments": {"text": "x"}}]},
                                 {"text": "ok"}])
    result = Loop(journal, provider, [note], approve=["note"]).start("n", conversation_id="c1")
    assert result.status == "awaiting_approval"
    assert rows(journal, "conversation_started")[0]["approve"] == ["note"]
    # a loop without approve= still waits: the mark is recorded
    again = Loop(journal, provider, [note])
    assert again.resume("c1").status == "awaiting_approval" and ran == []


@pytest.mark.parametrize("approve", [["pay_"], ["pay", "Pay"], "pay"])
def test_an_approve_name_no_offered_tool_has_is_refused_before_anything_runs(journal, approve):
    ran = []
    with pytest.raises(UnknownApprovalToolError) as caught:
        Loop(journal, ScriptedProvider(script(5)), [make_pay(ran)], approve=approve)
    if not isinstance(approve, str):
        bad = [n for n in approve if n != "pay"]
        assert f"approve names {bad[0]!r}, which no offered tool has (did you mean 'pay'?)" \
            in str(caught.value) and "offered tools: pay" in str(caught.value)
    assert ran == [] and list(journal.read("c1")) == []


def test_approve_from_another_process_then_resume(tmp_path):
    path = tmp_path / "j.db"
    journal = Journal(str(path))
    ran = []
    loop = Loop(journal, ScriptedProvider(script(500)), [make_pay(ran)])
    loop.start("pay", conversation_id="c1")
    code = (f"import sys; from turnlog.journal import Journal; from turnlog.engine.tools.approvals import decide; "
            f"decide(Journal({str(path)!r}), 'c1', 'call_1_1', True, 'ann')")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert loop.resume("c1").status == "completed" and ran == [500]
    journal.close()


@settings(max_examples=30, deadline=None)
@given(amounts=st.lists(st.integers(0, 1000), min_size=1, max_size=3),
       choices=st.lists(st.sampled_from(["yes", "no", "edit"]), min_size=3, max_size=3),
       edits=st.lists(st.integers(101, 1000), min_size=3, max_size=3))
def test_no_executed_call_differs_from_its_approved_hash(amounts, choices, edits):
    journal = Journal(":memory:")
    ran = []
    loop = Loop(journal, ScriptedProvider(script(*amounts)), [make_pay(ran)])
    result = loop.start("pay", conversation_id="c1")
    for _ in range(len(amounts) + 1):
        if result.status != "awaiting_approval":
            break
        for i, call_id in enumerate(result.awaiting_approval):
            choice, edit = choices[i], edits[i]
            loop.decide("c1", call_id, choice != "no", "ann",
                        arguments={"amount": edit} if choice == "edit" else None)
        result = loop.resume("c1")
    assert result.status == "completed"
    decided = {d["call_id"]: d for d in rows(journal, "approval_decided")}
    for started in rows(journal, "tool_started"):
        if started["call_id"] in decided:
            d = decided[started["call_id"]]
            assert d["decision"] == "approve"
            assert arguments_hash("pay", started["arguments"]) == d["arguments_hash"]
        else:
            assert started["arguments"]["amount"] <= 100
    journal.close()


# --- deterministic replay covers approvals -----------------------------------------------

def replays(journal) -> bool:
    from turnlog.replay import replay

    result = replay(journal, "c1", collect=True)
    assert result.ok, result.divergence
    return True


@pytest.mark.parametrize("decisions", [
    [("call_1_1", True, None), ("call_1_2", True, None)],
    [("call_1_1", False, None), ("call_1_2", True, {"amount": 200})],
    [("call_1_1", True, None), ("call_1_2", False, None)],
])
def test_a_run_with_approvals_replays_deterministically(journal, decisions):
    """The replay asks where the recording asked (the tool's predicate was not recorded:
    the recording's requests are the reference) and hands the recorded decisions over."""
    loop, _, ran = paused(journal, 500, 5, 700)
    for call_id, approve, edited in decisions[:1]:
        loop.decide("c1", call_id, approve, "ann", arguments=edited)
    assert loop.resume("c1").status == "awaiting_approval"
    for call_id, approve, edited in decisions[1:]:
        loop.decide("c1", call_id.replace("1_2", "1_3"), approve, "ann", arguments=edited)
    assert loop.resume("c1").status == "completed"
    assert replays(journal)


def test_a_run_still_waiting_for_approval_replays_up_to_its_pause(journal):
    loop, result, _ = paused(journal, 500)
    assert result.status == "awaiting_approval"
    assert replays(journal)
