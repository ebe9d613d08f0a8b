"""SQL views over the journal's ``events``, so plain SQL answers audit questions.

The engine registers them as a journal :class:`~journal.Extension`: opening a
journal through the engine (every ``turnlog`` command does) creates them in
the same migration transaction as the schema. They are views, not tables:
``events`` stays the only source of truth and nothing here can drift from it.
One index, ``events_by_type (type, stream_id, seq)``, lets a view read only
the events of its types (an index is a projection too: SQLite rebuilds it
from ``events`` whenever asked). The same migration installs the audit's
trigger-maintained projection tables (``engine.audit.projections``).

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
- ``approvals``: every call that asked for a person's approval, with its
  decision (approver, reason, time, edited arguments) once there is one.
- ``events_hex``: ``events`` with ``prev_hash`` and ``hash`` as hex text, for
  tools that show bytes as ``<Binary: 32 bytes>`` (Datasette) or ``b'…'``.
- ``costs``: every model response with its token counts and the charge
  recorded with it (cost, currency, price source and version, or why it was
  unpriced); ``cost`` is NULL for a response recorded without a price
  (``turnlog audit`` prices those at their time).

Example, with nothing but ``sqlite3 turnlog.db``::

    SELECT tool, count(*), sum(outcome = 'failed') FROM tool_calls GROUP BY tool;
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any


from turnlog import journal
from turnlog.journal import Extension, ProjectionMismatch, shown_url

from turnlog.engine.model.snapshots import check_snapshots
from . import projections
from .status import status_sql
from turnlog.journal import POSTGRES, SQLITE, Dialect, PgConnection, ReadConnection

if TYPE_CHECKING:
    from sqlite_utils import Database

__all__ = ["EXTENSIONS", "STATUS_SQL", "VIEWS", "VIEWS_EXTENSION", "connect_readonly", "views"]

#: Version 4's status (one level of forks): the status after an event of each type. Kept for
#: the views of journals not yet migrated (``_PREVIOUS``); the current view's status is
#: generated from the Python rule (``engine.audit.status``).
STATUS_SQL = """CASE {type}
    WHEN 'conversation_completed' THEN 'completed'
    WHEN 'conversation_failed' THEN 'failed'
    WHEN 'turn_limit_reached' THEN 'halted'
    WHEN 'conversation_halted' THEN 'halted'
    WHEN 'run_interrupted' THEN 'interrupted'
    WHEN 'approval_pending' THEN 'awaiting_approval'
    ELSE 'active' END"""

#: The event types after which a conversation's run has ended.
_TERMINAL = "('conversation_completed', 'conversation_failed', 'turn_limit_reached', " \
            "'conversation_halted')"


def _undecided(d: Dialect, stream: str) -> str:
    """Whether ``stream`` has a call that asked for approval, has no decision and no answer
    (``ConversationState.awaiting_approval``)."""
    j = d.json
    return f"""EXISTS (SELECT 1 FROM events AS q
        WHERE q.type = 'approval_requested' AND q.stream_id = {stream}
          AND NOT EXISTS (SELECT 1 FROM events AS v
              WHERE v.type IN ('approval_decided', 'tool_completed', 'tool_call_rejected')
                AND v.stream_id = q.stream_id AND v.seq > q.seq
                AND {j('v.payload', '$.call_id')} = {j('q.payload', '$.call_id')}))"""

def _v4_status(d: Dialect) -> str:
    return STATUS_SQL.format(type=f'''CASE WHEN z.seq = 1 AND l.parent_stream_id IS NOT NULL
        THEN (SELECT nullif(p.type, 'run_interrupted') FROM events p
              WHERE p.stream_id = l.parent_stream_id AND p.seq = l.parent_seq)
        WHEN z.type NOT IN {_TERMINAL} AND {_undecided(d, 's.stream_id')}
        THEN 'approval_pending'
        ELSE z.type END''')


_TOKENS = ("input_tokens", "output_tokens", "cached_input_tokens")


def _own_tokens(d: Dialect, column: str) -> str:
    return (f"coalesce((SELECT sum({d.json('r.payload', f'$.usage.{column}', 'number')}) "
            f"FROM events r "
            f"WHERE r.type = 'model_responded' AND r.stream_id = s.stream_id), 0) AS {column}")


# The status is generated from the Python rule (``engine.audit.status``), walking forks of
# any depth. Each stream's last event is found by an index lookup per conversation, not by
# grouping every event, so listing 10,000 conversations does not read a million index entries.
def _conversations(d: Dialect, markers: bool = True) -> str:
    return _conversations_v4(d, status_sql(d, "s.stream_id", "z.seq", "z.type"), markers)


# Version 4's conversations view (its status handled one level of forks), kept for
# ``_PREVIOUS``. A fork whose only own event is its start is in the state its parent was in at the fork
# point; otherwise the last own event decides (one level of forks, the common case).
# Each stream's last event is found by an index lookup per conversation, not by grouping
# every event, so listing 10,000 conversations does not read a million index entries.
# A fork's own start ends its parent's interruption (the fork was never interrupted).
_MARKERS = "('erasure_recorded', 'hold_placed', 'hold_released')"


def _conversations_v4(d: Dialect, status: str | None = None, markers: bool = False) -> str:
    """``status``: the status expression (version 4's one-level rule by default);
    ``markers``: an erasure's or a hold's record does not change the status (version 6)."""
    j = d.json
    own = f" AND m.type NOT IN {_MARKERS}" if markers else ""
    count = ("(SELECT max(c.seq) FROM events AS c WHERE c.stream_id = s.stream_id)" if markers
             else "z.seq")
    return f"""CREATE VIEW conversations AS
SELECT
    s.stream_id AS conversation_id,
    {j('s.payload', '$.provider')} AS provider,
    {j('s.payload', '$.model')} AS model,
    coalesce({j('s.payload', '$.mode')}, 'chat') AS mode,
    {status or _v4_status(d)} AS status,
    (SELECT count(*) FROM events r
     WHERE r.type = 'model_responded' AND r.stream_id = s.stream_id) AS turns,
    {", ".join(_own_tokens(d, c) for c in _TOKENS)},
    {count} AS events,
    s.recorded_at AS started_at,
    z.recorded_at AS updated_at,
    z.type AS last_event,
    l.parent_stream_id AS parent,
    l.parent_seq AS fork_seq,
    {j('s.payload', '$.replay_of.conversation_id')} AS replay_of,
    z.position AS last_position
FROM events AS s
JOIN events AS z ON z.stream_id = s.stream_id
    AND z.seq = (SELECT max(m.seq) FROM events AS m WHERE m.stream_id = s.stream_id{own})
LEFT JOIN stream_links AS l ON l.stream_id = s.stream_id
WHERE s.type = 'conversation_started' AND s.seq = 1"""


def _model_calls(d: Dialect) -> str:
    j = d.json

    def started(key: str) -> str:
        # The conversation's provider/model stand in when a response does not name its own
        # (coalesce is lazy in SQLite, so the start event is only read when needed).
        return (f"(SELECT {j('s.payload', f'$.{key}')} FROM events s "
                "WHERE s.stream_id = e.stream_id AND s.seq = 1)")

    def tokens(key: str) -> str:
        return f"coalesce({j('e.payload', f'$.usage.{key}', 'number')}, 0) AS {key}"

    return f"""CREATE VIEW model_calls AS
SELECT
    e.position, e.stream_id AS conversation_id, e.seq, e.recorded_at,
    {j('e.payload', '$.turn', 'number')} AS turn,
    coalesce(nullif({j('e.payload', '$.provider')}, ''), {started('provider')}) AS provider,
    coalesce(nullif({j('e.payload', '$.model')}, ''), {started('model')}) AS model,
    e.type = 'model_responded' AS ok,
    CASE WHEN e.type = 'model_responded'
         THEN coalesce({j('e.payload', '$.stop_reason')}, 'end_turn') END AS stop_reason,
    {tokens('input_tokens')},
    {tokens('output_tokens')},
    {tokens('cached_input_tokens')},
    {tokens('cache_write_tokens')},
    {tokens('reasoning_tokens')},
    {j('e.payload', '$.latency_ms', 'number')} AS latency_ms,
    CASE WHEN e.type = 'model_responded'
         THEN coalesce({j('e.payload', '$.source')}, 'provider') END AS source,
    (SELECT count(*) FROM {d.each('e.payload', '$.parts', 'p')}
     WHERE {j('p.value', '$.type')} = 'tool_call') AS tool_calls,
    {j('e.payload', '$.error_type')} AS error_type,
    {j('e.payload', '$.message')} AS error,
    {j('e.payload', '$.status', 'number')} AS http_status
FROM events AS e
WHERE e.type IN ('model_responded', 'model_failed')"""


def _whole_text(d: Dialect, expr: str, path: str, parts: bool) -> str:
    """SQL for the text at ``path`` of the JSON ``expr``, read from ``blobs`` when the journal
    keeps it there (a part over the threshold: ``{"$blob": digest, "size": n}``; base64
    parts, kept as their bytes, are left as that reference). ``parts`` False: version 4's
    plain extraction."""
    if not parts:
        return d.json(expr, path)
    key = path.removeprefix("$.")
    if d.name == "sqlite":
        ref = f"""json_extract({expr}, '$.{key}."$blob"')"""
        stored = ("SELECT CAST(b.data AS TEXT) FROM blobs AS b WHERE b.digest = "
                  f"""{ref} AND json_extract({expr}, '$.{key}."enc"') IS NULL""")
    else:
        ref = f"({expr}::json -> '{key}' ->> '$blob')"
        stored = ("SELECT convert_from(b.data, 'UTF8') FROM blobs AS b WHERE b.digest = "
                  f"{ref} AND ({expr}::json -> '{key}' ->> 'enc') IS NULL")
    return f"coalesce(({stored}), {d.json(expr, path)})"


def _tool_calls(d: Dialect, parts: bool = True) -> str:
    j = d.json
    return f"""CREATE VIEW tool_calls AS
SELECT
    e.position, e.stream_id AS conversation_id, e.seq, e.recorded_at,
    {j('e.payload', '$.call_id')} AS call_id,
    {j('e.payload', '$.name')} AS tool,
    CASE WHEN e.type = 'tool_call_rejected' THEN 'refused'
         WHEN {j('e.payload', '$.success', 'bool')} THEN 'succeeded'
         ELSE 'failed' END AS outcome,
    {j('e.payload', '$.reason')} AS refused_reason,
    {j('e.payload', '$.duration_ms', 'number')} AS duration_ms,
    {j('e.payload', '$.error')} AS error,
    {_whole_text(d, 'e.payload', '$.content', parts)} AS content,
    CASE WHEN e.type = 'tool_completed'
         THEN coalesce({j('e.payload', '$.source')}, 'live') END AS source,
    CASE WHEN e.type = 'tool_call_rejected'
         THEN coalesce({j('e.payload', '$.arguments')}, '{{}}')
         ELSE (SELECT coalesce({j('t.payload', '$.arguments')}, '{{}}') FROM events AS t
               WHERE t.type = 'tool_started' AND t.stream_id = e.stream_id AND t.seq < e.seq
                 AND {j('t.payload', '$.call_id')} = {j('e.payload', '$.call_id')}
               ORDER BY t.seq DESC LIMIT 1) END AS arguments
FROM events AS e
WHERE e.type IN ('tool_completed', 'tool_call_rejected')
UNION ALL
SELECT
    e.position, e.stream_id, e.seq, e.recorded_at,
    {j('p.value', '$.id')}, {j('p.value', '$.name')}, 'pending',
    NULL, NULL, NULL, NULL, NULL,
    coalesce({j('p.value', '$.arguments')}, '{{}}')
FROM events AS e, {d.each('e.payload', '$.parts', 'p')}
WHERE e.type = 'model_responded' AND {j('p.value', '$.type')} = 'tool_call'
  AND NOT EXISTS (
    SELECT 1 FROM events AS a
    WHERE a.type IN ('tool_completed', 'tool_call_rejected') AND a.stream_id = e.stream_id
      AND a.seq > e.seq AND {j('a.payload', '$.call_id')} = {j('p.value', '$.id')})"""


def _messages(d: Dialect, parts: bool = True) -> str:
    j = d.json
    return f"""CREATE VIEW messages AS
SELECT
    e.position, e.stream_id AS conversation_id, e.seq, e.recorded_at,
    CASE e.type WHEN 'user_message' THEN 'user' WHEN 'model_responded' THEN 'assistant'
         ELSE 'tool' END AS role,
    CASE WHEN e.type IN ('user_message', 'model_responded')
         THEN (SELECT {d.concat(_whole_text(d, 'p.value', '$.text', parts), "''")}
               FROM {d.each('e.payload', '$.parts', 'p')}
               WHERE {j('p.value', '$.type')} = 'text')
         ELSE {_whole_text(d, 'e.payload', '$.content', parts)} END AS text,
    {j('e.payload', '$.turn', 'number')} AS turn,
    nullif({j('e.payload', '$.provider')}, '') AS provider,
    nullif({j('e.payload', '$.model')}, '') AS model,
    {j('e.payload', '$.call_id')} AS call_id,
    {j('e.payload', '$.name')} AS tool,
    CASE WHEN e.type = 'tool_completed' THEN {d.flag('NOT ' + j('e.payload', '$.success', 'bool'))}
         WHEN e.type = 'tool_call_rejected' THEN 1 ELSE 0 END AS is_error,
    {j('e.payload', '$.parts')} AS parts
FROM events AS e
WHERE e.type IN ('user_message', 'model_responded', 'tool_completed', 'tool_call_rejected')"""


def _approvals(d: Dialect) -> str:
    j = d.json
    decided = """(SELECT {column} FROM events AS v
         WHERE v.type = 'approval_decided' AND v.stream_id = e.stream_id AND v.seq > e.seq
           AND {call} = {asked} ORDER BY v.seq LIMIT 1)"""

    def decision(column: str) -> str:
        return decided.format(column=column, call=j('v.payload', '$.call_id'),
                              asked=j('e.payload', '$.call_id'))

    return f"""CREATE VIEW approvals AS
SELECT
    e.position, e.stream_id AS conversation_id, e.seq, e.recorded_at AS requested_at,
    {j('e.payload', '$.call_id')} AS call_id,
    {j('e.payload', '$.name')} AS tool,
    {j('e.payload', '$.arguments_hash')} AS arguments_hash,
    {decision(j('v.payload', '$.decision'))} AS decision,
    {decision(j('v.payload', '$.approver'))} AS approver,
    {decision(j('v.payload', '$.reason'))} AS reason,
    {decision(j('v.payload', '$.decided_at'))} AS decided_at,
    {decision(d.flag(j('v.payload', '$.arguments') + ' IS NOT NULL'))} AS edited,
    {decision('v.seq')} AS decided_seq
FROM events AS e
WHERE e.type = 'approval_requested'"""


def _events_hex(d: Dialect) -> str:
    return f"""CREATE VIEW events_hex AS
SELECT position, stream_id, seq, type, version, recorded_at, payload,
    {d.hex('prev_hash')} AS prev_hash,
    {d.hex('hash')} AS hash
FROM events"""


def _costs(d: Dialect) -> str:
    j = d.json

    def charge(key: str, kind: str = "text") -> str:
        return j('e.payload', f'$.charge.{key}', kind)

    def tokens(key: str) -> str:
        return f"coalesce({j('e.payload', f'$.usage.{key}', 'number')}, 0) AS {key}"

    return f"""CREATE VIEW costs AS
SELECT
    e.position, e.stream_id AS conversation_id, e.seq, e.recorded_at,
    substr(e.recorded_at, 1, 10) AS day,
    {j('e.payload', '$.turn', 'number')} AS turn,
    coalesce(nullif({j('e.payload', '$.provider')}, ''),
             (SELECT {j('s.payload', '$.provider')} FROM events s
              WHERE s.stream_id = e.stream_id AND s.seq = 1)) AS provider,
    coalesce(nullif({j('e.payload', '$.model')}, ''),
             (SELECT {j('s.payload', '$.model')} FROM events s
              WHERE s.stream_id = e.stream_id AND s.seq = 1)) AS model,
    {tokens('input_tokens')},
    {tokens('output_tokens')},
    {tokens('cached_input_tokens')},
    {tokens('cache_write_tokens')},
    {tokens('cache_write_1h_tokens')},
    {tokens('reasoning_tokens')},
    {charge('amount', 'number')} AS cost,
    CASE WHEN {charge('source')} IS NOT NULL
         THEN coalesce({charge('currency')}, 'USD') END AS currency,
    {charge('source')} AS price_source,
    {charge('version')} AS price_version,
    {charge('priced_as')} AS priced_as,
    {charge('reason')} AS unpriced_reason
FROM events AS e
WHERE e.type = 'model_responded'"""


def views(d: Dialect, parts: bool = True, markers: bool = True) -> dict[str, str]:
    """View name -> its CREATE VIEW statement in dialect ``d`` (``parts``: version 5's
    ``messages`` and ``tool_calls``, which read parts kept in blobs; ``markers``: version
    6's ``conversations``, whose status skips erasure and hold records)."""
    return {"conversations": _conversations(d, markers), "messages": _messages(d, parts),
            "model_calls": _model_calls(d), "tool_calls": _tool_calls(d, parts),
            "approvals": _approvals(d), "events_hex": _events_hex(d), "costs": _costs(d)}


#: View name -> its CREATE VIEW statement.
VIEWS: dict[str, str] = views(SQLITE)

_INDEX = "CREATE INDEX IF NOT EXISTS events_by_type ON events (type, stream_id, seq)"


def _migrate(db: Database, from_version: int) -> None:
    """Create (or, from an older version, recreate) the index, every view and the projections.

    Version 2 added ``requested`` and ``call_id`` to the projections, version 3
    the Responses API's server tool calls to ``requested``: they are rebuilt
    from ``events``. Version 4 added the ``costs`` view, version 8 the columns a cost
    needs to the model calls' table (rebuilt from ``events``), version 9 the requested
    calls' table (built from ``events``) and the tool calls' index by call.
    """
    db.execute(_INDEX)
    if from_version in (1, 2):
        projections.drop(db)
    if from_version < 3:
        projections.install(db)
    elif from_version < 9:  # 8: the model calls' table gains the columns a cost needs
        rebuilt = (projections.MODEL_CALLS,) if from_version < 8 else ()
        projections.drop(db, (*rebuilt, projections.REQUESTED_CALLS))
        projections.install(db, (*rebuilt, projections.REQUESTED_CALLS))
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
        if not _same(sql, expected.get(name, VIEWS[name]))
    ]
    return found + projections.check(db.conn, conversation_id)


def _migrate_postgres(conn: Any, from_version: int) -> None:
    """:func:`_migrate` on PostgreSQL: the same index, views and projections (version 2 on)."""
    conn.execute(_INDEX)
    if from_version == 2:
        projections.drop_postgres(conn)
    if from_version < 3:
        projections.install_postgres(conn)
    elif from_version < 9:
        rebuilt = (projections.MODEL_CALLS,) if from_version < 8 else ()
        projections.drop_postgres(conn, (*rebuilt, projections.REQUESTED_CALLS))
        projections.install_postgres(conn, (*rebuilt, projections.REQUESTED_CALLS))
    for name, sql in views(POSTGRES).items():
        conn.execute(f"DROP VIEW IF EXISTS {name}")
        conn.execute(sql)


def _verify_postgres(conn: Any, conversation_id: str | None) -> list[ProjectionMismatch]:
    """The projection rows recomputed from ``events`` on PostgreSQL (its view definitions
    are stored parsed, not as text: they are not compared)."""
    return projections.check(PgConnection(conn, "the journal"), conversation_id)


#: The audit views as a journal extension (bump ``version`` when a view changes, and keep
#: the old definitions in ``_PREVIOUS``). 2: ``conversations.status`` says ``interrupted``;
#: ``tool_calls`` lists pending calls; the projections keep call ids and requested calls.
#: 3: ``conversations.status`` says ``awaiting_approval``; the ``approvals`` view; the
#: projections count the Responses API's server tool calls. 4: the ``events_hex`` and
#: ``costs`` views. 5: ``tool_calls.content`` and ``messages.text`` read a part kept once
#: in ``blobs`` (journal schema 6). 6: ``conversations.status`` is generated from
#: ``ConversationState``'s rule and walks forks of any depth, and reads past erasure and
#: hold records. 7: a fork taken at an erasure's or a hold's record has the status
#: its parent had before the record (version 6 read none there). 8: the model calls'
#: projection keeps what each response's cost needs (seq, time, own provider and model,
#: every token count, tool calls, attempt, recorded charge), so the audit's costs read no
#: payload. 9: the requested calls' projection (a row per call a response asked for) and the
#: tool calls' index by call, so the pending calls are one anti-join. Its ``verify_journal`` refolds the saved conversation states
#: (``engine.snapshots``), on
#: every backend.
VIEWS_EXTENSION = Extension(name="engine.views", version=9, migrate=_migrate, verify=_verify,
                            migrate_postgres=_migrate_postgres, verify_postgres=_verify_postgres,
                            verify_journal=check_snapshots, guards=projections.GUARDS,
                            guards_postgres=projections.PG_GUARDS)

# Versions 7's and 8's views are version 9's (only the projections changed).
_V7 = VIEWS
# Version 6's views: a fork taken at a marker read the marker as its parent's last event.
_V6 = {**VIEWS, "conversations": _conversations_v4(
    SQLITE, status_sql(SQLITE, "s.stream_id", "z.seq", "z.type", fork_at_marker=False), True)}
# Version 5's views: the status of one level of forks, from the last event whatever it is.
_V5 = {**VIEWS, "conversations": _conversations_v4(SQLITE)}
# Version 4's views: a part kept in blobs showed as its reference.
_V4 = {**views(SQLITE, parts=False), "conversations": _conversations_v4(SQLITE)}
# Version 3's views: no events_hex, no costs.
_V3 = {name: sql for name, sql in _V4.items() if name not in ("events_hex", "costs")}
# Version 2's views: no 'awaiting_approval' status, no approvals view.
_V2 = {name: sql for name, sql in _V3.items() if name != "approvals"}
_V2["conversations"] = (_V2["conversations"]
                        .replace("    WHEN 'approval_pending' THEN 'awaiting_approval'\n", "")
                        .replace(f"\n        WHEN z.type NOT IN {_TERMINAL} AND "
                                 f"{_undecided(SQLITE, 's.stream_id')}\n"
                                 "        THEN 'approval_pending'", ""))
# Version 1's views: conversations had no 'interrupted' status, tool_calls no pending calls.
_PREVIOUS: dict[int, dict[str, str]] = {1: {
    **_V2,
    "conversations": _V2["conversations"].replace("    WHEN 'run_interrupted' THEN 'interrupted'\n", "")
    .replace("nullif(p.type, 'run_interrupted')", "p.type"),
    "tool_calls": _V2["tool_calls"].split("\nUNION ALL\n", 1)[0],
}, 2: _V2, 3: _V3, 4: _V4, 5: _V5, 6: _V6, 7: _V7, 8: _V7}

#: Journal schema extensions the engine registers when it opens a journal.
EXTENSIONS: tuple[Extension, ...] = (VIEWS_EXTENSION,)


def connect_readonly(path: str) -> ReadConnection:
    """A read-only connection to the journal at ``path`` (a file or a PostgreSQL URL), with
    the engine's views.

    For queries over the views (``turnlog audit``, ``ls``, ``tail``). It never
    creates, migrates or writes a file (``journal.connect_readonly``: a 0444 file
    or a read-only mount works); temporary tables live in memory. A journal whose
    file lacks the views (written without the engine) or has an older version of
    them (not written since turnlog was upgraded) gets them as temporary views.
    On PostgreSQL it is a :class:`~turnlog.journal.PgConnection` that writes only
    temporary tables and views of its own session.
    """
    conn = journal.connect_sql(path, extensions=EXTENSIONS, check_same_thread=False)
    if journal.dialect_of(conn) is POSTGRES:
        return _prepare_postgres(conn)
    try:
        installed = _views_of(conn)
        blobs = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'blobs'").fetchone()
        for name, sql in (VIEWS if blobs else _V4).items():  # _V4: a journal before schema 6
            if name not in installed or not _same(installed[name], sql):
                # a temporary view is found before the file's own view of the same name
                conn.execute(sql.replace("CREATE VIEW", "CREATE TEMP VIEW", 1))
    except sqlite3.Error as exc:
        conn.close()
        raise journal.JournalError(f"{shown_url(path)}: cannot prepare the views for reading: {exc}") from exc
    return conn


def _prepare_postgres(conn: PgConnection) -> PgConnection:
    try:
        row = conn.execute("SELECT value FROM _turnlog_meta WHERE key = ?",
                           (f"ext:{VIEWS_EXTENSION.name}",)).fetchone()
        if row is None or row[0] != str(VIEWS_EXTENSION.version):
            # pg_temp comes first in every search path: these views hide older ones
            blobs = conn.execute("SELECT to_regclass('blobs')").fetchone()[0] is not None
            for sql in views(POSTGRES, parts=blobs).values():
                conn.execute(sql.replace("CREATE VIEW", "CREATE TEMP VIEW", 1))
    except BaseException:
        conn.close()
        raise
    return conn
