"""Schema creation and migrations, run through sqlite-utils, plus the extension hook.

The core schema is a list of ``(version, step)`` pairs; a journal records the last
version applied as ``schema_version`` in ``_turnlog_meta``. Higher layers keep their
own objects in the same file (SQL views over payload JSON, say) as an
:class:`Extension`, recorded there as ``ext:<name>``. Every pending step, core and
extension, runs in one ``BEGIN IMMEDIATE`` transaction: a journal is migrated
completely or not at all, and two processes opening it at once cannot both migrate.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

import msgspec

from ._hashing import CHAIN_VERSION
from ._blobs import BLOBS_FROM, BLOBS_TABLE
from ._logtree import LEAF_COLUMN, leaf_data
from ._merkle import TILE_LEVEL, Frontier, node_at, node_id
from ._types import ProjectionMismatch, StoredEvent
from .errors import NotAJournalError, SchemaTooNewError

if TYPE_CHECKING:
    from sqlite_utils import Database

__all__ = [
    "APPLICATION_ID",
    "CHAIN_KEY",
    "COMPACT_HASHES_FROM",
    "LOG_TREE_FROM",
    "MIGRATIONS",
    "READABLE_FROM",
    "SCHEMA_VERSION",
    "TILES_FROM",
    "Extension",
    "check_extensions",
    "chain_version",
    "check_schema",
    "core_guards",
    "lost_constraints",
    "missing_guards",
    "new_origin",
    "open_schema",
    "restore_guards",
]

APPLICATION_ID = 0x544C4F47
"""``PRAGMA application_id`` of every turnlog journal (the bytes ``TLOG``)."""

META_TABLE = "_turnlog_meta"
_SCHEMA_KEY = "schema_version"
CHAIN_KEY = "chain_version"
"""The ``_turnlog_meta`` key of the journal's chain version (absent before schema 7: 1)."""


class Extension(msgspec.Struct, frozen=True, kw_only=True):
    """A higher layer's own named, versioned schema kept in the journal file.

    ``migrate(db, from_version)`` receives the :class:`sqlite_utils.Database` and the
    version already installed (0 when never installed) and must bring the extension
    to ``version``. It runs inside the journal's migration transaction, so it must not
    commit; if it raises, nothing of the migration is kept. A journal whose recorded
    version is newer than ``version`` is refused with :class:`SchemaTooNewError`.

    ``verify(db, stream_id)``, when given, recomputes the extension's derived objects
    (projection tables, views) from ``events`` — for every stream, or only
    ``stream_id``'s rows — and returns every :class:`ProjectionMismatch`;
    :meth:`Journal.verify` runs it and reports what it finds. It must only read.

    ``on_append(db, events)``, when given, runs inside every append's transaction
    (:meth:`Journal.append` and :meth:`Journal.append_many`), after the events are
    inserted and before the commit, with every :class:`StoredEvent` of the append in
    position order. It may write the extension's own tables: they then change
    atomically with the events. If it raises, the append is rolled back and the
    error propagates (sqlite3 errors as :class:`JournalError`); if the append is
    refused, it is not called. It must not COMMIT or ROLLBACK. A read-only journal
    never calls it. For example, a table of the last seq per stream::

        def track(db, events):
            db["heads"].upsert_all(
                [{"stream_id": e.stream_id, "seq": e.seq} for e in events], pk="stream_id")

        def create(db, from_version):
            db["heads"].create({"stream_id": str, "seq": int}, pk="stream_id")

        Extension(name="heads", version=1, migrate=create, on_append=track)

    ``verify_journal(journal, stream_id)``, when given, runs on every backend after the
    chains are checked, with the journal handle itself (the :class:`JournalProtocol`):
    for derived data that only the layer's own code can recompute (a folded state
    saved as a snapshot, say). It returns every :class:`ProjectionMismatch` and must
    only read.

    ``migrate_postgres(conn, from_version)`` and ``verify_postgres(conn, stream_id)``,
    when given, do the same on a PostgreSQL journal (``conn``: a psycopg connection,
    inside the migration's transaction or a read snapshot). An extension without
    ``migrate_postgres`` is not installed there: its objects are absent, as on a SQLite
    journal opened read-only. On PostgreSQL, tables kept in step with ``events``
    belong in a trigger created by ``migrate_postgres``; ``on_append`` is SQLite's.

    ``guards`` (SQLite) and ``guards_postgres``, when given, name the extension's
    triggers that must stay in place (trigger name: its ``CREATE TRIGGER`` statement).
    :meth:`Journal.verify` reports one that is missing (or disabled, on PostgreSQL),
    and a writable open reinstalls it.
    """

    name: str
    version: int
    migrate: Callable[[Database, int], None]
    verify: Callable[[Database, str | None], Sequence[ProjectionMismatch]] | None = None
    on_append: Callable[[Database, Sequence[StoredEvent]], None] | None = None
    migrate_postgres: Callable[[Any, int], None] | None = None
    verify_postgres: Callable[[Any, str | None], Sequence[ProjectionMismatch]] | None = None
    verify_journal: Callable[[Any, str | None], Sequence[ProjectionMismatch]] | None = None
    guards: dict[str, str] | None = None
    guards_postgres: dict[str, str] | None = None


_EVENTS_V1 = """CREATE TABLE events (
    position INTEGER PRIMARY KEY,
    stream_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    version INTEGER NOT NULL,
    recorded_at TEXT NOT NULL,
    payload TEXT NOT NULL CHECK (json_valid(payload)),
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    UNIQUE (stream_id, seq)
)"""

_STREAM_LINKS_V1 = """CREATE TABLE stream_links (
    stream_id TEXT PRIMARY KEY,
    parent_stream_id TEXT NOT NULL,
    parent_seq INTEGER NOT NULL
)"""


def _refusal(table: str, operation: str) -> str:
    """The trigger that refuses ``operation`` (UPDATE or DELETE) on ``table``."""
    return (f"CREATE TRIGGER {table}_refuse_{operation.lower()} BEFORE {operation} ON {table} "
            f"BEGIN SELECT RAISE(ABORT, 'turnlog journal is append-only: "
            f"{operation} on {table} is not allowed'); END")


def _create_v1(db: Database) -> None:
    db.execute(_EVENTS_V1)
    db.execute(_STREAM_LINKS_V1)
    for table in ("events", "stream_links"):
        for operation in ("UPDATE", "DELETE"):
            db.execute(_refusal(table, operation))


_SNAPSHOTS_V2 = """CREATE TABLE snapshots (
    stream_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    seq INTEGER NOT NULL,
    hash TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (stream_id, kind)
)"""


def _create_v2(db: Database) -> None:
    """Snapshots: a cache of higher layers' folded state, checked against the chain on read."""
    db.execute(_SNAPSHOTS_V2)


# Every view and trigger (a trigger elsewhere may read ``events``) and the indexes on
# ``events``: dropped while the table is rebuilt, then created again as they were.
_DEPENDENTS = """SELECT type, name, tbl_name, sql FROM sqlite_master
    WHERE sql IS NOT NULL AND (type IN ('view', 'trigger') OR (type = 'index' AND tbl_name = 'events'))
    ORDER BY rowid"""

_HASH_COLUMN = re.compile(r"\b(prev_hash|hash) (?:TEXT|BLOB)\b")
_EVENTS_TABLE = re.compile(r'CREATE TABLE "?events"? ?\(')


def _unhex(column: str) -> str:
    """SQL for ``column`` as its 32 bytes when it holds lower-case hex text, else as it is:
    an edited hash (another type, other text, bytes that are not UTF-8) is copied
    untouched, so ``verify`` still reports it."""
    return (f"CASE WHEN typeof({column}) = 'text' "
            f"THEN coalesce(turnlog_unhex(CAST({column} AS BLOB)), {column}) ELSE {column} END")


def _hash_bytes(stored: bytes) -> bytes | None:
    """``turnlog_unhex``: a stored hash's text (as bytes) as its 32 bytes, or ``None``
    (keep the value) unless it is exactly 64 lower-case hex digits."""
    if len(stored) != 64 or stored != stored.lower():
        return None
    try:
        digest = bytes.fromhex(stored.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
    return digest if len(digest) == 32 else None


def _create_v3(db: Database) -> None:
    """Hashes as 32-byte BLOBs instead of 64-character hex: 128 bytes less per event.

    The chain's definition and values do not change (it hashes the hex text, which
    reads give back as before). ``events`` is rebuilt from its own definition with
    both hash columns declared BLOB, keeping every row, position and column; its
    triggers and indexes and every view come back unchanged, and the triggers of
    other tables are not run. Rows are copied as they are stored, an edited one
    too (a payload that is not JSON included), so ``verify`` still reports them.
    """
    conn = db.conn
    [table_sql] = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone()
    new_sql, replaced = _HASH_COLUMN.subn(r"\1 BLOB", table_sql)
    new_sql, named = _EVENTS_TABLE.subn("CREATE TABLE events_v3 (", new_sql, count=1)
    # turnlog's own table: its key, its unique (stream, seq) and both hash columns
    if (replaced != 2 or not named or "position INTEGER PRIMARY KEY" not in table_sql
            or "UNIQUE (stream_id, seq)" not in table_sql):
        raise NotAJournalError(
            "cannot migrate the journal to schema 3: its events table is not turnlog's "
            f"({table_sql!r})")
    columns = [row[1] for row in conn.execute("PRAGMA table_info(events)")]
    names = ", ".join(f'"{c}"' for c in columns)
    values = ", ".join(_unhex(c) if c in ("prev_hash", "hash") else f'"{c}"' for c in columns)
    dependents = conn.execute(_DEPENDENTS).fetchall()
    for kind, name, table, _sql in reversed(dependents):
        if kind == "view" or (kind == "trigger" and table != "events"):
            conn.execute(f'DROP {kind.upper()} "{name}"')
    conn.create_function("turnlog_unhex", 1, _hash_bytes, deterministic=True)
    conn.execute(new_sql)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    try:
        conn.execute(f"INSERT INTO events_v3 ({names}) "
                     f"SELECT {values} FROM events ORDER BY position")
    finally:
        conn.execute("PRAGMA ignore_check_constraints = OFF")
    conn.execute("DROP TABLE events")
    conn.execute("ALTER TABLE events_v3 RENAME TO events")
    conn.execute(f"UPDATE snapshots SET hash = {_unhex('hash')}")
    for _kind, _name, _table, sql in dependents:
        conn.execute(sql)


_TREE_V4 = """CREATE TABLE tree (
    id INTEGER PRIMARY KEY,
    hash BLOB NOT NULL
)"""

_CHECKPOINTS_V4 = """CREATE TABLE checkpoints (
    id INTEGER PRIMARY KEY,
    size INTEGER NOT NULL,
    note TEXT NOT NULL
)"""


def new_origin() -> str:
    """A journal's stable origin: the default first line of its checkpoints (C2SP: a
    schema-less, URL-like name without spaces or ``+``)."""
    return f"turnlog.invalid/{uuid.uuid4().hex}"


def _create_v4(db: Database) -> None:
    """The log tree (RFC 6962 over every event, in position order) and signed checkpoints.

    ``tree`` holds the hash of every complete subtree, numbered in the order appends
    complete them (``_merkle.node_id``); ``checkpoints``
    the signed notes kept; ``_turnlog_meta`` gains the journal's ``origin``. Both
    tables are append-only, as ``events`` is. The tree of the events already there is
    built from their stored chain hashes, in one pass.
    """
    conn = db.conn
    conn.execute(_TREE_V4)
    conn.execute(_CHECKPOINTS_V4)
    for table in ("tree", "checkpoints"):
        for operation in ("UPDATE", "DELETE"):
            conn.execute(
                f"CREATE TRIGGER {table}_refuse_{operation.lower()} BEFORE {operation} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, 'turnlog journal is append-only: "
                f"{operation} on {table} is not allowed'); END")
    conn.execute(f"INSERT INTO {META_TABLE} (key, value) VALUES ('origin', ?)", (new_origin(),))
    frontier = Frontier(0, lambda *_: b"")
    rows = conn.execute(f"SELECT {LEAF_COLUMN} FROM events ORDER BY position")
    insert = "INSERT INTO tree (id, hash) VALUES (?, ?)"
    while batch := rows.fetchmany(10_000):
        conn.executemany(insert, [(node_id(level, index), h) for level, index, h
                                  in frontier.add(leaf_data(h) for (h,) in batch)])


_SNAPSHOTS_V5 = """CREATE TABLE snapshots_v5 (
    stream_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    seq INTEGER NOT NULL,
    hash BLOB NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (stream_id, kind, seq)
)"""


def _create_v5(db: Database) -> None:
    """Snapshots are guarded like events: rows are only inserted (a newer snapshot is a
    new row, the newest that still holds is read), never updated or deleted."""
    kept = [sql for (sql,) in db.execute(
        "SELECT sql FROM sqlite_master WHERE tbl_name = 'snapshots' AND type IN "
        "('trigger', 'index') AND sql IS NOT NULL AND name NOT LIKE 'snapshots_refuse_%' "
        "ORDER BY rowid").fetchall()]
    db.execute(_SNAPSHOTS_V5)
    db.execute("INSERT INTO snapshots_v5 (stream_id, kind, seq, hash, data) "
               "SELECT stream_id, kind, seq, hash, data FROM snapshots")
    db.execute("DROP TABLE snapshots")
    db.execute("ALTER TABLE snapshots_v5 RENAME TO snapshots")
    for sql in kept:  # an extension's triggers and indexes on the table come back
        db.execute(sql)
    for operation in ("UPDATE", "DELETE"):
        db.execute(_refusal("snapshots", operation))


def _create_v6(db: Database) -> None:
    """Content-addressed parts (``_blobs``): large parts of new events are stored once, by
    SHA-256, in ``blobs``, guarded like events. Events already written keep their parts
    inline: their chain hashes commit to them as they are."""
    db.execute(BLOBS_TABLE)
    for operation in ("UPDATE", "DELETE"):
        db.execute(_refusal("blobs", operation))


def _create_v7(db: Database) -> None:
    """The chain's version (``chain_version`` in ``_turnlog_meta``, see ``_hashing``): 2,
    erasable, for a journal without events; 1 (as they were hashed) for one with events.
    Nothing else changes: no hash is recomputed."""
    has_events = db.execute("SELECT 1 FROM events LIMIT 1").fetchone() is not None
    db.execute(f"INSERT OR IGNORE INTO {META_TABLE} (key, value) VALUES ('{CHAIN_KEY}', ?)",
               ("1" if has_events else str(CHAIN_VERSION),))


def _node_level(node: int) -> int:
    """``turnlog_node_level``: the level of the tree node numbered ``node``."""
    return node_at(node)[0]


def _create_v8(db: Database) -> None:
    """The log tree keeps only its nodes of level ``TILE_LEVEL`` and up (``_merkle``): one
    per 256 events and their tree, instead of two per event; lower ones are recomputed
    from the events' chain hashes. The rows below are deleted, the guard that refuses
    it is set aside for that statement and put back as it was. Ids, roots and proofs
    do not change; a row kept that was edited stays, so ``verify --checkpoint`` still
    reports it."""
    conn = db.conn
    conn.create_function("turnlog_node_level", 1, _node_level, deterministic=True)
    conn.execute("DROP TRIGGER IF EXISTS tree_refuse_delete")
    conn.execute(f"DELETE FROM tree WHERE turnlog_node_level(id) < {TILE_LEVEL}")
    conn.execute(_refusal("tree", "DELETE"))


MIGRATIONS: Sequence[tuple[int, Callable[[Database], None]]] = [
    (1, _create_v1), (2, _create_v2), (3, _create_v3), (4, _create_v4), (5, _create_v5),
    (6, _create_v6), (7, _create_v7), (8, _create_v8)]
"""The core schema's steps, oldest first. Append a step to change the schema; never edit one."""

SCHEMA_VERSION = MIGRATIONS[-1][0]
"""The newest core schema version this code knows."""

READABLE_FROM = 1
"""The oldest core schema a read-only handle reads as it is (v2 added only the snapshot
cache, whose absence just means no snapshot; v3 only stores hashes as bytes, and a
reader of an older journal reads them as the hex text they were; v4 adds the log tree,
which a reader of an older journal recomputes from the events where it needs it: read
commands need no migration first)."""

COMPACT_HASHES_FROM = 3
"""The first core schema whose ``events.hash`` and ``prev_hash`` are 32-byte BLOBs."""

LOG_TREE_FROM = 4
"""The first core schema with the log tree (``tree``, ``checkpoints``, the ``origin``)."""

TILES_FROM = 8
"""The first core schema whose ``tree`` keeps only nodes of level ``TILE_LEVEL`` and up
(a reader of schema 4 to 7 reads every level stored, and checks them all)."""


def open_schema(
    db: Database, path: str, extensions: Sequence[Extension], synchronous: str
) -> tuple[list[str], str | None]:
    """Check that ``db`` is a turnlog journal (or empty), then bring it up to date.

    Nothing is written until the file is known to be a journal or empty, and nothing
    at all when it is already current and guarded. Missing guard triggers are
    reinstalled (:func:`restore_guards`, whose result this returns).
    """
    meta = _inspect(db, path)
    _refuse_newer(meta, path, extensions)
    db.conn.execute("PRAGMA journal_mode = WAL")
    db.conn.execute(f"PRAGMA synchronous = {synchronous}")
    if meta is None or _pending(meta, extensions):
        _migrate(db, path, extensions)
    return restore_guards(db, path, extensions)


def check_schema(db: Database, path: str, extensions: Sequence[Extension]) -> int:
    """For a read-only open: ``db`` must already be a journal this code can read as it is.

    Returns its core schema version. Extensions that are missing or older are left so
    (nothing can be installed); their objects are simply absent.
    """
    meta = _inspect(db, path)
    if meta is None:
        raise NotAJournalError(f"{path} is an empty SQLite database, not a turnlog journal")
    _refuse_newer(meta, path, extensions)
    if int(meta[_SCHEMA_KEY]) < READABLE_FROM:
        raise NotAJournalError(
            f"{path} has journal schema version {meta[_SCHEMA_KEY]}, older than this turnlog's "
            f"{SCHEMA_VERSION}: open it once for writing to migrate it, then read it"
        )
    return int(meta[_SCHEMA_KEY])


def chain_version(conn: Any) -> int:
    """The chain version a SQLite journal records (1 when it records none: before schema 7)."""
    try:
        row = conn.execute(f"SELECT value FROM {META_TABLE} WHERE key = ?", (CHAIN_KEY,)).fetchone()
    except Exception:  # noqa: BLE001 - no meta table: not a journal yet
        return 1
    return int(row[0]) if row is not None and _is_version(row[0]) else 1


def core_guards(version: int) -> dict[str, str]:
    """The triggers that keep a journal of schema ``version`` append-only, by name: their SQL."""
    tables = ("events", "stream_links", *(("tree", "checkpoints") if version >= 4 else ()),
              *(("snapshots",) if version >= 5 else ()),
              *(("blobs",) if version >= BLOBS_FROM else ()))
    return {f"{table}_refuse_{op.lower()}": _refusal(table, op)
            for table in tables for op in ("UPDATE", "DELETE")}


def missing_guards(db: Database, version: int, extensions: Sequence[Extension] = ()) -> list[str]:
    """What of the journal's guards is gone, each said in a few words (empty: all in place).

    The guards are the triggers that refuse UPDATE and DELETE (the core's, and those of
    installed extensions that declare ``guards``) and the ``events`` table's own
    constraints (one row per stream and seq, JSON payloads). A tool that rebuilds a
    table (``sqlite-utils transform``) drops its triggers.
    """
    conn = db.conn
    triggers = {name for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    meta = dict(conn.execute(f"SELECT key, value FROM {META_TABLE}").fetchall())
    expected = list(core_guards(version))
    for ext in extensions:
        if ext.guards and _ext_version(meta, ext) >= 1:
            expected += list(ext.guards)
    missing = [f"trigger {name}" for name in expected if name not in triggers]
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone()
    if row is not None and "json_valid(payload)" not in row[0].replace('"', ""):
        missing.append("events CHECK (json_valid(payload))")
    if row is not None and not _unique_stream_seq(conn):
        missing.append("events UNIQUE (stream_id, seq)")
    return missing


def _unique_stream_seq(conn: Any) -> bool:
    """Whether ``events`` keeps one row per (stream_id, seq): a table constraint or a unique
    index (read from ``sqlite_master``: a read-only connection may not run PRAGMAs)."""
    for (sql,) in conn.execute("SELECT sql FROM sqlite_master WHERE tbl_name = 'events' "
                               "AND sql IS NOT NULL AND type IN ('table', 'index')"):
        text = " ".join(sql.replace('"', "").split())
        if "UNIQUE (stream_id, seq)" in text or (
                text.startswith("CREATE UNIQUE INDEX") and text.endswith("(stream_id, seq)")):
            return True
    return False


def restore_guards(db: Database, path: str,
                   extensions: Sequence[Extension]) -> tuple[list[str], str | None]:
    """Reinstall the missing triggers of a journal opened for writing, under the write lock.

    Returns the triggers reinstalled, and why the journal must not be written to (``None``
    when it may): a lost ``events`` constraint cannot be put back without rebuilding the
    table, so the handle then refuses every write.
    """
    missing = missing_guards(db, SCHEMA_VERSION, extensions)
    if not missing:
        return [], None
    db.execute("BEGIN IMMEDIATE")
    try:
        missing = missing_guards(db, SCHEMA_VERSION, extensions)
        sql = dict(core_guards(SCHEMA_VERSION))
        for ext in extensions:
            sql.update(ext.guards or {})
        triggers = [m for m in missing if m.startswith("trigger ")]
        for item in triggers:
            db.execute(sql[item.removeprefix("trigger ")])
        db.execute("COMMIT")
    except BaseException:
        db.rollback()
        raise
    return triggers, lost_constraints(path, [m for m in missing if m not in triggers])


def lost_constraints(path: str, lost: list[str]) -> str | None:
    """Why a journal whose ``events`` table lost constraints is not written to (or ``None``)."""
    if not lost:
        return None
    return (f"{path}: the journal's events table lost {', '.join(lost)} (it was rebuilt "
            "outside turnlog), so turnlog will not write to it. Check it with turnlog verify, "
            "then copy it into a new journal (turnlog copy) and use that one")


def check_extensions(extensions: Sequence[Extension]) -> None:
    """Refuse extensions with empty or duplicate names or versions below 1."""
    seen: set[str] = set()
    for ext in extensions:
        if not isinstance(ext, Extension):
            raise TypeError(f"extensions must be Extension objects, got {ext!r}")
        if not ext.name or ext.name in seen:
            raise ValueError(f"extension names must be unique and non-empty, got {ext.name!r}")
        if type(ext.version) is not int or ext.version < 1:
            raise ValueError(f"extension {ext.name!r}: version must be an int >= 1")
        seen.add(ext.name)


def _inspect(db: Database, path: str) -> dict[str, str] | None:
    """Return the journal's meta, ``None`` for an empty database; refuse anything else."""
    app_id = db.execute("PRAGMA application_id").fetchone()[0]
    user_version = db.execute("PRAGMA user_version").fetchone()[0]
    names = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    if not names and app_id == 0 and user_version == 0:
        return None
    if app_id != APPLICATION_ID or META_TABLE not in names:
        raise NotAJournalError(f"{path} is a SQLite database but not a turnlog journal")
    meta = dict(db.execute(f"SELECT key, value FROM {META_TABLE}").fetchall())
    if not _is_version(meta.get(_SCHEMA_KEY)):
        raise NotAJournalError(
            f"{path} is damaged: its {META_TABLE} table has no valid {_SCHEMA_KEY}"
        )
    return meta


def _is_version(value: str | None) -> TypeGuard[str]:
    return value is not None and value.isascii() and value.isdigit()


def _refuse_newer(
    meta: dict[str, str] | None, path: str, extensions: Sequence[Extension]
) -> None:
    if meta is None:
        return
    found = int(meta[_SCHEMA_KEY])
    if found > SCHEMA_VERSION:
        raise SchemaTooNewError(
            f"{path} has journal schema version {found}, but this turnlog knows versions up "
            f"to {SCHEMA_VERSION}: upgrade turnlog to open it"
        )
    for ext in extensions:
        recorded = _ext_version(meta, ext)
        if recorded > ext.version:
            raise SchemaTooNewError(
                f"{path} has extension {ext.name!r} at version {recorded}, but this code "
                f"knows versions up to {ext.version}: upgrade turnlog to open it"
            )


def _ext_version(meta: dict[str, str], ext: Extension) -> int:
    value = meta.get(f"ext:{ext.name}")
    return int(value) if _is_version(value) else 0


def _pending(meta: dict[str, str], extensions: Sequence[Extension]) -> bool:
    return int(meta[_SCHEMA_KEY]) < SCHEMA_VERSION or any(
        _ext_version(meta, ext) < ext.version for ext in extensions
    )


def _migrate(db: Database, path: str, extensions: Sequence[Extension]) -> None:
    db.execute("BEGIN IMMEDIATE")
    try:
        # Re-read under the write lock: another process may have migrated meanwhile.
        meta = _inspect(db, path)
        _refuse_newer(meta, path, extensions)
        if meta is None:
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.table(META_TABLE).create({"key": str, "value": str}, pk="key")
            meta = {_SCHEMA_KEY: "0"}
        current = int(meta[_SCHEMA_KEY])
        for version, step in MIGRATIONS:
            if version > current:
                step(db)
                _set_meta(db, _SCHEMA_KEY, version)
        for ext in extensions:
            recorded = _ext_version(meta, ext)
            if recorded < ext.version:
                ext.migrate(db, recorded)
                _set_meta(db, f"ext:{ext.name}", ext.version)
        db.execute("COMMIT")
    except BaseException:
        db.rollback()
        raise


def _set_meta(db: Database, key: str, version: int) -> None:
    db.table(META_TABLE).upsert({"key": key, "value": str(version)}, pk="key")
