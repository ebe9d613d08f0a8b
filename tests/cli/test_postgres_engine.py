"""The engine's views and audit projections on PostgreSQL: ``ls``, ``show``, ``audit``, ``tail``
read a PostgreSQL journal as they read a SQLite file, with the same figures.

One demo journal is built once (SQLite, then copied to PostgreSQL with ``turnlog copy``)
and shared by the tests that only read it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from turnlog.engine.audit.sql import EVENTS
from turnlog.engine.audit import AuditQuery, audit
from turnlog.engine.cli import cli
from turnlog.engine.audit.listing import appends_waiter, events_after, last_position
from turnlog.journal import POSTGRES, SQLITE
from turnlog.journal._dialect import pg_placeholders
from turnlog.engine.audit.views import connect_readonly, views
from turnlog.journal import Journal
from tests.pgcluster import fresh_url

runner = CliRunner()
ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


def invoke(*args: str) -> str:
    result = runner.invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """(sqlite path, postgresql url, demo conversation id, its fork's id): the same journal."""
    db = str(tmp_path_factory.mktemp("pgengine") / "j.db")
    url = fresh_url()
    cid = json.loads(invoke("demo", "--db", db, "--json"))["conversation_id"]
    fork = json.loads(invoke("fork", cid, "--at", "8", "--db", db, "--json"))["conversation_id"]
    invoke("copy", db, url)
    return db, url, cid, fork


def _without_clock(report: dict) -> dict:
    return {k: v for k, v in report.items() if k != "generated_at"}


@pytest.mark.parametrize("args", [
    ["ls", "--json"], ["audit", "--json"], ["audit", "--json", "--tool", "add"],
    ["audit", "--json", "--status", "completed", "--check"],
], ids=" ".join)
def test_listing_and_audit_figures_are_equal_on_both_backends(both, args):
    db, url, _cid, _fork = both

    on_sqlite = json.loads(invoke(*args, "--db", db))
    on_postgres = json.loads(invoke(*args, "--db", url))

    assert on_postgres == on_sqlite


def test_show_and_tail_print_the_same_on_both_backends(both):
    db, url, cid, fork = both
    for args in (["show", cid, "--json"], ["show", fork], ["show", cid, "--full"],
                 ["tail", "--once", "--from-position", "1", "--json"]):
        on_postgres = invoke(*args, "--db", url).replace(shlex.quote(url), "DB")
        assert on_postgres == invoke(*args, "--db", db).replace(shlex.quote(db), "DB"), args


def test_projections_and_events_give_the_same_audit_on_postgresql(both):
    _db, url, _cid, _fork = both
    conn = connect_readonly(url)
    try:
        by_projection = audit(conn, AuditQuery(tool="get_weather"))
        by_events = audit(conn, AuditQuery(tool="get_weather"), source=EVENTS)
    finally:
        conn.close()

    assert by_projection.pop("source") == "projections" and by_events.pop("source") == "events"
    assert by_projection == by_events


def test_every_next_try_hint_of_the_demo_works_on_postgresql():
    url = fresh_url()
    out = invoke("demo", "--db", url)
    hints = out.split("Next, try:\n", 1)[1].splitlines()

    assert len(hints) == 5
    for hint in hints:
        words = shlex.split(hint)
        assert words[0] == "turnlog" and url in words
        result = runner.invoke(cli, words[1:])
        assert result.exit_code == 0, (hint, result.output)


def test_a_postgresql_journal_written_without_the_engine_is_read_through_temporary_views(both):
    _db, url, cid, _fork = both
    bare = fresh_url()
    invoke("copy", url, bare)
    with psycopg.connect(bare, autocommit=True) as conn:  # as if written by the journal alone
        conn.execute("DROP VIEW conversations, messages, model_calls, tool_calls")
        for table in ("_audit_model_calls", "_audit_tool_calls"):
            conn.execute(f"DROP FUNCTION {table}_project() CASCADE")
            conn.execute(f"DROP TABLE {table}")
        conn.execute("DELETE FROM _turnlog_meta WHERE key = 'ext:engine.views'")

    listing = json.loads(invoke("ls", "--json", "--db", bare))

    assert cid in [row["conversation_id"] for row in listing]
    assert json.loads(invoke("audit", "--json", "--db", bare))["source"] == "events"


def test_a_forged_projection_row_on_postgresql_is_named_by_verify_and_audit_check():
    url = fresh_url()
    invoke("demo", "--db", url)
    with psycopg.connect(url, autocommit=True) as conn:  # a superuser goes around the triggers
        conn.execute("ALTER TABLE _audit_model_calls DISABLE TRIGGER USER")
        position = conn.execute("UPDATE _audit_model_calls SET input_tokens = 1 WHERE position = "
                                "(SELECT min(position) FROM _audit_model_calls) "
                                "RETURNING position").fetchone()[0]

    verify = runner.invoke(cli, ["verify", "--db", url, "--json"])
    checked = runner.invoke(cli, ["audit", "--check", "--db", url, "--json"])

    assert verify.exit_code == 1 and checked.exit_code == 1
    found = json.loads(checked.stdout)["projection_mismatches"]
    assert [(m["table"], m["position"], m["column"]) for m in found] == [
        ("_audit_model_calls", position, "input_tokens")]
    assert json.loads(checked.stdout)["source"] == "events"


def test_the_projection_tables_refuse_update_and_delete_on_postgresql():
    url = fresh_url()
    invoke("demo", "--db", url)
    with psycopg.connect(url, autocommit=True) as conn:
        for sql in ("UPDATE _audit_tool_calls SET tool = 'x'", "DELETE FROM _audit_model_calls",
                    "TRUNCATE _audit_tool_calls"):
            with pytest.raises(psycopg.errors.IntegrityConstraintViolation, match="append-only"):
                conn.execute(sql)


def test_the_postgresql_views_use_no_sqlite_function():
    rendered = " ".join(views(POSTGRES).values())
    for sqlite_only in ("json_extract(", "json_each(", "group_concat(", "json_group_array("):
        assert sqlite_only not in rendered
    assert "json_extract(e.payload, '$.usage.input_tokens')" in views(SQLITE)["model_calls"]


_SQL_TEXT = st.text(alphabet="?%'ab ", max_size=30)


@given(_SQL_TEXT)
def test_placeholders_change_only_outside_string_literals(sql):
    converted = pg_placeholders(sql)
    outside = sql.split("'")[::2]
    inside = sql.split("'")[1::2]

    assert converted.split("'")[1::2] == [s.replace("%", "%%") for s in inside]
    assert converted.split("'")[::2] == [s.replace("%", "%%").replace("?", "%s") for s in outside]


_APPENDER = """
import sys, time
from turnlog.journal import Journal, NewEvent
with Journal.open(sys.argv[1]) as j:
    j.append("from-another-process", [NewEvent("note", 1, "{}")], 0)
    print(time.time(), flush=True)
"""


def test_a_follower_hears_another_process_append_at_once_on_postgresql():
    url = fresh_url()
    invoke("demo", "--db", url)
    conn = connect_readonly(url)
    try:
        with Journal.open(url, readonly=True) as j:
            channel = j.channel
        after = last_position(conn)
        wait = appends_waiter(conn, channel, interval=60.0)  # polling would take a minute

        appender = subprocess.Popen([sys.executable, "-c", _APPENDER, url], env=ENV,
                                    stdout=subprocess.PIPE, text=True)
        wait(60.0)
        woke = time.time()
        committed = float(appender.communicate(timeout=60)[0])
        rows = events_after(conn, after)
    finally:
        conn.close()

    assert [r[1] for r in rows] == ["from-another-process"]
    assert woke - committed < 2.0


def test_tail_follows_on_postgresql_until_its_count():
    url = fresh_url()
    invoke("demo", "--db", url)
    start = json.loads(invoke("heads", "--db", url, "--json"))[0]["seq"] + 1

    out = invoke("tail", "--follow", "--from-position", str(start - 2), "--count", "2",
                 "--timeout", "30", "--json", "--db", url)

    assert [json.loads(line)["position"] for line in out.splitlines()] == [start - 2, start - 1]


def test_events_hex_gives_the_same_rows_on_both_backends(both):
    db, url, _cid, _fork = both
    query = "SELECT stream_id, seq, prev_hash, hash FROM events_hex ORDER BY position"
    rows = []
    for where in (db, url):
        conn = connect_readonly(where)
        try:
            rows.append([tuple(r) for r in conn.execute(query).fetchall()])
        finally:
            conn.close()
    assert rows[0] == rows[1] and len(rows[0]) > 20
    assert all(len(r[3]) == 64 and int(r[3], 16) >= 0 for r in rows[0])
