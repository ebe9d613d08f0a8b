"""Cost that matches the bill: genai-prices under an override table, every token kind,
the charge recorded with each turn, and the audit's figures by the money.

The test vectors are the providers' own published prices, worked by hand in
each test (the source is cited there); turnlog must match them to the cent
through the wire's usage object, its adapter's ``map_usage`` and the default
prices (genai-prices).
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import sqlite3
from pathlib import Path

import genai_prices
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from click.testing import CliRunner

from turnlog.engine.audit import AuditQuery, audit, connect_readonly
from turnlog.engine.audit.prices import Prices, PriceTable
from turnlog.engine.audit.views import EXTENSIONS
from turnlog.engine.cli import cli
from turnlog.engine.demo import DEMO_PROMPT, DEMO_SCRIPT
from turnlog.engine.errors import FormatError, PriceTableError
from turnlog.engine.model.events import Charge, ModelResponded, UnpricedReason, decode_event
from turnlog.engine.formats.importer import import_file
from turnlog.engine.model.messages import Usage
from turnlog.engine.providers import anthropic, gemini, openai
from turnlog.journal import Journal
from tests.fakeapi import fake_api, reply  # noqa: F401 - fake_api is a fixture

VERSION = importlib.metadata.version("genai-prices")
CORPUS = Path(__file__).parent.parent / "data" / "corpus"

#: the viewer answers only its own host names (a TestClient says "testserver")
LOOPBACK = "http://127.0.0.1"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def cents(x: float) -> int:
    return round(x * 100)


# -- test vectors from the providers' published prices ----------------------------------

def test_openai_cached_input_and_reasoning_tokens():
    # Source: https://openai.com/api/pricing/ — gpt-5: input $1.250, cached input $0.125,
    # output $10.000 per 1M tokens; https://platform.openai.com/docs/guides/reasoning —
    # reasoning tokens are billed as output tokens (they are inside completion_tokens).
    wire = {"prompt_tokens": 200_000, "completion_tokens": 50_000,
            "prompt_tokens_details": {"cached_tokens": 150_000},
            "completion_tokens_details": {"reasoning_tokens": 40_000}}
    expected = (50_000 * 1.25 + 150_000 * 0.125 + 50_000 * 10.00) / 1e6  # $0.58125
    charge = Prices.default().charge("openai", "gpt-5", "2025-09-01", openai.map_usage(wire))
    assert charge.amount == pytest.approx(expected) and cents(charge.amount) == 58
    assert (charge.source, charge.version, charge.priced_as) == ("genai-prices", VERSION,
                                                                 "openai/gpt-5")


def test_anthropic_cache_writes_of_5_minutes_and_1_hour_and_cache_reads():
    # Source: https://docs.claude.com/en/docs/build-with-claude/prompt-caching#pricing —
    # Claude Sonnet 4.5: base input $3/MTok, 5m cache writes $3.75, 1h cache writes $6,
    # cache hits and refreshes $0.30, output $15.
    wire = {"input_tokens": 1_000, "output_tokens": 2_000, "cache_read_input_tokens": 50_000,
            "cache_creation_input_tokens": 20_000,
            "cache_creation": {"ephemeral_5m_input_tokens": 10_000,
                               "ephemeral_1h_input_tokens": 10_000}}
    expected = (1_000 * 3 + 10_000 * 3.75 + 10_000 * 6 + 50_000 * 0.30 + 2_000 * 15) / 1e6
    charge = Prices.default().charge("anthropic", "claude-sonnet-4-5", "2025-10-01",
                                     anthropic.map_usage(wire))
    assert charge.amount == pytest.approx(expected) and cents(charge.amount) == 15  # $0.1455
    # the same writes all for 5 minutes cost less: the TTL is priced, not ignored
    wire["cache_creation"] = {"ephemeral_5m_input_tokens": 20_000}
    five = Prices.default().cost("anthropic", "claude-sonnet-4-5", "2025-10-01",
                                 anthropic.map_usage(wire))
    assert five == pytest.approx(expected - 10_000 * (6 - 3.75) / 1e6)


def test_gemini_prompts_above_200k_tokens_are_priced_at_the_long_context_tier():
    # Source: https://ai.google.dev/gemini-api/docs/pricing — Gemini 2.5 Pro: input $1.25
    # (prompts <= 200k tokens) / $2.50 (> 200k); output including thinking tokens $10.00 /
    # $15.00 per 1M tokens.
    def cost(prompt: int) -> float:
        wire = {"promptTokenCount": prompt, "candidatesTokenCount": 4_000,
                "thoughtsTokenCount": 6_000}
        return Prices.default().cost("gemini", "gemini-2.5-pro", "2025-08-01",
                                     gemini.map_usage(wire))

    assert cost(150_000) == pytest.approx((150_000 * 1.25 + 10_000 * 10.00) / 1e6)  # $0.2875
    assert cost(250_000) == pytest.approx((250_000 * 2.50 + 10_000 * 15.00) / 1e6)  # $0.775
    assert (cents(cost(150_000)), cents(cost(250_000))) == (29, 78)


def test_deepseek_cache_hits_and_off_peak_hours():
    # Source: https://api-docs.deepseek.com/quick_start/pricing (deepseek-chat, the table in
    # force from 2025-02-08): 1M input tokens $0.07 on a cache hit, $0.27 on a miss, 1M output
    # tokens $1.10, from UTC 00:30 to 16:30; 50% off from 16:30 to 00:30 (off-peak).
    wire = {"prompt_tokens": 100_000, "completion_tokens": 5_000,
            "prompt_cache_hit_tokens": 80_000, "prompt_cache_miss_tokens": 20_000}
    usage = openai.map_usage(wire)  # DeepSeek speaks the Chat Completions wire
    expected = (80_000 * 0.07 + 20_000 * 0.27 + 5_000 * 1.10) / 1e6  # $0.0165
    peak = Prices.default().charge("openai", "deepseek-chat", "2025-03-10T10:00:00Z", usage)
    assert peak.amount == pytest.approx(expected) and peak.priced_as == "deepseek/deepseek-chat"
    off = Prices.default().cost("openai", "deepseek-chat", "2025-03-10T18:00:00Z", usage)
    assert off == pytest.approx(expected / 2)


# -- sources, overrides and the unpriced ------------------------------------------------

def test_an_override_wins_over_the_database_and_records_the_files_digest(tmp_path):
    path = tmp_path / "deal.toml"
    text = ('[[prices]]\nprovider="openai"\nmodel="gpt-5"\nsince=2025-01-01\n'
            'input=1.0\noutput=8.0\n')
    path.write_text(text)
    charge = Prices.load(str(path)).charge("openai", "gpt-5", "2025-09-01",
                                           Usage(input_tokens=10**6, output_tokens=10**6))
    assert (charge.amount, charge.source, charge.priced_as) == (9.0, "overrides", "openai/gpt-5")
    import hashlib
    assert charge.version == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    # a model the file does not name is still priced by the database
    other = Prices.load(str(path)).charge("openai", "gpt-4o", "2025-09-01", Usage(input_tokens=10**6))
    assert (other.amount, other.source) == (2.5, "genai-prices")


def test_an_unknown_model_is_unpriced_with_the_reason_never_free():
    charge = Prices.default().charge("openai", "my-private-model", "2025-09-01",
                                     Usage(input_tokens=100))
    assert charge.amount is None
    # recorded as a code: the sentence is the record's provider, model, source and version
    assert (charge.reason, charge.source, charge.version) == ("unlisted", "genai-prices", VERSION)
    assert charge.explained("openai", "my-private-model") == (
        f"openai/my-private-model is not in genai-prices {VERSION}; add it to a --prices file")


def test_an_unknown_model_under_a_price_table_says_the_table_was_tried_too(tmp_path):
    table = PriceTable.parse('[[prices]]\nprovider="p"\nmodel="m"\nsince=2025-01-01\n'
                             'input=1\noutput=1\n', "t")
    prices = Prices(table)
    charge = prices.charge("openai", "my-private-model", "2025-09-01", Usage(input_tokens=1))
    assert (charge.amount, charge.reason) == (None, "unlisted_overrides")
    sentence = (f"openai/my-private-model is not in genai-prices {VERSION} or the override "
                "table; add it to a --prices file")
    assert charge.explained("openai", "my-private-model") == sentence
    # what ``find`` answers (``turnlog prices``) is the same sentence
    assert prices.find("openai", "my-private-model") == sentence


@given(reason=st.text(max_size=60) | st.none(), provider=st.text(max_size=10),
       model=st.text(max_size=10))
def test_a_reason_that_is_not_a_code_reads_as_recorded(reason, provider, model):
    # every reason recorded before the codes (a sentence) reads back unchanged
    assume(reason not in {r.value for r in UnpricedReason})
    assert Charge(reason=reason, source="genai-prices", version="1").explained(
        provider, model) == reason


def test_a_recorded_turn_stores_the_code_and_every_reader_shows_the_sentence(tmp_path,
                                                                            fake_api):  # noqa: F811
    # a live OpenAI run (the official SDK against the loopback fake) of a model genai-prices
    # does not list, through the installed console script
    import os
    import subprocess
    import sys

    turnlog = str(Path(sys.executable).parent / "turnlog")
    db = tmp_path / "j.db"
    env = {**os.environ, **fake_api.env("openai")}

    def run(*words):
        done = subprocess.run([turnlog, *map(str, words)], capture_output=True, text=True,
                              env=env, timeout=120)
        assert done.returncode == 0, (words, done.stderr)
        return done.stdout

    fake_api.script("openai", [reply("openai", text="hi", model="my-private-model",
                                     usage={"prompt_tokens": 7, "completion_tokens": 2})])
    run("run", "hello", "--provider", "openai", "--model", "my-private-model", "--id", "c",
        "--db", db)
    sentence = f"openai/my-private-model is not in genai-prices {VERSION}; add it to a --prices file"
    # stored: the code, not the sentence (its parts are the record's own fields)
    con = sqlite3.connect(db)
    [(payload, reason)] = con.execute(
        "SELECT e.payload, c.unpriced_reason FROM events e JOIN costs c USING (position)").fetchall()
    con.close()
    assert json.loads(payload)["charge"] == {"reason": "unlisted", "source": "genai-prices",
                                             "version": VERSION}
    assert reason == "unlisted"  # the costs view shows what was recorded
    [event] = _responses(str(db))
    assert event.charge.explained(event.provider, event.model) == sentence
    # the audit says why in the sentence, as before
    assert json.loads(run("audit", "--db", db, "--json"))["cost"]["unpriced"] == [
        {"provider": "openai", "model": "my-private-model", "reason": sentence}]
    assert f"unpriced: openai/my-private-model: {sentence}" in run("audit", "--db", db)
    # the jsonl export holds the payload as stored, and imports into a journal that verifies
    exported = tmp_path / "c.jsonl"
    exported.write_text(run("export", "c", "--format", "jsonl", "--db", db))
    [charged] = [json.loads(line)["payload"]["charge"] for line in exported.read_text().splitlines()
                 if json.loads(line).get("type") == "model_responded"]
    assert charged["reason"] == "unlisted"
    other = tmp_path / "k.db"
    run("import", exported, "--format", "jsonl", "--db", other)
    run("verify", "--db", other)
    run("verify", "--db", db)


def test_overrides_in_another_currency_are_refused_by_name(tmp_path):
    path = tmp_path / "eur.toml"
    path.write_text('currency="EUR"\n[[prices]]\nprovider="p"\nmodel="m"\nsince=2025-01-01\n'
                    'input=1\noutput=1\n')
    with pytest.raises(PriceTableError, match="currency is 'EUR'.*must be in USD"):
        Prices.load(str(path))


def _responses(db: str) -> list[ModelResponded]:
    con = sqlite3.connect(db)
    rows = con.execute("SELECT type, version, payload FROM events "
                       "WHERE type = 'model_responded'").fetchall()
    con.close()
    return [decode_event(*row) for row in rows]


def test_every_corpus_model_genai_prices_knows_is_priced_and_the_rest_say_why(tmp_path):
    db = str(tmp_path / "corpus.db")
    with Journal(db, extensions=EXTENSIONS) as journal:
        for i, path in enumerate(sorted(CORPUS.glob("*.json*"))):
            try:
                import_file(journal, path, conversation_id=f"c{i}")
            except FormatError:
                continue  # refused on purpose (tests/formats/test_corpus.py REFUSED)
    prices = Prices.default()
    con = sqlite3.connect(db)
    calls = con.execute("SELECT DISTINCT provider, model FROM model_calls WHERE ok").fetchall()
    con.close()
    seen = {(p, m): prices.charge(p, m, "2026-01-01", Usage(input_tokens=1)) for p, m in calls}
    assert len(seen) > 20
    for (provider, model), charge in seen.items():
        known = []
        for vendor, ref in ((None, model), *((model.split("/", 1),) if "/" in model else ()),
                            ({"gemini": "google", "openai-responses": "openai"}.get(
                                provider, provider), model)):
            try:
                genai_prices.calc_price(genai_prices.Usage(input_tokens=1), ref,
                                        provider_id=vendor)
                known.append(vendor)
            except LookupError:
                pass
        if known:
            assert charge.amount is not None and charge.source == "genai-prices", (provider, model)
        else:
            assert charge.amount is None and charge.reason == "unlisted"
            assert "is not in genai-prices" in charge.explained(provider, model)
    # the models the issue found unpriced with the old table
    for model in ("gpt-5", "gpt-5-mini", "claude-sonnet-4-5", "claude-opus-4-6",
                  "claude-haiku-4-5", "gemini-2.5-pro", "deepseek/deepseek-chat"):
        assert any(m == model and c.amount is not None for (_p, m), c in seen.items()), model
    # and the audit lists the rest as unpriced, each with its reason
    conn = connect_readonly(db)
    try:
        cost = audit(conn, AuditQuery(), prices)["cost"]
    finally:
        conn.close()
    unpriced = {(u["provider"], u["model"]): u["reason"] for u in cost["unpriced"]}
    assert unpriced == {key: c.explained(*key) for key, c in seen.items() if c.amount is None}
    assert unpriced and not cost["complete"]


# -- the charge recorded with the turn ---------------------------------------------------

def _script(tmp_path: Path, turns: list[dict]) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns}))
    return path


def _table(path: Path, input_: float, output: float) -> Path:
    path.write_text(f'[[prices]]\nprovider="scripted"\nmodel="*"\nsince=2020-01-01\n'
                    f'input={input_}\noutput={output}\n')
    return path


def test_the_price_recorded_on_a_turn_survives_a_price_change(tmp_path):
    db, prices = tmp_path / "j.db", _table(tmp_path / "prices.toml", 1.0, 2.0)
    script = _script(tmp_path, [{"text": "hi", "usage": {"input_tokens": 1_000_000,
                                                         "output_tokens": 500_000}}])
    assert invoke("run", "hello", "--script", script, "--prices", prices, "--id", "c",
                  "--db", db).exit_code == 0
    [event] = _responses(str(db))
    assert (event.charge.amount, event.charge.source) == (2.0, "overrides")
    _table(prices, 10.0, 20.0)  # the price changes after the run
    report = json.loads(invoke("audit", "--db", db, "--prices", prices, "--reprice",
                               "--json").output)
    assert report["cost"]["total"] == 2.0 and report["cost"]["recorded"] == 1
    assert report["cost"]["repriced"]["total"] == 20.0
    assert report["cost"]["repriced"]["conversations"] == [
        {"conversation_id": "c", "recorded": 2.0, "today": 20.0}]
    text = invoke("audit", "--db", db, "--prices", prices, "--reprice").output
    assert "c: recorded 2.0000, today 20.0000" in text
    # the SQL view shows the recorded charge, its source and version
    con = sqlite3.connect(db)
    row = con.execute("SELECT cost, price_source, price_version, unpriced_reason FROM costs").fetchone()
    con.close()
    assert row[:2] == (2.0, "overrides") and row[2].startswith("sha256:") and row[3] is None


def test_a_journal_written_before_charges_still_audits_at_the_prices_of_its_time(tmp_path):
    # an imported transcript has no recorded charge: it is priced at its own timestamp
    prices = tmp_path / "p.toml"
    prices.write_text('[[prices]]\nprovider="openai"\nmodel="gpt-x"\nsince=2024-01-01\n'
                      'input=1\noutput=1\n'
                      '[[prices]]\nprovider="openai"\nmodel="gpt-x"\nsince=2025-01-01\n'
                      'input=100\noutput=100\n')
    transcript = tmp_path / "t.jsonl"
    at = "2024-06-01T10:00:00.000000Z"
    lines = [
        {"seq": 1, "type": "conversation_started", "version": 1, "recorded_at": at,
         "payload": {"conversation_id": "old", "provider": "openai", "model": "gpt-x"}},
        {"seq": 2, "type": "user_message", "version": 1, "recorded_at": at,
         "payload": {"parts": [{"type": "text", "text": "hi"}]}},
        {"seq": 3, "type": "model_responded", "version": 1, "recorded_at": at,
         "payload": {"turn": 1, "parts": [{"type": "text", "text": "hello"}],
                     "usage": {"input_tokens": 1_000_000}, "source": "imported",
                     "timestamp": at}}]
    transcript.write_text("\n".join(json.dumps(line) for line in lines))
    db = tmp_path / "j.db"
    result = invoke("import", transcript, "--id", "old", "--db", db)
    assert result.exit_code == 0, result.output
    [event] = _responses(str(db))
    assert event.charge is None and event.usage.input_tokens == 1_000_000
    report = json.loads(invoke("audit", "--db", db, "--prices", prices, "--json").output)
    assert report["cost"]["total"] == 1.0  # 2024's price, not 2025's
    assert report["cost"]["by_day"] == [{"day": "2024-06-01", "cost": 1.0}]


# -- figures by the money ----------------------------------------------------------------

def test_refused_duplicates_retries_tool_turns_providers_and_days_are_costed(tmp_path):
    turns = [dict(t, usage={"input_tokens": 1_000_000, "output_tokens": 0})
             for t in DEMO_SCRIPT["turns"]]
    script, prices = _script(tmp_path, turns), _table(tmp_path / "p.toml", 1.0, 0.0)
    db = tmp_path / "j.db"
    result = invoke("run", DEMO_PROMPT, "--script", script, "--tools", "demo", "--prices",
                    prices, "--id", "demo", "--db", db, "--json")
    assert result.exit_code == 0, result.output
    cost = json.loads(invoke("audit", "--db", db, "--json").output)["cost"]
    assert cost["total"] == 5.0 and cost["complete"]  # five answers at $1 each
    assert cost["tool_turns"] == {"responses": 4, "cost": 4.0}
    # the fourth answer only asked for the refused duplicate: all of its cost
    assert cost["duplicates"] == {"responses": 1, "cost": 1.0}
    assert cost["retried"] == {"responses": 0, "cost": 0.0}
    assert cost["by_provider"] == [{"provider": "scripted", "cost": 5.0}]
    assert [d["cost"] for d in cost["by_day"]] == [5.0]
    assert cost["conversations"] == [{"conversation_id": "demo", "cost": 5.0}]
    text = invoke("audit", "--db", db).output
    assert "refused duplicates: 1 1.0000" in text and "retried requests: 0 0" in text


def test_the_answer_to_a_retried_request_is_counted_under_retries(tmp_path):
    from turnlog.engine.model.conversation import Conversation
    from turnlog.engine.model.events import (
        Charge,
        ConversationStarted,
        ModelFailed,
        ModelRequested,
        UserMessage,
    )

    db = str(tmp_path / "j.db")
    with Journal(db, extensions=EXTENSIONS) as journal:
        conv = Conversation.start(journal, ConversationStarted(
            conversation_id="r", provider="openai", model="gpt-4o"))
        conv.append(UserMessage.of("hi"),
                    ModelRequested(turn=1, digest="d", provider="openai", model="gpt-4o"),
                    ModelFailed(turn=1, error_type="ServerError", message="boom"),
                    ModelRequested(turn=1, digest="d", provider="openai", model="gpt-4o",
                                   attempt=2),
                    ModelResponded(turn=1, parts=(), usage=Usage(input_tokens=10),
                                   provider="openai", model="gpt-4o",
                                   charge=Charge(amount=0.75, source="overrides")))
    conn = connect_readonly(db)
    try:
        cost = audit(conn)["cost"]
    finally:
        conn.close()
    assert cost["retried"] == {"responses": 1, "cost": 0.75} and cost["total"] == 0.75


# -- turnlog prices ----------------------------------------------------------------------

def test_prices_lists_each_token_kind_with_its_source_and_version(tmp_path):
    result = invoke("prices", "claude-sonnet-4-5", "--provider", "anthropic", "--json")
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.output)["prices"]
    assert (row["provider"], row["model"], row["source"], row["version"]) == (
        "anthropic", "claude-sonnet-4-5", "genai-prices", VERSION)
    assert row["rates"]["cache_write_1h_mtok"]["base"] == 6.0
    assert row["rates"]["input_mtok"]["tiers"] == [{"above": 200_000, "price": 6.0}]
    table = _table(tmp_path / "p.toml", 1.5, 2.5)
    out = invoke("prices", "anything", "--provider", "scripted", "--prices", table).output
    assert out.splitlines()[0].startswith("scripted/*   overrides sha256:")
    assert "input_mtok               1.5" in out


def test_prices_of_an_unknown_model_says_it_is_unpriced_and_why():
    result = invoke("prices", "my-private-model", "--provider", "openai")
    assert result.exit_code == 1
    assert "unpriced: openai/my-private-model is not in genai-prices" in result.output


def test_a_price_table_alone_is_the_only_source():
    table = PriceTable.parse('[[prices]]\nprovider="p"\nmodel="m"\nsince=2025-01-01\n'
                             'input=1\noutput=1\n', "t")
    charge = Prices.of(table).charge("openai", "gpt-4o", "2025-06-01", Usage(input_tokens=1))
    assert charge.amount is None and charge.reason == "openai/gpt-4o has no price in t on 2025-06-01"


def test_the_viewers_dashboard_shows_the_cost_figures_and_why_a_model_is_unpriced(tmp_path):
    from starlette.testclient import TestClient

    from turnlog.replay.view.app import create_app

    db, prices = tmp_path / "j.db", _table(tmp_path / "p.toml", 1.0, 0.0)
    script = _script(tmp_path, [{"text": "hi", "usage": {"input_tokens": 1_000_000}}])
    assert invoke("run", "hello", "--script", script, "--prices", prices, "--id", "s",
                  "--db", db).exit_code == 0
    with Journal(str(db), extensions=EXTENSIONS) as journal:
        from turnlog.engine.model.conversation import Conversation
        from turnlog.engine.model.events import ConversationStarted, ModelRequested, UserMessage

        conv = Conversation.start(journal, ConversationStarted(
            conversation_id="p", provider="openai", model="my-private-model"))
        conv.append(UserMessage.of("hi"),
                    ModelRequested(turn=1, digest="d", provider="openai", model="my-private-model"),
                    ModelResponded(turn=1, parts=(), usage=Usage(input_tokens=5)))
    page = TestClient(create_app(str(db)), base_url=LOOPBACK).get("/audit").text
    assert "unpriced openai/my-private-model: openai/my-private-model is not in genai-prices" in page
    assert "priced as recorded: 1 responses" in page
    assert 'href="/conversation?id=s">s</a> 1.0000' in page


def test_a_bad_price_file_stops_a_run_before_the_journal_is_touched(tmp_path):
    db, bad = tmp_path / "j.db", tmp_path / "bad.toml"
    bad.write_text("[[prices]]\nprovider = 1\n")
    script = _script(tmp_path, [{"text": "hi"}])
    result = invoke("run", "hello", "--script", script, "--prices", bad, "--db", db)
    assert result.exit_code != 0
    assert f"price table {bad}, [[prices]] entry 1: provider must be a non-empty string" in result.output
    assert not db.exists()


_PRICED = [("openai", "gpt-4o"), ("anthropic", "claude-sonnet-4-20250514"),
           ("gemini", "gemini-2.5-pro"), ("deepseek", "deepseek-chat"), ("openai", "gpt-4o-mini"),
           ("acme", "unpriced-1"), ("openai", "")]
_COUNT = st.one_of(st.sampled_from([0, 1, 40, 500, 800]), st.integers(0, 400_000))
_USAGE = st.builds(lambda i, o, c, w, h, a, im, oa: Usage(
    input_tokens=i + c + w, output_tokens=o + oa, cached_input_tokens=c, cache_write_tokens=w,
    cache_write_1h_tokens=h, input_audio_tokens=min(a, i), input_image_tokens=min(im, i),
    output_audio_tokens=oa), _COUNT, _COUNT, _COUNT, _COUNT, _COUNT, _COUNT, _COUNT,
    st.sampled_from([0, 7]))
# whole hours across deepseek's off-peak boundary and days across price changes
_WHEN = st.builds(lambda d, h, m: f"{d.isoformat()}T{h:02d}:{m:02d}:00.000000Z",
                  st.dates(dt.date(2024, 1, 1), dt.date(2026, 6, 30)),
                  st.sampled_from([0, 12, 16, 17, 23]), st.sampled_from([0, 29, 30, 59]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_USAGE, min_size=1, max_size=3), st.data())
def test_a_prices_remembered_charges_equal_each_call_priced_afresh(usages, data):
    # one Prices prices every call (and remembers each entry, price and usage it met); the
    # same calls priced each by a new Prices, which remembers nothing, give the same charges.
    # Few usages, many moments: the same usage meets other prices (history, off-peak hours).
    calls = data.draw(st.lists(st.tuples(st.sampled_from(_PRICED), _WHEN, st.sampled_from(usages)),
                               min_size=1, max_size=30))
    shared = Prices.default()
    for (provider, model), when, usage in calls + calls:
        assert shared.charge(provider, model, when, usage) == \
            Prices.default().charge(provider, model, when, usage)
