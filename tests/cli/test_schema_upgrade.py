"""A journal written before schema 3 (hashes as hex text), with the engine's views and
projections in it: read commands read it as it is, and after the first writable open
migrates it every command prints exactly what it printed before."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from turnlog.engine.audit import EXTENSIONS
from turnlog.journal import SCHEMA_VERSION, Journal
from tests.old_journals import as_schema_2

from .conftest import turnlog


def _stored(path: Path) -> tuple[str, list]:
    conn = sqlite3.connect(path)
    try:
        return (conn.execute("SELECT value FROM _turnlog_meta "
                             "WHERE key = 'schema_version'").fetchone()[0],
                conn.execute("SELECT DISTINCT typeof(hash) FROM events").fetchall())
    finally:
        conn.close()


def _outputs(db: Path, conversation: str) -> list[str]:
    commands = [("ls", "--json"), ("audit", "--json"), ("heads", "--json"),
                ("verify", "--json"), ("show", conversation, "--json"),
                ("export", conversation, "--format", "jsonl")]
    outputs = []
    for command in commands:
        done = turnlog(*command, "--db", db)
        assert done.returncode == 0, (command, done.stderr)
        outputs.append(done.stdout)
    return outputs


def test_an_engine_journal_of_schema_2_reads_the_same_before_and_after_it_migrates(db):
    assert turnlog("demo", "--db", db).returncode == 0
    [first, *_] = json.loads(turnlog("ls", "--json", "--db", db).stdout)
    conversation = first["conversation_id"]
    now = _outputs(db, conversation)

    as_schema_2(db)
    assert _stored(db) == ("2", [("text",)])
    assert _outputs(db, conversation) == now  # read as it is, never migrated
    assert _stored(db) == ("2", [("text",)])

    Journal.open(str(db), extensions=EXTENSIONS).close()
    assert _stored(db) == (str(SCHEMA_VERSION), [("blob",)])
    assert _outputs(db, conversation) == now
    assert json.loads(now[3])["ok"] is True
