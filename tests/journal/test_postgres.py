"""What only the PostgreSQL journal has to show: the same hashes as SQLite, opening by URL,
the database refusing rewrites, typed connection errors. The rest of its contract runs
in ``test_contract.py`` (``turnlog.testing.JournalContract`` on ``conftest.BACKENDS["postgres"]``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from turnlog.journal import (
    ConcurrencyError,
    Journal,
    JournalConnectionError,
    JournalError,
    NewEvent,
    NotAJournalError,
    PostgresJournal,
    ReadOnlyJournalError,
    SchemaTooNewError,
)
from tests.pgcluster import fresh_url, shared_cluster

from .conftest import FakeClock, event, events

ROOT = Path(__file__).resolve().parents[2]


def fill(journal) -> None:
    """The same appends on any backend: unicode, a batch, a fork, imported timestamps."""
    journal.append("a", [NewEvent("note", 1, '{"t": "é ✓ \\u00e9", "n": [1.50, null]}'),
                         *events(3)], 0)
    journal.append("b", events(2, 10), 0)
    journal.append("fork", [event(20)], 0, parent=("a", 2))
    journal.append("a", [NewEvent("note", 2, "{}", recorded_at="2019-05-06T07:08:09.123456Z")], 4)


def test_the_same_appends_give_byte_identical_rows_and_hashes_on_sqlite_and_postgres(tmp_path):
    with Journal(tmp_path / "j.db", clock=FakeClock()) as lite, \
            Journal.open(fresh_url(), clock=FakeClock()) as pg:
        fill(lite)
        fill(pg)
        assert list(pg.read_all()) == list(lite.read_all())
        assert pg.heads() == lite.heads()
        assert list(pg.streams()) == list(lite.streams())
        assert pg.verify() == lite.verify()


def test_stream_ids_order_bytewise_as_on_sqlite(tmp_path):
    names = ["b", "B", "a", "é", "Z", "_", "a b", "ä"]
    with Journal(tmp_path / "j.db", clock=FakeClock()) as lite, \
            Journal.open(fresh_url(), clock=FakeClock()) as pg:
        for name in names:
            lite.append(name, [event()], 0)
            pg.append(name, [event()], 0)
        assert [h.stream_id for h in pg.heads()] == [h.stream_id for h in lite.heads()]
        assert pg.verify() == lite.verify()


def test_the_sqlite_path_never_imports_psycopg(tmp_path):
    code = f"""
import sys
from click.testing import CliRunner
import turnlog.replay.cli
from turnlog import journal
from turnlog.engine.cli import cli as main
with journal.Journal.open({str(tmp_path / 'j.db')!r}) as j:
    j.append("s", [journal.NewEvent("note", 1, "{{}}")], 0)
runner = CliRunner()
for args in (["demo"], ["ls"], ["verify"], ["audit"]):
    result = runner.invoke(main, [*args, "--db", {str(tmp_path / 'cli.db')!r}])
    assert result.exit_code == 0, (args, result.output)
assert "psycopg" not in sys.modules, sorted(m for m in sys.modules if "psycopg" in m)
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok")


def test_open_picks_the_backend_from_the_path_or_url(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with Journal.open("sqlite:///rel.db") as rel, Journal.open(f"sqlite:///{tmp_path}/abs.db") as ab:
        assert (type(rel), rel.path) == (Journal, "rel.db")
        assert ab.path == f"{tmp_path}/abs.db"
    with Journal.open(tmp_path / "plain.db") as plain:
        assert plain.path == str(tmp_path / "plain.db")
    with Journal.open(fresh_url()) as pg:
        assert isinstance(pg, PostgresJournal)
    with pytest.raises(JournalError, match="unknown journal URL scheme 'mysql'"):
        Journal.open("mysql://host/db")
    assert not (tmp_path / "mysql:").exists()


@pytest.mark.parametrize("statement", [
    "UPDATE events SET payload = '{\"n\":99}' WHERE seq = 1",
    "DELETE FROM events WHERE seq = 2",
    "TRUNCATE events CASCADE",
    "UPDATE stream_links SET parent_seq = 2",
    "DELETE FROM stream_links",
    "TRUNCATE stream_links",
])
def test_the_database_itself_refuses_to_rewrite_history_even_for_a_superuser(statement):
    url = fresh_url()
    with Journal.open(url) as journal:
        journal.append("parent", events(2), 0)
        journal.append("fork", [event()], 0, parent=("parent", 1))
        before = list(journal.read_all()), journal.heads()
        with psycopg.connect(url, autocommit=True) as conn:
            with pytest.raises(psycopg.errors.IntegrityConstraintViolation, match="append-only"):
                conn.execute(statement)
        assert (list(journal.read_all()), journal.heads()) == before


def test_an_unreachable_server_is_a_connection_error_naming_the_url(tmp_path):
    url = f"postgresql://nobody@/turnlog?host={tmp_path}"
    with pytest.raises(JournalConnectionError, match="cannot reach the journal at postgresql://"):
        Journal.open(url, timeout=2)


def test_a_missing_database_is_a_connection_error_in_the_servers_words():
    url = shared_cluster().url("no_such_database")
    with pytest.raises(JournalConnectionError, match='database "no_such_database" does not exist'):
        Journal.open(url, timeout=5)


def test_a_password_never_appears_in_messages():
    url = shared_cluster().url("no_such_database").replace("postgres@", "postgres:s3cret@")
    with pytest.raises(JournalError) as info:
        Journal.open(url, timeout=5)
    assert "s3cret" not in str(info.value)
    assert "postgres:***@" in str(info.value)


def test_readonly_refuses_writes_and_creates_nothing():
    url = fresh_url()
    with pytest.raises(NotAJournalError, match="no turnlog journal"):
        Journal.open(url, readonly=True)
    with Journal.open(url) as writer:
        writer.append("s", events(2), 0)
    with Journal.open(url, readonly=True) as reader:
        assert reader.last_seq("s") == 2 and reader.verify().ok
        with pytest.raises(ReadOnlyJournalError, match="read-only"):
            reader.append("s", [event()], 2)


def test_foreign_tables_with_the_journals_names_are_refused_untouched():
    url = fresh_url()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE events (id int)")
    with pytest.raises(NotAJournalError, match="not a turnlog journal"):
        Journal.open(url)
    with psycopg.connect(url, autocommit=True) as conn:
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = "
                              "current_schema()").fetchall()
    assert tables == [("events",)]


def test_a_journal_written_by_a_newer_turnlog_is_refused():
    url = fresh_url()
    Journal.open(url).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE _turnlog_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(SchemaTooNewError, match="version 99"):
        Journal.open(url)


def test_a_server_restart_is_a_connection_error_and_a_retry_with_the_same_seq_is_safe():
    url = fresh_url()
    with Journal.open(url, timeout=30) as journal:
        journal.append("s", events(2), 0)
        shared_cluster().restart()
        outcomes = []
        for attempt in range(3):  # the pool replaces a broken connection after it failed
            try:
                journal.append("s", [event(2)], 2)
                outcomes.append("landed")
                break
            except JournalConnectionError:
                outcomes.append("connection")
            except ConcurrencyError:
                outcomes.append("already")
                break
        assert outcomes[-1] in ("landed", "already")
        assert [e.seq for e in journal.read("s")] == [1, 2, 3]
        assert journal.verify().ok


def test_a_closed_journal_names_its_url():
    journal = Journal.open(fresh_url())
    journal.close()
    with pytest.raises(JournalError, match="closed") as info:
        journal.last_position()
    assert journal.path in str(info.value)
