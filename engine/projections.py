"""Narrow projection tables of model and tool calls, kept in step with ``events`` by triggers.

``turnlog audit`` must answer in seconds over millions of events, and parsing
every JSON payload each time costs more than that. So the engine's journal
extension keeps two narrow tables, one row per event of their kind, with the
few numbers the audit needs already extracted:

- ``_audit_model_calls``: one row per ``model_responded``/``model_failed``
  (position, conversation, day, ok, token counts, error type, and
  ``requested``: the calls the response asked for, a JSON array of
  ``[call_id, tool, kind]`` — ``kind`` is ``client`` for a ``tool_call``
  part, or the wire type of a server tool call kept as an ``Opaque`` part,
  see ``SERVER_CALL_KINDS``);
- ``_audit_tool_calls``: one row per ``tool_completed``/``tool_call_rejected``
  (position, conversation, call id, tool, outcome, refusal reason, duration).

A requested client call with no row of its own in ``_audit_tool_calls`` (same
conversation, same call id) is pending: the transcript or run ended before
its tool ran.

They are projections, never a second source of truth: an ``AFTER INSERT``
trigger fills them in the same transaction as the event (so they cannot lag
behind it), the migration builds them from ``events`` when first installed,
triggers refuse UPDATE and DELETE on them as on ``events``, and
:func:`in_step` checks cheaply (counts and last positions) that they cover
exactly the events they project; the audit falls back to reading ``events``
when they do not (a journal edited by hand, say). Counts cannot see a forged
figure, so :func:`check` recomputes every row from ``events`` and names each
difference (table, conversation, position, column): ``turnlog verify`` runs
it through the engine's journal extension, ``turnlog audit --check`` too.
"""

from __future__ import annotations

import sqlite3

from sqlite_utils import Database

from journal import ProjectionMismatch

__all__ = ["MODEL_CALLS", "REQUESTED_SQL", "SERVER_CALL_KINDS", "TOOL_CALLS", "check", "drop",
           "in_step", "install", "rebuild"]

MODEL_CALLS = "_audit_model_calls"
TOOL_CALLS = "_audit_tool_calls"

#: ``Opaque.kind`` of a call the provider's server ran itself (Anthropic's
#: ``server_tool_use``/``mcp_tool_use`` blocks, Gemini's ``executableCode``
#: and ``toolCall`` parts): counted by the audit as server tool calls, apart
#: from the client tool calls turnlog runs. Its tool is the block's ``name``
#: (the kind itself when it has none).
SERVER_CALL_KINDS = ("executableCode", "mcp_tool_use", "server_tool_use", "toolCall")

#: SQL over an event row named ``{e}``: the JSON array of ``[call_id, tool, kind]`` for
#: every call its parts ask for (NULL: none). One rule for the projection and ``events``.
REQUESTED_SQL = """nullif((SELECT json_group_array(json_array(
        CASE json_extract(p.value, '$.type') WHEN 'tool_call' THEN json_extract(p.value, '$.id')
             ELSE json_extract(p.value, '$.data.id') END,
        CASE json_extract(p.value, '$.type') WHEN 'tool_call' THEN json_extract(p.value, '$.name')
             ELSE coalesce(json_extract(p.value, '$.data.name'), json_extract(p.value, '$.kind')) END,
        CASE json_extract(p.value, '$.type') WHEN 'tool_call' THEN 'client'
             ELSE json_extract(p.value, '$.kind') END))
    FROM json_each({e}.payload, '$.parts') AS p
    WHERE json_extract(p.value, '$.type') = 'tool_call'
       OR (json_extract(p.value, '$.type') = 'opaque'
           AND json_extract(p.value, '$.kind') IN (%s))), '[]')""" % ", ".join(
    f"'{k}'" for k in SERVER_CALL_KINDS)

_MODEL_TYPES = "('model_responded', 'model_failed')"
_TOOL_TYPES = "('tool_completed', 'tool_call_rejected')"

# The same JSON paths as the model_calls and tool_calls views, over a row named {e}.
_MODEL_ROW = """{e}.position, {e}.stream_id, substr({e}.recorded_at, 1, 10),
    {e}.type = 'model_responded',
    coalesce(json_extract({e}.payload, '$.usage.input_tokens'), 0),
    coalesce(json_extract({e}.payload, '$.usage.output_tokens'), 0),
    coalesce(json_extract({e}.payload, '$.usage.cached_input_tokens'), 0),
    coalesce(json_extract({e}.payload, '$.usage.cache_write_tokens'), 0),
    coalesce(json_extract({e}.payload, '$.usage.reasoning_tokens'), 0),
    json_extract({e}.payload, '$.error_type'),
    CASE WHEN {e}.type = 'model_responded' THEN """ + REQUESTED_SQL + """ END"""

_TOOL_ROW = """{e}.position, {e}.stream_id, json_extract({e}.payload, '$.call_id'),
    json_extract({e}.payload, '$.name'),
    CASE WHEN {e}.type = 'tool_call_rejected' THEN 'refused'
         WHEN json_extract({e}.payload, '$.success') THEN 'succeeded' ELSE 'failed' END,
    json_extract({e}.payload, '$.reason'),
    json_extract({e}.payload, '$.duration_ms')"""

_MODEL_COLUMNS = ("position", "conversation_id", "day", "ok", "input_tokens", "output_tokens",
                  "cached_input_tokens", "cache_write_tokens", "reasoning_tokens", "error_type",
                  "requested")
_TOOL_COLUMNS = ("position", "conversation_id", "call_id", "tool", "outcome", "reason",
                 "duration_ms")
_PROJECTED = ((MODEL_CALLS, _MODEL_TYPES, _MODEL_ROW, _MODEL_COLUMNS),
              (TOOL_CALLS, _TOOL_TYPES, _TOOL_ROW, _TOOL_COLUMNS))
_MAX_REPORTED = 100

_TABLES = [
    f"""CREATE TABLE {MODEL_CALLS} (
        position INTEGER PRIMARY KEY, conversation_id TEXT NOT NULL, day TEXT NOT NULL,
        ok INTEGER NOT NULL, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
        cached_input_tokens INTEGER NOT NULL, cache_write_tokens INTEGER NOT NULL,
        reasoning_tokens INTEGER NOT NULL, error_type TEXT, requested TEXT)""",
    f"""CREATE TABLE {TOOL_CALLS} (
        position INTEGER PRIMARY KEY, conversation_id TEXT NOT NULL, call_id TEXT, tool TEXT,
        outcome TEXT NOT NULL, reason TEXT, duration_ms REAL)""",
]
# No secondary indexes: every append pays for them, and a scan of these narrow tables is
# already fast enough for the audit (a filtered audit checks scope per row).


def drop(db: Database) -> None:
    """Drop both tables and their triggers (to ``install`` them again from ``events``)."""
    for table in (MODEL_CALLS, TOOL_CALLS):
        for suffix in ("project", "refuse_update", "refuse_delete"):
            db.execute(f"DROP TRIGGER IF EXISTS {table}_{suffix}")
        db.execute(f"DROP TABLE IF EXISTS {table}")


def install(db: Database) -> None:
    """Create the tables, fill them from ``events`` and add the triggers (inside the migration)."""
    for sql in _TABLES:
        db.execute(sql)
    db.execute(f"INSERT INTO {MODEL_CALLS} SELECT {_MODEL_ROW.format(e='e')} "
               f"FROM events AS e WHERE e.type IN {_MODEL_TYPES}")
    db.execute(f"INSERT INTO {TOOL_CALLS} SELECT {_TOOL_ROW.format(e='e')} "
               f"FROM events AS e WHERE e.type IN {_TOOL_TYPES}")
    for table, types, row in ((MODEL_CALLS, _MODEL_TYPES, _MODEL_ROW),
                              (TOOL_CALLS, _TOOL_TYPES, _TOOL_ROW)):
        db.execute(f"CREATE TRIGGER {table}_project AFTER INSERT ON events "
                   f"WHEN NEW.type IN {types} "
                   f"BEGIN INSERT INTO {table} VALUES ({row.format(e='NEW')}); END")
        for operation in ("UPDATE", "DELETE"):
            db.execute(
                f"CREATE TRIGGER {table}_refuse_{operation.lower()} BEFORE {operation} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{table} is a projection of events: "
                f"{operation} is not allowed'); END")


def in_step(conn: sqlite3.Connection) -> bool:
    """Whether both tables hold exactly one row per projected event (counts and last positions)
    and have this version's columns.

    Cheap: every figure comes from an index, no payload is read. False when the
    tables are missing (a journal written without the engine, read read-only).
    """
    present = {name for (name,) in conn.execute(
        f"SELECT name FROM sqlite_master WHERE name IN ('{MODEL_CALLS}', '{TOOL_CALLS}')")}
    if len(present) < 2:
        return False
    try:  # tables of an older version (read-only: not migrated) lack the newer columns
        conn.execute(f"SELECT requested FROM {MODEL_CALLS} LIMIT 0")
        conn.execute(f"SELECT call_id FROM {TOOL_CALLS} LIMIT 0")
    except sqlite3.OperationalError:
        return False
    for table, types in ((MODEL_CALLS, _MODEL_TYPES), (TOOL_CALLS, _TOOL_TYPES)):
        projected = conn.execute(f"SELECT count(*), max(position) FROM {table}").fetchone()
        source = conn.execute(
            f"SELECT count(*), max(position) FROM events WHERE type IN {types}").fetchone()
        if projected != source:
            return False
    return True


def check(conn: sqlite3.Connection, conversation_id: str | None = None,
          extension: str = "engine.views") -> list[ProjectionMismatch]:
    """Recompute both tables from ``events`` (every row, or one conversation's) and
    return each difference: a row missing, a row no event backs, a column that differs.

    Reads every projected payload once: O(events of those types). At most 100
    differences are listed (the first by position).
    """
    present = {name for (name,) in conn.execute(
        f"SELECT name FROM sqlite_master WHERE name IN ('{MODEL_CALLS}', '{TOOL_CALLS}')")}
    found: list[ProjectionMismatch] = []
    for table, types, row, columns in _PROJECTED:
        if table not in present:
            continue  # not installed: nothing can be forged, the audit reads events
        scope = () if conversation_id is None else (conversation_id,)
        expected = (f"SELECT {row.format(e='e')} FROM events AS e WHERE e.type IN {types}"
                    + (" AND e.stream_id = ?" if scope else ""))
        stored = f"SELECT * FROM {table}" + (" WHERE conversation_id = ?" if scope else "")
        positions = sorted(
            {p for (p, *_) in conn.execute(f"{expected} EXCEPT {stored}", scope * 2)}
            | {p for (p, *_) in conn.execute(f"{stored} EXCEPT {expected}", scope * 2)})
        for position in positions[:_MAX_REPORTED - len(found)]:
            want = conn.execute(f"SELECT {row.format(e='e')} FROM events AS e "
                                f"WHERE e.position = ? AND e.type IN {types}", (position,)).fetchone()
            have = conn.execute(f"SELECT * FROM {table} WHERE position = ?", (position,)).fetchone()
            found.append(_mismatch(extension, table, columns, position, want, have))
    return found


def _mismatch(extension: str, table: str, columns: tuple[str, ...], position: int,
              want: tuple | None, have: tuple | None) -> ProjectionMismatch:
    if have is None:
        return ProjectionMismatch(extension, table, want[1], position, None,
                                  "the row for this event is missing")
    if want is None:
        return ProjectionMismatch(extension, table, have[1], position, None,
                                  "no event of its kind is at this position (a forged row)")
    index = next((i for i, (w, h) in enumerate(zip(want, have)) if w != h), None)
    if index is None:
        return ProjectionMismatch(extension, table, want[1], position, None,
                                  "the row differs from the event in a value's type")
    return ProjectionMismatch(extension, table, want[1], position, columns[index],
                              f"{columns[index]} is {have[index]!r}, the event says "
                              f"{want[index]!r}")


def rebuild(path: str) -> None:
    """Drop and rebuild both projection tables from ``events`` in one transaction.

    For a journal whose projections are out of step (``in_step`` is false):
    the audit is right without them, only slower.
    """
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("BEGIN IMMEDIATE")
        try:
            drop(Database(conn))
            install(Database(conn))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()
