"""``turnlog audit`` figures equal figures computed independently from the raw events."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import math
import sqlite3
import statistics
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnlog.engine.audit.sql import EVENTS
from turnlog.engine.audit import AuditQuery, audit, parse_since
from turnlog.engine.cli import cli
from turnlog.engine.model.conversation import Conversation, load_state
from turnlog.engine.errors import BadFilterError, PriceTableError
from turnlog.engine.model.events import (
    ConversationCompleted,
    ConversationFailed,
    ConversationStarted,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ToolCallRejected,
    ToolCompleted,
    ToolStarted,
    TurnLimitReached,
    UserMessage,
)
from turnlog.engine.model.messages import Opaque, Text, ToolCall, Usage
from turnlog.engine.audit.prices import Prices, PriceTable
from turnlog.engine.audit.views import EXTENSIONS, connect_readonly
from turnlog.journal import Journal
from tests.engine.audit_data import PRICES, build


@pytest.fixture
def audited(db_path):
    j = Journal(str(db_path), extensions=EXTENSIONS)  # as turnlog writes it: views, projections
    build(j)
    j.close()
    return db_path


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


# -- the independent calculation ---------------------------------------------------------

def raw_events(path) -> list[tuple]:
    con = sqlite3.connect(path)
    rows = con.execute("SELECT stream_id, seq, type, recorded_at, payload FROM events "
                       "ORDER BY position").fetchall()
    con.close()
    return [(s, q, t, at, json.loads(p)) for s, q, t, at, p in rows]


def expected(path, scope: set[str], tool: str | None = None) -> dict:
    """Figures for conversations ``scope``: states folded by the reducer, the rest by hand."""
    j = Journal(str(path))
    states = {cid: load_state(j, cid) for cid in scope}
    j.close()
    events = [e for e in raw_events(path) if e[0] in scope]
    tokens = Counter()
    failures = Counter()
    tools: dict[str, Counter] = defaultdict(Counter)
    durations: dict[str, list[float]] = defaultdict(list)
    answered = {(cid, p["call_id"]) for cid, _seq, type_, _at, p in events
                if type_ in ("tool_completed", "tool_call_rejected")}
    server: Counter = Counter()
    for cid, _seq, type_, _at, p in events:
        if type_ != "model_responded":
            continue
        for part in p.get("parts", []):
            if part["type"] == "tool_call" and (cid, part["id"]) not in answered and tool in (
                    None, part["name"]):
                tools[part["name"]]["calls"] += 1
                tools[part["name"]]["pending"] += 1
            elif part["type"] == "opaque" and part["kind"] in ("server_tool_use", "mcp_tool_use"):
                if tool in (None, part["data"].get("name", part["kind"])):
                    server[(part["kind"], part["data"].get("name", part["kind"]))] += 1
    for _cid, _seq, type_, _at, p in events:
        if type_ == "model_responded":
            tokens["turns"] += 1
            for kind in ("input", "output", "cached_input"):
                tokens[kind] += p.get("usage", {}).get(f"{kind}_tokens", 0)
        elif type_ == "model_failed":
            failures[p["error_type"]] += 1
        elif type_ in ("tool_completed", "tool_call_rejected") and tool in (None, p["name"]):
            t = tools[p["name"]]
            t["calls"] += 1
            if type_ == "tool_call_rejected":
                t[f"refused:{p['reason']}"] += 1
            elif not p["success"]:
                t["failures"] += 1
            if type_ == "tool_completed" and "duration_ms" in p:
                durations[p["name"]].append(p["duration_ms"])
    return {
        "conversations": len(scope),
        "by_status": Counter(s.status for s in states.values()),
        "turns": tokens["turns"],
        "tokens": {k: tokens[k] for k in ("input", "output", "cached_input")},
        "model_failures": dict(failures),
        "server_tools": [{"kind": k, "tool": n, "calls": c} for (k, n), c in sorted(server.items())],
        "tools": {name: {
            "calls": t["calls"], "failures": t["failures"], "pending": t["pending"],
            "duplicates_prevented": t["refused:duplicate"],
            "refused_by_reason": {k.split(":")[1]: v for k, v in t.items() if k.startswith("refused:")},
            "median_ms": statistics.median(durations[name]) if durations[name] else None,
            "p95_ms": (sorted(durations[name])[math.ceil(0.95 * len(durations[name])) - 1]
                       if durations[name] else None),
        } for name, t in tools.items()},
    }


def observed(report: dict) -> dict:
    return {
        "conversations": report["conversations"],
        "by_status": Counter({k: v for k, v in report["by_status"].items() if v}),
        "turns": report["turns"],
        "tokens": {k: report["tokens"][k] for k in ("input", "output", "cached_input")},
        "model_failures": report["model_failures"],
        "server_tools": report["server_tools"],
        "tools": {name: {k: t[k] for k in ("calls", "failures", "pending", "duplicates_prevented",
                                           "refused_by_reason", "median_ms", "p95_ms")}
                  for name, t in report["tools"].items()},
    }


def run_audit(path, source=None, **filters) -> dict:
    conn = connect_readonly(str(path))
    try:
        return audit(conn, AuditQuery(**filters), PriceTable.parse(PRICES, "test prices"), source)
    finally:
        conn.close()


ALL = {"done", "old", "fail", "halt", "active", "mystery", "fork", "replay"}


@pytest.mark.parametrize("filters, scope", [
    ({}, ALL),
    ({"provider": "anthropic"}, {"fail", "halt", "fork", "replay"}),
    ({"provider": "openai", "model": "gpt-4o"}, {"done", "old"}),
    ({"status": "completed"}, {"done", "old", "mystery", "fork"}),
    ({"status": "halted"}, {"halt"}),
    ({"since": "2025-03-03T00:00:00.000000Z"}, {"halt", "active", "mystery", "fork", "replay"}),
    ({"tool": "get_weather"}, {"done"}),
])
def test_audit_figures_equal_an_independent_count_of_the_events(audited, filters, scope):
    report = run_audit(audited, **filters)
    assert report["source"] == "projections"
    assert observed(report) == expected(audited, scope, filters.get("tool"))
    from_events = run_audit(audited, EVENTS, **filters)
    assert from_events["source"] == "events"
    assert {k: v for k, v in from_events.items() if k != "source"} == {
        k: v for k, v in report.items() if k != "source"}


def test_audit_reads_events_when_the_projections_are_out_of_step(audited):
    con = sqlite3.connect(audited)
    Journal(str(audited), extensions=EXTENSIONS).close()  # install the projections
    con.execute("DROP TRIGGER _audit_model_calls_project")
    con.commit()
    con.close()
    j = Journal(str(audited))
    Conversation.open(j, "active").append(
        ModelRequested(turn=1, digest="d", provider="openai", model="gpt-4o-mini"),
        ModelResponded(turn=1, parts=(Text(text="late"),), usage=Usage(input_tokens=7)))
    j.close()
    report = run_audit(audited)
    assert report["source"] == "events"
    assert observed(report) == expected(audited, ALL)


def test_statuses_provider_models_and_tools_of_the_sample_are_what_was_recorded(audited):
    r = run_audit(audited)
    assert r["by_status"] == {"active": 2, "awaiting_approval": 0, "interrupted": 0, "completed": 4, "failed": 1,
                              "halted": 1}
    assert r["tools"]["get_weather"] | {} == {
        "calls": 2, "succeeded": 1, "failures": 0, "refused": 1, "pending": 0,
        "duplicates_prevented": 1,
        "refused_by_reason": {"duplicate": 1}, "median_ms": 10.0, "p95_ms": 10.0}
    assert r["tools"]["teleport"]["refused_by_reason"] == {"unknown": 1}
    assert r["model_failures"] == {"RateLimitError": 1, "ServerError": 1}
    models = {(m["provider"], m["model"]): m["conversations"] for m in r["by_provider_model"]}
    assert models == {("openai", "gpt-4o"): 2, ("anthropic", "claude-x"): 4,
                      ("openai", "gpt-4o-mini"): 1, ("acme", "m1"): 1}


def test_each_call_is_priced_at_the_rate_in_effect_on_its_day(audited):
    cost = run_audit(audited, top=0)["cost"]
    per_conv = {c["conversation_id"]: c["cost"] for c in cost["conversations"]}
    # done, 2025 rates: (600 fresh*2.5 + 400 cached*1.25 + 100*10) + (1200*2.5 + 20*10) + (1300*2.5 + 50*10)
    assert per_conv["done"] == pytest.approx((3000 + 3200 + 3750) / 1e6)
    # old, 2024 rates (input 5, output 15): the same model priced at its own time's rate
    assert per_conv["old"] == pytest.approx((2000 * 5 + 1000 * 15) / 1e6)
    # halt: (400 fresh*3 + 100 cached*0.3 + 10*15) + (600*3 + 10*15)
    assert per_conv["halt"] == pytest.approx((1200 + 30 + 150 + 1800 + 150) / 1e6)
    assert per_conv["mystery"] is None  # unknown model: unpriced, never zero
    assert cost["unpriced"] == [{"provider": "acme", "model": "m1",
                                 "reason": "acme/m1 has no price in test prices on 2025-03-05"}]
    assert cost["complete"] is False
    by_model = {(c["provider"], c["model"]): c["cost"] for c in cost["by_provider_model"]}
    assert by_model[("acme", "m1")] is None
    assert by_model[("openai", "gpt-4o")] == pytest.approx(0.00995 + 0.025)
    assert cost["total"] == pytest.approx(sum(v for v in by_model.values() if v is not None))


def test_a_price_before_a_models_first_entry_is_unpriced():
    table = PriceTable.parse(PRICES, "t")
    assert table.price("openai", "gpt-4o", "2023-12-31") is None
    assert table.price("openai", "gpt-4o", "2024-12-31").input == 5.0
    assert table.price("openai", "gpt-4o", "2025-01-01").input == 2.5
    assert table.price("nobody", "x", "2025-01-01") is None


def test_the_default_prices_are_genai_prices_and_the_scripted_provider_costs_nothing():
    prices = Prices.default()
    assert prices.cost("scripted", "anything", "2026-01-01", Usage(input_tokens=5)) == 0.0
    charge = prices.charge("openai", "gpt-4o", "2025-01-01", Usage(input_tokens=10**6))
    # OpenAI's list price for gpt-4o input: $2.50 per million tokens
    assert (charge.amount, charge.source, charge.priced_as) == (2.5, "genai-prices", "openai/gpt-4o")
    assert charge.version == importlib.metadata.version("genai-prices")


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=30),
       st.lists(st.integers(0, 10**6), min_size=1, max_size=30),
       st.integers(0, 10**6), st.integers(0, 10**6))
def test_cost_is_additive_over_usage(a, b, cached, written):
    table = PriceTable.parse(PRICES, "t")
    ua = Usage(input_tokens=sum(a) + cached + written, output_tokens=sum(b),
               cached_input_tokens=cached, cache_write_tokens=written)
    parts = [Usage(input_tokens=x) for x in a] + [Usage(output_tokens=y) for y in b] + [
        Usage(input_tokens=cached, cached_input_tokens=cached),
        Usage(input_tokens=written, cache_write_tokens=written)]
    whole = table.cost("openai", "gpt-4o", "2025-02-01", ua)
    assert whole == pytest.approx(sum(table.cost("openai", "gpt-4o", "2025-02-01", u) for u in parts))


# -- random conversations: audit == independent count ---------------------------------------

_outcome = st.sampled_from(["ok", "fail", "duplicate", "unknown", "invalid_arguments",
                            "pending", "server"])
_turn = st.lists(st.tuples(st.sampled_from(["search", "fetch", "add"]), _outcome,
                           st.integers(0, 5000)), max_size=3)


def _part(n: int, name: str, outcome: str):
    """A client call, or (``server``) a server tool call the provider ran itself."""
    if outcome == "server":
        return Opaque(provider="anthropic", kind="server_tool_use",
                      data={"type": "server_tool_use", "id": f"s{n}", "name": name, "input": {}})
    return ToolCall(id=f"k{n}", name=name)
_conv = st.tuples(st.sampled_from([("openai", "gpt-4o"), ("anthropic", "claude-x")]),
                  st.lists(st.tuples(_turn, st.integers(0, 500), st.booleans()), max_size=4),
                  st.sampled_from(["complete", "fail", "halt", "none"]))


def _record(j: Journal, cid: str, spec) -> None:
    (provider, model), turns, end = spec
    c = Conversation.start(j, ConversationStarted(conversation_id=cid, provider=provider, model=model))
    c.append(UserMessage.of("go"))
    turn, n = 0, 0
    for calls, tokens, model_fails in turns:
        if model_fails:
            c.append(ModelRequested(turn=turn + 1, digest="d", provider=provider, model=model),
                     ModelFailed(turn=turn + 1, error_type="ServerError", message="x"))
        turn += 1
        parts = [_part(n + i, name, o) for i, (name, o, _ms) in enumerate(calls)]
        c.append(ModelRequested(turn=turn, digest="d", provider=provider, model=model), ModelResponded(
            turn=turn, parts=(Text(text="t"), *parts), provider=provider, model=model,
            usage=Usage(input_tokens=tokens * 2, output_tokens=tokens, cached_input_tokens=tokens)))
        for part, (name, outcome, ms) in zip(parts, calls):
            if outcome in ("ok", "fail"):
                c.append(ToolStarted(call_id=part.id, name=name),
                         ToolCompleted(call_id=part.id, name=name, success=outcome == "ok",
                                       content="r", duration_ms=float(ms)))
            elif outcome not in ("pending", "server"):
                c.append(ToolCallRejected(call_id=part.id, name=name, reason=outcome, content="no"))
        n += len(calls)
        if not any(o != "server" for _n, o, _ms in calls) or any(
                o == "pending" for _n, o, _ms in calls):
            break  # an answer without tool calls ends the turns (completion may follow), and
            # a call left pending ends the run (interrupted before its tool ran)
    if c.builder.lifecycle.value == "answered" and end == "complete":
        c.append(ConversationCompleted())
    elif c.builder.lifecycle.value == "awaiting_model" and end == "fail":
        c.append(ConversationFailed(error="boom"))
    elif c.builder.lifecycle.value == "awaiting_model" and end == "halt":
        c.append(TurnLimitReached(turn_count=turn, max_turns=turn))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_conv, min_size=1, max_size=5), st.sampled_from([None, "search", "add"]),
       st.sampled_from([None, "openai", "anthropic"]))
def test_audit_of_random_conversations_equals_the_independent_count(specs, tool, provider):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "j.db"
        j = Journal(str(path))
        for i, spec in enumerate(specs):
            _record(j, f"c{i}", spec)
        j.close()
        scope = {f"c{i}" for i, s in enumerate(specs) if provider in (None, s[0][0])}
        if tool is not None:
            scope = {e[0] for e in raw_events(path) if e[0] in scope and (
                (e[2] in ("tool_completed", "tool_call_rejected") and e[4]["name"] == tool)
                or (e[2] == "model_responded" and any(
                    p.get("name", p.get("data", {}).get("name")) == tool for p in e[4]["parts"])))}
        report = run_audit(path, tool=tool, provider=provider)
        assert observed(report) == expected(path, scope, tool)
        from_events = run_audit(path, EVENTS, tool=tool, provider=provider)
        assert observed(from_events) == observed(report)
        assert from_events["cost"] == report["cost"]
        by_status = sum(run_audit(path, tool=tool, provider=provider, status=s)["conversations"]
                        for s in ("active", "completed", "failed", "halted"))
        assert by_status == report["conversations"]  # statuses partition the conversations


# -- the command line ------------------------------------------------------------------------

def test_audit_json_has_the_documented_fields(audited):
    result = invoke("audit", "--db", audited, "--json")
    assert result.exit_code == 0, result.output
    r = json.loads(result.output)
    assert {"conversations", "by_status", "turns", "tokens", "tools", "cost", "model_failures",
            "divergences", "by_provider_model"} <= set(r)
    for t in r["tools"].values():
        assert {"calls", "failures", "duplicates_prevented"} <= set(t)
    assert r["divergences"] is None  # no replay has recorded anything


def test_audit_human_output_is_a_table_with_unpriced_models_named(audited, tmp_path):
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES)
    result = invoke("audit", "--db", audited, "--prices", prices)
    assert result.exit_code == 0, result.output
    out = result.output
    assert ("conversations: 8   turns: 8   active: 2   awaiting_approval: 0   interrupted: 0   completed: 4   failed: 1"
            "   halted: 1") in out
    assert any(line.split()[:2] == ["acme/m1", "1"] and line.split()[-1] == "unpriced"
               for line in out.splitlines())
    assert "get_weather: duplicate 1" in out
    assert "unpriced: acme/m1" in out
    assert "model failures: RateLimitError 1, ServerError 1" in out


def test_audit_reports_the_last_recorded_replay_run(audited):
    con = sqlite3.connect(audited)
    con.execute("CREATE TABLE replay_reports (run_at TEXT, conversation_id TEXT, ok INTEGER, "
                "divergence_seq INTEGER)")
    con.executemany("INSERT INTO replay_reports VALUES (?, ?, ?, ?)", [
        ("2025-01-01T00:00:00Z", "old", 0, 3),
        ("2025-02-01T00:00:00Z", "done", 1, None), ("2025-02-01T00:00:00Z", "halt", 0, 7)])
    con.commit()
    con.close()
    div = json.loads(invoke("audit", "--db", audited, "--json").output)["divergences"]
    assert div == {"run_at": "2025-02-01T00:00:00Z", "checked": 2,
                   "diverged": [{"conversation_id": "halt", "seq": 7}]}


def _digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.mark.parametrize("args, message", [
    (["--since", "last tuesday"], "--since 'last tuesday' is not a date"),
    (["--status", "done"], "--status 'done' is not one of"),
    (["--prices", "/nonexistent/prices.toml"], "cannot read price table /nonexistent/prices.toml"),
])
def test_bad_audit_input_is_exit_2_with_a_clear_message(audited, args, message):
    before = _digest(audited)
    result = invoke("audit", "--db", audited, *args)
    assert result.exit_code == 2
    assert message in result.output
    assert _digest(audited) == before


@pytest.mark.parametrize("text, message", [
    ("[[prices]\n", "is not valid TOML"),
    ('[[prices]]\nprovider="p"\nmodel="m"\nsince=2025-01-01\noutput=1\n', "entry 1: input"),
    ('[[prices]]\nprovider="p"\nmodel="m"\nsince="soon"\ninput=1\noutput=1\n', "since must be a date"),
    ('[[prices]]\nprovider="p"\nmodel="m"\nsince=2025-01-01\ninput=-1\noutput=1\n', "input must be a number >= 0"),
    ('[[prices]]\nprovider="p"\nmodel="m"\nsince=2025-01-01\ninput=1\noutput=1\ncahced_input=1\n',
     "unknown key(s) cahced_input"),
    ("currency = 'EUR'\n", "has no [[prices]] entries"),
])
def test_a_bad_price_file_is_exit_2_naming_the_file_and_entry(audited, tmp_path, text, message):
    prices = tmp_path / "bad.toml"
    prices.write_text(text)
    result = invoke("audit", "--db", audited, "--prices", prices)
    assert result.exit_code == 2
    assert message in result.output and "bad.toml" in result.output
    with pytest.raises(PriceTableError):
        PriceTable.load(str(prices))


def test_since_accepts_dates_timestamps_and_relative_spans():
    assert parse_since("2025-01-31") == "2025-01-31T00:00:00.000000Z"
    assert parse_since("2025-01-31T12:00:00+02:00") == "2025-01-31T10:00:00.000000Z"
    with pytest.raises(BadFilterError):
        parse_since("31/01/2025")


@pytest.mark.parametrize("n, median, p95", [(40, 20.5, 38.0), (21, 11.0, 20.0), (100, 50.5, 95.0)])
def test_median_and_p95_use_the_middle_values_and_the_nearest_rank(db_path, n, median, p95):
    j = Journal(str(db_path))
    c = Conversation.start(j, ConversationStarted(conversation_id="t", provider="p", model="m"))
    calls = [ToolCall(id=f"k{i}", name="probe") for i in range(n)]
    c.append(UserMessage.of("go"), ModelRequested(turn=1, digest="d", provider="p", model="m"),
             ModelResponded(turn=1, parts=tuple(calls)))
    durations = [float(d) for d in range(1, n + 1)]
    durations.reverse()  # recorded out of order
    c.append(*[e for call, ms in zip(calls, durations) for e in (
        ToolStarted(call_id=call.id, name="probe"),
        ToolCompleted(call_id=call.id, name="probe", success=True, content="", duration_ms=ms))])
    j.close()
    for source in (None, EVENTS):
        probe = run_audit(db_path, source)["tools"]["probe"]
        assert (probe["median_ms"], probe["p95_ms"]) == (median, p95)


def test_an_empty_journal_audits_to_zeros_not_an_error(db_path):
    Journal(str(db_path)).close()
    r = json.loads(invoke("audit", "--db", db_path, "--json").output)
    assert (r["conversations"], r["turns"], r["tools"], r["cost"]["total"], r["cost"]["complete"]) == (
        0, 0, {}, 0, True)


def test_an_imported_cassette_and_a_responses_run_are_priced_as_their_vendor(tmp_path):
    from turnlog.engine.formats.importer import import_file
    from turnlog.engine.model.messages import Usage

    prices = Prices.default()
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert prices.cost("openai-responses", "gpt-4.1", "2025-06-01", usage) == \
        prices.cost("openai", "gpt-4.1", "2025-06-01", usage) == 10.0
    cassette = {"request": {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]},
                "response": {"model": "gpt-4.1", "choices": [{"message": {
                    "role": "assistant", "content": "hello"}}],
                    "usage": {"prompt_tokens": 1000, "completion_tokens": 500}}}
    path = tmp_path / "cassette.json"
    path.write_text(json.dumps(cassette))
    db = str(tmp_path / "j.db")
    with Journal(db, extensions=EXTENSIONS) as journal:
        import_file(journal, path, conversation_id="imp")
    conn = connect_readonly(db)
    try:
        report = audit(conn)
    finally:
        conn.close()
    assert report["by_provider_model"][0] | {"by_status": None} == {
        "provider": "openai", "model": "gpt-4.1", "conversations": 1, "by_status": None}
    assert report["cost"]["complete"] and report["cost"]["unpriced"] == []
    # the cassette's response usage is on the turn it answered: 1,000 in, 500 out
    assert (report["tokens"]["input"], report["tokens"]["output"]) == (1000, 500)
    assert report["cost"]["total"] == 0.006
