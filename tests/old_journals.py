"""Journals as turnlog stored them before schema 3 (hashes as 64-character hex text).

Shared by the migration tests and ``bench/migrate_bench.py``; no pytest here.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlite_utils import Database

from turnlog.journal import Extension, NewEvent
from turnlog.journal._hashing import GENESIS_HASH
from turnlog.journal._rows import chain_rows
from turnlog.journal._schema import APPLICATION_ID, MIGRATIONS

__all__ = ["as_schema_2", "write_old_journal"]


def write_old_journal(
    path: Path,
    version: int,
    appends: list[tuple[str, list[NewEvent], tuple[str, int] | None]],
    extensions: tuple[Extension, ...] = (),
) -> None:
    """A journal as turnlog wrote it at core schema ``version`` (< 3: hashes as hex text).

    Its schema is made by the real migration steps up to ``version``, then
    ``extensions`` are installed; each append (``stream_id, events, parent``) starts
    a stream, chained as ``Journal.append`` chains it, at a fixed time.
    """
    conn = sqlite3.connect(path)
    db = Database(conn)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    db["_turnlog_meta"].create({"key": str, "value": str}, pk="key")
    for step_version, step in MIGRATIONS:
        if step_version <= version:
            step(db)
    db["_turnlog_meta"].insert({"key": "schema_version", "value": str(version)})
    for ext in extensions:
        ext.migrate(db, 0)
        db["_turnlog_meta"].insert({"key": f"ext:{ext.name}", "value": str(ext.version)})
    for stream_id, new, parent in appends:
        prev = GENESIS_HASH
        if parent is not None:
            prev = conn.execute("SELECT hash FROM events WHERE stream_id = ? AND seq = ?",
                                parent).fetchone()[0]
            conn.execute("INSERT INTO stream_links VALUES (?, ?, ?)", (stream_id, *parent))
        rows = chain_rows(prev, stream_id, 0, new, "2025-01-01T00:00:00.000000Z", 1)
        conn.executemany(
            "INSERT INTO events (stream_id, seq, type, version, recorded_at, payload, prev_hash, "
            "hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    conn.commit()
    conn.close()


def as_schema_2(path: Path) -> None:
    """Turn a current journal back into schema 2, in place: hashes as hex text, no log tree,
    no ``blobs`` table (the journal must have no part stored there)."""
    conn = sqlite3.connect(path)
    try:
        [trigger] = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'events_refuse_update'").fetchone()
        conn.execute("DROP TRIGGER events_refuse_update")
        conn.execute("UPDATE events SET prev_hash = lower(hex(prev_hash)), hash = lower(hex(hash))")
        conn.execute(trigger)
        # schema 6's parts: a journal of schema 2 has every part inline in its payloads
        assert conn.execute("SELECT count(*) FROM blobs").fetchone()[0] == 0, \
            "as_schema_2 takes a journal without content-addressed parts"
        views = conn.execute("SELECT name FROM sqlite_master WHERE type = 'view' "
                             "AND (sql LIKE '%blobs%' OR name = 'conversations')").fetchall()
        if views:  # the engine's views of that time (v4) did not read blobs, skip markers
            # nor walk forks of any depth
            from turnlog.engine.audit.views import _PREVIOUS

            for (name,) in views:
                conn.execute(f"DROP VIEW {name}")
                conn.execute(_PREVIOUS[4][name])
            conn.execute("UPDATE _turnlog_meta SET value = '4' WHERE key = 'ext:engine.views'")
        for statement in (  # schema 2's snapshots: one row per stream and kind, unguarded
                "DROP TABLE blobs",
                "DROP TABLE tree", "DROP TABLE checkpoints",  # schema 4's log tree
                "DELETE FROM _turnlog_meta WHERE key = 'origin'",
                "DROP TRIGGER snapshots_refuse_update", "DROP TRIGGER snapshots_refuse_delete",
                "CREATE TABLE snapshots_v2 (stream_id TEXT NOT NULL, kind TEXT NOT NULL, "
                "seq INTEGER NOT NULL, hash TEXT NOT NULL, data BLOB NOT NULL, "
                "PRIMARY KEY (stream_id, kind))",
                "INSERT OR REPLACE INTO snapshots_v2 SELECT stream_id, kind, seq, "
                "lower(hex(hash)), data FROM snapshots ORDER BY seq",
                "DROP TABLE snapshots", "ALTER TABLE snapshots_v2 RENAME TO snapshots"):
            conn.execute(statement)
        conn.execute("UPDATE _turnlog_meta SET value = '2' WHERE key = 'schema_version'")
        conn.commit()
    finally:
        conn.close()
