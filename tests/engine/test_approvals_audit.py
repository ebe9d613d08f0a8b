"""Approvals in the audit: the ``approvals`` view, ``awaiting_approval`` in the conversations
view, and ``turnlog audit``'s figures (who decided what, how fast) — on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from html import unescape
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from turnlog.engine.tools.approvals import decide
from turnlog.engine.audit import AuditQuery, audit
from turnlog.engine.cli import cli
from turnlog.engine.model.conversation import load_state
from turnlog.engine.loop import Loop
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.engine.tools import tool
from turnlog.engine.audit.views import connect_readonly
from turnlog.journal import Journal

runner = CliRunner()


@tool(needs_approval=lambda a: a["amount"] > 100)
def pay(amount: int) -> dict:
    """Pay an amount."""
    return {"paid": amount}


@tool(effect="read_only", needs_approval=True)
def peek(what: str) -> str:
    """Look at something (asks every time)."""
    return what


def _later(seconds: float):
    return lambda: datetime.now(UTC) + timedelta(seconds=seconds)


def record(path: str) -> dict[str, str]:
    """Three conversations: one approved (edited) and denied, one pending, one never asking."""
    with Journal(path) as journal:
        script = [{"tool_calls": [{"name": "pay", "arguments": {"amount": 500}},
                                  {"name": "pay", "arguments": {"amount": 900}},
                                  {"name": "peek", "arguments": {"what": "balance"}}]},
                  {"text": "done"}]
        loop = Loop(journal, ScriptedProvider(script), [pay, peek])
        first = loop.start("pay twice", conversation_id="decided")
        assert first.awaiting_approval == ("call_1_1", "call_1_2", "call_1_3")
        decide(journal, "decided", "call_1_1", True, "ann", arguments={"amount": 400},
               clock=_later(30))
        decide(journal, "decided", "call_1_2", False, "bob", reason="too much", clock=_later(90))
        decide(journal, "decided", "call_1_3", True, "ann", clock=_later(60))
        assert loop.resume("decided").completed

        waiting = Loop(journal, ScriptedProvider(script[:1] + script[1:]), [pay, peek])
        held = waiting.start("pay later", conversation_id="pending")
        decide(journal, "pending", "call_1_3", True, "carol", clock=_later(10))
        assert held.status == "awaiting_approval"
        assert load_state(journal, "pending").status == "awaiting_approval"

        plain = Loop(journal, ScriptedProvider([{"text": "hi"}]), [pay])
        assert plain.start("hello", conversation_id="plain").completed
    return {"decided": "completed", "pending": "awaiting_approval", "plain": "completed"}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("approvals") / "j.db")
    return path, record(path)


def test_the_conversations_view_says_awaiting_approval_as_the_state_does(recorded):
    path, statuses = recorded
    conn = connect_readonly(path)
    try:
        found = dict(conn.execute("SELECT conversation_id, status FROM conversations"))
    finally:
        conn.close()
    assert found == statuses
    listed = json.loads(runner.invoke(cli, ["ls", "--db", path, "--json",
                                            "--status", "awaiting_approval"]).output)
    assert [c["conversation_id"] for c in listed] == ["pending"]


def test_the_approvals_view_has_one_row_per_request_with_its_decision(recorded):
    path, _ = recorded
    conn = connect_readonly(path)
    try:
        rows = conn.execute("SELECT conversation_id, call_id, tool, decision, approver, reason, "
                            "edited, decided_seq IS NOT NULL FROM approvals "
                            "ORDER BY conversation_id, call_id").fetchall()
    finally:
        conn.close()
    assert [tuple(r) for r in rows] == [
        ("decided", "call_1_1", "pay", "approve", "ann", None, 1, 1),
        ("decided", "call_1_2", "pay", "deny", "bob", "too much", 0, 1),
        ("decided", "call_1_3", "peek", "approve", "ann", None, 0, 1),
        ("pending", "call_1_1", "pay", None, None, None, None, 0),
        ("pending", "call_1_2", "pay", None, None, None, None, 0),
        ("pending", "call_1_3", "peek", "approve", "carol", None, 0, 1),
    ]


def test_audit_counts_decisions_by_approver_and_tool_and_times_them(recorded):
    path, _ = recorded
    conn = connect_readonly(path)
    try:
        report = audit(conn)
        only_peek = audit(conn, AuditQuery(tool="peek"))
        only_pending = audit(conn, AuditQuery(status="awaiting_approval"))
    finally:
        conn.close()
    a = report["approvals"]
    assert {k: a[k] for k in ("requested", "approved", "denied", "pending", "edited")} == {
        "requested": 6, "approved": 3, "denied": 1, "pending": 2, "edited": 1}
    assert a["by_approver"] == {"ann": {"approved": 2, "denied": 0},
                                "bob": {"approved": 0, "denied": 1},
                                "carol": {"approved": 1, "denied": 0}}
    assert a["by_tool"] == {"pay": {"requested": 4, "approved": 1, "denied": 1, "pending": 2},
                            "peek": {"requested": 2, "approved": 2, "denied": 0, "pending": 0}}
    # decisions 10, 30, 60 and 90 s after their requests (plus the test's own run time)
    assert 30 <= a["median_seconds_to_decision"] < 45 + 30
    assert 90 <= a["p95_seconds_to_decision"] < 90 + 30
    assert report["by_status"]["awaiting_approval"] == 1
    assert only_peek["approvals"]["requested"] == 2
    assert only_pending["approvals"]["requested"] == 3


def test_the_human_audit_and_show_tell_who_approved_and_what_waits(recorded):
    path, _ = recorded
    out = runner.invoke(cli, ["audit", "--db", path]).output
    assert "approvals: 6 asked   approved 3   denied 1   pending 2   edited 1" in out
    assert "by approver: ann approved 2 denied 0, bob approved 0 denied 1" in out
    shown = runner.invoke(cli, ["show", "pending", "--db", path]).output
    assert "waiting for approval: turnlog approve pending --all --yes --as NAME" in shown


def test_approvals_are_audited_alike_on_postgresql(recorded):
    from tests.pgcluster import fresh_url

    path, _ = recorded
    url = fresh_url()
    assert runner.invoke(cli, ["copy", path, url]).exit_code == 0
    on_sqlite = json.loads(runner.invoke(cli, ["audit", "--db", path, "--json"]).output)
    on_postgres = json.loads(runner.invoke(cli, ["audit", "--db", url, "--json"]).output)
    for report in (on_sqlite, on_postgres):
        report.pop("generated_at", None)
        report.pop("source")  # projections on PostgreSQL (copy installs them), events here
    assert on_postgres["approvals"] == on_sqlite["approvals"]
    assert on_postgres == on_sqlite
    listed = json.loads(runner.invoke(cli, ["ls", "--db", url, "--json"]).output)
    assert {c["conversation_id"]: c["status"] for c in listed}["pending"] == "awaiting_approval"


def test_the_viewer_shows_each_calls_approval_and_the_audit_page_the_figures(recorded, tmp_path):
    pytest.importorskip("starlette")  # the 'view' extra: installed by the test extra
    from starlette.testclient import TestClient

    from turnlog.replay.view import create_app

    path, _ = recorded
    # a decision by a hostile name renders as text
    copy = tmp_path / "copy.db"
    copy.write_bytes(Path(path).read_bytes())
    with Journal(str(copy)) as journal:
        decide(journal, "pending", "call_1_1", False, "<img src=x onerror=alert(1)>",
               reason="<script>alert(2)</script>")
    client = TestClient(create_app(str(copy), poll=0.02, live_for=0.5),
                        base_url="http://127.0.0.1")
    decided = client.get("/conversation", params={"id": "decided"}).text
    assert "approved by ann" in decided and "denied by bob" in decided
    assert "too much" in decided and "edited arguments:" in decided
    assert '"amount": 400' in unescape(decided)  # the approver's edit
    pending = client.get("/conversation", params={"id": "pending"}).text
    assert "waiting for approval" in pending
    assert "<img src=x" not in pending and "&lt;img src=x onerror=alert(1)&gt;" in pending
    assert "<script>alert(2)" not in pending
    dashboard = client.get("/audit").text
    assert "<h2>Approvals</h2>" in dashboard and "6 asked · approved 3 · denied 2 · pending 1" in dashboard
    assert "&lt;img src=x onerror=alert(1)&gt;" in dashboard


def test_a_call_answered_without_a_decision_no_longer_waits_in_the_view_or_the_state(tmp_path):
    from turnlog.engine.model.conversation import Conversation
    from turnlog.engine.model.events import (ApprovalRequested, ConversationStarted, ModelRequested,
                               ModelResponded, ToolCompleted, UserMessage)
    from turnlog.engine.model.messages import ToolCall

    db = str(tmp_path / "j.db")
    asked = ApprovalRequested(call_id="a", name="t", arguments_hash="h", spec_hash="s")
    with Journal(db) as journal:
        Conversation.start(journal, ConversationStarted(conversation_id="c", provider="p",
                                                        model="m"), rest=[
            UserMessage.of("hi"), ModelRequested(turn=1, digest="d", provider="p", model="m"),
            ModelResponded(turn=1, parts=(ToolCall(id="a", name="t"), ToolCall(id="b", name="t"))),
            asked, ToolCompleted(call_id="a", name="t", success=False,
                                 content="outcome unknown: interrupted", source="interrupted")])
        assert load_state(journal, "c").status == "active"
    conn = connect_readonly(db)
    try:
        assert conn.execute("SELECT status FROM conversations").fetchone()[0] == "active"
        assert tuple(conn.execute("SELECT call_id, decision FROM approvals").fetchone()) == (
            "a", None)
    finally:
        conn.close()
