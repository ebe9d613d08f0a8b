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
  Since views version 8 a response's row also keeps what its cost needs
  (``COST_COLUMNS``: seq, time, the provider and model it names itself, its
  client tool calls, every other token count, the ``attempt`` of the request
  just before it when that request is of its turn, and the recorded charge's
  amount, currency and reason), so ``engine.audit.costs`` reads no payload;
- ``_audit_tool_calls``: one row per ``tool_completed``/``tool_call_rejected``
  (position, conversation, call id, tool, outcome, refusal reason, duration),
  indexed by (conversation, call id) since views version 9;
- ``_audit_requested_calls`` (views version 9): one row per call a response
  asked for, the rows of its ``requested`` array (position, conversation, the
  part's index among the response's parts, call id, tool, kind), so the
  pending calls are one anti-join against the tool calls' index and the
  server tool calls one scan, with no JSON read.

Erasure (``turnlog erase``, ``prune``) rewrites payloads but keeps what these rows
hold (usage, charge, provider, model, turn, attempt, call ids and tool names,
outcomes, durations), so an erased event keeps its row and the row still equals
what :func:`check` recomputes from the erased payload; events are never deleted,
so no row is either.

A requested client call with a call id and no row of its own in
``_audit_tool_calls`` (same conversation, same call id) is pending: the
transcript or run ended before its tool ran.

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
from typing import TYPE_CHECKING, Any


from turnlog.journal import JournalError, ProjectionMismatch, sqlite_database

from turnlog.journal import POSTGRES, SQLITE, Dialect, ReadConnection, dialect_of

if TYPE_CHECKING:
    from sqlite_utils import Database

__all__ = ["COST_COLUMNS", "GUARDS", "MODEL_CALLS", "PG_GUARDS", "REQUESTED_CALLS", "REQUESTED_SQL",
           "SERVER_CALL_KINDS", "TOOL_CALLS", "check", "drop",
           "drop_postgres",
           "in_step", "install", "install_postgres", "rebuild", "requested_sql"]

MODEL_CALLS = "_audit_model_calls"
TOOL_CALLS = "_audit_tool_calls"
REQUESTED_CALLS = "_audit_requested_calls"
_ALL = (MODEL_CALLS, TOOL_CALLS, REQUESTED_CALLS)

#: ``Opaque.kind`` of a call the provider's server ran itself (Anthropic's
#: ``server_tool_use``/``mcp_tool_use`` blocks, Gemini's ``executableCode``
#: and ``toolCall`` parts): counted by the audit as server tool calls, apart
#: from the client tool calls turnlog runs. Its tool is the block's ``name``
#: (the kind itself when it has none).
SERVER_CALL_KINDS = ("code_interpreter_call", "executableCode", "file_search_call",
                     "image_generation_call", "mcp_call", "mcp_tool_use", "server_tool_use",
                     "toolCall", "web_search_call")

def _requested_items(d: Dialect) -> tuple[str, str, str, str]:
    """The call id, tool and kind of a part ``p.value`` that asks for a call, and the filter
    that keeps only those parts (a ``tool_call``, or an ``Opaque`` of ``SERVER_CALL_KINDS``)."""
    j = d.json
    kinds = ", ".join(f"'{k}'" for k in SERVER_CALL_KINDS)
    return (f"""CASE {j('p.value', '$.type')} WHEN 'tool_call' THEN {j('p.value', '$.id')}
             ELSE {j('p.value', '$.data.id')} END""",
            f"""CASE {j('p.value', '$.type')} WHEN 'tool_call' THEN {j('p.value', '$.name')}
             ELSE coalesce({j('p.value', '$.data.name')}, {j('p.value', '$.kind')}) END""",
            f"""CASE {j('p.value', '$.type')} WHEN 'tool_call' THEN 'client'
             ELSE {j('p.value', '$.kind')} END""",
            f"""({j('p.value', '$.type')} = 'tool_call'
       OR ({j('p.value', '$.type')} = 'opaque'
           AND {j('p.value', '$.kind')} IN ({kinds})))""")


def requested_sql(d: Dialect) -> str:
    """SQL over an event row named ``{e}``: the JSON array of ``[call_id, tool, kind]`` for
    every call its parts ask for (NULL: none). One rule for the projection and ``events``."""
    *items, asks = _requested_items(d)
    return f"""nullif((SELECT {d.array_of_arrays(*items)}
    FROM {d.each('{e}.payload', '$.parts', 'p')}
    WHERE {asks}), '[]')"""


def _requested_select(d: Dialect, source: str | None) -> str:
    """The requested calls' rows (version 9) of the ``model_responded`` events of ``source``
    (aliased ``e``), or of the trigger's ``NEW`` row when ``source`` is None: one per part
    that asks for a call, with the part's index among the response's parts."""
    *items, asks = _requested_items(d)
    parts = d.each("{e}.payload", "$.parts", "p")
    if d.name == "sqlite":
        index = "p.key"
    else:  # json_array_elements has no key: number the elements
        parts = parts.replace(" AS p(value)", " WITH ORDINALITY AS p(value, n)")
        index = "p.n - 1"
    e = "NEW" if source is None else "e"
    columns = ", ".join((f"{e}.position", f"{e}.stream_id", index, *items)).replace("{e}", e)
    if source is None:
        return f"SELECT {columns} FROM {parts.replace('{e}', e)} WHERE {asks}"
    return (f"SELECT {columns} FROM {source} AS e, {parts.replace('{e}', e)} "
            f"WHERE e.type = 'model_responded' AND {asks}")


#: :func:`requested_sql` in SQLite.
REQUESTED_SQL = requested_sql(SQLITE)

_MODEL_TYPES = "('model_responded', 'model_failed')"
#: The token counts of a ``Usage`` the audit's first columns leave out (prices read them).
_MORE_TOKENS = ("cache_write_1h_tokens", "input_audio_tokens", "input_image_tokens",
                "output_audio_tokens")
_TOOL_TYPES = "('tool_completed', 'tool_call_rejected')"


def _model_row(d: Dialect) -> str:
    """The same JSON paths as the model_calls and tool_calls views, over a row named {e}."""
    def tokens(key: str) -> str:
        return f"coalesce({d.json('{e}.payload', f'$.usage.{key}', 'number')}, 0)"

    return ("""{e}.position, {e}.stream_id, substr({e}.recorded_at, 1, 10),
    {e}.type = 'model_responded',
    """ + ",\n    ".join(tokens(k) for k in ("input_tokens", "output_tokens",
                                               "cached_input_tokens", "cache_write_tokens",
                                               "reasoning_tokens")) + f""",
    {d.json('{e}.payload', '$.error_type')},
    CASE WHEN {{e}}.type = 'model_responded' THEN """ + requested_sql(d) + """ END,
    """ + _cost_columns(d))


def _cost_columns(d: Dialect) -> str:
    """Version 8's columns, what a response's cost needs (``engine.audit.costs``): its seq and
    time, the provider and model it names itself, its client tool calls, the token counts
    the other columns do not keep, the ``attempt`` of the request just before it when that
    request is of its turn, and the charge recorded with it (amount, currency, reason)."""
    j = d.json

    def tokens(key: str) -> str:
        return f"coalesce({j('{e}.payload', f'$.usage.{key}', 'number')}, 0)"

    responded = "{e}.type = 'model_responded'"
    charge = j('{e}.payload', '$.charge')
    return ",\n    ".join((
        "{e}.seq", "{e}.recorded_at",
        f"nullif({j('{e}.payload', '$.provider')}, '')",
        f"nullif({j('{e}.payload', '$.model')}, '')",
        f"""CASE WHEN {responded} THEN (SELECT count(*) FROM {d.each('{e}.payload', '$.parts', 'p')}
             WHERE {j('p.value', '$.type')} = 'tool_call') ELSE 0 END""",
        *(tokens(k) for k in _MORE_TOKENS),
        f"""CASE WHEN {responded} THEN (SELECT CASE
                 WHEN {j('q.payload', '$.turn', 'number')} = {j('{e}.payload', '$.turn', 'number')}
                 THEN {j('q.payload', '$.attempt', 'number')} END
             FROM events AS q WHERE q.type = 'model_requested' AND q.stream_id = {{e}}.stream_id
               AND q.seq < {{e}}.seq ORDER BY q.seq DESC LIMIT 1) END""",
        j('{e}.payload', '$.charge.amount', 'number'),
        f"CASE WHEN {charge} IS NOT NULL THEN coalesce({j('{e}.payload', '$.charge.currency')}, 'USD') END",
        j('{e}.payload', '$.charge.reason')))


def _tool_row(d: Dialect) -> str:
    j = d.json
    return f"""{{e}}.position, {{e}}.stream_id, {j('{e}.payload', '$.call_id')},
    {j('{e}.payload', '$.name')},
    CASE WHEN {{e}}.type = 'tool_call_rejected' THEN 'refused'
         WHEN {j('{e}.payload', '$.success', 'bool')} THEN 'succeeded' ELSE 'failed' END,
    {j('{e}.payload', '$.reason')},
    {j('{e}.payload', '$.duration_ms', 'number')}"""


_MODEL_ROW = _model_row(SQLITE)
_TOOL_ROW = _tool_row(SQLITE)

#: The columns version 8 added to the model calls' table: what a response's cost needs.
COST_COLUMNS = ("seq", "recorded_at", "provider", "model", "tool_calls", *_MORE_TOKENS, "attempt",
                "charge_amount", "charge_currency", "charge_reason")
_MODEL_COLUMNS = ("position", "conversation_id", "day", "ok", "input_tokens", "output_tokens",
                  "cached_input_tokens", "cache_write_tokens", "reasoning_tokens", "error_type",
                  "requested", *COST_COLUMNS)
_TOOL_COLUMNS = ("position", "conversation_id", "call_id", "tool", "outcome", "reason",
                 "duration_ms")
_REQUESTED_COLUMNS = ("position", "conversation_id", "part", "call_id", "tool", "kind")


def _projected(d: Dialect) -> tuple[tuple[str, Any, tuple[str, ...], tuple[int, ...]], ...]:
    """Per table: its name, the SELECT of its rows from a source of events (``source`` -> SQL
    over ``source AS e``, ending in a WHERE clause), its columns, and the indexes of the
    columns that key a row (the position; the requested calls' part index too)."""
    def one_per_event(types: str, row: str) -> Any:
        return lambda source: f"SELECT {row.format(e='e')} FROM {source} AS e WHERE e.type IN {types}"

    return ((MODEL_CALLS, one_per_event(_MODEL_TYPES, _model_row(d)), _MODEL_COLUMNS, (0,)),
            (TOOL_CALLS, one_per_event(_TOOL_TYPES, _tool_row(d)), _TOOL_COLUMNS, (0,)),
            (REQUESTED_CALLS, lambda source: _requested_select(d, source), _REQUESTED_COLUMNS,
             (0, 2)))


_MAX_REPORTED = 100

_TABLES = [
    f"""CREATE TABLE {MODEL_CALLS} (
        position INTEGER PRIMARY KEY, conversation_id TEXT NOT NULL, day TEXT NOT NULL,
        ok INTEGER NOT NULL, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
        cached_input_tokens INTEGER NOT NULL, cache_write_tokens INTEGER NOT NULL,
        reasoning_tokens INTEGER NOT NULL, error_type TEXT, requested TEXT,
        seq INTEGER NOT NULL, recorded_at TEXT NOT NULL, provider TEXT, model TEXT,
        tool_calls INTEGER NOT NULL, cache_write_1h_tokens INTEGER NOT NULL,
        input_audio_tokens INTEGER NOT NULL, input_image_tokens INTEGER NOT NULL,
        output_audio_tokens INTEGER NOT NULL, attempt INTEGER, charge_amount REAL,
        charge_currency TEXT, charge_reason TEXT)""",
    f"""CREATE TABLE {TOOL_CALLS} (
        position INTEGER PRIMARY KEY, conversation_id TEXT NOT NULL, call_id TEXT, tool TEXT,
        outcome TEXT NOT NULL, reason TEXT, duration_ms REAL)""",
    f"""CREATE TABLE {REQUESTED_CALLS} (
        position INTEGER NOT NULL, conversation_id TEXT NOT NULL, part INTEGER NOT NULL,
        call_id TEXT, tool TEXT, kind TEXT, PRIMARY KEY (position, part)) WITHOUT ROWID""",
]
# One secondary index, the tool calls' by call: a pending call is a requested one this index
# does not find. Every append pays for an index, so there is no other; a scan of these narrow
# tables is fast enough for the rest of the audit (a filtered audit checks scope per row).
_INDEX = (f"CREATE INDEX IF NOT EXISTS {TOOL_CALLS}_by_call "
          f"ON {TOOL_CALLS} (conversation_id, call_id)")

# PostgreSQL: the same columns; numbers as numeric (what the row's JSON casts give), ok
# as boolean. A statement-level trigger projects a whole append's events at once.
_PG_TABLES = [
    f"""CREATE TABLE {MODEL_CALLS} (
        position BIGINT PRIMARY KEY, conversation_id TEXT COLLATE "C" NOT NULL,
        day TEXT NOT NULL, ok BOOLEAN NOT NULL, input_tokens NUMERIC NOT NULL,
        output_tokens NUMERIC NOT NULL, cached_input_tokens NUMERIC NOT NULL,
        cache_write_tokens NUMERIC NOT NULL, reasoning_tokens NUMERIC NOT NULL,
        error_type TEXT, requested TEXT, seq BIGINT NOT NULL, recorded_at TEXT NOT NULL,
        provider TEXT, model TEXT, tool_calls BIGINT NOT NULL,
        cache_write_1h_tokens NUMERIC NOT NULL, input_audio_tokens NUMERIC NOT NULL,
        input_image_tokens NUMERIC NOT NULL, output_audio_tokens NUMERIC NOT NULL,
        attempt NUMERIC, charge_amount NUMERIC, charge_currency TEXT, charge_reason TEXT)""",
    f"""CREATE TABLE {TOOL_CALLS} (
        position BIGINT PRIMARY KEY, conversation_id TEXT COLLATE "C" NOT NULL,
        call_id TEXT, tool TEXT, outcome TEXT NOT NULL, reason TEXT, duration_ms NUMERIC)""",
    f"""CREATE TABLE {REQUESTED_CALLS} (
        position BIGINT NOT NULL, conversation_id TEXT COLLATE "C" NOT NULL, part BIGINT NOT NULL,
        call_id TEXT, tool TEXT, kind TEXT, PRIMARY KEY (position, part))""",
]


def drop(db: Database, tables: tuple[str, ...] = _ALL) -> None:
    """Drop the tables (all by default) and their triggers (to ``install`` them again from
    ``events``)."""
    for table in tables:
        for suffix in ("project", "refuse_update", "refuse_delete"):
            db.execute(f"DROP TRIGGER IF EXISTS {table}_{suffix}")
        db.execute(f"DROP TABLE IF EXISTS {table}")


def drop_postgres(conn: Any, tables: tuple[str, ...] = _ALL) -> None:
    """:func:`drop` on PostgreSQL: the tables, their triggers and trigger functions."""
    for table in tables:
        conn.execute(f"DROP TRIGGER IF EXISTS {table}_project ON events")
        conn.execute(f"DROP FUNCTION IF EXISTS {table}_project()")
        conn.execute(f"DROP TABLE IF EXISTS {table} CASCADE")


def install(db: Database, tables: tuple[str, ...] = _ALL) -> None:
    """Create the tables (all by default), fill them from ``events`` and add their triggers
    and the tool calls' index (inside the migration)."""
    for (table, select, _columns, _key), sql in zip(_projected(SQLITE), _TABLES):
        if table in tables:
            db.execute(sql)
            db.execute(f"INSERT INTO {table} {select('events')}")
    db.execute(_INDEX)
    for name, sql in GUARDS.items():
        if name.startswith(tables):
            db.execute(sql)


def _guards() -> dict[str, str]:
    """The triggers that keep the tables in step with ``events`` and refuse edits (SQLite)."""
    guards = {}
    for table, when, insert in (
            (MODEL_CALLS, f"IN {_MODEL_TYPES}", f"VALUES ({_MODEL_ROW.format(e='NEW')})"),
            (TOOL_CALLS, f"IN {_TOOL_TYPES}", f"VALUES ({_TOOL_ROW.format(e='NEW')})"),
            (REQUESTED_CALLS, "= 'model_responded'", _requested_select(SQLITE, None))):
        guards[f"{table}_project"] = (
            f"CREATE TRIGGER {table}_project AFTER INSERT ON events "
            f"WHEN NEW.type {when} "
            f"BEGIN INSERT INTO {table} {insert}; END")
        for operation in ("UPDATE", "DELETE"):
            guards[f"{table}_refuse_{operation.lower()}"] = (
                f"CREATE TRIGGER {table}_refuse_{operation.lower()} BEFORE {operation} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{table} is a projection of events: "
                f"{operation} is not allowed'); END")
    return guards


def _pg_guards() -> dict[str, str]:
    """:func:`_guards` on PostgreSQL (the functions they run are created by the migration)."""
    guards = {}
    for table, *_ in _projected(POSTGRES):
        guards[f"{table}_project"] = (
            f"CREATE TRIGGER {table}_project AFTER INSERT ON events "
            "REFERENCING NEW TABLE AS appended FOR EACH STATEMENT "
            f"EXECUTE FUNCTION {table}_project()")
        for operation in ("UPDATE", "DELETE", "TRUNCATE"):
            level = "STATEMENT" if operation == "TRUNCATE" else "ROW"
            guards[f"{table}_refuse_{operation.lower()}"] = (
                f"CREATE TRIGGER {table}_refuse_{operation.lower()} BEFORE {operation} "
                f"ON {table} FOR EACH {level} EXECUTE FUNCTION turnlog_refuse_rewrite()")
    return guards


def _present(conn: ReadConnection) -> set[str]:
    """Which of the tables the journal has."""
    exists = dialect_of(conn).table_exists()
    return {t for t in _ALL if conn.execute(exists, (t,)).fetchone()}


def install_postgres(conn: Any, tables: tuple[str, ...] = _ALL) -> None:
    """:func:`install` on PostgreSQL (``conn``: the migration's psycopg connection)."""
    for (table, select, _columns, _key), sql in zip(_projected(POSTGRES), _PG_TABLES):
        if table not in tables:
            continue
        conn.execute(sql)
        conn.execute(f"INSERT INTO {table} {select('events')}")
        conn.execute(
            f"CREATE FUNCTION {table}_project() RETURNS trigger LANGUAGE plpgsql AS $$ "
            f"BEGIN INSERT INTO {table} {select('appended')}; RETURN NULL; END $$")
    conn.execute(_INDEX)
    for name, sql in PG_GUARDS.items():
        if name.startswith(tables):
            conn.execute(sql)


def in_step(conn: ReadConnection) -> bool:
    """Whether the tables cover exactly the events they project and have this version's
    columns: the model and tool calls' tables one row per projected event (counts and last
    positions), the requested calls' table up to the last response that asked for a call.

    Cheap: every figure comes from an index or a primary key, no payload is read. False when
    the tables are missing (a journal written without the engine, or by an older one and read
    read-only).
    """
    if len(_present(conn)) < len(_ALL):
        return False
    try:  # tables of an older version (read-only: not migrated) lack the newer columns
        conn.execute(f"SELECT requested, charge_reason FROM {MODEL_CALLS} LIMIT 0")
        conn.execute(f"SELECT call_id FROM {TOOL_CALLS} LIMIT 0")
    except (sqlite3.OperationalError, JournalError):
        return False
    for table, types in ((MODEL_CALLS, _MODEL_TYPES), (TOOL_CALLS, _TOOL_TYPES)):
        projected = conn.execute(f"SELECT count(*), max(position) FROM {table}").fetchone()
        source = conn.execute(
            f"SELECT count(*), max(position) FROM events WHERE type IN {types}").fetchone()
        if projected != source:
            return False
    asked = conn.execute(f"SELECT position FROM {MODEL_CALLS} WHERE requested IS NOT NULL "
                         "ORDER BY position DESC LIMIT 1").fetchone()
    rows = conn.execute(f"SELECT max(position) FROM {REQUESTED_CALLS}").fetchone()
    return (asked or (None,))[0] == rows[0]


def check(conn: ReadConnection, conversation_id: str | None = None,
          extension: str = "engine.audit.views") -> list[ProjectionMismatch]:
    """Recompute every table from ``events`` (every row, or one conversation's) and
    return each difference: a row missing, a row no event backs, a column that differs.

    Reads every projected payload once: O(events of those types). At most 100
    differences are listed (the first by position).
    """
    present = _present(conn)
    found: list[ProjectionMismatch] = []
    for table, select, columns, key in _projected(dialect_of(conn)):
        if table not in present:
            continue  # not installed: nothing can be forged, the audit reads events
        scope = () if conversation_id is None else (conversation_id,)
        expected = select("events") + (" AND e.stream_id = ?" if scope else "")
        stored = f"SELECT * FROM {table}" + (" WHERE conversation_id = ?" if scope else "")
        positions = sorted(
            {p for (p, *_) in conn.execute(f"{expected} EXCEPT {stored}", scope * 2)}
            | {p for (p, *_) in conn.execute(f"{stored} EXCEPT {expected}", scope * 2)})
        for position in positions:
            if len(found) >= _MAX_REPORTED:
                break
            want = {tuple(r[i] for i in key): r for r in conn.execute(
                select("events") + " AND e.position = ?", (position,)).fetchall()}
            have = {tuple(r[i] for i in key): r for r in conn.execute(
                f"SELECT * FROM {table} WHERE position = ?", (position,)).fetchall()}
            for k in sorted(want.keys() | have.keys()):
                if want.get(k) != have.get(k) and len(found) < _MAX_REPORTED:
                    found.append(_mismatch(extension, table, columns, position,
                                           want.get(k), have.get(k), k[1:]))
    return found


def _mismatch(extension: str, table: str, columns: tuple[str, ...], position: int,
              want: tuple | None, have: tuple | None, part: tuple = ()) -> ProjectionMismatch:
    """``part``: the requested call's part index (its table has a row per requested call)."""
    of = "".join(f"part {p}: " for p in part)
    if have is None:
        return ProjectionMismatch(extension, table, want[1], position, None,
                                  f"{of}the row for this event is missing")
    if want is None:
        return ProjectionMismatch(extension, table, have[1], position, None,
                                  f"{of}no event of its kind is at this position (a forged row)")
    index = next((i for i, (w, h) in enumerate(zip(want, have)) if w != h), None)
    if index is None:
        return ProjectionMismatch(extension, table, want[1], position, None,
                                  f"{of}the row differs from the event in a value's type")
    return ProjectionMismatch(extension, table, want[1], position, columns[index],
                              f"{of}{columns[index]} is {have[index]!r}, the event says "
                              f"{want[index]!r}")


def rebuild(path: str) -> None:
    """Drop and rebuild the projection tables from ``events`` in one transaction.

    For a journal whose projections are out of step (``in_step`` is false):
    the audit is right without them, only slower.
    """
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("BEGIN IMMEDIATE")
        try:
            drop(sqlite_database(conn))
            install(sqlite_database(conn))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()


GUARDS = _guards()
"""The tables' triggers by name (SQLite): the extension's ``guards``."""

PG_GUARDS = _pg_guards()
"""The tables' triggers by name (PostgreSQL): the extension's ``guards_postgres``."""
