"""The journal's contract, as shipped (``turnlog.testing.JournalContract``), run on every
implementation and every way of opening one (``conftest.BACKENDS``: SQLite files, SQLite in
memory and PostgreSQL on the session's throwaway cluster), then the clauses only a SQLite file
has. Replay writes no journal: its re-run's rows are compared in memory."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import ClassVar

import pytest

from turnlog.journal import (
    ConcurrencyError,
    CorruptEventError,
    Journal,
    JournalError,
    JournalProtocol,
    ReadOnlyJournalError,
    walk_ancestry,
)
from turnlog.testing import JournalContract

from .conftest import BACKENDS, event, events, raw_rows


class _Backend(JournalContract):
    """The contract on one of ``conftest.BACKENDS``."""

    backend: ClassVar[str]

    def open_journal(self, folder: Path, clock: Callable[[], datetime]) -> JournalProtocol:
        return BACKENDS[self.backend](folder / "turnlog.db", clock)


class TestSQLiteDurable(_Backend):
    backend = "sqlite-durable"


class TestSQLiteNormalSync(_Backend):
    backend = "sqlite-normal-sync"


class TestSQLiteReopened(_Backend):
    backend = "sqlite-reopened"


class TestSQLiteWithExtension(_Backend):
    backend = "sqlite-with-extension"


class TestSQLiteMemory(_Backend):
    backend = "sqlite-memory"


class TestPostgreSQL(_Backend):
    backend = "postgres"


def test_every_backend_runs_the_contract():
    """A backend added to ``conftest.BACKENDS`` gets a contract class here."""
    ran = {cls.backend for cls in _Backend.__subclasses__()}
    assert ran == set(BACKENDS)


def test_the_contract_without_open_journal_says_what_to_define(tmp_path):
    class TestNothing(JournalContract):
        pass

    with pytest.raises(NotImplementedError, match=r"TestNothing must define open_journal"):
        TestNothing().open_journal(tmp_path, datetime.now)


# -- clauses of a SQLite file ------------------------------------------------------------------


def test_a_second_handle_on_the_same_file_is_caught_by_the_unique_key(file_journal):
    journal = file_journal
    journal.append("conv", events(2), 0)
    with Journal(journal.path) as other:
        other.append("conv", [event(2)], expected_seq=2)

    # This handle's cached head (seq 2) is stale now: the UNIQUE key refuses seq 3.
    with pytest.raises(ConcurrencyError) as info:
        journal.append("conv", [event(9)], expected_seq=2)
    assert info.value.actual_seq == 3

    [fourth] = journal.append("conv", [event(3)], expected_seq=3)
    assert fourth.prev_hash == journal.hash_at("conv", 3)
    assert journal.verify().ok


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE events SET payload = '{\"n\":99}' WHERE seq = 1",
        "DELETE FROM events WHERE seq = 2",
        "UPDATE stream_links SET parent_seq = 2",
        "DELETE FROM stream_links",
    ],
)
def test_the_database_itself_refuses_to_rewrite_history(file_journal, statement):
    journal = file_journal
    journal.append("parent", events(2), 0)
    journal.append("fork", [event()], 0, parent=("parent", 1))
    before = raw_rows(journal.path)

    conn = sqlite3.connect(journal.path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(statement)
    finally:
        conn.close()

    assert raw_rows(journal.path) == before


def test_reading_from_another_thread_is_a_journal_error(file_journal):
    errors: list[BaseException] = []
    worker = threading.Thread(
        target=lambda: errors.append(pytest.raises(JournalError, file_journal.last_seq, "x")))
    worker.start()
    worker.join()
    assert len(errors) == 1


def test_fork_links_that_loop_are_refused_by_the_shared_ancestry_walk():
    links = {"a": ("b", 1), "b": ("a", 1)}
    with pytest.raises(CorruptEventError, match="loop"):
        walk_ancestry(links.get, "a")
    assert walk_ancestry({"b": ("a", 3)}.get, "b", 2) == [("a", 3), ("b", 2)]


def test_a_readonly_journal_refuses_append_many_naming_the_streams(tmp_path):
    path = tmp_path / "j.db"
    Journal(path).close()
    with Journal(path, readonly=True) as journal:
        with pytest.raises(ReadOnlyJournalError, match=r"streams 'a', 'b': .* read-only"):
            journal.append_many([("a", [event()], 0), ("b", [event()], 0)])
        with pytest.raises(ReadOnlyJournalError, match=r"stream 'a': .* read-only"):
            journal.append("a", [event()], 0)
