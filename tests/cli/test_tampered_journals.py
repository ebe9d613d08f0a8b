"""Journals edited behind turnlog's back, met through the console script (issue 25)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import psycopg
import pytest

from tests.pgcluster import fresh_url

from .conftest import turnlog


def demo(db: Path | str) -> str:
    """A demo conversation in ``db``; its id."""
    done = turnlog("demo", "--db", db)
    assert done.returncode == 0, done.stderr
    return json.loads(turnlog("ls", "--db", db, "--json").stdout)[0]["conversation_id"]


def sql(db: Path, *statements: str) -> None:
    """Run statements as a user of the sqlite3 shell would, guards out of the way."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA ignore_check_constraints = ON")
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


def pg_sql(url: str, *statements: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


EDIT_SEQ_2 = ("UPDATE events SET payload = replace(payload, 'Paris', 'Lyon') "
              "WHERE seq = 2")


def test_copy_refuses_a_tampered_source_and_writes_nothing(tmp_path):
    src, dst = tmp_path / "a.db", tmp_path / "b.db"
    demo(src)
    sql(src, "DROP TRIGGER events_refuse_update", EDIT_SEQ_2)
    done = turnlog("copy", src, dst)
    assert done.returncode == 2
    assert "does not verify" in done.stderr and "seq 2" in done.stderr
    assert "hash mismatch" in done.stderr and "nothing was copied" in done.stderr
    assert not dst.exists()


def test_copy_refuses_a_tampered_postgres_source(tmp_path):
    url, dst = fresh_url(), tmp_path / "b.db"
    demo(url)
    pg_sql(url, "ALTER TABLE events DISABLE TRIGGER events_refuse_update", EDIT_SEQ_2)
    done = turnlog("copy", url, dst)
    assert done.returncode == 2 and "seq 2" in done.stderr and "does not verify" in done.stderr
    assert not dst.exists()


def test_copy_of_a_verified_source_still_copies(tmp_path):
    src, dst = tmp_path / "a.db", tmp_path / "b.db"
    demo(src)
    assert turnlog("copy", src, dst).returncode == 0
    assert turnlog("verify", "--db", dst).returncode == 0
