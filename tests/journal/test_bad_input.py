"""Bad files and bad appends get typed errors naming what and where, and change nothing."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from pathlib import Path

import pytest

from turnlog.journal import (
    SCHEMA_VERSION,
    ConcurrencyError,
    Extension,
    HeadsFileError,
    InvalidAppendError,
    Journal,
    JournalError,
    NewEvent,
    NotAJournalError,
    SchemaTooNewError,
    TurnlogError,
    load_heads,
)

from .conftest import event, events, file_digest, raw_rows


def make_journal(path: Path, count: int = 200) -> Path:
    with Journal(path) as journal:
        batch = [NewEvent("note", 1, f'{{"text":"{"x" * 200}","n":{n}}}') for n in range(count)]
        journal.append("conv", batch, 0)
    return path


def refused(path: Path, error: type[JournalError], match: str, **options) -> JournalError:
    """Open ``path``, expect ``error``, and check that the file did not change."""
    before = file_digest(path)
    with pytest.raises(error, match=match) as info:
        Journal(path, **options)
    assert isinstance(info.value, TurnlogError)
    assert str(path) in str(info.value)
    assert file_digest(path) == before
    return info.value


def test_a_text_file_is_not_a_journal(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("these are my notes, not a database\n" * 20)

    refused(path, NotAJournalError, "not a SQLite database")


def test_a_file_shorter_than_a_sqlite_header_is_not_a_journal(tmp_path):
    path = tmp_path / "tiny.db"
    path.write_bytes(b"SQLite format 3\x00abc")

    refused(path, NotAJournalError, "not a SQLite database")


def test_a_journal_cut_in_half_is_reported_as_truncated(tmp_path):
    path = make_journal(tmp_path / "turnlog.db")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])

    refused(path, NotAJournalError, "truncated")


def test_a_journal_with_garbage_after_its_header_is_reported_as_corrupt(tmp_path):
    path = make_journal(tmp_path / "turnlog.db")
    data = path.read_bytes()
    path.write_bytes(data[:100] + bytes(range(256)) * ((len(data) - 100) // 256 + 1))

    refused(path, NotAJournalError, "corrupt|not a turnlog journal")


def test_another_programs_sqlite_database_is_not_a_journal(tmp_path):
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO users (name) VALUES ('ada')")
    conn.commit()
    conn.close()

    refused(path, NotAJournalError, "is a SQLite database but not a turnlog journal")


def test_a_database_with_turnlog_tables_but_another_application_id_is_not_a_journal(tmp_path):
    path = make_journal(tmp_path / "turnlog.db", count=1)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 42")
    conn.close()

    refused(path, NotAJournalError, "not a turnlog journal")


def test_a_journal_from_a_newer_turnlog_is_refused(tmp_path):
    path = make_journal(tmp_path / "turnlog.db", count=1)
    conn = sqlite3.connect(path)
    newer = str(SCHEMA_VERSION + 1)
    conn.execute("UPDATE _turnlog_meta SET value = ? WHERE key = 'schema_version'", (newer,))
    conn.commit()
    conn.close()

    refused(path, SchemaTooNewError, f"schema version {SCHEMA_VERSION + 1}.*upgrade turnlog")


def test_a_journal_with_a_newer_extension_is_refused(tmp_path):
    path = make_journal(tmp_path / "turnlog.db", count=1)
    newer = Extension(name="views", version=3, migrate=lambda db, v: None)
    older = Extension(name="views", version=2, migrate=lambda db, v: None)
    Journal(path, extensions=[newer]).close()

    refused(path, SchemaTooNewError, "extension 'views' at version 3", extensions=[older])


def test_a_missing_directory_is_a_journal_error_naming_the_path(tmp_path):
    path = tmp_path / "no" / "such" / "dir" / "turnlog.db"

    with pytest.raises(JournalError, match="unable to open") as info:
        Journal(path)
    assert str(path) in str(info.value)


@pytest.fixture
def full(journal_path, clock):
    """A journal where stream "conv" has 3 events and "parent" has 2."""
    with Journal(journal_path, clock=clock) as journal:
        journal.append("conv", events(3), 0)
        journal.append("parent", events(2), 0)
        yield journal


def case(id, match, batch=None, *, stream_id="conv", expected_seq=3, parent=None,
         error=InvalidAppendError):
    """One refused append to the ``full`` journal ("conv" has 3 events, "parent" has 2)."""
    batch = [event()] if batch is None else batch
    return pytest.param(stream_id, batch, expected_seq, parent, error, match, id=id)


BAD_JSON_BATCH = [event(0), event(1), NewEvent("note", 1, '{"n": 2,'), event(3)]


@pytest.mark.parametrize(
    ("stream_id", "batch", "expected_seq", "parent", "error", "match"),
    [
        case("stale", r"'conv'.*expected seq 1.*last seq is 3", expected_seq=1,
             error=ConcurrencyError),
        case("bad-json-in-batch", r"'conv'.*event 2 \(seq 6\).*not valid JSON", BAD_JSON_BATCH),
        case("empty-payload", "event 0.*not valid JSON", [NewEvent("note", 1, "")]),
        case("lone-surrogate", "event 0.*Unicode", [NewEvent("note", 1, '"\ud800"')]),
        case("empty-stream-id", "stream id", stream_id="", expected_seq=0),
        case("newline-stream-id", r"'new\\nline'.*stream id", stream_id="new\nline",
             expected_seq=0),
        case("nul-stream-id", "stream id", stream_id="nul\x00", expected_seq=0),
        case("int-stream-id", "stream id", stream_id=42, expected_seq=0),
        case("empty-type", "'conv', event 0: type", [NewEvent("", 1, "{}")]),
        case("tab-type", "event 1: type", [event(), NewEvent("bad\ttype", 1, "{}")]),
        case("version-0", "version", [NewEvent("note", 0, "{}")]),
        case("version-bool", "version", [NewEvent("note", True, "{}")]),
        case("dict-payload", "payload must be JSON text", [NewEvent("note", 1, {"n": 1})]),
        case("timestamp-without-micros", "recorded_at",
             [NewEvent("note", 1, "{}", "2025-01-01T00:00:00Z")]),
        case("timestamp-month-13", "recorded_at",
             [NewEvent("note", 1, "{}", "2025-13-01T00:00:00.000000Z")]),
        case("not-a-new-event", "expected a NewEvent", [{"type": "note"}]),
        case("no-events", "no events", []),
        case("negative-expected-seq", "expected_seq", expected_seq=-1),
        case("str-expected-seq", "expected_seq", expected_seq="3"),
        case("fork-at-seq-0", "parent must be", stream_id="fork", expected_seq=0,
             parent=("parent", 0)),
        case("parent-as-list", "parent must be", stream_id="fork", expected_seq=0,
             parent=["parent", 1]),
        case("parent-on-later-append", "first append", parent=("parent", 1)),
    ],
)
def test_a_refused_append_writes_nothing_and_leaves_the_stream_appendable(
    full, stream_id, batch, expected_seq, parent, error, match
):
    before = raw_rows(full.path)

    with pytest.raises(error, match=match) as info:
        full.append(stream_id, batch, expected_seq, parent=parent)

    assert isinstance(info.value, TurnlogError)
    assert raw_rows(full.path) == before
    [fourth] = full.append("conv", [event(3)], 3)
    assert fourth.prev_hash == full.hash_at("conv", 3)
    assert full.verify().ok


def test_a_clock_without_a_timezone_is_refused_before_anything_is_written(journal_path):
    with Journal(journal_path, clock=datetime.now) as journal:
        with pytest.raises(ValueError, match="aware datetime"):
            journal.append("conv", [event()], 0)
        assert list(journal.read_all()) == []


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"not json", "not a turnlog heads file"),
        (b'{"conversation_id": "a", "seq": 1, "hash": "00"}', "not a turnlog heads file"),
        (b'[{"conversation_id": "a", "seq": 0, "hash": "' + b"0" * 64 + b'"}]', r"\$\[0\]\.seq"),
        (b'[{"conversation_id": "a", "seq": 1, "hash": "xyz"}]', r"\$\[0\]\.hash"),
        (b'[{"stream_id": "a", "seq": 1, "hash": "' + b"0" * 64 + b'"}]', "conversation_id"),
    ],
)
def test_a_malformed_heads_file_is_a_heads_file_error_naming_it(tmp_path, content, match):
    path = tmp_path / "heads.json"
    path.write_bytes(content)

    with pytest.raises(HeadsFileError, match=match) as info:
        load_heads(path)
    assert str(path) in str(info.value)


def test_a_missing_heads_file_is_a_heads_file_error(tmp_path):
    with pytest.raises(HeadsFileError, match="cannot read heads file"):
        load_heads(tmp_path / "missing.json")
