"""The PostgreSQL journal's schema: the SQLite journal's tables, column for column, and migrations.

The same concepts as ``_schema`` (SQLite): ``events`` (position, stream_id, seq,
type, version, recorded_at, payload, prev_hash, hash; ``UNIQUE (stream_id, seq)``),
``stream_links`` for forks, triggers that refuse UPDATE, DELETE and TRUNCATE, and
``_turnlog_meta`` recording ``schema_version`` (and ``ext:<name>`` per extension).
Text columns compare as bytes (``COLLATE "C"``), as SQLite's do, so orderings by
stream id agree across backends. ``payload`` is ``text``, stored byte for byte; a
CHECK casts it to ``json`` so that invalid JSON is refused as on SQLite.

The tables live in the connection's current schema (``search_path``): one
database may hold several journals in several schemas (``?options=-csearch_path%3Dname``).
Every pending step runs in one transaction under an advisory lock, so two
processes opening a new journal at once cannot both migrate it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import psycopg

from ._blobs import BLOBS_FROM, BLOBS_TABLE_POSTGRES
from ._logtree import leaf_data
from ._merkle import TILE_LEVEL, Frontier, node_at, node_id
from ._hashing import CHAIN_VERSION
from ._schema import (
    CHAIN_KEY, READABLE_FROM, SCHEMA_VERSION, Extension, lost_constraints, new_origin,
)
from .errors import NotAJournalError, SchemaTooNewError

__all__ = [
    "MIGRATIONS",
    "MIGRATION_LOCK",
    "check_pg_schema",
    "core_guards",
    "missing_pg_guards",
    "open_pg_schema",
    "pg_chain_version",
    "restore_pg_guards",
]

META_TABLE = "_turnlog_meta"
_SCHEMA_KEY = "schema_version"

#: ``pg_advisory_xact_lock`` key (the bytes ``TLOG`` + 1) serialising migrations.
MIGRATION_LOCK = 0x544C4F47_00000001

_V1 = [
    f"CREATE TABLE {META_TABLE} (key TEXT COLLATE \"C\" PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE events (
        position BIGINT PRIMARY KEY,
        stream_id TEXT COLLATE "C" NOT NULL,
        seq BIGINT NOT NULL,
        type TEXT COLLATE "C" NOT NULL,
        version BIGINT NOT NULL,
        recorded_at TEXT COLLATE "C" NOT NULL,
        payload TEXT NOT NULL CHECK (payload::json IS NOT NULL),
        prev_hash TEXT COLLATE "C" NOT NULL,
        hash TEXT COLLATE "C" NOT NULL,
        UNIQUE (stream_id, seq)
    )""",
    """CREATE TABLE stream_links (
        stream_id TEXT COLLATE "C" PRIMARY KEY,
        parent_stream_id TEXT COLLATE "C" NOT NULL,
        parent_seq BIGINT NOT NULL
    )""",
    """CREATE FUNCTION turnlog_refuse_rewrite() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'turnlog journal is append-only: % on % is not allowed',
            TG_OP, TG_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';
    END $$""",
    *(
        f"CREATE TRIGGER {table}_refuse_{op.lower()} BEFORE {op} ON {table} "
        f"FOR EACH {'STATEMENT' if op == 'TRUNCATE' else 'ROW'} "
        "EXECUTE FUNCTION turnlog_refuse_rewrite()"
        for table in ("events", "stream_links")
        for op in ("UPDATE", "DELETE", "TRUNCATE")
    ),
]


def _create_v1(conn: psycopg.Connection) -> None:
    for statement in _V1:
        conn.execute(statement)


def _create_v2(conn: psycopg.Connection) -> None:
    """Snapshots: a cache of higher layers' folded state, checked against the chain on read."""
    conn.execute("""CREATE TABLE snapshots (
        stream_id TEXT COLLATE "C" NOT NULL,
        kind TEXT COLLATE "C" NOT NULL,
        seq BIGINT NOT NULL,
        hash TEXT COLLATE "C" NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (stream_id, kind)
    )""")


def _create_v3(conn: psycopg.Connection) -> None:
    """Nothing: SQLite's version 3 stores hashes as 32-byte BLOBs; PostgreSQL keeps hex text."""


def _refusal(table: str, op: str) -> str:
    """The trigger that refuses ``op`` (UPDATE, DELETE or TRUNCATE) on ``table``."""
    return (f"CREATE TRIGGER {table}_refuse_{op.lower()} BEFORE {op} ON {table} "
            f"FOR EACH {'STATEMENT' if op == 'TRUNCATE' else 'ROW'} "
            "EXECUTE FUNCTION turnlog_refuse_rewrite()")


def _create_v5(conn: psycopg.Connection) -> None:
    """Snapshots are guarded like events: only inserted, a newer snapshot is a new row."""
    conn.execute("ALTER TABLE snapshots DROP CONSTRAINT snapshots_pkey, "
                 "ADD PRIMARY KEY (stream_id, kind, seq)")
    for op in ("UPDATE", "DELETE", "TRUNCATE"):
        conn.execute(f"DROP TRIGGER IF EXISTS snapshots_refuse_{op.lower()} ON snapshots")
        conn.execute(_refusal("snapshots", op))


def _create_v4(conn: psycopg.Connection) -> None:
    """The log tree and signed checkpoints, as SQLite's schema 4 (hashes as ``BYTEA``);
    the tree of the events already there is built from their chain hashes."""
    conn.execute("CREATE TABLE tree (id BIGINT PRIMARY KEY, hash BYTEA NOT NULL)")
    conn.execute("""CREATE TABLE checkpoints (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        size BIGINT NOT NULL,
        note TEXT NOT NULL
    )""")
    for table in ("tree", "checkpoints"):
        for op in ("UPDATE", "DELETE", "TRUNCATE"):
            conn.execute(
                f"CREATE TRIGGER {table}_refuse_{op.lower()} BEFORE {op} ON {table} "
                f"FOR EACH {'STATEMENT' if op == 'TRUNCATE' else 'ROW'} "
                "EXECUTE FUNCTION turnlog_refuse_rewrite()")
    conn.execute(f"INSERT INTO {META_TABLE} (key, value) VALUES ('origin', %s)", (new_origin(),))
    frontier = Frontier(0, lambda *_: b"")
    with conn.cursor(name="turnlog_migrate_tree") as cursor:
        cursor.itersize = 10_000
        cursor.execute("SELECT hash FROM events ORDER BY position")
        while batch := cursor.fetchmany(10_000):
            conn.cursor().executemany(
                "INSERT INTO tree (id, hash) VALUES (%s, %s)",
                [(node_id(level, index), h) for level, index, h
                 in frontier.add(leaf_data(h) for (h,) in batch)])


def _create_v6(conn: psycopg.Connection) -> None:
    """Content-addressed parts, as SQLite's schema 6: ``blobs``, guarded like events."""
    conn.execute(BLOBS_TABLE_POSTGRES)
    for op in ("UPDATE", "DELETE", "TRUNCATE"):
        conn.execute(_refusal("blobs", op))


def _create_v7(conn: psycopg.Connection) -> None:
    """The chain's version, as SQLite's schema 7: 2 for a journal without events, else 1."""
    has_events = conn.execute("SELECT 1 FROM events LIMIT 1").fetchone() is not None
    conn.execute(f"INSERT INTO {META_TABLE} (key, value) VALUES (%s, %s) "
                 "ON CONFLICT (key) DO NOTHING", (CHAIN_KEY, "1" if has_events else str(CHAIN_VERSION)))


def pg_chain_version(conn: psycopg.Connection) -> int:
    """The chain version a PostgreSQL journal records (1 when none: before schema 7)."""
    row = conn.execute(f"SELECT value FROM {META_TABLE} WHERE key = %s", (CHAIN_KEY,)).fetchone()
    return int(row[0]) if row is not None and str(row[0]).isdigit() else 1


def _create_v8(conn: psycopg.Connection) -> None:
    """As SQLite's schema 8: ``tree`` keeps only its nodes of level ``TILE_LEVEL`` and up;
    the rows below are deleted with the refusing trigger set aside, then put back."""
    low: list[int] = []
    with conn.cursor(name="turnlog_migrate_tiles") as cursor:
        cursor.itersize = 10_000
        cursor.execute("SELECT id FROM tree ORDER BY id")
        low = [node for (node,) in cursor if node_at(node)[0] < TILE_LEVEL]
    conn.execute("DROP TRIGGER IF EXISTS tree_refuse_delete ON tree")
    for start in range(0, len(low), 10_000):
        conn.execute("DELETE FROM tree WHERE id = ANY(%s)", (low[start:start + 10_000],))
    conn.execute(_refusal("tree", "DELETE"))


MIGRATIONS: Sequence[tuple[int, Callable[[psycopg.Connection], None]]] = [
    (1, _create_v1), (2, _create_v2), (3, _create_v3), (4, _create_v4), (5, _create_v5),
    (6, _create_v6), (7, _create_v7), (8, _create_v8)]
"""The PostgreSQL schema's steps, oldest first, numbered as the SQLite schema's."""

assert MIGRATIONS[-1][0] == SCHEMA_VERSION, "both backends share one schema version"


def _inspect(conn: psycopg.Connection, where: str) -> dict[str, str] | None:
    """The journal's meta; ``None`` when the schema holds none of the journal's tables."""
    names = {name for (name,) in conn.execute(
        "SELECT c.relname FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace "
        "AND c.relname IN (%s, 'events', 'stream_links')", (META_TABLE,))}
    if not names:
        return None
    if META_TABLE not in names:
        raise NotAJournalError(
            f"{where} has tables named {', '.join(sorted(names))} but is not a turnlog journal "
            f"(no {META_TABLE} table): use another database or schema"
        )
    meta: dict[str, str] = dict(conn.execute(f"SELECT key, value FROM {META_TABLE}").fetchall())
    value = meta.get(_SCHEMA_KEY)
    if value is None or not (value.isascii() and value.isdigit()):
        raise NotAJournalError(f"{where} is damaged: its {META_TABLE} has no valid {_SCHEMA_KEY}")
    return meta


def _ext_version(meta: dict[str, str], ext: Extension) -> int:
    value = meta.get(f"ext:{ext.name}", "")
    return int(value) if value.isascii() and value.isdigit() else 0


def _refuse_newer(meta: dict[str, str], where: str, extensions: Sequence[Extension]) -> None:
    found = int(meta[_SCHEMA_KEY])
    if found > SCHEMA_VERSION:
        raise SchemaTooNewError(
            f"{where} has journal schema version {found}, but this turnlog knows versions up "
            f"to {SCHEMA_VERSION}: upgrade turnlog to open it"
        )
    for ext in extensions:
        if _ext_version(meta, ext) > ext.version:
            raise SchemaTooNewError(
                f"{where} has extension {ext.name!r} at version {_ext_version(meta, ext)}, but "
                f"this code knows versions up to {ext.version}: upgrade turnlog to open it"
            )


def _pending(meta: dict[str, str] | None, extensions: Sequence[Extension]) -> bool:
    return meta is None or int(meta[_SCHEMA_KEY]) < SCHEMA_VERSION or any(
        _ext_version(meta, ext) < ext.version for ext in _installable(extensions))


def _installable(extensions: Sequence[Extension]) -> list[Extension]:
    """The extensions that carry a PostgreSQL schema (``migrate_postgres``).

    The others are not installed in a PostgreSQL journal: their objects are absent,
    as on a SQLite journal opened read-only, and nothing of them is recorded.
    """
    return [ext for ext in extensions if ext.migrate_postgres is not None]


def open_pg_schema(conn: psycopg.Connection, where: str,
                   extensions: Sequence[Extension]) -> tuple[list[str], str | None]:
    """Check that the current schema is a turnlog journal (or empty), then bring it up to date
    and reinstall missing guards (``restore_pg_guards``, whose result this returns).

    ``conn`` is in autocommit mode; nothing is written when the journal is current.
    """
    meta = _inspect(conn, where)
    if meta is not None:
        _refuse_newer(meta, where, extensions)
    if _pending(meta, extensions):
        _migrate(conn, where, extensions)
    return restore_pg_guards(conn, where, extensions)


def _migrate(conn: psycopg.Connection, where: str, extensions: Sequence[Extension]) -> None:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        meta = _inspect(conn, where)  # another process may have migrated meanwhile
        if meta is None:
            meta = {_SCHEMA_KEY: "0"}
        else:
            _refuse_newer(meta, where, extensions)
        current = int(meta[_SCHEMA_KEY])
        for version, step in MIGRATIONS:
            if version > current:
                step(conn)
                _set_meta(conn, _SCHEMA_KEY, version)
        for ext in _installable(extensions):
            recorded = _ext_version(meta, ext)
            if recorded < ext.version and ext.migrate_postgres is not None:  # installable: set
                ext.migrate_postgres(conn, recorded)
                _set_meta(conn, f"ext:{ext.name}", ext.version)


def core_guards(version: int) -> dict[str, tuple[str, str]]:
    """The journal's own triggers at schema ``version``: name -> (table, CREATE TRIGGER)."""
    tables = ("events", "stream_links", *(("tree", "checkpoints") if version >= 4 else ()),
              *(("snapshots",) if version >= 5 else ()),
              *(("blobs",) if version >= BLOBS_FROM else ()))
    return {f"{table}_refuse_{op.lower()}": (table, _refusal(table, op))
            for table in tables for op in ("UPDATE", "DELETE", "TRUNCATE")}


_TRIGGERS = """SELECT t.tgname, c.relname, t.tgenabled FROM pg_trigger t
    JOIN pg_class c ON c.oid = t.tgrelid
    WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal"""
_CONSTRAINTS = """SELECT contype, pg_get_constraintdef(oid) FROM pg_constraint
    WHERE conrelid = (SELECT oid FROM pg_class WHERE relname = 'events'
                      AND relnamespace = current_schema()::regnamespace)"""


def _expected(conn: psycopg.Connection, version: int,
              extensions: Sequence[Extension]) -> dict[str, tuple[str, str]]:
    expected = core_guards(version)
    meta: dict[str, str] = dict(conn.execute(f"SELECT key, value FROM {META_TABLE}").fetchall())
    for ext in extensions:
        if ext.guards_postgres and _ext_version(meta, ext) >= 1:
            expected.update({name: (_table_of(sql), sql)
                             for name, sql in ext.guards_postgres.items()})
    return expected


def _table_of(sql: str) -> str:
    words = sql.split()
    return words[words.index("ON") + 1]


def missing_pg_guards(conn: psycopg.Connection, version: int,
                      extensions: Sequence[Extension] = ()) -> list[str]:
    """As ``_schema.missing_guards``: the triggers missing or disabled, and lost constraints."""
    present = {name: enabled for name, _table, enabled in conn.execute(_TRIGGERS)}
    missing = []
    for name in _expected(conn, version, extensions):
        if name not in present:
            missing.append(f"trigger {name}")
        elif present[name] == "D":
            missing.append(f"trigger {name} (disabled)")
    constraints = conn.execute(_CONSTRAINTS).fetchall()
    if not any(kind == "c" and "json" in text for kind, text in constraints):
        missing.append("events CHECK (payload::json IS NOT NULL)")
    if not any(kind == "u" and text == "UNIQUE (stream_id, seq)" for kind, text in constraints):
        missing.append("events UNIQUE (stream_id, seq)")
    return missing


def restore_pg_guards(conn: psycopg.Connection, where: str,
                      extensions: Sequence[Extension]) -> tuple[list[str], str | None]:
    """As ``_schema.restore_guards``: reinstall (or enable) the missing triggers of a journal
    opened for writing; return them, and why it must not be written to (or ``None``)."""
    if not missing_pg_guards(conn, SCHEMA_VERSION, extensions):
        return [], None
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        missing = missing_pg_guards(conn, SCHEMA_VERSION, extensions)
        expected = _expected(conn, SCHEMA_VERSION, extensions)
        triggers = [m for m in missing if m.startswith("trigger ")]
        for item in triggers:
            name = item.removeprefix("trigger ").removesuffix(" (disabled)")
            table, sql = expected[name]
            if item.endswith("(disabled)"):
                conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER {name}")
            else:
                conn.execute(sql)
    return triggers, lost_constraints(where, [m for m in missing if m not in triggers])


def check_pg_schema(conn: psycopg.Connection, where: str,
                    extensions: Sequence[Extension]) -> int:
    """For a read-only open: the schema must already hold a journal this code can read.

    Returns its schema version."""
    meta = _inspect(conn, where)
    if meta is None:
        raise NotAJournalError(f"{where} holds no turnlog journal (no {META_TABLE} table)")
    _refuse_newer(meta, where, extensions)
    if int(meta[_SCHEMA_KEY]) < READABLE_FROM:
        raise NotAJournalError(
            f"{where} has journal schema version {meta[_SCHEMA_KEY]}, older than this turnlog's "
            f"{SCHEMA_VERSION}: open it once for writing to migrate it, then read it"
        )
    return int(meta[_SCHEMA_KEY])


def _set_meta(conn: psycopg.Connection, key: str, version: int) -> None:
    conn.execute(
        f"INSERT INTO {META_TABLE} (key, value) VALUES (%s, %s) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, str(version)))
