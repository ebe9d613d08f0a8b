"""Read-only journals: every read command works on a 0444 file in a read-only directory,
and no read (library or CLI) creates, migrates or changes a file — not even a 0-byte one.

The truly read-only case runs in a subprocess that cannot override file permissions
(as root, ``setpriv`` drops the capabilities that would let it), so SQLite meets the
same refusals it meets on a read-only mount.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from turnlog.engine.cli import cli
from turnlog.journal import (
    Journal,
    JournalNotFoundError,
    NewEvent,
    NotAJournalError,
    ReadOnlyJournalError,
    TurnlogError,
    connect_readonly,
)

from .conftest import events

READ_COMMANDS = [
    ["ls"], ["ls", "--json"], ["show", "{id}"], ["show", "{id}", "--json"], ["verify"],
    ["verify", "{fork}"], ["heads"], ["heads", "--json"], ["audit"], ["audit", "--json"],
    ["export", "{id}", "--format", "jsonl"], ["export", "{id}", "--format", "markdown"],
    ["tail", "--once", "--from-position", "1"], ["diff", "{id}", "{fork}"], ["replay", "{id}"],
]


def state_of(directory: Path) -> dict[str, str]:
    """Every file in ``directory`` with its checksum: a read must leave this identical."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.iterdir()) if p.is_file()}


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory) -> tuple[Path, str, str]:
    """A directory holding only a demo journal with a fork: (directory, id, fork id)."""
    directory = tmp_path_factory.mktemp("demo")
    db = str(directory / "turnlog.db")
    assert invoke("demo", "--db", db).exit_code == 0
    [cid] = [c["conversation_id"] for c in json.loads(invoke("ls", "--db", db, "--json").output)]
    fork = invoke("fork", cid, "--at", "4", "--id", "f-1", "--db", db, "--json")
    assert fork.exit_code == 0, fork.output
    return directory, cid, "f-1"


def commands(db: str, cid: str, fork: str) -> list[list[str]]:
    return [[a.format(id=cid, fork=fork) for a in cmd] + ["--db", db] for cmd in READ_COMMANDS]


def test_read_commands_on_a_live_journal_change_no_file(demo_dir, tmp_path):
    directory, cid, fork = demo_dir
    copy = tmp_path / "live"
    shutil.copytree(directory, copy)
    before = state_of(copy)

    for cmd in commands(str(copy / "turnlog.db"), cid, fork):
        result = invoke(*cmd)
        assert result.exit_code == 0, (cmd, result.output)
        assert state_of(copy) == before, cmd


_UNPRIVILEGED = """
import json, sys
from click.testing import CliRunner
from turnlog.engine.cli import cli
out = {}
for cmd in json.loads(sys.argv[1]):
    r = CliRunner().invoke(cli, cmd)
    out[" ".join(cmd)] = [r.exit_code, r.output[-300:], repr(r.exception)]
print(json.dumps(out))
"""


def run_unprivileged(code: str, *args: str) -> subprocess.CompletedProcess:
    """Run Python ``code`` in a process that file permissions bind (even when we are root)."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv, "root must drop CAP_DAC_OVERRIDE to test read-only files: need setpriv"
        prefix = [setpriv, "--inh-caps=-all",
                  "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
    return subprocess.run([*prefix, sys.executable, "-c", code, *args], capture_output=True,
                          text=True, timeout=600, cwd=Path(__file__).parents[2])


@pytest.fixture
def read_only_copy(demo_dir, tmp_path):
    """The demo journal as a 0444 file in a 0555 directory (restored for cleanup)."""
    directory, cid, fork = demo_dir
    copy = tmp_path / "ro"
    shutil.copytree(directory, copy)
    (copy / "turnlog.db").chmod(0o444)
    copy.chmod(0o555)
    yield copy, cid, fork
    copy.chmod(0o755)


def test_read_commands_work_on_a_read_only_file_in_a_read_only_directory(read_only_copy):
    copy, cid, fork = read_only_copy
    before = state_of(copy)
    probe = run_unprivileged("import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("
                             "'CREATE TABLE x (a)')", str(copy / "turnlog.db"))
    assert "readonly database" in probe.stderr  # the subprocess really cannot write

    done = run_unprivileged(_UNPRIVILEGED, json.dumps(commands(str(copy / "turnlog.db"),
                                                               cid, fork)))

    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    failed = {cmd: r for cmd, r in results.items() if r[0] != 0}
    assert failed == {}
    assert len(results) == len(READ_COMMANDS)
    assert state_of(copy) == before


def test_a_write_command_on_a_read_only_journal_is_a_plain_error(read_only_copy):
    copy, cid, _ = read_only_copy
    cmd = [["fork", cid, "--at", "2", "--db", str(copy / "turnlog.db")]]

    done = run_unprivileged(_UNPRIVILEGED, json.dumps(cmd))

    [(code, output, _)] = json.loads(done.stdout).values()
    assert code == 2 and "Traceback" not in output


@pytest.mark.parametrize("cmd", [c[0] for c in READ_COMMANDS if "{" not in " ".join(c)] +
                         ["show", "export", "diff", "replay"])
def test_a_read_command_on_a_missing_file_creates_nothing(tmp_path, cmd):
    args = {"show": ["show", "x"], "export": ["export", "x", "--format", "jsonl"],
            "diff": ["diff", "x", "y"], "replay": ["replay", "x"]}.get(cmd, [cmd])

    result = invoke(*args, "--db", str(tmp_path / "missing.db"))

    assert result.exit_code == 2
    assert "no journal at" in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("cmd", ["ls", "verify", "heads", "audit", "tail"])
def test_a_read_command_never_turns_an_empty_file_into_a_journal(tmp_path, cmd):
    empty = tmp_path / "empty.db"
    empty.touch()
    args = [cmd, "--once"] if cmd == "tail" else [cmd]

    result = invoke(*args, "--db", str(empty))

    assert result.exit_code == 2, result.output
    assert "empty file, not a turnlog journal" in result.output
    assert [p.name for p in tmp_path.iterdir()] == ["empty.db"]
    assert empty.stat().st_size == 0


# -- the library -------------------------------------------------------------------------


@pytest.fixture
def written(tmp_path) -> Path:
    path = tmp_path / "turnlog.db"
    with Journal(path) as journal:
        journal.append("a", events(3), 0)
        journal.append("f", events(1), 0, parent=("a", 2))
    return path


def test_a_read_only_journal_reads_everything_and_changes_nothing(written):
    before = state_of(written.parent)

    with Journal(written, readonly=True) as journal:
        assert journal.readonly
        assert [e.seq for e in journal.lineage("f")] == [1, 2, 1]
        assert journal.verify().ok and journal.verify("f").ok
        assert len(journal.heads()) == 2 and journal.last_position() == 4
        assert [s.stream_id for s in journal.streams()] == ["f", "a"]
        with pytest.raises(ReadOnlyJournalError, match="read-only"):
            journal.append("a", events(1), 3)
        with pytest.raises(ReadOnlyJournalError):
            journal.append("new", events(1), 0)

    assert state_of(written.parent) == before


def test_a_read_only_connection_refuses_writes_but_allows_temporary_tables(written):
    before = state_of(written.parent)
    conn = connect_readonly(written)
    try:
        conn.execute("CREATE TEMP TABLE scratch (x)")
        conn.execute("INSERT INTO temp.scratch VALUES (1)")
        for statement in ("INSERT INTO events (stream_id) VALUES ('x')", "DELETE FROM events",
                          "CREATE TABLE t (x)", "DROP TRIGGER events_refuse_update",
                          "PRAGMA journal_mode = DELETE", "PRAGMA user_version = 7",
                          f"ATTACH '{written.parent / 'other.db'}' AS other"):
            with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
                conn.execute(statement)
    finally:
        conn.close()
    assert state_of(written.parent) == before


def test_a_read_only_connection_runs_table_valued_json_functions_first_thing(written):
    # the first json_each of a connection declares a virtual table, which SQLite reports
    # to the authorizer as an UPDATE of sqlite_master: it must not be refused
    before = state_of(written.parent)
    conn = connect_readonly(written)
    try:
        assert conn.execute("SELECT count(*) FROM json_each('[1, 2]')").fetchone() == (2,)
        assert conn.execute("SELECT count(*) FROM events AS e, json_tree(e.payload)"
                            ).fetchone()[0] > 0
        with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
            conn.execute("PRAGMA writable_schema = ON")
        with pytest.raises(sqlite3.DatabaseError):
            conn.execute("UPDATE sqlite_master SET type = 'x'")
    finally:
        conn.close()
    assert state_of(written.parent) == before


def test_a_writer_appending_meanwhile_is_seen_by_a_read_only_reader(written):
    with Journal(written, readonly=True) as reader, Journal(written) as writer:
        assert reader.last_seq("a") == 3
        writer.append("a", events(1, 3), 3)
        assert reader.last_seq("a") == 4
        assert reader.verify("a").ok


@pytest.mark.parametrize("content, error, match", [
    (None, JournalNotFoundError, "does not exist"),
    (b"", NotAJournalError, "empty file"),
    (b"hello, not a database" * 10, NotAJournalError, "not a SQLite database"),
])
def test_a_read_only_open_of_no_journal_creates_and_changes_nothing(tmp_path, content, error,
                                                                    match):
    path = tmp_path / "j.db"
    if content is not None:
        path.write_bytes(content)
    before = state_of(tmp_path)

    with pytest.raises(error, match=match) as info:
        Journal(path, readonly=True)

    assert isinstance(info.value, TurnlogError) and str(path) in str(info.value)
    assert state_of(tmp_path) == before


def test_an_empty_sqlite_database_is_not_a_journal_to_read(tmp_path):
    path = tmp_path / "j.db"
    path.write_bytes(_empty_sqlite_file(tmp_path))
    before = state_of(tmp_path)

    with pytest.raises(NotAJournalError, match="empty SQLite database"):
        Journal(path, readonly=True)
    assert state_of(tmp_path) == before


def _empty_sqlite_file(tmp_path: Path) -> bytes:
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.execute("DROP TABLE t")
    conn.commit()
    conn.close()
    data = other.read_bytes()
    other.unlink()
    return data


def test_a_read_only_journal_is_read_in_a_read_only_directory(written):
    code = """
import json, os, sys
from turnlog.journal import Journal
with Journal(sys.argv[1], readonly=True) as j:
    print(json.dumps([j.verify("f").ok, [e.seq for e in j.lineage("f")], j.last_position()]))
"""
    written.chmod(0o444)
    written.parent.chmod(0o555)
    try:
        before = state_of(written.parent)
        done = run_unprivileged(code, str(written))
        after = state_of(written.parent)
    finally:
        written.parent.chmod(0o755)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [True, [1, 2, 1], 4]
    assert after == before


def test_append_refused_on_a_read_only_handle_leaves_no_trace(written):
    with Journal(written, readonly=True) as journal:
        with pytest.raises(ReadOnlyJournalError):
            journal.append("a", [NewEvent("note", 1, "{}")], 3)
    with Journal(written) as journal:
        assert journal.last_seq("a") == 3
