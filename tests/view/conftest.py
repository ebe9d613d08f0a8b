"""Fixtures of the viewer's tests: one built journal per session, and its bytes."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from .journal_data import build


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("view") / "view.db"
    ids = build(path)
    return path, ids


@pytest.fixture
def db(built, tmp_path: Path) -> Path:
    """A private copy of the built journal (tests may tamper with or append to it)."""
    copy = tmp_path / "view.db"
    shutil.copy(built[0], copy)
    return copy


@pytest.fixture
def ids(built) -> dict[str, str]:
    return built[1]


def digest(path: Path) -> dict[str, str]:
    """The journal's files (the database and any -wal/-shm) and their SHA-256."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.parent.glob(path.name + "*"))}
