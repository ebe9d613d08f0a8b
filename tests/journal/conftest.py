"""Fixtures shared by the journal tests: a fake clock, every journal backend, every way to open one.

``BACKENDS`` is the one list of journal implementations the contract suite runs on:
a backend is one more factory here and every contract test runs on it (PostgreSQL
runs on a throwaway cluster the session starts: ``tests/pgcluster.py``).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from turnlog.journal import Extension, Journal, JournalProtocol, NewEvent
from tests.pgcluster import fresh_url
from turnlog._contract import ContractClock, event, events  # noqa: F401


# the shipped contract suite's helpers (turnlog.testing.JournalContract), one definition
FakeClock = ContractClock


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def raw_rows(path: Path) -> list[tuple]:
    """Every events and stream_links row, read with plain sqlite3."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT * FROM events ORDER BY position").fetchall() + conn.execute(
            "SELECT * FROM stream_links ORDER BY stream_id"
        ).fetchall()
    finally:
        conn.close()


def _views(db, from_version: int) -> None:
    db.create_view("notes", "SELECT stream_id, seq, json_extract(payload, '$.n') AS n FROM events")


VIEWS = Extension(name="views", version=1, migrate=_views)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def journal_path(tmp_path: Path) -> Path:
    return tmp_path / "turnlog.db"


Factory = Callable[[Path, FakeClock], JournalProtocol]


def _reopened(path: Path, clock: FakeClock) -> Journal:
    Journal(path).close()
    return Journal(path, clock=clock)


#: Every way of opening a journal file (the SQLite-file-specific tests run on these).
FILE_BACKENDS: dict[str, Factory] = {
    "sqlite-durable": lambda path, clock: Journal(path, clock=clock),
    "sqlite-normal-sync": lambda path, clock: Journal(path, clock=clock, synchronous="NORMAL"),
    "sqlite-reopened": _reopened,
    "sqlite-with-extension": lambda path, clock: Journal(path, clock=clock, extensions=[VIEWS]),
}

#: Every journal implementation: the contract suite runs on each.
BACKENDS: dict[str, Factory] = {
    **FILE_BACKENDS,
    "sqlite-memory": lambda path, clock: Journal(":memory:", clock=clock),
    # A fresh schema in the session's throwaway PostgreSQL cluster (tests/pgcluster.py).
    "postgres": lambda path, clock: Journal.open(fresh_url(), clock=clock),
}


@pytest.fixture(params=list(BACKENDS))
def journal(request, journal_path: Path, clock: FakeClock) -> Iterator[JournalProtocol]:
    """A fresh journal of every implementation; the contract must hold for all."""
    with BACKENDS[request.param](journal_path, clock) as opened:
        yield opened


@pytest.fixture(params=list(FILE_BACKENDS))
def file_journal(request, journal_path: Path, clock: FakeClock) -> Iterator[Journal]:
    """A fresh journal file, opened each way callers open one."""
    with FILE_BACKENDS[request.param](journal_path, clock) as opened:
        yield opened

