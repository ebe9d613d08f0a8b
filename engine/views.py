"""SQL views over the journal's ``events``, so plain SQL answers audit questions.

The engine registers them as a journal :class:`~journal.Extension`: opening a
journal through the engine (every ``turnlog`` command does) creates them in
the same migration transaction as the schema. They are views, not tables:
``events`` stays the only source of truth and nothing here can drift from it.
One index, ``events_by_type (type, stream_id, seq)``, lets a view read only
the events of its types (an index is a projection too: SQLite rebuilds it
from ``events`` whenever asked). The same migration installs the audit's
trigger-maintained projection tables (``engine.projections``).

Views (columns are documented in README.md, "SQL views"):

- ``conversations``: one row per conversation (stream whose seq 1 is
  ``conversation_started``): provider, model, status, own turns and tokens,
  lineage.
- ``messages``: user, assistant and tool messages in order, with their text.
- ``model_calls``: every model response or failure, with usage and errors.
- ``tool_calls``: every tool call's outcome (succeeded, failed, refused), and
  every call the model asked for that has no outcome in its conversation
  (``pending``: the run or transcript ended before its tool ran; the row is
  the response's, with the call's arguments).

Example, with nothing but ``sqlite3 turnlog.db``::

    SELECT tool, count(*), sum(outcome = 'failed') FROM tool_calls GROUP BY tool;
"""

from __future__ import annotations

import sqlite3

from sqlite_utils import Database

import journal
from journal import Extension, ProjectionMismatch
from journal._open import is_postgres, shown_url

from . import projections

__all__ = ["EXTENSIONS", "STATUS_SQL", "VIEWS", "VIEWS_EXTENSION", "connect_readonly"]

#: The status a conversation is in after an event of each type (anything else: active),
#: as ``ConversationState.status`` says it.
STATUS_SQL = """CASE {type}
    WHEN 'conversation_completed' THEN 'completed'
    WHEN 'conversation_failed' THEN 'failed'
    WHEN 'turn_limit_reached' THEN 'halted'
    WHEN 'conversation_halted' THEN 'halted'
    WHEN 'run_interrupted' THEN 'interrupted'
    ELSE 'active' END"""

_TOKENS = ("input_tokens", "output_tokens", "cached_input_tokens")


def _own_tokens(column: str) -> str:
    return (f"coalesce((SELECT sum(json_extract(r.payload, '$.usage.{column}')) FROM events r "
            f"WHERE r.type = 'model_responded' AND r.stream_id = s.stream_id), 0) AS {column}")


# A fork whose only own event is its start is in the state its parent was in at the fork
# point; otherwise the last own event decides (one level of forks, the common case).
# Each stream's last event is found by an index lookup per conversation, not by grouping
# every event, so listing 10,000 conversations does not read a million index entries.
# A fork's own start ends its parent's interruption (the fork was never interrupted).
_CONVERSATIONS = f"""CREATE VIEW conversations AS
SELECT
    s.stream_id AS conversation_id,
    json_extract(s.payload, '$.provider') AS provider,
    json_extract(s.payload, '$.model') AS model,
    coalesce(json_extract(s.payload, '$.mode'), 'chat') AS mode,
    {STATUS_SQL.format(type='''CASE WHEN z.seq = 1 AND l.parent_stream_id IS NOT NULL
        THEN (SELECT nullif(p.type, 'run_interrupted') FROM events p
              WHERE p.stream_id = l.parent_stream_id AND p.seq = l.parent_seq)
        ELSE z.type END''')} AS status,
    (SELECT count(*) FROM events r
     WHERE r.type = 'model_responded' AND r.stream_id = s.stream_id) AS turns,
    {", ".join(_own_tokens(c) for c in _TOKENS)},
    z.seq AS events,
    s.recorded_at AS started_at,
    z.recorded_at AS updated_at,
    z.type AS last_event,
    l.parent_stream_id AS parent,
    l.parent_seq AS fork_seq,
    json_extract(s.payload, '$.replay_of.conversation_id') AS replay_of,
    z.position AS last_position
FROM events AS s
JOIN events AS z ON z.stream_id = s.stream_id
    AND z.seq = (SELECT max(m.seq) FROM events AS m WHERE m.stream_id = s.stream_id)
LEFT JOIN stream_links AS l ON l.stream_id = s.stream_id
WHERE s.type = 'conversation_started' AND s.seq = 1"""

# The conversation's provider/model stand in when a response does not name its own
# (coalesce is lazy in SQLite, so the start event is only read when needed).
_STARTED = "(SELECT json_extract(s.payload, '$.{0}') FROM events s WHERE s.stream_id = e.stream_id AND s.seq = 1)"

_MODEL_CALLS = f"""CREATE VIEW model_calls AS
SELECT
    e.position, e.stream_id AS conversation_id, e.seq, e.recorded_at,
    json_extract(e.payload, '$.turn') AS turn,
    coalesce(nullif(json_extract(e.payload, '$.provider'), ''), {_STARTED.format('provider')}) AS provider,
    coalesce(nullif(json_extract(e.payload, '$.model'), ''), {_STARTED.format('model')}) AS model,
    e.type = 'model_responded' AS ok,
    CASE WHEN e.type = 'model_responded'
         THEN coalesce(json_extract(e.payload, '$.stop_reason'), 'end_turn') END AS stop_reason,
    coalesce(json_extract(e.payload, '$.usage.input_tokens'), 0) AS input_tokens,
    coalesce(json_extract(e.payload, '$.usage.output_tokens'), 0) AS output_tokens,
    coalesce(json_extract(e.payload, '$.usage.cached_input_tokens'), 0) AS cached_input_tokens,
    coalesce(json_extract(e.payload, '$.usage.cache_write_tokens'), 0) AS cache_write_tokens,
    coalesce(json_extract(e.payload, '$.usage.reasoning_tokens'), 0) AS reasoning_tokens,
    json_extract(e.payload, '$.latency_ms') AS latency_ms,
    CASE WHEN e.type = 'model_responded'
         THEN coalesce(json_extract(e.payload, '$.source'), 'provider') END AS source,
    (SELECT count(*) FROM json_each(e.payload, '$.parts') AS p
     WHERE json_extract(p.value, '$.type') = 'tool_call') AS tool_calls,
    json_extract(e.payload, '$.error_type') AS error_type,
    json_extract(e.payload, '$.message') AS error,
    json_extract(e.payload, '$.status') AS http_status
FROM events AS e
WHERE e.type IN ('model_responded', 'model_failed')"""

_TOOL_CALLS = """CREATE VIEW tool_calls AS
SELECT
    e.position, e.stream_id AS conversation_id, e.seq, e.recorded_at,
    json_extract(e.payload, '$.call_id') AS call_id,
    json_extract(e.payload, '$.name') AS tool,
    CASE WHEN e.type = 'tool_call_rejected' THEN 'refused'
         WHEN json_extract(e.payload, '$.success') THEN 'succeeded'
         ELSE 'failed' END AS outcome,
    json_extract(e.payload, '$.reason') AS refused_reason,
    json_extract(e.payload, '$.duration_ms') AS duration_ms,
    json_extract(e.payload, '$.error') AS error,
    json_extract(e.payload, '$.content') AS content,
    CASE WHEN e.type = 'tool_completed'
         THEN coalesce(json_extract(e.payload, '$.source'), 'live') END AS source,
    CASE WHEN e.type = 'tool_call_rejected'
         THEN coalesce(json_extract(e.payload, '$.arguments'), '{}')
         ELSE (SELECT coalesce(json_extract(t.payload, '$.arguments'), '{}') FROM events AS t
               WHERE t.type = 'tool_started' AND t.stream_id = e.stream_id AND t.seq < e.seq
                 AND json_extract(t.payload, '$.call_id') = json_extract(e.payload, '$.call_id')
               ORDER BY t.seq DESC LIMIT 1) END AS arguments
FROM events AS e
WHERE e.type IN ('tool_completed', 'tool_call_rejected')
UNION ALL
SELECT
    e.position, e.stream_id, e.seq, e.recorded_at,
    json_extract(p.value, '$.id'), json_extract(p.value, '$.name'), 'pending',
    NULL, NULL, NULL, NULL, NULL,
    coalesce(json_extract(p.value, '$.arguments'), '{}')
FROM events AS e, json_each(e.payload, '$.parts') AS p
WHERE e.type = 'model_responded' AND json_extract(p.value, '$.type') = 'tool_call'
  AND NOT EXISTS (
    SELECT 1 FROM events AS a
    WHERE a.type IN ('tool_completed', 'tool_call_rejected') AND a.stream_id = e.stream_id
      AND a.seq > e.seq AND json_extract(a.payload, '$.call_id') = json_extract(p.value, '$.id'))"""

_MESSAGES = """CREATE VIEW messages AS
SELECT
    e.position, e.stream_id AS conversation_id, e.seq, e.recorded_at,
    CASE e.type WHEN 'user_message' THEN 'user' WHEN 'model_responded' THEN 'assistant'
         ELSE 'tool' END AS role,
    CASE WHEN e.type IN ('user_message', 'model_responded')
         THEN (SELECT group_concat(json_extract(p.value, '$.text'), '')
               FROM json_each(e.payload, '$.parts') AS p
               WHERE json_extract(p.value, '$.type') = 'text')
         ELSE json_extract(e.payload, '$.content') END AS text,
    json_extract(e.payload, '$.turn') AS turn,
    nullif(json_extract(e.payload, '$.provider'), '') AS provider,
    nullif(json_extract(e.payload, '$.model'), '') AS model,
    json_extract(e.payload, '$.call_id') AS call_id,
    json_extract(e.payload, '$.name') AS tool,
    CASE WHEN e.type = 'tool_completed' THEN NOT json_extract(e.payload, '$.success')
         WHEN e.type = 'tool_call_rejected' THEN 1 ELSE 0 END AS is_error,
    json_extract(e.payload, '$.parts') AS parts
FROM events AS e
WHERE e.type IN ('user_message', 'model_responded', 'tool_completed', 'tool_call_rejected')"""

#: View name -> its CREATE VIEW statement.
VIEWS: dict[str, str] = {
    "conversations": _CONVERSATIONS,
    "messages": _MESSAGES,
    "model_calls": _MODEL_CALLS,
    "tool_calls": _TOOL_CALLS,
}

_INDEX = "CREATE INDEX IF NOT EXISTS events_by_type ON events (type, stream_id, seq)"


def _migrate(db: Database, from_version: int) -> None:
    """Create (or, from an older version, recreate) the index, every view and the projections.

    Version 2 added ``requested`` and ``call_id`` to the projections: they are
    rebuilt from ``events``.
    """
    db.execute(_INDEX)
    if from_version == 1:
        projections.drop(db)
    if from_version < 2:
        projections.install(db)
    for name, sql in VIEWS.items():
        db.execute(f"DROP VIEW IF EXISTS {name}")
        db.execute(sql)


def _same(sql: str, other: str) -> bool:
    return " ".join(sql.split()) == " ".join(other.split())


def _views_of(conn: sqlite3.Connection) -> dict[str, str]:
    """The engine's views as the journal file defines them (name -> CREATE VIEW)."""
    return dict(conn.execute(
        "SELECT name, sql FROM main.sqlite_master WHERE type = 'view' AND name IN "
        f"({', '.join('?' * len(VIEWS))})", list(VIEWS)).fetchall())


def _installed_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM _turnlog_meta WHERE key = 'ext:engine.views'").fetchone()
    return int(row[0]) if row is not None and str(row[0]).isdigit() else 0


def _verify(db: Database, conversation_id: str | None) -> list[ProjectionMismatch]:
    """The extension's check: every view as its installed version defines it, every
    projection row recomputed.

    A journal not yet migrated since a view changed (only read since) keeps the older
    definition; that is not a forgery.
    """
    expected = _PREVIOUS.get(_installed_version(db.conn), VIEWS)
    found = [
        ProjectionMismatch("engine.views", name, None, None, None,
                           "the view's definition differs from the engine's (redefined)")
        for name, sql in _views_of(db.conn).items()
        if not _same(sql, expected[name])
    ]
    return found + projections.check(db.conn, conversation_id)


#: The audit views as a journal extension (bump ``version`` when a view changes, and keep
#: the old definitions in ``_PREVIOUS``). 2: ``conversations.status`` says ``interrupted``;
#: ``tool_calls`` lists pending calls; the projections keep call ids and requested calls.
VIEWS_EXTENSION = Extension(name="engine.views", version=2, migrate=_migrate, verify=_verify)

# Version 1's views: conversations had no 'interrupted' status, tool_calls no pending calls.
_PREVIOUS: dict[int, dict[str, str]] = {1: {
    **VIEWS,
    "conversations": _CONVERSATIONS.replace("    WHEN 'run_interrupted' THEN 'interrupted'\n", "")
    .replace("nullif(p.type, 'run_interrupted')", "p.type"),
    "tool_calls": _TOOL_CALLS.split("\nUNION ALL\n", 1)[0],
}}

#: Journal schema extensions the engine registers when it opens a journal.
EXTENSIONS: tuple[Extension, ...] = (VIEWS_EXTENSION,)


def connect_readonly(path: str) -> sqlite3.Connection:
    """A read-only SQLite connection to the journal at ``path``, with the engine's views.

    For queries over the views (``turnlog audit``, ``ls``, ``tail``). It never
    creates, migrates or writes a file (``journal.connect_readonly``: a 0444 file
    or a read-only mount works); temporary tables live in memory. A journal whose
    file lacks the views (written without the engine) or has an older version of
    them (not written since turnlog was upgraded) gets them as temporary views.
    """
    if is_postgres(path):
        raise journal.JournalError(
            f"{shown_url(path)}: the engine's SQL views (ls, show, audit, tail, view) are not "
            "available on a PostgreSQL journal yet; verify, heads, export, replay, fork and "
            "copy work on it")
    conn = journal.connect_readonly(path, extensions=EXTENSIONS, check_same_thread=False)
    try:
        installed = _views_of(conn)
        for name, sql in VIEWS.items():
            if name not in installed or not _same(installed[name], sql):
                # a temporary view is found before the file's own view of the same name
                conn.execute(sql.replace("CREATE VIEW", "CREATE TEMP VIEW", 1))
    except sqlite3.Error as exc:
        conn.close()
        raise journal.JournalError(f"{path}: cannot prepare the views for reading: {exc}") from exc
    return conn
