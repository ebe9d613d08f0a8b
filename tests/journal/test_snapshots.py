"""Snapshots: a cache beside the events, returned only while the chain still holds at its seq.

The contract part runs on every backend (the ``journal`` fixture); the rest checks
what only a file can show (a rewritten chain, a schema-1 journal, read-only handles).
"""

from __future__ import annotations

import sqlite3

import pytest

from turnlog.journal import (
    SCHEMA_VERSION,
    EventNotFoundError,
    InvalidAppendError,
    Journal,
    ReadOnlyJournalError,
    Snapshot,
)

from tests.old_journals import write_old_journal

from .conftest import event, events, raw_rows


def test_a_written_snapshot_reads_back_with_the_events_hash(journal):
    journal.append("s", events(3), 0)
    written = journal.write_snapshot("s", "counter", 2, b"\x00two\xff")
    assert written == Snapshot("s", "counter", 2, journal.hash_at("s", 2), b"\x00two\xff")
    assert journal.read_snapshot("s", "counter") == written


def test_no_snapshot_is_none_for_each_stream_and_kind(journal):
    journal.append("s", events(2), 0)
    journal.append("t", events(1), 0)
    journal.write_snapshot("s", "a", 1, b"1")
    assert journal.read_snapshot("s", "b") is None
    assert journal.read_snapshot("t", "a") is None
    assert journal.read_snapshot("nobody", "a") is None


def test_a_later_write_replaces_the_snapshot_and_kinds_are_apart(journal):
    journal.append("s", events(4), 0)
    journal.write_snapshot("s", "a", 1, b"old")
    journal.write_snapshot("s", "b", 2, b"other")
    journal.write_snapshot("s", "a", 4, b"new")
    assert journal.read_snapshot("s", "a").seq == 4
    assert journal.read_snapshot("s", "a").data == b"new"
    assert journal.read_snapshot("s", "b").data == b"other"


def test_a_snapshot_stays_valid_while_the_stream_grows(journal):
    journal.append("s", events(2), 0)
    journal.write_snapshot("s", "a", 2, b"at 2")
    journal.append("s", events(3), 2)
    assert journal.read_snapshot("s", "a").seq == 2


def test_a_snapshot_of_a_missing_event_is_refused_and_nothing_is_saved(journal):
    journal.append("s", events(2), 0)
    before = list(journal.read_all())
    with pytest.raises(EventNotFoundError, match=r"stream 's' seq 3"):
        journal.write_snapshot("s", "a", 3, b"x")
    with pytest.raises(EventNotFoundError, match=r"stream 'nobody' seq 1"):
        journal.write_snapshot("nobody", "a", 1, b"x")
    assert journal.read_snapshot("s", "a") is None
    assert list(journal.read_all()) == before


@pytest.mark.parametrize(("args", "message"), [
    (("", "a", 1, b"x"), "stream id"),
    (("s", "", 1, b"x"), "kind"),
    (("s", "a", 0, b"x"), "seq must be an int >= 1"),
    (("s", "a", True, b"x"), "seq must be an int >= 1"),
    (("s", "a", 1, "text"), "data must be bytes"),
])
def test_bad_snapshot_arguments_are_typed_errors(journal, args, message):
    journal.append("s", events(1), 0)
    with pytest.raises(InvalidAppendError, match=message):
        journal.write_snapshot(*args)
    assert journal.read_snapshot("s", "a") is None


def test_writing_a_snapshot_never_touches_the_events(file_journal):
    file_journal.append("s", events(3), 0)
    file_journal.append("f", [event()], 0, parent=("s", 2))
    before = raw_rows(file_journal.path)
    file_journal.write_snapshot("f", "a", 1, b"x")
    assert raw_rows(file_journal.path) == before
    assert file_journal.verify().ok


def test_a_read_only_handle_reads_snapshots_and_refuses_to_write_them(journal_path):
    with Journal(journal_path) as writer:
        writer.append("s", events(2), 0)
        writer.write_snapshot("s", "a", 2, b"x")
    with Journal(journal_path, readonly=True) as reader:
        assert reader.read_snapshot("s", "a").data == b"x"
        with pytest.raises(ReadOnlyJournalError, match="read-only"):
            reader.write_snapshot("s", "a", 1, b"y")
        assert reader.read_snapshot("s", "a").seq == 2


def _tamper(path, *statements: str) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("DROP TRIGGER IF EXISTS events_refuse_update")
        conn.execute("DROP TRIGGER IF EXISTS snapshots_refuse_update")
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


def test_a_chain_rewritten_under_a_snapshot_hides_it(journal_path):
    with Journal(journal_path) as j:
        j.append("s", events(3), 0)
        j.write_snapshot("s", "a", 2, b"x")
    _tamper(journal_path, "UPDATE events SET hash = substr(hash, 2) || '0' WHERE seq = 2")
    with Journal(journal_path) as j:
        assert j.read_snapshot("s", "a") is None


def test_a_snapshot_whose_recorded_hash_was_edited_is_hidden(journal_path):
    with Journal(journal_path) as j:
        j.append("s", events(3), 0)
        j.write_snapshot("s", "a", 2, b"x")
    _tamper(journal_path, "UPDATE snapshots SET seq = 3")
    with Journal(journal_path) as j:
        assert j.read_snapshot("s", "a") is None


def test_a_schema_1_journal_reads_as_it_is_and_migrates_when_opened_to_write(journal_path):
    write_old_journal(journal_path, 1, [("s", events(2), None)])
    with Journal(journal_path, readonly=True) as reader:  # no migration needed to read
        assert reader.read_snapshot("s", "a") is None
        heads = reader.heads()
        assert reader.verify().ok
    with Journal(journal_path) as writer:
        writer.write_snapshot("s", "a", 2, b"x")
        assert writer.verify().ok and writer.heads() == heads
        assert writer.read_snapshot("s", "a").hash == heads[0].hash
    conn = sqlite3.connect(journal_path)
    version = conn.execute(
        "SELECT value FROM _turnlog_meta WHERE key = 'schema_version'").fetchone()[0]
    conn.close()
    assert version == str(SCHEMA_VERSION) == "8"


def test_a_fork_whose_parent_was_rewritten_at_the_fork_point_hides_its_snapshot(journal_path):
    with Journal(journal_path) as j:
        j.append("parent", events(3), 0)
        j.append("fork", events(2), 0, parent=("parent", 2))
        j.append("grandchild", events(1), 0, parent=("fork", 1))
        j.write_snapshot("fork", "a", 2, b"x")
        j.write_snapshot("grandchild", "a", 1, b"y")
        assert j.read_snapshot("grandchild", "a").data == b"y"
    # the parent's event at the fork point rewritten, its hash recomputed by the forger
    _tamper(journal_path, "UPDATE events SET hash = substr(hash, 2) || '0' "
                          "WHERE stream_id = 'parent' AND seq = 2")
    with Journal(journal_path) as j:
        assert j.read_snapshot("fork", "a") is None
        assert j.read_snapshot("grandchild", "a") is None
        assert j.read_snapshot("parent", "a") is None  # none was saved there
