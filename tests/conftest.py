"""Shared fixtures: a fresh journal file per test, a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from journal import Journal


class FixedClock:
    """A clock that starts at a fixed instant and ticks one millisecond per call."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "turnlog.db"


@pytest.fixture
def journal(db_path: Path):
    j = Journal(str(db_path), clock=FixedClock())
    yield j
    j.close()
