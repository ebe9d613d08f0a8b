"""Every page of ``turnlog view`` through Starlette's test client: content, filters, errors,
security headers, and a journal left byte-identical."""

from __future__ import annotations

import json
from html import unescape
import re
import sqlite3
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from turnlog.engine.demo import demo_tools
from turnlog.engine.loop import Loop
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.engine.audit.views import EXTENSIONS
from turnlog.journal import Journal
from turnlog.replay.view import create_app
from turnlog.replay.view.render import CSP, href

from .conftest import digest


@pytest.fixture
def client(db: Path) -> TestClient:
    return TestClient(create_app(str(db), poll=0.02, live_for=0.5),
                      base_url="http://127.0.0.1")


def listed(html: str) -> list[str]:
    """The conversation ids of a list page, in order."""
    return [unescape(m) for m in re.findall(r'<a class="cid" href="[^"]*">([^<]*)</a>', html)]


def recorded_tokens(db: Path, conversation_id: str) -> int:
    """Input plus output tokens of a conversation's model responses, summed from its events
    (the demo's figure varies with the clock: ``get_current_time``'s answer is in the prompt)."""
    with Journal(db) as journal:
        usages = [json.loads(e.payload).get("usage") or {}
                  for e in journal.read(conversation_id) if e.type == "model_responded"]
    return sum(u.get("input_tokens", 0) + u.get("output_tokens", 0) for u in usages)


def test_the_list_shows_every_conversation_with_its_columns(client, db):
    tokens = recorded_tokens(db, "demo")
    assert tokens > 0
    r = client.get("/")
    assert r.status_code == 200
    assert set(listed(r.text)) >= {"demo", "demo-fork", "demo-swap"}
    assert "4 conversations" in r.text
    row = r.text.split('id=demo">demo</a>', 1)[1].split("</tr>", 1)[0]
    for cell in ("completed", ">5<", "add, get_current_time, get_weather", f"{tokens:,}",
                 'data-chain="demo"'):  # the chain verified after the page is shown
        assert cell in row, cell
    assert client.get("/chains?id=demo").json()["demo"]["ok"] is True
    row = client.get("/").text.split('id=demo">demo</a>', 1)[1].split("</tr>", 1)[0]
    assert "verified ✓" in row  # then shown at once while its head stays


@pytest.mark.parametrize(("query", "expected"), [
    ("status=active", {"fork"}),
    ("status=completed&model=scripted-demo", {"demo"}),
    ("model=other-model", {"swap"}),
    ("provider=scripted&tool=add", {"demo"}),
    ("tool=echo", {"hostile"}),
    ("q=ATLANTIS", {"demo", "swap"}),
    ("q=fork", {"fork"}),
    ("since=2000-01-01&until=2999-12-31", {"demo", "fork", "swap", "hostile"}),
    ("until=2000-01-01", set()),
])
def test_filters_narrow_the_list(client, ids, query, expected):
    by_id = {v: k for k, v in ids.items()}
    r = client.get("/?" + query)
    assert r.status_code == 200
    assert {by_id.get(c, c) for c in listed(r.text)} == expected
    if not expected:
        assert "no conversations match these filters" in r.text


def test_sorting_and_pagination(client):
    first = client.get("/?sort=id&order=asc&per_page=2")
    assert listed(first.text) == ["demo", "demo-fork"]
    assert "page 1 of 2" in first.text and 'rel="next"' in first.text
    second = client.get("/?sort=id&order=asc&per_page=2&page=2")
    assert listed(second.text)[0] == "demo-swap" and 'rel="prev"' in second.text
    assert listed(client.get("/?sort=tokens&order=desc").text)[0] == "demo"


@pytest.mark.parametrize("url", ["/?status=bogus", "/?since=yesterday-ish", "/?page=abc",
                                 "/?sort=colour", "/?page=0", "/audit?status=bogus"])
def test_bad_filters_are_400_pages_saying_what_was_wrong(client, url):
    r = client.get(url)
    assert r.status_code == 400
    assert 'id="error-message"' in r.text


@pytest.mark.parametrize("url", ["/conversation?id=nope", "/conversation", "/diff?a=demo&b=nope",
                                 "/report?id=nope", "/nowhere"])
def test_unknown_ids_and_pages_are_404(client, url):
    r = client.get(url)
    assert r.status_code == 404 and "Not found" in r.text


def test_a_timeline_page_past_the_end_is_a_400_naming_the_last_page(client):
    r = client.get("/conversation?id=demo&page=9")
    assert r.status_code == 400 and "last page (1)" in r.text


def test_a_conversation_shows_its_timeline_chain_forks_and_replays(client):
    r = client.get("/conversation?id=demo")
    assert r.status_code == 200
    text = r.text
    for needle in ("verified ✓", "What&#39;s the weather in Paris", "get_weather",
                   "&#34;city&#34;: &#34;Paris&#34;", "tool failed", "no forecast for",
                   "refused: duplicate", "stop: tool_use", "tokens in 359", "cost 0",
                   'class="bar"', "completed"):
        assert needle in text, needle
    assert 'href="/conversation?id=demo-fork"' in text
    assert 'href="/diff?a=demo&amp;b=demo-fork"' in text
    assert 'href="/conversation?id=demo-swap"' in text and "replayed as" in text
    assert "same ✓" in text  # the recorded deterministic replay run


def test_a_fork_links_back_to_its_parent_and_a_replay_to_its_source(client):
    fork = client.get("/conversation?id=demo-fork").text
    assert "Fork of" in fork and 'href="/conversation?id=demo"' in fork and "at seq 6" in fork
    assert 'href="/diff?a=demo&amp;b=demo-fork"' in fork
    swap = client.get("/conversation?id=demo-swap").text
    assert "Replay of" in swap and 'href="/diff?a=demo&amp;b=demo-swap"' in swap


def test_the_diff_page_shows_both_conversations_turn_by_turn(client):
    r = client.get("/diff?a=demo&b=demo-swap")
    assert r.status_code == 200
    assert 'id="verdict">DIFFERENT' in r.text
    assert "turn 1" in r.text and "different: " in r.text
    assert "scripted/other-model" in r.text and "Checking Paris only." in r.text
    assert 'id="verdict">SAME' in client.get("/diff?a=demo&b=demo").text


def test_the_audit_dashboard_has_the_figures_and_svg_charts(client):
    r = client.get("/audit")
    assert r.status_code == 200
    assert "4 conversations" in r.text
    assert r.text.count('<svg class="chart"') >= 5
    assert "Tool failure rate" in r.text and "Duplicate calls refused" in r.text
    assert ">get_weather<" in r.text
    narrowed = client.get("/audit?tool=echo")
    assert "1 conversations" in narrowed.text


def test_the_report_route_downloads_the_self_contained_file(client):
    r = client.get("/report?id=demo")
    assert r.status_code == 200
    assert r.headers["content-disposition"] == 'attachment; filename="turnlog-demo.html"'
    assert "<style>" in r.text and "no forecast for" in r.text


def test_a_tampered_event_shows_as_broken_at_its_seq(db):
    conn = sqlite3.connect(db)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                "AND tbl_name = 'events'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("UPDATE events SET payload = replace(payload, 'Paris', 'Rome') "
                 "WHERE stream_id = 'demo' AND seq = 4")
    conn.commit()
    conn.close()
    client = TestClient(create_app(str(db)), base_url="http://127.0.0.1")
    assert "broken at seq 4" in client.get("/conversation?id=demo").text
    state = client.get("/chains?id=demo").json()["demo"]  # what the list fetches once shown
    assert state["ok"] is False and state["seq"] == 4 and state["conversation_id"] == "demo"
    row = client.get("/").text.split('id=demo">demo</a>', 1)[1].split("</tr>", 1)[0]
    assert "broken at seq 4" in row


def test_every_response_carries_the_security_headers(client):
    for url in ("/", "/conversation?id=demo", "/diff?a=demo&b=demo-fork", "/audit",
                "/static/app.css", "/nowhere", "/?status=bogus"):
        r = client.get(url)
        assert r.headers["content-security-policy"] == CSP, url
        assert r.headers["x-content-type-options"] == "nosniff"
    assert "'unsafe-inline'" not in CSP and "http" not in CSP


def test_assets_ship_in_the_package_and_pages_reference_nothing_remote(client):
    for url in ("/", "/conversation?id=demo", "/audit"):
        html = client.get(url).text
        assert not re.search(r'(src|href)="(https?:)?//', html), url
    assert client.get("/static/app.js").status_code == 200


def test_live_events_announce_appends_by_another_process(db, client):
    after = json.loads(re.search(r'id="live-config">([^<]*)<', client.get("/").text).group(1))
    assert after["conversation"] is None
    with Journal(db, extensions=EXTENSIONS) as journal:
        Loop(journal, ScriptedProvider([{"text": "hi"}]), demo_tools()).start(
            "hello", conversation_id="new-one")
    with client.stream("GET", f"/live?after={after['after']}") as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        body = "".join(r.iter_text())
    assert "event: append" in body
    position = json.loads(body.split("data: ", 1)[1].split("\n", 1)[0])["position"]
    assert position > after["after"]
    assert "new-one" in client.get("/").text
    quiet = client.get(f"/live?after={position}&c=demo").text
    assert "event: append" not in quiet


def test_a_browsing_session_leaves_the_journal_byte_identical(db, client, ids):
    before = digest(db)
    for url in ("/", "/?q=paris", "/?tool=add&sort=turns", "/conversation?id=demo",
                href("/conversation", id=ids["hostile"]), "/conversation?id=demo-fork",
                "/diff?a=demo&b=demo-swap", "/audit", "/audit?since=7d", "/report?id=demo",
                "/live?after=0", "/conversation?id=nope"):
        client.get(url)
    assert digest(db) == before
