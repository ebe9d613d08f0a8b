"""Schema 3: hashes stored as 32-byte BLOBs; older journals migrate on open, and read the same."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnlog.journal import (
    Extension,
    Journal,
    NewEvent,
    NotAJournalError,
    ReadOnlyJournalError,
    event_hash,
)
from turnlog.journal._schema import SCHEMA_VERSION

from tests.old_journals import write_old_journal

from .conftest import events, file_digest


def _install(db, from_version: int) -> None:
    """An extension with every kind of object the rebuild must keep: a trigger on
    ``events`` writing its own table, an index on ``events`` and a view over it."""
    db.execute("CREATE TABLE counts (stream_id TEXT PRIMARY KEY, n INTEGER NOT NULL)")
    db.execute("CREATE TRIGGER count_events AFTER INSERT ON events BEGIN "
               "INSERT INTO counts VALUES (NEW.stream_id, 1) "
               "ON CONFLICT (stream_id) DO UPDATE SET n = n + 1; END")
    db.execute("CREATE INDEX events_by_type ON events (type)")
    db.execute("CREATE VIEW notes AS "
               "SELECT stream_id, seq, json_extract(payload, '$.n') AS n FROM events")


COUNTING = Extension(name="counting", version=1, migrate=_install)

FAMILY = [("root", events(4), None), ("child", events(3, 10), ("root", 2)),
          ("grandchild", events(2, 20), ("child", 3))]


def _everything(journal: Journal) -> tuple:
    streams = sorted(journal.streams(), key=lambda s: s.stream_id)
    return (list(journal.read_all()), journal.heads(), streams,
            [list(journal.lineage(s.stream_id)) for s in streams])


def _schema(path: Path) -> tuple[str, list, list]:
    conn = sqlite3.connect(path)
    try:
        version = conn.execute(
            "SELECT value FROM _turnlog_meta WHERE key = 'schema_version'").fetchone()[0]
        stored = conn.execute(
            "SELECT DISTINCT typeof(prev_hash), length(prev_hash), typeof(hash), length(hash) "
            "FROM events").fetchall()
        objects = conn.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE "
                               "'sqlite_autoindex%' ORDER BY type, name").fetchall()
        return version, stored, objects
    finally:
        conn.close()


@pytest.mark.parametrize("version", [1, 2])
def test_an_old_journal_reads_as_it_is_then_migrates_to_the_same_events_and_hashes(
        journal_path, version):
    write_old_journal(journal_path, version, FAMILY, (COUNTING,))
    with Journal(journal_path, readonly=True) as reader:
        before = _everything(reader)
        assert reader.verify().ok
    assert _schema(journal_path)[1] == [("text", 64, "text", 64)]

    with Journal(journal_path, extensions=(COUNTING,)) as journal:
        assert _everything(journal) == before
        assert journal.verify().ok and journal.verify("grandchild").ok
        assert journal.check_heads(before[1]) == []

    found, stored, objects = _schema(journal_path)
    assert (found, stored) == (str(SCHEMA_VERSION), [("blob", 32, "blob", 32)])
    assert ("index", "events_by_type") in objects and ("view", "notes") in objects
    assert ("trigger", "count_events") in objects and ("trigger", "events_refuse_update") in objects
    with Journal(journal_path, readonly=True) as reader:
        assert _everything(reader) == before


def test_after_the_migration_appends_chain_on_and_every_kept_object_still_works(journal_path):
    write_old_journal(journal_path, 2, FAMILY, (COUNTING,))
    with Journal(journal_path, extensions=(COUNTING,)) as journal:
        last = journal.hash_at("root", 4)
        [added] = journal.append("root", events(1, 99), 4)
        assert added.prev_hash == last
        assert added.hash == event_hash(last, "root", 5, "note", 1, added.recorded_at, '{"n":99}',
                                     chain=1)  # an old journal stays on chain version 1
        assert journal.chain_version == 1
        forked = journal.append("late", events(1), 0, parent=("child", 3))[0]
        assert forked.prev_hash == journal.hash_at("child", 3)
        assert journal.verify().ok
    conn = sqlite3.connect(journal_path)
    try:
        assert dict(conn.execute("SELECT stream_id, n FROM counts")) == {
            "root": 5, "child": 3, "grandchild": 2, "late": 1}
        assert conn.execute("SELECT n FROM notes WHERE stream_id = 'root' AND seq = 5"
                            ).fetchone() == (99,)
        for statement in ("UPDATE events SET type = 'x'", "DELETE FROM events"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute(statement)
    finally:
        conn.close()


def test_a_snapshot_saved_before_the_migration_is_still_read_after_it(journal_path):
    write_old_journal(journal_path, 2, FAMILY)
    conn = sqlite3.connect(journal_path)
    conn.execute("INSERT INTO snapshots SELECT stream_id, 'k', seq, hash, X'2a' FROM events "
                 "WHERE stream_id = 'child' AND seq = 2")
    conn.commit()
    conn.close()
    with Journal(journal_path, readonly=True) as reader:
        old = reader.read_snapshot("child", "k")
    with Journal(journal_path) as journal:
        assert journal.read_snapshot("child", "k") == old
        assert old.hash == journal.hash_at("child", 2) and old.data == b"*"


def test_an_edit_made_before_the_migration_is_still_reported_after_it(journal_path):
    write_old_journal(journal_path, 2, FAMILY)
    conn = sqlite3.connect(journal_path)
    conn.execute("DROP TRIGGER events_refuse_update")
    conn.execute("""UPDATE events SET payload = '{"n":666}' WHERE stream_id = 'root' AND seq = 4""")
    conn.execute("UPDATE events SET hash = upper(hash) WHERE stream_id = 'child' AND seq = 2")
    conn.commit()
    conn.close()
    with Journal(journal_path) as journal:
        root, child = journal.verify("root"), journal.verify("child")
    assert (root.first_bad.seq, root.first_bad.reason) == (
        4, "hash mismatch: the event's fields were edited after it was written")
    # not lower-case hex: kept as the text it was, and reported as stored with another type
    assert (child.first_bad.stream_id, child.first_bad.seq) == ("child", 2)
    assert "hash is stored as TEXT, not BLOB" in child.first_bad.reason


def test_a_read_only_handle_never_migrates(journal_path):
    write_old_journal(journal_path, 2, FAMILY)
    with Journal(journal_path, readonly=True) as reader:
        with pytest.raises(ReadOnlyJournalError):
            reader.append("root", events(1), 4)
    assert _schema(journal_path)[:2] == ("2", [("text", 64, "text", 64)])


_streams = st.lists(
    st.tuples(st.integers(1, 4), st.integers(0, 5)), min_size=1, max_size=5)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=_streams, texts=st.lists(st.text(max_size=8), min_size=1, max_size=4))
def test_any_old_journal_migrates_to_the_same_reads_and_verifies(tmp_path_factory, shape, texts):
    """Streams of 1..4 events, each after the first forked from an earlier one (or not)."""
    path = tmp_path_factory.mktemp("old") / "old.db"
    appends: list[tuple[str, list[NewEvent], tuple[str, int] | None]] = []
    sizes: list[int] = []
    for index, (count, fork_from) in enumerate(shape):
        payloads = [NewEvent("note", 1, json.dumps({"t": texts[(index + i) % len(texts)]}))
                    for i in range(count)]
        parent = None
        if index and fork_from:
            parent_index = fork_from % index
            parent = (f"s{parent_index}", 1 + fork_from % sizes[parent_index])
        appends.append((f"s{index}", payloads, parent))
        sizes.append(count)
    write_old_journal(path, 2, appends)
    with Journal(path, readonly=True) as reader:
        before = _everything(reader)
    with Journal(path) as journal:
        assert _everything(journal) == before
        assert journal.verify().ok
        assert all(journal.verify(f"s{i}").ok for i in range(len(shape)))



def test_a_reader_opened_before_a_writer_migrates_still_reads_hex_hashes(journal_path):
    write_old_journal(journal_path, 2, FAMILY)
    with Journal(journal_path, readonly=True) as reader:
        before = _everything(reader)
        with Journal(journal_path):  # migrates under the open reader
            pass
        assert _everything(reader) == before
        assert reader.verify().ok and reader.verify("grandchild").ok
        assert reader.check_heads(before[1]) == []
        assert next(reader.read("root", 4, 4)).hash == before[1][2].hash


_EDITS = ["CAST({c} AS BLOB)", "X'00ff'", "CAST(X'ff' AS TEXT)", "3.5", "'text'", "42", "{c} || ''",
          "upper({c})"]


@pytest.mark.parametrize("column", [
    "stream_id", "seq", "type", "version", "recorded_at", "payload", "prev_hash", "hash"])
@pytest.mark.parametrize("edit", _EDITS)
def test_an_old_journal_edited_in_any_way_migrates_and_still_reports_the_edit(
        journal_path, column, edit):
    write_old_journal(journal_path, 2, FAMILY)
    conn = sqlite3.connect(journal_path)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    conn.execute("DROP TRIGGER events_refuse_update")
    conn.execute(f"UPDATE events SET {column} = {edit.format(c=column)} "
                 "WHERE stream_id = 'root' AND seq = 3")
    conn.commit()
    conn.close()
    with Journal(journal_path, readonly=True) as reader:
        before = reader.verify("root")

    with Journal(journal_path) as journal:  # the migration copies the edit as it is
        after = journal.verify("root")
    assert _schema(journal_path)[0] == str(SCHEMA_VERSION)
    assert (after.first_bad is None) is (before.first_bad is None)
    assert before.missing_guards == ("trigger events_refuse_update",)
    assert after.missing_guards == ()  # the writable open reinstalled it
    if before.first_bad is not None:
        assert (after.first_bad.stream_id, after.first_bad.seq) == ("root", 3)


def test_the_migration_runs_no_trigger_of_another_table_and_keeps_added_columns(journal_path):
    def install(db, from_version: int) -> None:
        db.execute("ALTER TABLE events ADD COLUMN note TEXT")
        db.execute("CREATE TRIGGER snapshots_frozen BEFORE UPDATE ON snapshots "
                   "BEGIN SELECT RAISE(ABORT, 'snapshots are frozen'); END")

    frozen = Extension(name="frozen", version=1, migrate=install)
    write_old_journal(journal_path, 2, FAMILY, (frozen,))
    conn = sqlite3.connect(journal_path)
    [refuse] = conn.execute("SELECT sql FROM sqlite_master "
                            "WHERE name = 'events_refuse_update'").fetchone()
    conn.execute("DROP TRIGGER events_refuse_update")
    conn.execute("UPDATE events SET note = 'kept' WHERE position = 1")
    conn.execute(refuse)
    conn.execute("INSERT INTO snapshots SELECT stream_id, 'k', seq, hash, X'2a' FROM events "
                 "WHERE stream_id = 'root' AND seq = 2")
    conn.commit()
    conn.close()

    with Journal(journal_path, extensions=(frozen,)) as journal:
        assert journal.read_snapshot("root", "k").hash == journal.hash_at("root", 2)
        assert journal.verify().ok
    conn = sqlite3.connect(journal_path)
    try:
        assert conn.execute("SELECT note FROM events WHERE position = 1").fetchone() == ("kept",)
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("UPDATE snapshots SET seq = 1")
        assert conn.execute("SELECT count(*) FROM sqlite_master "  # rebuilt: the trigger kept
                            "WHERE name = 'snapshots_frozen'").fetchone() == (1,)
    finally:
        conn.close()


def test_an_old_journal_whose_events_table_was_replaced_is_refused_for_writing_untouched(
        journal_path):
    write_old_journal(journal_path, 2, FAMILY)
    conn = sqlite3.connect(journal_path)
    for statement in ("CREATE TABLE loose AS SELECT * FROM events", "DROP TABLE events",
                      "ALTER TABLE loose RENAME TO events"):
        conn.execute(statement)
    conn.commit()
    conn.close()
    before = file_digest(journal_path)

    with pytest.raises(NotAJournalError, match="its events table is not turnlog's"):
        Journal(journal_path)
    assert file_digest(journal_path) == before
    with Journal(journal_path, readonly=True) as reader:  # still read as it is
        report = reader.verify()
        assert report.first_bad is None and len(list(reader.read_all())) == 9
        assert "events UNIQUE (stream_id, seq)" in report.missing_guards


@given(digest=st.binary(min_size=32, max_size=32), other=st.binary(max_size=80))
def test_only_a_hash_stored_as_its_lower_case_hex_is_converted(digest, other):
    from turnlog.journal._schema import _hash_bytes

    assert _hash_bytes(digest.hex().encode()) == digest
    converted = _hash_bytes(other)  # anything else is kept as it was (None)
    assert converted is None or converted.hex().encode() == other
    if any(c in "abcdef" for c in digest.hex()):
        assert _hash_bytes(digest.hex().upper().encode()) is None
