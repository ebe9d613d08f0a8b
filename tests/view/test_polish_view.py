"""What people read in the viewer (issue 25's polish): tool results without the default
success sentence, approval reasons, lineage and chart labels that say what they mean."""

from __future__ import annotations

from html import unescape
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from turnlog.engine.demo import demo_tools
from turnlog.engine.loop import Loop
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.journal import Journal
from turnlog.replay.view import create_app

from ..cli.conftest import turnlog as turnlog_cli

NOISE = "The requested operation has been finished as requested"

#: the viewer answers only its own host names (a TestClient says "testserver")
LOOPBACK = "http://127.0.0.1"


@pytest.fixture
def client(db: Path) -> TestClient:
    return TestClient(create_app(str(db), poll=0.02, live_for=0.5), base_url=LOOPBACK)


def test_tool_results_in_the_timeline_and_the_diff_leave_out_the_success_sentence(client, db):
    with Journal(db) as journal:  # the journal keeps the exact text the model read
        assert any(NOISE in e.payload for e in journal.read("demo") if e.type == "tool_completed")
    page = unescape(client.get("/conversation?id=demo").text)
    assert NOISE not in page and '"sum": 5.0' in page
    diff = unescape(client.get("/diff?a=demo&b=demo-fork").text)
    assert NOISE not in diff and "completed successfully" not in diff


def test_the_viewer_shows_why_a_call_waits_for_approval(tmp_path):
    db = tmp_path / "a.db"
    script = [{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}, {"text": "3"}]
    with Journal(db) as journal:
        loop = Loop(journal, ScriptedProvider(script), demo_tools(), approve=["add"],
                    approve_reason="sums <need> a check")
        loop.start("add", conversation_id="w")
    page = TestClient(create_app(str(db)), base_url=LOOPBACK).get("/conversation?id=w").text
    assert "needs approval" in page and "sums &lt;need&gt; a check" in page


@pytest.fixture
def odd(tmp_path: Path) -> Path:
    """A journal with what the viewer used to label badly: only zero-cost (scripted) calls,
    an imported conversation with no model, and a fork whose parent was edited."""
    import json
    import sqlite3

    db = tmp_path / "odd.db"
    transcript = tmp_path / "t.json"
    transcript.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                                   {"role": "assistant", "content": "hello"}]}))
    with Journal(db) as journal:
        Loop(journal, ScriptedProvider([{"text": "fine"}]), demo_tools()).start(
            "hi", conversation_id="parent")
    assert turnlog_cli("import", transcript, "--id", "imp", "--db", db).returncode == 0
    assert turnlog_cli("fork", "parent", "--at", "3", "--id", "child", "--db", db).returncode == 0
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER IF EXISTS events_refuse_update")
    conn.execute("UPDATE events SET payload = replace(payload, 'hi', 'HI') "
                 "WHERE stream_id = 'parent' AND seq = 2")
    conn.commit()
    conn.close()
    return db


def test_a_fork_of_an_edited_conversation_names_the_broken_ancestor(odd):
    client = TestClient(create_app(str(odd)), base_url=LOOPBACK)
    state = client.get("/chains?id=child").json()["child"]  # what the list fetches once shown
    assert (state["ok"], state["seq"], state["conversation_id"]) == (False, 2, "parent")
    row = client.get("/").text.split('id=child">child</a>', 1)[1].split("</tr>", 1)[0]
    assert "broken at seq 2 of ancestor parent" in unescape(row)
    page = unescape(client.get("/conversation?id=child").text)
    assert "broken at seq 2 of ancestor parent" in page


def test_the_audit_page_separates_its_figures_and_labels_zero_charts_and_unknown_models(odd):
    page = unescape(TestClient(create_app(str(odd)), base_url=LOOPBACK).get("/audit").text)
    figures = page.split('id="figures">', 1)[1].split("</p>", 1)[0]
    assert "· estimated cost" in " ".join(figures.split())
    assert not any(c.isdigit() and d == "·" for c, d in zip(figures, figures[1:]))
    cost = page.split("<h2>Cost per day", 1)[1].split("</svg>", 1)[0]
    assert "max 1 " not in cost and "all 0 USD" in cost
    assert "imported (model not recorded)" in page and "imported/<" not in page
    listing = unescape(TestClient(create_app(str(odd)), base_url=LOOPBACK).get("/").text)
    assert "imported (model not recorded)" in listing and "imported/<" not in listing
