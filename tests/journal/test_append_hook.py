"""``Extension.on_append``: a higher layer's own tables written in the append's transaction."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from turnlog.journal import (
    ConcurrencyError,
    Extension,
    InvalidAppendError,
    Journal,
    JournalError,
    NewEvent,
    StoredEvent,
)

from .conftest import event, events, file_digest, raw_rows

seen: list[list[StoredEvent]] = []


def _create(db, from_version: int) -> None:
    db["heads"].create({"stream_id": str, "seq": int}, pk="stream_id")


def _track(db, appended) -> None:
    """The example of ``Extension``'s docstring: the last seq of each stream."""
    seen.append(list(appended))
    db["heads"].upsert_all([{"stream_id": e.stream_id, "seq": e.seq} for e in appended],
                           pk="stream_id")


HEADS = Extension(name="heads", version=1, migrate=_create, on_append=_track)


class Refusal(Exception):
    """What a hook raises to veto an append."""


def _refuse_big(db, appended) -> None:
    _track(db, appended)  # writes first: the rollback must undo it
    if any(e.type == "big" for e in appended):
        raise Refusal("no big events")


def heads_table(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute("SELECT stream_id, seq FROM heads").fetchall())
    finally:
        conn.close()


@pytest.fixture(autouse=True)
def _forget():
    seen.clear()


def test_the_hook_writes_its_table_with_the_appended_events_in_one_transaction(journal_path):
    with Journal(journal_path, extensions=[HEADS]) as journal:
        first = journal.append("a", events(2), 0)
        a, b = journal.append_many([("a", [event()], 2), ("b", events(3), 0)])

    assert seen == [first, a + b]
    assert heads_table(journal_path) == {"a": 3, "b": 3}


@pytest.mark.parametrize(
    ("appends", "error"),
    [
        ([("a", [event()], 0)], ConcurrencyError),  # stale: 'a' has 2 events
        ([("b", [event()], 0), ("a", [event()], 1)], ConcurrencyError),
        ([("b", [event()], 0), ("c", [NewEvent("n", 1, "{")], 0)], InvalidAppendError),
    ],
)
def test_a_refused_append_leaves_the_extensions_table_untouched(journal_path, appends, error):
    with Journal(journal_path, extensions=[HEADS]) as journal:
        journal.append("a", events(2), 0)
        before = raw_rows(journal_path), heads_table(journal_path)

        with pytest.raises(error):
            journal.append_many(appends)

        assert (raw_rows(journal_path), heads_table(journal_path)) == before
        assert len(seen) == 1  # the refused append never reached the hook


def test_a_hook_that_raises_aborts_the_append_with_its_own_error(journal_path):
    vetoing = Extension(name="heads", version=1, migrate=_create, on_append=_refuse_big)
    with Journal(journal_path, extensions=[vetoing]) as journal:
        journal.append("a", events(2), 0)
        before = raw_rows(journal_path), heads_table(journal_path)

        with pytest.raises(Refusal, match="no big events"):
            journal.append_many([("a", [event()], 2), ("b", [event(1, "big")], 0)])
        with pytest.raises(Refusal):
            journal.append("a", [event(1, "big")], 2)

        assert (raw_rows(journal_path), heads_table(journal_path)) == before
        [third] = journal.append("a", [event()], 2)  # the head cache was not advanced
        assert third.prev_hash == journal.hash_at("a", 2)
    assert heads_table(journal_path) == {"a": 3}


def test_a_vetoed_append_leaves_the_file_byte_identical(journal_path):
    vetoing = Extension(name="heads", version=1, migrate=_create, on_append=_refuse_big)
    with Journal(journal_path, extensions=[vetoing]) as journal:
        journal.append("a", events(2), 0)
    digest = file_digest(journal_path)

    with Journal(journal_path, extensions=[vetoing]) as journal:
        with pytest.raises(Refusal):
            journal.append_many([("a", [event()], 2), ("b", [event(1, "big")], 0)])

    assert file_digest(journal_path) == digest


def test_a_sqlite_error_in_a_hook_is_a_journal_error_naming_the_extension(journal_path):
    def broken(db, appended) -> None:
        db.execute("INSERT INTO no_such_table VALUES (1)")

    ext = Extension(name="broken", version=1, migrate=lambda db, v: None, on_append=broken)
    with Journal(journal_path, extensions=[ext]) as journal:
        with pytest.raises(JournalError, match=r"on_append hook of extension 'broken'.*no_such"):
            journal.append("a", [event()], 0)
        assert journal.last_seq("a") == 0


def test_a_hook_that_commits_is_reported(journal_path):
    def committing(db, appended) -> None:
        db.execute("COMMIT")

    ext = Extension(name="rude", version=1, migrate=lambda db, v: None, on_append=committing)
    with Journal(journal_path, extensions=[ext]) as journal:
        with pytest.raises(JournalError, match="'rude' ended the append's transaction"):
            journal.append("a", [event()], 0)


def test_a_readonly_journal_never_calls_the_hook(journal_path):
    with Journal(journal_path, extensions=[HEADS]) as journal:
        journal.append("a", [event()], 0)
    with Journal(journal_path, readonly=True, extensions=[HEADS]) as journal:
        with pytest.raises(JournalError, match="read-only"):
            journal.append("a", [event()], 1)
    assert len(seen) == 1
