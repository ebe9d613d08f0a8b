"""The SQL views answer audit questions with plain SQL, through sqlite-utils, and stay views."""

from __future__ import annotations

import sqlite3

import pytest
from sqlite_utils import Database

from turnlog.engine.model.conversation import Conversation, load_state
from turnlog.engine.model.events import ModelFailed, ModelRequested, ModelResponded, ToolCallRejected
from turnlog.engine.model.messages import ToolCall
from turnlog.engine.audit.projections import in_step, rebuild
from turnlog.engine.audit import audit
from turnlog.engine.audit.views import EXTENSIONS, VIEWS, VIEWS_EXTENSION, connect_readonly
from turnlog.journal import Journal
from tests.engine.audit_data import build


@pytest.fixture
def db(db_path):
    j = Journal(str(db_path), extensions=EXTENSIONS)
    build(j)
    j.close()
    database = Database(str(db_path))
    yield database
    database.close()


def test_views_are_views_created_by_the_migration_beside_three_projection_tables(db):
    assert set(db.view_names()) == set(VIEWS)
    assert set(db.table_names()) == {"_turnlog_meta", "events", "stream_links", "snapshots",
                                     "tree", "checkpoints",  # the journal's log tree (schema 4)
                                     "blobs",  # parts kept once (schema 6)
                                     "_audit_model_calls", "_audit_tool_calls",
                                     "_audit_requested_calls"}
    meta = dict(db.execute("SELECT key, value FROM _turnlog_meta").fetchall())
    assert meta["ext:engine.views"] == str(VIEWS_EXTENSION.version) == "9"


def _before_version_9(conn) -> None:
    """Drop what views v9 added: the requested calls' table and the tool calls' index."""
    for op in ("project", "refuse_update", "refuse_delete"):
        conn.execute(f"DROP TRIGGER _audit_requested_calls_{op}")
    conn.execute("DROP TABLE _audit_requested_calls")
    conn.execute("DROP INDEX _audit_tool_calls_by_call")


def _as_version_1(db_path) -> None:
    conn = sqlite3.connect(db_path)
    _before_version_9(conn)
    for table, column in (("_audit_model_calls", "requested"), ("_audit_tool_calls", "call_id")):
        for op in ("project", "refuse_update", "refuse_delete"):
            conn.execute(f"DROP TRIGGER {table}_{op}")
        conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")  # as version 1 had them
    conn.execute("UPDATE _turnlog_meta SET value = '1' WHERE key = 'ext:engine.views'")
    conn.commit()
    conn.close()


def test_a_version_1_journal_read_only_is_audited_from_events(db, db_path):
    conn = connect_readonly(str(db_path))
    honest = audit(conn)
    conn.close()
    _as_version_1(db_path)
    conn = connect_readonly(str(db_path))  # read-only: nothing is migrated
    try:
        assert not in_step(conn)
        report = audit(conn)
    finally:
        conn.close()
    assert report["source"] == "events"
    assert {k: v for k, v in report.items() if k != "source"} == {
        k: v for k, v in honest.items() if k != "source"}


def test_projections_of_version_1_are_rebuilt_with_call_ids_and_requested_calls(db, db_path):
    _as_version_1(db_path)
    Journal(str(db_path), extensions=EXTENSIONS).close()
    conn = sqlite3.connect(db_path)
    assert in_step(conn)
    assert conn.execute("SELECT call_id FROM _audit_tool_calls ORDER BY position LIMIT 1"
                        ).fetchone() == ("c1",)
    assert conn.execute("SELECT requested FROM _audit_model_calls WHERE requested IS NOT NULL "
                        "ORDER BY position LIMIT 1").fetchone() == (
        '[["c1","get_weather","client"],["c2","add","client"]]',)
    conn.close()


def test_the_views_migrate_into_a_journal_written_before_them(db_path):
    j = Journal(str(db_path))
    build(j)
    j.close()
    assert Database(str(db_path)).view_names() == []
    Journal(str(db_path), extensions=EXTENSIONS).close()
    rows = list(Database(str(db_path)).query("SELECT count(*) AS n FROM conversations"))
    assert rows == [{"n": 8}]


def test_conversations_view_agrees_with_the_reducer_for_every_conversation(db, db_path):
    rows = {r["conversation_id"]: r for r in db.query("SELECT * FROM conversations")}
    assert set(rows) == {"done", "old", "fail", "halt", "active", "mystery", "fork", "replay"}
    j = Journal(str(db_path))
    for cid, row in rows.items():
        state = load_state(j, cid)
        assert (row["status"], row["provider"], row["model"]) == (
            state.status, state.provider, state.model), cid
        assert row["events"] == j.stream(cid).events
    j.close()
    assert rows["done"]["turns"] == 3
    assert (rows["done"]["input_tokens"], rows["done"]["output_tokens"],
            rows["done"]["cached_input_tokens"]) == (3500, 170, 400)
    assert (rows["fork"]["parent"], rows["fork"]["fork_seq"], rows["fork"]["turns"]) == ("done", 8, 1)
    assert rows["replay"]["replay_of"] == "done"
    assert rows["halt"]["last_event"] == "turn_limit_reached"


def test_messages_view_gives_each_message_its_role_and_text_in_order(db):
    rows = list(db.query("SELECT seq, role, text, tool, is_error FROM messages "
                         "WHERE conversation_id = 'done' ORDER BY seq"))
    assert [(r["seq"], r["role"], r["text"], r["tool"], r["is_error"]) for r in rows] == [
        (2, "user", "Weather in Paris and 2+3?", None, 0),
        (4, "assistant", "Let me check.", None, 0),
        (6, "tool", '{"forecast":"sunny"}', "get_weather", 0),
        (8, "tool", "b is not a number", "add", 1),
        (10, "assistant", None, None, 0),
        (11, "tool", "You already called get_weather with these arguments.", "get_weather", 1),
        (13, "assistant", "Paris is sunny.", None, 0),
    ]


def test_model_calls_view_has_usage_failures_and_the_conversations_model_as_fallback(db):
    rows = list(db.query("SELECT conversation_id, turn, provider, model, ok, stop_reason, "
                         "input_tokens, cached_input_tokens, tool_calls, error_type, http_status "
                         "FROM model_calls WHERE conversation_id IN ('fail', 'mystery', 'done') "
                         "ORDER BY position"))
    assert [tuple(r.values()) for r in rows] == [
        ("done", 1, "openai", "gpt-4o", 1, "tool_use", 1000, 400, 2, None, None),
        ("done", 2, "openai", "gpt-4o", 1, "tool_use", 1200, 0, 1, None, None),
        ("done", 3, "openai", "gpt-4o", 1, "end_turn", 1300, 0, 0, None, None),
        ("fail", 1, "anthropic", "claude-x", 0, None, 0, 0, 0, "RateLimitError", 429),
        ("fail", 1, "anthropic", "claude-x", 0, None, 0, 0, 0, "ServerError", 529),
        ("mystery", 1, "acme", "m1", 1, "end_turn", 10, 0, 0, None, None),
    ]


def test_tool_calls_view_has_outcomes_reasons_durations_and_arguments(db):
    rows = list(db.query("SELECT conversation_id, call_id, tool, outcome, refused_reason, "
                         "duration_ms, arguments FROM tool_calls ORDER BY position"))
    assert [tuple(r.values()) for r in rows] == [
        ("done", "c1", "get_weather", "succeeded", None, 10.0, '{"city":"Paris"}'),
        ("done", "c2", "add", "failed", None, 30.0, '{"a":2,"b":"x"}'),
        ("done", "c3", "get_weather", "refused", "duplicate", None, "{}"),
        ("halt", "h1", "teleport", "refused", "unknown", None, "{}"),
        ("halt", "h2", "wait", "succeeded", None, 1000.0, '{"seconds":1}'),
    ]


def test_an_audit_question_in_plain_sql(db):
    rows = list(db.query(
        "SELECT tool, count(*) AS calls, sum(outcome = 'failed') AS failures, "
        "count(*) FILTER (WHERE refused_reason = 'duplicate') AS duplicates FROM tool_calls "
        "GROUP BY tool ORDER BY tool"))
    assert rows == [
        {"tool": "add", "calls": 1, "failures": 1, "duplicates": 0},
        {"tool": "get_weather", "calls": 2, "failures": 0, "duplicates": 1},
        {"tool": "teleport", "calls": 1, "failures": 0, "duplicates": 0},
        {"tool": "wait", "calls": 1, "failures": 0, "duplicates": 0},
    ]


def test_projections_follow_every_append_and_refuse_edits(db, db_path):
    j = Journal(str(db_path))  # a plain journal handle: the triggers live in the file
    c = Conversation.open(j, "active")
    c.append(ModelRequested(turn=1, digest="d", provider="openai", model="gpt-4o-mini"),
             ModelFailed(turn=1, error_type="ProviderTimeout", message="slow"))
    j.close()
    conn = sqlite3.connect(db_path)
    assert in_step(conn)
    assert conn.execute("SELECT conversation_id, ok, error_type FROM _audit_model_calls "
                        "ORDER BY position DESC LIMIT 1").fetchone() == ("active", 0, "ProviderTimeout")
    for sql in ("UPDATE _audit_tool_calls SET tool = 'x'", "DELETE FROM _audit_model_calls"):
        with pytest.raises(sqlite3.IntegrityError, match="projection of events"):
            conn.execute(sql)
    conn.close()


def test_projections_out_of_step_are_noticed(db, db_path):
    conn = sqlite3.connect(db_path)
    conn.execute("DROP TRIGGER _audit_tool_calls_project")
    conn.commit()
    conn.close()
    j = Journal(str(db_path))
    c = Conversation.open(j, "active")
    c.append(ModelRequested(turn=1, digest="d", provider="p", model="m"),
             ModelResponded(turn=1, parts=(ToolCall(id="z", name="t"),)),
             ToolCallRejected(call_id="z", name="t", reason="unknown", content="no"))
    j.close()
    conn = sqlite3.connect(db_path)
    assert not in_step(conn)
    conn.close()
    rebuild(str(db_path))
    conn = sqlite3.connect(db_path)
    assert in_step(conn)
    assert conn.execute("SELECT tool, outcome, reason FROM _audit_tool_calls "
                        "ORDER BY position DESC LIMIT 1").fetchone() == ("t", "refused", "unknown")
    conn.close()


def test_events_hex_shows_every_hash_as_the_hex_text_verify_and_heads_report(db, db_path):
    with Journal(str(db_path), extensions=EXTENSIONS) as j:
        expected = {(e.stream_id, e.seq): (e.prev_hash, e.hash)
                    for s in j.streams() for e in j.read(s.stream_id)}
    rows = db.execute("SELECT stream_id, seq, prev_hash, hash, typeof(hash) "
                      "FROM events_hex").fetchall()
    assert len(rows) == len(expected) > 0
    for stream, seq, prev, hashed, kind in rows:
        assert kind == "text" and (prev, hashed) == expected[(stream, seq)]
    raw = db.execute("SELECT typeof(hash) FROM events LIMIT 1").fetchone()[0]
    assert raw == "blob"  # the table keeps the 32 bytes; only the view shows hex


def test_a_version_3_journal_gets_events_hex_when_opened_for_writing(db, db_path):
    db.execute("DROP VIEW events_hex")
    _before_version_9(db.conn)
    db.execute("UPDATE _turnlog_meta SET value = '3' WHERE key = 'ext:engine.views'")
    db.conn.commit()
    conn = connect_readonly(str(db_path))  # read-only: a temporary view, nothing written
    assert conn.execute("SELECT count(*) FROM events_hex").fetchone()[0] > 0
    conn.close()
    assert "events_hex" not in Database(str(db_path)).view_names()
    Journal(str(db_path), extensions=EXTENSIONS).close()
    assert "events_hex" in Database(str(db_path)).view_names()
    assert not Journal(str(db_path), extensions=EXTENSIONS).verify().first_bad
