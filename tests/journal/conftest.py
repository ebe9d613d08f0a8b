"""Fixtures shared by the journal tests: a fake clock, journals opened every supported way."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from journal import Extension, Journal, NewEvent


class FakeClock:
    """Starts at 2025-01-01T00:00:00Z and moves one millisecond per reading."""

    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


def event(n: int = 0, type: str = "note") -> NewEvent:
    return NewEvent(type, 1, f'{{"n":{n}}}')


def events(count: int, start: int = 0) -> list[NewEvent]:
    return [event(n) for n in range(start, start + count)]


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


@pytest.fixture(params=["durable", "normal-sync", "reopened", "with-extension"])
def journal(request, journal_path: Path, clock: FakeClock) -> Iterator[Journal]:
    """A fresh journal, opened each way callers open one; the contract must hold for all."""
    if request.param == "durable":
        opened = Journal(journal_path, clock=clock)
    elif request.param == "normal-sync":
        opened = Journal(journal_path, clock=clock, synchronous="NORMAL")
    elif request.param == "reopened":
        Journal(journal_path).close()
        opened = Journal(journal_path, clock=clock)
    else:
        opened = Journal(journal_path, clock=clock, extensions=[VIEWS])
    with opened:
        yield opened
