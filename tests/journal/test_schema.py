"""Opening, pragmas, migrations and extensions."""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest

import turnlog.journal._schema
import turnlog.journal._sqlite
from turnlog import journal
from turnlog.journal import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    Extension,
    Journal,
    JournalLockedError,
    NewEvent,
)

from .conftest import event


def meta(path) -> dict[str, str]:
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute("SELECT key, value FROM _turnlog_meta"))
    finally:
        conn.close()


def pragma(path, name: str):
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]
    finally:
        conn.close()


def schema_names(path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()


def test_a_missing_file_becomes_a_wal_journal_with_turnlogs_application_id(journal_path):
    Journal(journal_path).close()

    assert pragma(journal_path, "application_id") == APPLICATION_ID
    assert pragma(journal_path, "journal_mode") == "wal"
    found = meta(journal_path)
    assert found.pop("origin").startswith("turnlog.invalid/")
    assert found == {"schema_version": str(SCHEMA_VERSION), "chain_version": "2"}


def test_an_empty_file_becomes_a_journal(journal_path):
    journal_path.write_bytes(b"")

    with Journal(journal_path) as journal:
        journal.append("conv", [event()], 0)

    assert pragma(journal_path, "application_id") == APPLICATION_ID


def test_reopening_keeps_the_events(journal_path):
    with Journal(journal_path) as journal:
        stored = journal.append("conv", [event(1), event(2)], 0)
    with Journal(journal_path) as journal:
        assert list(journal.read("conv")) == stored


@pytest.mark.parametrize(("synchronous", "level"), [("FULL", 2), ("NORMAL", 1), ("normal", 1)])
def test_synchronous_is_set_on_the_connection(journal_path, synchronous, level):
    with Journal(journal_path, synchronous=synchronous) as journal:
        assert journal._conn.execute("PRAGMA synchronous").fetchone()[0] == level
        assert journal._conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000


def test_an_unknown_synchronous_level_is_refused(journal_path):
    with pytest.raises(ValueError, match="FULL"):
        Journal(journal_path, synchronous="OFF")


def hold_write_lock(path, seconds: float, locked: threading.Event,
                    release: threading.Event | None = None) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    locked.set()
    if release is None:
        time.sleep(seconds)
    else:  # held until the test has seen the refusal, however slow the machine
        release.wait(seconds)
    conn.execute("ROLLBACK")
    conn.close()


def test_an_append_waits_for_another_writers_lock(journal_path):
    with Journal(journal_path) as journal:
        locked = threading.Event()
        holder = threading.Thread(target=hold_write_lock, args=(journal_path, 0.3, locked))
        holder.start()
        locked.wait()
        [stored] = journal.append("conv", [event()], 0)
        holder.join()
    assert stored.seq == 1


def test_a_lock_held_past_the_busy_timeout_is_a_journal_locked_error(journal_path, monkeypatch):
    monkeypatch.setattr(journal._sqlite, "BUSY_TIMEOUT_MS", 50)
    with Journal(journal_path) as opened:
        locked, release = threading.Event(), threading.Event()
        holder = threading.Thread(target=hold_write_lock,
                                  args=(journal_path, 30, locked, release))
        holder.start()
        locked.wait()
        try:
            with pytest.raises(JournalLockedError, match="locked"):
                opened.append("conv", [event()], 0)
        finally:
            release.set()
            holder.join()
        assert opened.append("conv", [event()], 0)[0].seq == 1


def test_a_new_core_migration_step_is_applied_once_on_open(journal_path, monkeypatch):
    Journal(journal_path).close()
    calls = []

    def add_type_index(db):
        calls.append(1)
        db["events"].create_index(["type"], index_name="events_by_type")

    new = SCHEMA_VERSION + 1
    steps = [*journal._schema.MIGRATIONS, (new, add_type_index)]
    monkeypatch.setattr(journal._schema, "MIGRATIONS", steps)
    monkeypatch.setattr(journal._schema, "SCHEMA_VERSION", new)
    Journal(journal_path).close()
    Journal(journal_path).close()

    assert calls == [1]
    assert meta(journal_path)["schema_version"] == str(new)
    assert "events_by_type" in schema_names(journal_path)


def test_an_extension_is_migrated_from_the_version_it_has(journal_path):
    calls = []

    def views(db, from_version):
        calls.append(from_version)
        db.create_view("notes", "SELECT stream_id, json_extract(payload, '$.n') AS n FROM events",
                       replace=True)

    with Journal(journal_path, extensions=[Extension(name="views", version=1, migrate=views)]) as j:
        j.append("conv", [event(7)], 0)
    Journal(journal_path, extensions=[Extension(name="views", version=1, migrate=views)]).close()
    Journal(journal_path, extensions=[Extension(name="views", version=2, migrate=views)]).close()
    Journal(journal_path).close()  # a layer that does not know the extension may still open it

    assert calls == [0, 1]
    assert meta(journal_path)["ext:views"] == "2"
    conn = sqlite3.connect(journal_path)
    assert conn.execute("SELECT stream_id, n FROM notes").fetchall() == [("conv", 7)]
    conn.close()


def test_a_failing_extension_keeps_nothing_of_the_migration(journal_path):
    def broken(db, from_version):
        db.create_view("half_done", "SELECT 1")
        raise RuntimeError("migration bug")

    with pytest.raises(RuntimeError, match="migration bug"):
        Journal(journal_path, extensions=[Extension(name="broken", version=1, migrate=broken)])

    # Even the core schema of the new file was rolled back; the file opens fine afterwards.
    with Journal(journal_path) as journal:
        journal.append("conv", [event()], 0)
    found = meta(journal_path)
    assert found.pop("origin").startswith("turnlog.invalid/")
    assert found == {"schema_version": str(SCHEMA_VERSION), "chain_version": "2"}
    assert "half_done" not in schema_names(journal_path)


@pytest.mark.parametrize(
    "extensions",
    [
        [Extension(name="", version=1, migrate=lambda db, v: None)],
        [Extension(name="x", version=0, migrate=lambda db, v: None)],
        [Extension(name="x", version=1, migrate=lambda db, v: None)] * 2,
    ],
)
def test_malformed_extensions_are_refused(journal_path, extensions):
    with pytest.raises(ValueError):
        Journal(journal_path, extensions=extensions)


def test_the_default_clock_records_now_in_utc(journal_path):
    with Journal(journal_path) as journal:
        before = datetime.now(UTC)
        [stored] = journal.append("conv", [event()], 0)
        after = datetime.now(UTC)

    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", stored.recorded_at)
    recorded = datetime.fromisoformat(stored.recorded_at.replace("Z", "+00:00"))
    assert before <= recorded <= after


def test_a_clock_in_another_timezone_is_recorded_in_utc(journal_path):
    paris = timezone(timedelta(hours=2))
    clock = lambda: datetime(2025, 6, 1, 14, 30, 0, 250, tzinfo=paris)  # noqa: E731

    with Journal(journal_path, clock=clock) as journal:
        [stored] = journal.append("conv", [NewEvent("note", 1, "{}")], 0)

    assert stored.recorded_at == "2025-06-01T12:30:00.000250Z"


def test_a_failed_first_open_leaves_no_file_behind(tmp_path):
    # issue 25, 13: a file left by a failed open (0 bytes, or a bare SQLite header) was then
    # refused by every later command as "an empty file"
    def broken(db, from_version):
        raise RuntimeError("the extension cannot migrate")

    path = tmp_path / "new.db"
    with pytest.raises(RuntimeError, match="cannot migrate"):
        Journal(path, extensions=[Extension(name="broken", version=1, migrate=broken)])
    assert list(tmp_path.iterdir()) == []


def test_a_failed_open_of_an_existing_journal_keeps_it(tmp_path):
    def broken(db, from_version):
        raise RuntimeError("the extension cannot migrate")

    path = tmp_path / "old.db"
    with Journal(path) as j:
        j.append("a", [event(1)], 0)
    with pytest.raises(RuntimeError, match="cannot migrate"):
        Journal(path, extensions=[Extension(name="broken", version=1, migrate=broken)])
    with Journal(path, readonly=True) as j:
        assert j.last_seq("a") == 1
