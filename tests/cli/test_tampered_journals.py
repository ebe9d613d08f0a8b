"""Journals edited behind turnlog's back, met through the console script (issue 25)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.pgcluster import fresh_url

from .conftest import TURNLOG, env, turnlog


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


def truncate_payload(seq: int) -> str:
    return f"UPDATE events SET payload = substr(payload, 1, 30) WHERE seq = {seq}"


@pytest.mark.parametrize("seq", [4, 7])  # a model response, a tool result: the views parse them
def test_verify_reports_a_payload_cut_short_as_a_tampered_event(tmp_path, seq):
    db = tmp_path / "a.db"
    cid = demo(db)
    sql(db, "DROP TRIGGER events_refuse_update", truncate_payload(seq))
    done = turnlog("verify", "--db", db)
    assert done.returncode == 1, done.stderr
    assert f"TAMPERED: conversation {cid!r} seq {seq}" in done.stdout
    report = json.loads(turnlog("verify", "--db", db, "--json").stdout)
    assert report["ok"] is False
    assert (report["first_bad"]["conversation_id"], report["first_bad"]["seq"]) == (cid, seq)
    assert turnlog("verify", cid, "--db", db).returncode == 1


def test_verify_names_a_non_json_payload_whose_hash_was_recomputed(tmp_path):
    from turnlog.journal._hashing import event_hash

    db = tmp_path / "a.db"
    cid = demo(db)
    sql(db, "DROP TRIGGER events_refuse_update", "DROP TRIGGER events_refuse_delete",
        "DELETE FROM events WHERE seq = 22", truncate_payload(21))
    conn = sqlite3.connect(db)
    prev, at, payload, version = conn.execute(
        "SELECT lower(hex(prev_hash)), recorded_at, payload, version FROM events "
        "WHERE seq = 21").fetchone()
    digest = event_hash(prev, cid, 21, "model_responded", version, at, payload)
    conn.execute("UPDATE events SET hash = ? WHERE seq = 21", (bytes.fromhex(digest),))
    conn.commit()
    conn.close()
    done = turnlog("verify", "--db", db, "--json")
    assert done.returncode == 1, done.stderr
    bad = json.loads(done.stdout)["first_bad"]
    assert (bad["seq"], bad["conversation_id"]) == (21, cid)
    assert "not JSON" in bad["reason"]


def test_verify_reports_a_cut_payload_on_postgres():
    url = fresh_url()
    cid = demo(url)
    pg_sql(url, "ALTER TABLE events DISABLE TRIGGER events_refuse_update",
           "ALTER TABLE events DROP CONSTRAINT events_payload_check", truncate_payload(4))
    done = turnlog("verify", "--db", url, "--json")
    assert done.returncode == 1, done.stderr
    bad = json.loads(done.stdout)["first_bad"]
    assert (bad["conversation_id"], bad["seq"]) == (cid, 4)


def unprivileged(*args: object) -> subprocess.CompletedProcess:
    """``turnlog ARGS`` in a process that file permissions bind, even when we are root."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv, "root must drop CAP_DAC_OVERRIDE to meet read-only files: need setpriv"
        prefix = [setpriv, "--inh-caps=-all",
                  "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
    return subprocess.run([*prefix, *TURNLOG, *map(str, args)], capture_output=True, text=True,
                          env=env(), timeout=300)


@pytest.fixture
def read_only_dir(tmp_path):
    directory = tmp_path / "ro"
    directory.mkdir()
    demo(directory / "j.db")
    (directory / "j.db").chmod(0o444)
    directory.chmod(0o555)
    yield directory
    directory.chmod(0o755)
    (directory / "j.db").chmod(0o644)


def test_writing_a_read_only_file_says_which_file_and_why(read_only_dir):
    read_only_dir.chmod(0o755)
    done = unprivileged("demo", "--db", read_only_dir / "j.db")
    assert done.returncode == 2
    assert f"the file {read_only_dir / 'j.db'} is read-only" in done.stderr
    assert "unable to open database file" not in done.stderr


def test_creating_a_journal_in_a_read_only_directory_names_the_directory(read_only_dir):
    done = unprivileged("demo", "--db", read_only_dir / "new.db")
    assert done.returncode == 2
    assert f"its directory {read_only_dir} is read-only" in done.stderr
    assert "-wal" in done.stderr and "unable to open database file" not in done.stderr
    assert not (read_only_dir / "new.db").exists()


def test_writing_a_writable_file_in_a_read_only_directory_names_the_directory(read_only_dir):
    (read_only_dir / "j.db").chmod(0o644)
    done = unprivileged("demo", "--db", read_only_dir / "j.db")
    assert done.returncode == 2
    assert f"its directory {read_only_dir} is read-only" in done.stderr


def test_verify_with_an_empty_heads_file_is_an_error(tmp_path):
    db, heads = tmp_path / "a.db", tmp_path / "heads.json"
    demo(db)
    for content in ("", "\n  \n"):
        heads.write_text(content)
        done = turnlog("verify", "--db", db, "--heads", heads)
        assert done.returncode == 2
        assert f"{heads} is empty" in done.stderr


SQLITE_UTILS = Path(sys.executable).parent / "sqlite-utils"


def test_sqlite_utils_transform_drops_the_guards_and_verify_says_so(tmp_path):
    db = tmp_path / "t.db"
    demo(db)
    done = subprocess.run([str(SQLITE_UTILS), "transform", str(db), "events"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = turnlog("verify", "--db", db, "--json")
    assert report.returncode == 1
    missing = json.loads(report.stdout)["missing_guards"]
    assert "trigger events_refuse_update" in missing
    assert "trigger events_refuse_delete" in missing
    assert "trigger _audit_model_calls_project" in missing
    human = turnlog("verify", "--db", db)
    assert human.returncode == 1 and "UNGUARDED" in human.stdout
    assert "events_refuse_update" in human.stdout

    write = turnlog("demo", "--db", db)  # a writable open puts them back, and says so
    assert write.returncode == 0, write.stderr
    assert "reinstalled trigger events_refuse_update" in write.stderr
    after = turnlog("verify", "--db", db, "--json")
    assert after.returncode == 0, after.stdout
    assert json.loads(after.stdout)["missing_guards"] == []
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        sql(db, EDIT_SEQ_2)


def test_an_events_table_rebuilt_without_its_constraints_is_not_written_to(tmp_path):
    db = tmp_path / "t.db"
    demo(db)
    sql(db, "PRAGMA legacy_alter_table = ON", "CREATE TABLE loose AS SELECT * FROM events",
        "DROP TABLE events", "ALTER TABLE loose RENAME TO events")
    report = json.loads(turnlog("verify", "--db", db, "--json").stdout)
    assert "events UNIQUE (stream_id, seq)" in report["missing_guards"]
    write = turnlog("demo", "--db", db)
    assert write.returncode == 2
    assert "lost events CHECK (json_valid(payload)), events UNIQUE (stream_id, seq)" in write.stderr
    assert "turnlog copy" in write.stderr
    assert turnlog("verify", "--db", db, "--json").returncode == 1


@pytest.mark.parametrize("how", ["DROP TRIGGER events_refuse_update ON events",
                                 "ALTER TABLE events DISABLE TRIGGER events_refuse_update"])
def test_a_postgres_journal_missing_a_guard_is_reported_then_repaired(how):
    url = fresh_url()
    demo(url)
    pg_sql(url, how)
    report = turnlog("verify", "--db", url, "--json")
    assert report.returncode == 1
    [missing] = json.loads(report.stdout)["missing_guards"]
    assert missing.startswith("trigger events_refuse_update")
    write = turnlog("demo", "--db", url)
    assert write.returncode == 0 and "reinstalled trigger events_refuse_update" in write.stderr
    assert turnlog("verify", "--db", url).returncode == 0
    with pytest.raises(psycopg.errors.IntegrityConstraintViolation):
        pg_sql(url, EDIT_SEQ_2)
