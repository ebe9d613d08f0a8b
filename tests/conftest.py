"""Shared fixtures: a fresh journal file per test, a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from turnlog.journal import Journal

# Timing is not behaviour: on a loaded 2-core CI machine a property test's
# example may take longer than hypothesis' 200 ms default deadline. Benchmarks
# in bench/ measure speed; tests here only check behaviour.
settings.register_profile(
    "turnlog", deadline=None, suppress_health_check=[HealthCheck.too_slow])
# bench/mutation.py runs selected tests once per mutant on 2 cores: a fixed seed comes on its
# command line, no example database carries one mutant's failures into the next run
settings.register_profile("mutation", parent=settings.get_profile("turnlog"), database=None,
                          max_examples=12)
settings.load_profile("turnlog")


class FixedClock:
    """A clock that starts at a fixed instant and ticks one millisecond per call."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@pytest.fixture(scope="session", autouse=True)
def _postgres_cluster():
    """The throwaway PostgreSQL cluster (``tests.pgcluster``): started by the first test that
    needs one, stopped when the session ends."""
    from tests.pgcluster import stop_shared

    yield
    stop_shared()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "turnlog.db"


@pytest.fixture
def journal(db_path: Path):
    j = Journal(str(db_path), clock=FixedClock())
    yield j
    j.close()
