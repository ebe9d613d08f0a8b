"""Forged snapshots met through the console script (issue 25, item 6): a cached state never
gates a side effect, verify folds every history through the lifecycle and compares saved
states by their canonical bytes, and a zlib bomb is never inflated."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path

import msgspec
import psycopg
import pytest

from turnlog.engine.audit import EXTENSIONS
from turnlog.engine.model.conversation import load_state
from turnlog.engine.model.events import ApprovalDecided, ToolStarted, encode_event
from turnlog.engine.model.snapshots import (
    decode_state,
    encode_state,
    inflate,
    open_builder,
    save_snapshot,
    snapshot_kind,
)
from turnlog.journal import Journal
from tests.pgcluster import fresh_url

from .conftest import TURNLOG, env, turnlog, write_script


def paused(tmp_path: Path, db: str) -> tuple[Path, Path]:
    """A run whose ``append_note`` call waits for approval, with a snapshot of its state."""
    notes = tmp_path / "notes.txt"
    script = write_script(
        tmp_path / "s.json",
        {"tool_calls": [{"name": "append_note",
                         "arguments": {"path": str(notes), "text": "pay 500"}}]},
        {"text": "Done."})
    done = turnlog("run", "Pay it.", "--script", script, "--tools", "demo", "--approve",
                   "append_note", "--id", "c1", "--db", db, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "awaiting_approval"
    with Journal.open(db, extensions=EXTENSIONS) as journal:
        assert save_snapshot(journal, "c1", open_builder(journal, "c1")) is not None
    return script, notes


def forged_approval(db: str) -> bytes:
    """The saved state with an approving decision the events do not hold."""
    with Journal.open(db, readonly=True) as journal:
        state = decode_state(journal.read_snapshot("c1", snapshot_kind()).data)
        folded = load_state(journal, "c1")
    [call_id] = folded.awaiting_approval
    asked = folded.approvals[call_id]
    decided = ApprovalDecided(call_id=call_id, decision="approve", approver="mallory",
                              decided_at="2026-01-01T00:00:00Z",
                              arguments_hash=asked.arguments_hash)
    return encode_state(msgspec.structs.replace(state, decisions={call_id: decided}))


def sqlite_edit(db: str, *statements: tuple) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        for statement in statements:
            conn.execute(*statement)
    finally:
        conn.close()


def pg_edit(url: str, *statements: tuple) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement[0].replace("?", "%s"), *statement[1:])


def backends(tmp_path: Path):
    """(db, edit) for a SQLite file and a PostgreSQL schema."""
    return [(str(tmp_path / "j.db"), sqlite_edit,
             "DROP TRIGGER snapshots_refuse_update", "DROP TRIGGER snapshots_refuse_delete"),
            (fresh_url(), pg_edit,
             "ALTER TABLE snapshots DISABLE TRIGGER snapshots_refuse_update",
             "ALTER TABLE snapshots DISABLE TRIGGER snapshots_refuse_delete")]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_snapshot_updated_with_an_approval_does_not_run_the_gated_tool(tmp_path, backend):
    db, edit, unguard_update, _ = backends(tmp_path)[backend == "postgresql"]
    script, notes = paused(tmp_path, db)
    edit(db, (unguard_update,), ("UPDATE snapshots SET data = ?", (forged_approval(db),)))

    resumed = turnlog("resume", "c1", "--script", script, "--tools", "demo", "--db", db,
                      "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "awaiting_approval"
    assert not notes.exists()  # the payment did not run
    with Journal.open(db, readonly=True) as journal:
        assert "tool_started" not in [e.type for e in journal.read("c1")]
    report = turnlog("verify", "--db", db, "--json")
    assert report.returncode == 1
    [forged] = json.loads(report.stdout)["projections"]
    assert forged["table"] == "snapshots" and "decisions" in forged["reason"]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_delete_from_snapshots_then_verify_reports_the_illegal_history(tmp_path, backend):
    db, edit, _, unguard_delete = backends(tmp_path)[backend == "postgresql"]
    paused(tmp_path, db)
    with Journal.open(db) as journal:  # what the forged approval made a run write
        folded = load_state(journal, "c1")
        call_id = folded.awaiting_approval[0]
        seq = journal.last_seq("c1") + 1
        call = folded.pending_calls[0]
        journal.append("c1", [encode_event(ToolStarted(call_id=call_id, name=call.name,
                                                       arguments=call.arguments))], seq - 1)
    edit(db, (unguard_delete,), ("DELETE FROM snapshots",))

    human = turnlog("verify", "--db", db)
    assert human.returncode == 1
    assert f"ILLEGAL HISTORY: conversation 'c1' an illegal history at seq {seq}" in human.stdout
    assert "no approving decision recorded" in human.stdout
    [found] = json.loads(turnlog("verify", "--db", db, "--json").stdout)["projections"]
    assert (found["table"], found["conversation_id"], found["seq"]) == ("history", "c1", seq)
    assert turnlog("verify", "c1", "--db", db).returncode == 1


def _retype_first_one(value):
    """``value`` with the first integer 1 inside tool arguments turned into ``true``."""
    done = [False]

    def walk(node, in_arguments=False):
        if isinstance(node, dict):
            return {k: walk(v, in_arguments or k == "arguments") for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, in_arguments) for v in node]
        if in_arguments and type(node) is int and node == 1 and not done[0]:
            done[0] = True
            return True
        return node

    changed = walk(value)
    assert done[0]
    return changed


def test_a_snapshot_that_compares_equal_in_python_is_still_a_forgery(tmp_path):
    db = str(tmp_path / "j.db")
    script = write_script(tmp_path / "s.json",
                          {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
                          {"text": "3"})
    assert turnlog("run", "Add.", "--script", script, "--tools", "demo", "--id", "c1",
                   "--max-turns", "1", "--db", db).returncode == 1  # halted: its call in the head
    with Journal.open(db, extensions=EXTENSIONS) as journal:
        saved = save_snapshot(journal, "c1", open_builder(journal, "c1"))
    raw = msgspec.msgpack.decode(inflate(saved.data))
    forged = zlib.compress(msgspec.msgpack.encode(_retype_first_one(raw)), 1)
    assert decode_state(forged) == decode_state(saved.data)  # == cannot tell them apart
    sqlite_edit(db, ("DROP TRIGGER snapshots_refuse_update",),
                ("UPDATE snapshots SET data = ?", (forged,)))
    report = turnlog("verify", "--db", db, "--json")
    assert report.returncode == 1
    [found] = json.loads(report.stdout)["projections"]
    assert found["table"] == "snapshots" and "differs from the fold" in found["reason"]


def _bomb(size: int) -> bytes:
    packer = zlib.compressobj(9)
    chunk = b"\x00" * (1 << 20)
    return b"".join([*(packer.compress(chunk) for _ in range(size >> 20)), packer.flush()])


def test_a_zlib_bomb_in_a_snapshot_is_never_inflated(tmp_path):
    db = str(tmp_path / "j.db")
    assert turnlog("demo", "--db", db).returncode == 0
    [cid] = [c["conversation_id"] for c in json.loads(turnlog("ls", "--db", db, "--json").stdout)]
    bomb = _bomb(400 << 20)
    assert len(bomb) < 500_000 and inflate(bomb) is None
    with Journal(db) as journal:
        journal.write_snapshot(cid, snapshot_kind(), journal.last_seq(cid), bomb)
    probe = ("import resource, subprocess, sys; "
             "done = subprocess.run(sys.argv[1:], capture_output=True); "
             "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", probe, *TURNLOG, "show", cid, "--db", db],
                         capture_output=True, text=True, env=env(), timeout=300)
    code, peak_kb = map(int, out.stdout.split())
    assert code == 0
    assert peak_kb < 300_000  # inflating it would take 400 MB
    verify = json.loads(turnlog("verify", "--db", db, "--json").stdout)
    assert "not a conversation state" in verify["projections"][0]["reason"]
