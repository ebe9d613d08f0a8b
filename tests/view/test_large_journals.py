"""The viewer over conversations too long to read whole: pages read only their turns, the
timeline's pages hold every event exactly once, "next" links walk them, and chains too long
to verify before a page answers are verified by ``/chain`` (tampering still shows), and the
list's chains after it is shown (``/chains``, kept per head)."""

from __future__ import annotations

import re
import sqlite3
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from turnlog.engine.audit import Reader
from turnlog.engine.audit.queries import CHAIN_INLINE
from turnlog.engine.audit.views import EXTENSIONS
from turnlog.engine.demo import demo_tools
from turnlog.engine.loop import Loop
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.journal import Journal
from turnlog.replay.view import create_app
from turnlog.replay.view.app import FLUSH

from .journal_data import clock

TURNS = 130  # with a tool call each: about 4 events a turn, past CHAIN_INLINE
LONG = "long"


@pytest.fixture(scope="module")
def long_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("long") / "long.db"
    script = {"turns": [{"text": f"Step {i}.", "tool_calls": [
        {"name": "get_weather", "arguments": {"city": f"City {i}"}}]} for i in range(TURNS)]
        + [{"text": "All done."}]}
    with Journal(path, extensions=EXTENSIONS) as journal:
        Loop(journal, ScriptedProvider(script, model="scripted-long"), demo_tools(),
             clock=clock()).start("Look up every city.", conversation_id=LONG,
                                  model="scripted-long", max_turns=TURNS + 5)
        Loop(journal, ScriptedProvider({"turns": [{"text": "hi"}]}, model="scripted-short"),
             [], clock=clock()).start("hello", conversation_id="short", model="scripted-short")
    return path


def _events(db: Path, conversation_id: str) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM events WHERE stream_id = ?",
                            (conversation_id,)).fetchone()[0]


def test_the_long_conversation_is_longer_than_a_page_verifies(long_db):
    assert _events(long_db, LONG) > CHAIN_INLINE


def _walk(reader: Reader, per_page: int) -> list[dict[str, Any]]:
    pages, page = [], 1
    while True:
        t = reader.timeline(LONG, page, per_page)
        pages.append(t)
        if not t["more"]:
            return pages
        page += 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(per_page=st.integers(min_value=1, max_value=TURNS + 10))
def test_the_pages_hold_every_entry_once_in_order_whatever_the_page_size(long_db, per_page):
    with Reader(str(long_db)) as reader:
        whole = reader.timeline(LONG, 1, 500)
        pages = _walk(reader, per_page)
    assert not whole["more"] and whole["turns"] == TURNS + 1
    walked = [e for t in pages for e in t["entries"]]
    assert walked == whole["entries"]  # every entry exactly once, in order
    seqs = [e["seq"] for e in walked]
    assert seqs == sorted(set(seqs))
    assert len(pages) == pages[0]["pages"] == -(-whole["turns"] // per_page)
    assert all(t["turns"] == whole["turns"] for t in pages)
    assert all(len([e for e in t["entries"] if e["kind"] == "turn"]) <= per_page for t in pages)
    with Reader(str(long_db)) as reader:
        streamed = list(reader.timeline_pages(LONG, per_page))
    assert [page for page, _ in streamed] == [t["entries"] for t in pages]
    assert [longest for _, longest in streamed] == [t["max_ms"] for t in pages]


def test_a_page_past_the_last_is_refused_naming_the_last(long_db):
    from turnlog.engine.errors import BadFilterError

    with Reader(str(long_db)) as reader:
        with pytest.raises(BadFilterError, match=r"page 15 is past the timeline's last page \(14\)"):
            reader.timeline(LONG, 15, 10)


class _Counting:
    """A read connection that counts the rows its queries hand back."""

    def __init__(self, conn: Any) -> None:
        self.conn, self.rows, self.queries = conn, 0, []

    def execute(self, sql: str, params: Any = ()) -> Any:
        self.queries.append(sql)
        return _CountingCursor(self, self.conn.execute(sql, params))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


class _CountingCursor:
    def __init__(self, owner: _Counting, cursor: Any) -> None:
        self.owner, self.cursor = owner, cursor

    def fetchall(self) -> list:
        rows = self.cursor.fetchall()
        self.owner.rows += len(rows)
        return rows

    def fetchone(self) -> Any:
        row = self.cursor.fetchone()
        self.owner.rows += row is not None
        return row

    def __iter__(self):
        for row in self.cursor:
            self.owner.rows += 1
            yield row


def test_a_page_reads_its_own_turns_not_the_whole_conversation(long_db):
    total = _events(long_db, LONG)
    with Reader(str(long_db)) as reader:
        counting = reader.conn = _Counting(reader.conn)
        first = reader.timeline(LONG, 1, 5)
        read_for_first = counting.rows
        info = reader.conversation(LONG)
    assert read_for_first < 100 < total  # 5 turns' events and a batch of turn starts
    assert first["more"] and len([e for e in first["entries"] if e["kind"] == "turn"]) == 5
    assert info["chain"] == {"ok": None, "deferred": True, "events": total}
    assert first["turns"] == TURNS + 1  # counted when asked, over a connection of its own


def test_the_pages_next_links_walk_every_turn(long_db):
    client = TestClient(create_app(str(long_db)), base_url="http://127.0.0.1")
    url, turns, visited = f"/conversation?id={LONG}", [], 0
    while url:
        html = client.get(url).text
        visited += 1
        head, tail = html.split(FLUSH)
        turns += [int(t) for t in re.findall(r'<li class="turn" id="turn-(\d+)">', head)]
        assert f"({TURNS + 1:,} turns)" in tail  # counted after the turns were sent
        links = re.findall(r'<a rel="next" href="([^"]+)"', head)
        url = unescape(links[0]) if links else None
        assert visited <= 10
    assert turns == list(range(1, TURNS + 2)) and visited == -(-(TURNS + 1) // 50)


def test_a_chain_too_long_for_the_page_is_verified_by_its_own_request(long_db):
    client = TestClient(create_app(str(long_db)), base_url="http://127.0.0.1")
    page = client.get(f"/conversation?id={LONG}").text
    assert f'data-chain="{LONG}"' in page and "verified ✓" not in page.split(FLUSH)[0]
    r = client.get(f"/chain?id={LONG}")
    assert r.status_code == 200 and r.json() == {"ok": True, "checked": _events(long_db, LONG)}
    assert client.get("/chain?id=nope").status_code == 404


def _row(listing: str, cid: str) -> str:
    return listing.split(f'id={cid}">{cid}</a>', 1)[1].split("</tr>", 1)[0]


def test_the_list_verifies_its_chains_after_it_is_shown_and_keeps_them_per_head(long_db,
                                                                                 tmp_path):
    db = tmp_path / "copy.db"
    db.write_bytes(long_db.read_bytes())
    client = TestClient(create_app(str(db)), base_url="http://127.0.0.1")
    listing = client.get("/").text
    for cid in (LONG, "short"):  # no chain verified before the list answers, however short
        events = _events(db, cid)
        assert (f'data-chain="{cid}" data-events="{events}" href="/chain?id={cid}">'
                f"verify {events:,} events</a>") in _row(listing, cid)
    r = client.get(f"/chains?id={LONG}&id=short")
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    assert r.json() == {LONG: {"ok": True, "checked": _events(db, LONG)},
                        "short": {"ok": True, "checked": _events(db, "short")}}
    listing = client.get("/").text  # verified once for these heads: shown at once, and
    for cid in (LONG, "short"):  # checked again after paint (an edit in place keeps heads)
        assert "verified ✓" in _row(listing, cid) and "verify " not in _row(listing, cid)
        assert (f'class="ok chain-recheck" data-chain="{cid}" data-events="{_events(db, cid)}"'
                in _row(listing, cid))
    with Journal(db, extensions=EXTENSIONS) as journal:  # a new head is verified again
        Loop(journal, ScriptedProvider({"turns": [{"text": "again"}]}, model="scripted-short"),
             [], clock=clock()).send("short", "once more")
    listing = client.get("/").text
    assert "verified ✓" in _row(listing, LONG)
    assert f'verify {_events(db, "short")} events</a>' in _row(listing, "short")
    assert client.get("/chains?id=short").json() == {
        "short": {"ok": True, "checked": _events(db, "short")}}


def test_the_chains_route_refuses_unknown_ids_and_too_many(long_db):
    client = TestClient(create_app(str(long_db)), base_url="http://127.0.0.1")
    assert client.get("/chains?id=short&id=nope").status_code == 404
    assert client.get("/chains").status_code == 400
    too_many = "&".join(f"id=c{i}" for i in range(501))
    r = client.get(f"/chains?{too_many}")
    assert r.status_code == 400 and "1 to 500 ids, not 501" in r.text


def test_a_list_page_verifies_no_chain(long_db):
    from turnlog.engine.audit import ListQuery

    with Reader(str(long_db)) as reader:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("a list page verified a chain")

        reader.journal.verify = refuse  # type: ignore[method-assign]
        rows = reader.conversations(ListQuery())["rows"]
    assert {r["conversation_id"]: r["chain"] for r in rows} == {
        cid: {"ok": None, "deferred": True, "events": _events(long_db, cid)}
        for cid in (LONG, "short")}


def test_a_tampered_long_chain_is_reported_by_chain(long_db, tmp_path):
    db = tmp_path / "tampered.db"
    db.write_bytes(long_db.read_bytes())
    conn = sqlite3.connect(db)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                "AND tbl_name = 'events'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("UPDATE events SET payload = replace(payload, 'City 99', 'City 98') "
                 "WHERE stream_id = ? AND type = 'tool_started' AND payload LIKE '%City 99%'",
                 (LONG,))
    seq = conn.execute("SELECT seq FROM events WHERE stream_id = ? AND type = 'tool_started' "
                       "AND payload LIKE '%City 98%' ORDER BY seq DESC LIMIT 1",
                       (LONG,)).fetchone()[0]
    conn.commit()
    conn.close()
    client = TestClient(create_app(str(db)), base_url="http://127.0.0.1")
    state = client.get(f"/chain?id={LONG}").json()
    assert state["ok"] is False and state["seq"] == seq and state["conversation_id"] == LONG


def test_the_streamed_report_is_the_whole_report(long_db):
    from turnlog.replay.view.render import asset, environment
    from turnlog.replay.view.report import _csp, iter_report, report_data
    from turnlog.journal import shown_url

    with Reader(str(long_db)) as reader:
        data = report_data(reader, LONG)
    css, js = asset("app.css"), asset("report.js")
    whole = environment().get_template("report.html").render(
        **data, generated_from=shown_url(str(long_db)), css=css, js=js, csp=_csp(css, js))
    pieces = iter_report(str(long_db), LONG)
    assert "".join(pieces) == whole
    assert f"Timeline ({TURNS + 1:,} turns)" in whole and "verified ✓" in whole


def test_a_browser_fills_in_the_long_chain_and_follows_next(long_db):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from .browser import chromium, server

    with server(long_db) as url, chromium() as driver:
        driver.get(url + f"/conversation?id={LONG}")
        chain = driver.find_element(By.ID, "chain")
        WebDriverWait(driver, 60).until(lambda d: "verified ✓" in chain.text)
        assert chain.text == f"verified ✓ ({_events(long_db, LONG):,} events)"
        assert f"turns page 1 of 3 ({TURNS + 1} turns)" in driver.find_element(
            By.TAG_NAME, "body").text
        driver.find_elements(By.LINK_TEXT, "next →")[0].click()
        WebDriverWait(driver, 30).until(lambda d: "page=2" in d.current_url)
        assert driver.find_element(By.ID, "turn-51").text.startswith("turn 51")
        driver.get(url + "/")
        row = driver.find_element(By.XPATH, f"//a[text()='{LONG}']/ancestor::tr")
        WebDriverWait(driver, 60).until(lambda d: "verified ✓" in row.text)
        assert [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []


def test_the_report_route_streams_the_report(long_db):
    from turnlog.replay.view import render_report

    client = TestClient(create_app(str(long_db)), base_url="http://127.0.0.1")
    r = client.get(f"/report?id={LONG}")
    assert r.status_code == 200 and r.text == render_report(str(long_db), LONG)
    assert r.headers["content-disposition"] == f'attachment; filename="turnlog-{LONG}.html"'
    assert client.get("/report?id=nope").status_code == 404


def test_a_chain_edited_in_place_after_it_was_verified_is_reported_broken(long_db, tmp_path):
    """An edit in place keeps every head, so a state kept per head would still say verified:
    ``/chain`` and ``/chains`` verify again each time they are asked."""
    db = tmp_path / "edited.db"
    db.write_bytes(long_db.read_bytes())
    client = TestClient(create_app(str(db)), base_url="http://127.0.0.1")
    assert client.get("/chains?id=short").json()["short"]["ok"] is True
    assert client.get("/chain?id=short").json()["ok"] is True
    conn = sqlite3.connect(db)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                "AND tbl_name = 'events'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    changed = conn.execute("UPDATE events SET payload = replace(payload, 'e', 'E') "
                           "WHERE stream_id = 'short' AND seq = 2").rowcount
    conn.commit()
    conn.close()
    assert changed == 1
    single, listed = client.get("/chain?id=short").json(), client.get("/chains?id=short").json()
    assert single["ok"] is False and single["seq"] == 2 and listed["short"] == single
    # the list paints what it was last told, and marks it to be asked again after paint
    assert 'class="bad chain-recheck" data-chain="short"' in _row(client.get("/").text, "short")
