"""Forged audit figures: ``verify`` and ``audit --check`` recompute the projections from events.

The projection tables are checked cheaply by counts and last positions
(``in_step``), which a forged figure passes. ``verify`` (through the engine's
journal extension) and ``turnlog audit --check`` recompute every row and name
the table, conversation, position and column that differ; the audit then takes
its figures from the events, never from the forged table.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from turnlog.engine.cli import cli
from turnlog.engine.audit.projections import MODEL_CALLS, REQUESTED_CALLS, TOOL_CALLS, check, in_step
from turnlog.engine.audit.views import EXTENSIONS
from turnlog.journal import Journal


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("demo") / "turnlog.db"
    assert invoke("demo", "--db", db).exit_code == 0
    [cid] = [c["conversation_id"] for c in json.loads(invoke("ls", "--db", db, "--json").output)]
    return db, cid


def forged(demo, tmp_path, *statements: str) -> Path:
    """A copy of the demo journal with the projection triggers dropped and ``statements`` run."""
    db, _ = demo
    copy = tmp_path / "forged.db"
    shutil.copy(db, copy)
    conn = sqlite3.connect(copy)
    for table in (MODEL_CALLS, TOOL_CALLS, REQUESTED_CALLS):
        for op in ("update", "delete"):
            conn.execute(f"DROP TRIGGER {table}_refuse_{op}")
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return copy


FIRST_RESPONSE = f"(SELECT min(position) FROM {MODEL_CALLS} WHERE ok)"


def test_an_untouched_journal_has_no_mismatch(demo):
    db, cid = demo
    result = invoke("verify", "--db", db, "--json")
    assert result.exit_code == 0
    assert json.loads(result.output)["projections"] == []
    checked = invoke("audit", "--check", "--json", "--db", db)
    assert checked.exit_code == 0
    report = json.loads(checked.output)
    assert report["projection_mismatches"] == [] and report["source"] == "projections"


def test_a_forged_token_count_is_named_by_verify_and_audit_check(demo, tmp_path):
    db, cid = demo
    copy = forged(demo, tmp_path,
                  f"UPDATE {MODEL_CALLS} SET input_tokens = 999999 WHERE position = {FIRST_RESPONSE}")
    conn = sqlite3.connect(copy)
    assert in_step(conn)  # counts and last positions cannot see it
    conn.close()

    result = invoke("verify", "--db", copy, "--json")
    assert result.exit_code == 1
    [mismatch] = json.loads(result.output)["projections"]
    assert (mismatch["table"], mismatch["conversation_id"], mismatch["column"]) == (
        MODEL_CALLS, cid, "input_tokens")
    assert "999999" in mismatch["reason"]
    text = invoke("verify", "--db", copy)
    assert text.exit_code == 1 and f"FORGED PROJECTION: {MODEL_CALLS}" in text.output

    honest = json.loads(invoke("audit", "--json", "--db", db).output)
    unchecked = json.loads(invoke("audit", "--json", "--db", copy).output)
    assert unchecked["tokens"]["input"] != honest["tokens"]["input"]  # what --check is for
    checked = invoke("audit", "--check", "--json", "--db", copy)
    assert checked.exit_code == 1
    assert "FORGED PROJECTION" in checked.stderr
    report = json.loads(checked.stdout)
    assert report["source"] == "events"
    assert report["tokens"] == honest["tokens"] and report["cost"] == honest["cost"]
    assert [m["column"] for m in report["projection_mismatches"]] == ["input_tokens"]


@pytest.mark.parametrize("statement, reason", [
    (f"DELETE FROM {TOOL_CALLS} WHERE position = (SELECT min(position) FROM {TOOL_CALLS})",
     "missing"),
    (f"INSERT INTO {MODEL_CALLS} VALUES (1, 'x', '2025-01-01', 1, 5, 5, 0, 0, 0, NULL, NULL, "
     "1, '2025-01-01T00:00:00Z', NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL)",
     "forged"),
    (f"UPDATE {MODEL_CALLS} SET requested = NULL WHERE requested IS NOT NULL", "requested"),
    (f"UPDATE {TOOL_CALLS} SET call_id = 'other' WHERE position = (SELECT max(position) "
     f"FROM {TOOL_CALLS})", "call_id"),
    (f"UPDATE {TOOL_CALLS} SET outcome = 'succeeded', reason = NULL "
     f"WHERE position = (SELECT max(position) FROM {TOOL_CALLS})", "outcome"),
    (f"UPDATE {MODEL_CALLS} SET conversation_id = 'elsewhere' WHERE position = {FIRST_RESPONSE}",
     "conversation_id"),
    # the cost columns (views v8): a forged charge or token count is named like any other
    (f"UPDATE {MODEL_CALLS} SET charge_amount = 99.0 WHERE position = {FIRST_RESPONSE}",
     "charge_amount"),
    (f"UPDATE {MODEL_CALLS} SET cache_write_1h_tokens = 7 WHERE position = {FIRST_RESPONSE}",
     "cache_write_1h_tokens"),
    (f"UPDATE {MODEL_CALLS} SET attempt = 3 WHERE position = {FIRST_RESPONSE}", "attempt"),
    # the requested calls (views v9): a row per call, keyed by the response and the part
    (f"DELETE FROM {REQUESTED_CALLS} WHERE position = (SELECT min(position) "
     f"FROM {REQUESTED_CALLS})", "the row for this event is missing"),
    (f"UPDATE {REQUESTED_CALLS} SET call_id = 'other' WHERE position = (SELECT min(position) "
     f"FROM {REQUESTED_CALLS})", "call_id"),
    (f"UPDATE {REQUESTED_CALLS} SET kind = 'web_search_call'", "kind"),
    (f"INSERT INTO {REQUESTED_CALLS} SELECT position, conversation_id, part + 100, 'extra', "
     f"tool, kind FROM {REQUESTED_CALLS} LIMIT 1", "part 1"),
])
def test_every_kind_of_forged_row_is_found(demo, tmp_path, statement, reason):
    copy = forged(demo, tmp_path, statement)

    with Journal(copy, extensions=EXTENSIONS, readonly=True) as journal:
        report = journal.verify()

    assert not report.ok and report.first_bad is None  # the events themselves are intact
    assert report.projections and reason in (
        report.projections[0].reason + str(report.projections[0].column))


def test_verify_of_one_conversation_checks_its_rows_only(demo, tmp_path):
    db, cid = demo
    copy = forged(demo, tmp_path,
                  f"UPDATE {MODEL_CALLS} SET output_tokens = 0 WHERE position = {FIRST_RESPONSE}")
    with Journal(copy, extensions=EXTENSIONS, readonly=True) as journal:
        assert not journal.verify(cid).ok
    conn = sqlite3.connect(copy)
    try:
        assert check(conn, "someone-else") == []
        assert [m.column for m in check(conn, cid)] == ["output_tokens"]
    finally:
        conn.close()


def test_a_redefined_view_is_reported(demo, tmp_path):
    copy = forged(demo, tmp_path, "DROP VIEW tool_calls",
                  "CREATE VIEW tool_calls AS SELECT 1 AS position WHERE 0")

    result = invoke("verify", "--db", copy, "--json")

    assert result.exit_code == 1
    [mismatch] = json.loads(result.output)["projections"]
    assert mismatch["table"] == "tool_calls" and "redefined" in mismatch["reason"]


def test_a_forged_requested_call_is_named_with_its_part_and_the_audit_reads_events(demo, tmp_path):
    """A requested call dropped from its table would hide it from the pending calls: verify
    names the response and the part, ``audit --check`` counts from the events."""
    db, cid = demo
    copy = forged(demo, tmp_path, f"DELETE FROM {REQUESTED_CALLS} WHERE position = "
                                  f"(SELECT min(position) FROM {REQUESTED_CALLS})")
    conn = sqlite3.connect(copy)
    asked = conn.execute(
        f"SELECT e.position, p.key FROM events AS e, json_each(e.payload, '$.parts') AS p "
        "WHERE e.type = 'model_responded' AND json_extract(p.value, '$.type') = 'tool_call' "
        f"AND e.position NOT IN (SELECT position FROM {REQUESTED_CALLS})").fetchall()
    conn.close()
    assert asked  # the demo's first response asks for calls
    found = json.loads(invoke("verify", "--db", copy, "--json").output)["projections"]
    assert [(m["table"], m["conversation_id"], m["position"], m["reason"]) for m in found] == [
        (REQUESTED_CALLS, cid, position, f"part {part}: the row for this event is missing")
        for position, part in asked]
    honest = json.loads(invoke("audit", "--json", "--db", db).output)
    checked = json.loads(invoke("audit", "--check", "--json", "--db", copy).stdout)
    assert checked["source"] == "events" and checked["tools"] == honest["tools"]
