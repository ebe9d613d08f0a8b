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

NOISE = "The requested operation has been finished as requested"


@pytest.fixture
def client(db: Path) -> TestClient:
    return TestClient(create_app(str(db), poll=0.02, live_for=0.5))


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
    page = TestClient(create_app(str(db))).get("/conversation?id=w").text
    assert "needs approval" in page and "sums &lt;need&gt; a check" in page
