"""The audit's costs read from the model calls' projection (views v8) equal those read from
the events themselves, on random journals with forks, erasures, retries and responses
recorded with and without a charge; the projection is migrated from views v7, and kept on
both backends."""

from __future__ import annotations

import math
import sqlite3
from typing import Any

import psycopg
from hypothesis import given, settings
from hypothesis import strategies as st

from turnlog.engine.audit import projections
from turnlog.engine.audit.erasure import erase_conversation
from turnlog.engine.audit.figures import AuditQuery, audit
from turnlog.engine.audit.prices import Prices, PriceTable
from turnlog.engine.audit.projections import COST_COLUMNS, MODEL_CALLS, in_step
from turnlog.engine.audit.sql import SOURCES
from turnlog.engine.audit.views import EXTENSIONS, connect_readonly
from turnlog.engine.model.conversation import Conversation
from turnlog.engine.model.events import (
    Charge,
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
    decode_event,
)
from turnlog.engine.model.messages import Opaque, Text, ToolCall, Usage
from turnlog.journal import Journal, dialect_of
from tests.engine.audit_data import PRICES
from tests.pgcluster import fresh_url

MODELS = [("openai", "gpt-4o"), ("anthropic", "claude-x"), ("acme", "unpriced-1")]
TOOLS = ["search", "add", "get_weather"]

# A tool call's fate: its outcome, or none (pending: only the last turn's calls).
fates = st.sampled_from(["ok", "failed", "duplicate", "refused", "pending"])
turns = st.lists(st.fixed_dictionaries({
    "calls": st.lists(st.tuples(st.sampled_from(TOOLS), fates, st.integers(1, 500)),
                      max_size=3),
    "retried": st.booleans(),
    "server": st.booleans(),  # a call the provider's server ran (counted apart)
    # a recorded charge: an amount (a binary fraction: sums are exact in any order), an
    # unpriced charge (a reason, no amount), or none (priced by the audit at its time)
    "charge": st.one_of(st.none(), st.integers(0, 4096).map(lambda n: n / 1024),
                        st.just("unpriced")),
    "own": st.one_of(st.none(), st.sampled_from(MODELS)),
    "tokens": st.tuples(st.integers(0, 5000), st.integers(0, 2000), st.integers(0, 500),
                        st.integers(0, 300), st.integers(0, 100)),
}), max_size=4)
conversations = st.lists(st.fixed_dictionaries({
    "model": st.sampled_from(MODELS), "turns": turns, "completed": st.booleans(),
    "day": st.integers(1, 28),
    # a fork of an earlier conversation after its first message, continued with turns
    "fork_of": st.one_of(st.none(), st.integers(0, 10)),
    # erase nothing, the whole conversation, or one event of it
    "erase": st.one_of(st.none(), st.just("all"), st.integers(2, 30)),
}), min_size=1, max_size=6)


def write(journal: Any, spec: list[dict[str, Any]]) -> None:
    """The conversations of ``spec`` through the library (each event checked by the lifecycle),
    then its erasures."""
    ids: list[tuple[str, bool]] = []
    for i, c in enumerate(spec):
        provider, model = c["model"]
        cid = f"c{i}"
        stamp = iter(f"2025-03-{c['day']:02d}T{10 + k // 3600:02d}:{k // 60 % 60:02d}:"
                     f"{k % 60:02d}.000000Z" for k in range(10**5))
        fork = None
        parents = [p for p, forked in ids if not forked]  # their seq 2 is the user's message
        if c["fork_of"] is not None and parents:
            parent = parents[c["fork_of"] % len(parents)]
            fork = ForkRef(conversation_id=parent, seq=2, hash=journal.hash_at(parent, 2))
        conv = Conversation.start(journal, ConversationStarted(
            conversation_id=cid, provider=provider, model=model, system="s", fork=fork),
            recorded_at=next(stamp))
        ids.append((cid, fork is not None))
        events: list[Any] = [] if fork else [UserMessage.of("go")]
        for t, turn in enumerate(c["turns"], start=1):
            last = t == len(c["turns"])
            attempt = 2 if turn["retried"] else 1
            if turn["retried"]:  # a failed first attempt
                events += [ModelRequested(turn=t, digest="d", provider=provider, model=model),
                           ModelFailed(turn=t, error_type="RateLimitError", message="slow")]
            events.append(ModelRequested(turn=t, digest="d", provider=provider, model=model,
                                         attempt=attempt))
            charge = turn["charge"]
            recorded = (None if charge is None else
                        Charge(source="scripted", reason="no price") if charge == "unpriced" else
                        Charge(amount=charge, source="overrides", currency="USD"))
            own_p, own_m = turn["own"] or ("", "")
            i_, o, cached, written, reasoning = turn["tokens"]
            calls = [(f"{cid}-{t}-{k}", name, fate, ms) for k, (name, fate, ms) in
                     enumerate(turn["calls"]) if last or fate != "pending"]
            events.append(ModelResponded(
                turn=t, parts=(Text(text="step"), *(ToolCall(id=call, name=name, arguments={})
                                                    for call, name, *_ in calls),
                               *([Opaque(provider=provider, kind="server_tool_use",
                                         data={"id": f"{cid}-{t}-s", "name": "web_search",
                                               "input": {"q": "x"}})]
                                 if turn.get("server") else [])),
                stop_reason="tool_use" if calls else "end_turn", provider=own_p, model=own_m,
                usage=Usage(input_tokens=i_ + cached + written, output_tokens=o + reasoning,
                            cached_input_tokens=cached, cache_write_tokens=written,
                            reasoning_tokens=reasoning), charge=recorded))
            for call, name, fate, ms in calls:
                if fate in ("ok", "failed"):
                    events += [ToolStarted(call_id=call, name=name, arguments={}),
                               ToolCompleted(call_id=call, name=name, success=fate == "ok",
                                             content="r", duration_ms=ms / 8)]
                elif fate in ("duplicate", "refused"):
                    events.append(ToolCallRejected(
                        call_id=call, name=name, content="no",
                        reason="duplicate" if fate == "duplicate" else "denied"))
            if any(fate == "pending" for _, _, fate, _ in calls):
                break
            if not calls and not last:  # the model answered: the user speaks next
                events.append(UserMessage.of("more"))
        else:
            if c["completed"] and c["turns"] and not calls:  # the last answer called nothing
                events.append(ConversationCompleted(final_content="done"))
        if events:
            conv.append(*events, recorded_at=[next(stamp) for _ in events])
    for i, c in enumerate(spec):
        if c["erase"] == "all":
            erase_conversation(journal, f"c{i}", reason="test", by="t")
        elif c["erase"] is not None and c["erase"] <= journal.last_seq(f"c{i}"):
            erase_conversation(journal, f"c{i}", seq=c["erase"], reason="test", by="t")


def same(a: Any, b: Any, where: str = "report") -> None:
    """``a`` equals ``b``, floats up to the last rounded digit (sums of priced calls added in
    another order)."""
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1.01e-6), (where, a, b)
    elif isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), (where, a.keys(), b.keys())
        for k in a:
            same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), (where, a, b)
        for n, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{n}]")
    else:
        assert a == b, (where, a, b)


QUERIES = [AuditQuery(top=0), AuditQuery(provider="openai", top=0), AuditQuery(tool="search", top=0),
           AuditQuery(top=2)]


def both_ways(conn: Any, prices: Prices) -> list[dict[str, Any]]:
    """Each query's audit from the projections, after checking it equals the one from events."""
    projected, events = SOURCES[dialect_of(conn).name]
    reports = []
    for query in QUERIES:
        for reprice in (False, True):
            fast = audit(conn, query, prices, projected, reprice=reprice)
            slow = audit(conn, query, prices, events, reprice=reprice)
            assert (fast.pop("source"), slow.pop("source")) == ("projections", "events")
            same(fast, slow)
            reports.append(fast)
    return reports


def requested_calls(conn: Any) -> list[tuple]:
    """The requested calls' rows (views v9) counted in Python from the decoded responses: a
    ``ToolCall`` part is a client call, an ``Opaque`` of a server call kind a server one."""
    rows = []
    for position, stream, version, payload in conn.execute(
            "SELECT position, stream_id, version, payload FROM events "
            "WHERE type = 'model_responded' ORDER BY position"):
        event = decode_event("model_responded", version, payload)
        for n, part in enumerate(event.parts):
            if isinstance(part, ToolCall):
                rows.append((position, stream, n, part.id, part.name, "client"))
            elif isinstance(part, Opaque) and part.kind in projections.SERVER_CALL_KINDS:
                rows.append((position, stream, n, part.data.get("id"),
                             part.data.get("name", part.kind), part.kind))
    return rows


def prices() -> Prices:
    return Prices.of(PriceTable.parse(PRICES, "test prices"))


@settings(max_examples=40)
@given(spec=conversations)
def test_the_costs_from_the_projection_are_those_from_the_events(tmp_path_factory, spec):
    path = tmp_path_factory.mktemp("j") / "j.db"
    with Journal(str(path), extensions=EXTENSIONS) as journal:
        write(journal, spec)
        assert journal.verify().ok
    conn = connect_readonly(str(path))
    try:
        assert in_step(conn)
        assert projections.check(conn) == []  # erased events keep the rows they had
        assert conn.execute(f"SELECT * FROM {projections.REQUESTED_CALLS} "
                            "ORDER BY position, part").fetchall() == requested_calls(conn)
        reports = both_ways(conn, prices())
        # genai-prices' own entries: responses without an amount priced once per group
        projected, events = SOURCES["sqlite"]
        fast, slow = (audit(conn, AuditQuery(top=0), Prices.default(), source)
                      for source in (projected, events))
        assert (fast.pop("source"), slow.pop("source")) == ("projections", "events")
        same(fast, slow)
        responses = conn.execute("SELECT count(*) FROM events "
                                 "WHERE type = 'model_responded'").fetchone()[0]
        assert reports[0]["turns"] == responses
    finally:
        conn.close()


def _example() -> list[dict[str, Any]]:
    """A journal with a bit of everything: charged, unpriced and uncharged responses, retries,
    duplicates, pending calls, a fork and both kinds of erasure."""
    def turn(calls, charge, **kw):
        return {"calls": calls, "retried": kw.get("retried", False), "charge": charge,
                "server": kw.get("server", False),
                "own": kw.get("own"), "tokens": (1000, 200, 300, 50, 10)}
    return [
        {"model": MODELS[0], "completed": True, "day": 1, "fork_of": None, "erase": None,
         "turns": [turn([("search", "ok", 10), ("add", "duplicate", 1)], 0.25, retried=True),
                   turn([("search", "duplicate", 1)], None, retried=True), turn([], "unpriced")]},
        {"model": MODELS[1], "completed": False, "day": 2, "fork_of": 0, "erase": "all",
         "turns": [turn([("get_weather", "failed", 30)], 0.5, server=True),
                   turn([("search", "ok", 20), ("search", "pending", 1)], None)]},
        {"model": MODELS[2], "completed": True, "day": 3, "fork_of": None, "erase": 4,
         "turns": [turn([("add", "refused", 1)], None, own=MODELS[0]), turn([], 1.0)]},
    ]


def _to_v7(conn: Any, sqlite: bool) -> None:
    """The model calls' table as views v7 kept it (without the cost columns), and the
    extension's version 7."""
    old = [c for c in projections._MODEL_COLUMNS if c not in COST_COLUMNS]
    keep = ", ".join(old)
    if sqlite:
        for suffix in ("project", "refuse_update", "refuse_delete"):
            conn.execute(f"DROP TRIGGER {MODEL_CALLS}_{suffix}")
    else:
        conn.execute(f"DROP TRIGGER {MODEL_CALLS}_project ON events")
        conn.execute(f"ALTER TABLE {MODEL_CALLS} DISABLE TRIGGER USER")
    conn.execute(f"CREATE TABLE v7 AS SELECT {keep} FROM {MODEL_CALLS}")
    conn.execute(f"DROP TABLE {MODEL_CALLS}")
    conn.execute(f"ALTER TABLE v7 RENAME TO {MODEL_CALLS}")
    conn.execute("UPDATE _turnlog_meta SET value = '7' WHERE key = 'ext:engine.views'")


def test_a_views_v7_journal_is_read_from_events_then_migrated_to_the_cost_columns(tmp_path):
    path = tmp_path / "v7.db"
    with Journal(str(path), extensions=EXTENSIONS) as journal:
        write(journal, _example())
    before = audit(connect_readonly(str(path)), AuditQuery(top=0), prices())
    conn = sqlite3.connect(path)
    _to_v7(conn, sqlite=True)
    conn.commit()
    conn.close()

    old = connect_readonly(str(path))  # read-only: not migrated, the audit reads events
    assert not in_step(old)
    as_v7 = audit(old, AuditQuery(top=0), prices())
    old.close()
    assert as_v7.pop("source") == "events"

    Journal(str(path), extensions=EXTENSIONS).close()  # a writer migrates it
    with sqlite3.connect(path) as raw:
        columns = [r[1] for r in raw.execute(f"PRAGMA table_info({MODEL_CALLS})")]
    assert columns == list(projections._MODEL_COLUMNS)
    conn = connect_readonly(str(path))
    assert in_step(conn) and projections.check(conn) == []
    after = audit(conn, AuditQuery(top=0), prices())
    conn.close()
    assert after.pop("source") == "projections" == before.pop("source")
    same(after, as_v7)
    same(after, before)
    assert (after["cost"]["recorded"], after["cost"]["duplicates"]["responses"],
            after["cost"]["retried"]["responses"]) == (3, 2, 2)
    with Journal(str(path), extensions=EXTENSIONS) as journal:
        assert journal.verify().ok


def test_postgresql_keeps_the_same_cost_rows_and_migrates_them():
    url = fresh_url()
    with Journal.open(url, extensions=EXTENSIONS) as journal:
        write(journal, _example())
        assert journal.verify().ok
    conn = connect_readonly(url)
    try:
        assert in_step(conn) and projections.check(conn) == []
        on_postgres = both_ways(conn, prices())
    finally:
        conn.close()

    with psycopg.connect(url, autocommit=True) as pg:
        _to_v7(pg, sqlite=False)
    conn = connect_readonly(url)
    assert not in_step(conn)
    conn.close()
    with Journal.open(url, extensions=EXTENSIONS) as journal:  # migrates
        assert journal.verify().ok
    conn = connect_readonly(url)
    try:
        assert in_step(conn) and projections.check(conn) == []
        assert both_ways(conn, prices()) == on_postgres
        rows = conn.execute(f"SELECT {', '.join(COST_COLUMNS)} FROM {MODEL_CALLS} "
                            "ORDER BY position").fetchall()
    finally:
        conn.close()
    assert any(r[COST_COLUMNS.index("charge_amount")] is not None for r in rows)
    assert any(r[COST_COLUMNS.index("attempt")] == 2 for r in rows)


def test_sqlite_and_postgresql_give_the_same_audit(tmp_path):
    path = tmp_path / "j.db"
    url = fresh_url()
    for target in (str(path), url):
        with Journal.open(target, extensions=EXTENSIONS) as journal:
            write(journal, _example())
    reports = []
    for target in (str(path), url):
        conn = connect_readonly(target)
        try:
            reports.append(both_ways(conn, prices()))
        finally:
            conn.close()
    same(reports[0], reports[1])
    assert reports[0][0]["server_tools"] == [
        {"kind": "server_tool_use", "tool": "web_search", "calls": 1}]


def test_an_erased_server_tool_call_keeps_its_projection_row(tmp_path):
    """Erasing a response that holds a call the provider's server ran keeps the call's id and
    tool (its input goes), so the projection still equals the events and verify passes;
    before, the erased part became text and verify named the row as forged."""
    path = tmp_path / "j.db"
    with Journal(str(path), extensions=EXTENSIONS) as journal:
        conv = Conversation.start(journal, ConversationStarted(
            conversation_id="c", provider="anthropic", model="claude-x"))
        conv.append(UserMessage.of("hi"),
                    ModelRequested(turn=1, digest="d", provider="anthropic", model="claude-x"),
                    ModelResponded(turn=1, parts=(
                        Opaque(provider="anthropic", kind="server_tool_use",
                               data={"id": "s1", "name": "web_search", "input": {"q": "secret"}}),
                        Text(text="found")), usage=Usage(input_tokens=3),
                        charge=Charge(amount=0.5, source="overrides")))
        before = audit(connect_readonly(str(path)), AuditQuery(), prices())
        erase_conversation(journal, "c", reason="test", by="t")
        report = journal.verify()
        assert report.ok, report.projections
        payload = next(e.payload for e in journal.read("c") if e.type == "model_responded")
    assert "secret" not in payload and "found" not in payload
    after = audit(connect_readonly(str(path)), AuditQuery(), prices())
    assert after["server_tools"] == before["server_tools"] == [
        {"kind": "server_tool_use", "tool": "web_search", "calls": 1}]
    assert after["cost"] == before["cost"] and after["cost"]["total"] == 0.5


def _to_v8(conn: Any, sqlite: bool) -> None:
    """The journal as views v8 kept it: no requested calls' table, no tool calls' index."""
    table = projections.REQUESTED_CALLS
    if sqlite:
        for suffix in ("project", "refuse_update", "refuse_delete"):
            conn.execute(f"DROP TRIGGER {table}_{suffix}")
    else:
        conn.execute(f"DROP TRIGGER {table}_project ON events")
        conn.execute(f"DROP FUNCTION {table}_project()")
    conn.execute(f"DROP TABLE {table}")
    conn.execute(f"DROP INDEX {projections.TOOL_CALLS}_by_call")
    conn.execute("UPDATE _turnlog_meta SET value = '8' WHERE key = 'ext:engine.views'")


def test_a_views_v8_journal_gains_the_requested_calls_on_both_backends(tmp_path):
    """Read-only, a v8 journal is audited from events; a writer's open builds the requested
    calls from the events, and the audit from them equals the one before."""
    path = tmp_path / "v8.db"
    url = fresh_url()
    for target in (str(path), url):
        with Journal.open(target, extensions=EXTENSIONS) as journal:
            write(journal, _example())
        conn = connect_readonly(target)
        before = both_ways(conn, prices())
        rows = requested_calls(conn)
        conn.close()
        if target == url:
            with psycopg.connect(url, autocommit=True) as pg:
                _to_v8(pg, sqlite=False)
        else:
            with sqlite3.connect(path) as raw:
                _to_v8(raw, sqlite=True)
        old = connect_readonly(target)
        assert not in_step(old)
        assert audit(old, AuditQuery(top=0), prices())["source"] == "events"
        old.close()
        with Journal.open(target, extensions=EXTENSIONS) as journal:  # migrates
            assert journal.verify().ok
        conn = connect_readonly(target)
        try:
            assert in_step(conn) and projections.check(conn) == []
            assert conn.execute(f"SELECT * FROM {projections.REQUESTED_CALLS} "
                                "ORDER BY position, part").fetchall() == rows
            assert any(r[5] == "server_tool_use" for r in rows)
            same(both_ways(conn, prices()), before)
        finally:
            conn.close()
