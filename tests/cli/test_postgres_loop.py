"""The loop end to end on PostgreSQL through the CLI against a ``postgresql://`` journal: run,
fork, deterministic replay, and a SIGKILL of a real ``turnlog run`` process mid-run, then
``resume`` that never runs a recorded tool again."""

from __future__ import annotations

import json
import signal
import subprocess
import time

from click.testing import CliRunner

from turnlog.engine.cli import cli
from turnlog.journal import Journal
from tests.cli.conftest import TURNLOG, env, write_script
from tests.pgcluster import fresh_url


def ok(*args: object) -> dict | list:
    done = CliRunner().invoke(cli, [*map(str, args), "--json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_run_fork_and_replay_on_postgresql(tmp_path):
    url = fresh_url()
    script = write_script(
        tmp_path / "s.json",
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        {"text": "Paris is sunny.", "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
        {"text": "And 2 + 3 = 5."})
    again = write_script(tmp_path / "f.json", {"text": "Tokyo, then."})

    run = ok("run", "Weather in Paris, and 2 + 3?", "--script", script, "--tools", "demo",
             "--db", url)
    cid = run["conversation_id"]
    fork = ok("fork", cid, "--at", "2", "--message", "Tokyo instead?", "--script", again,
              "--db", url)

    assert run["status"] == "completed" and run["turn_count"] == 3
    assert fork["parent"] == cid and fork["fork_seq"] == 2
    for conversation in (cid, fork["conversation_id"]):
        assert ok("replay", conversation, "--db", url)["ok"] is True
    listing = {row["conversation_id"]: row for row in ok("ls", "--db", url)}
    assert listing[fork["conversation_id"]]["parent"] == cid
    assert listing[fork["conversation_id"]]["status"] == "completed"
    assert ok("verify", "--db", url)["ok"] is True

    # replay --all records its report in the PostgreSQL journal, and the audit reads it
    assert ok("audit", "--db", url)["divergences"] is None
    everything = ok("replay", "--all", "--db", url)
    assert everything["ok"] is True and everything["conversations"] == 2
    found = ok("audit", "--db", url)["divergences"]
    assert found["checked"] == 2 and found["diverged"] == []
    assert found["run_at"] == everything["run_at"]
    assert ok("verify", "--db", url)["ok"] is True


def _wait_for(url: str, cid: str, seq: int, proc: subprocess.Popen) -> None:
    with Journal.open(url) as journal:
        deadline = time.monotonic() + 60
        while journal.last_seq(cid) < seq and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)


def test_sigkill_mid_run_on_postgresql_then_resume_finishes_without_rerunning_a_tool(tmp_path):
    url = fresh_url()
    notes = tmp_path / "notes.txt"
    turns = [{"tool_calls": [{"name": "append_note", "arguments": {"path": str(notes),
                                                                   "text": f"note {i}"}},
                             {"name": "wait", "arguments": {"seconds": 0.3}}]}
             for i in range(4)] + [{"text": "all noted"}]
    script = write_script(tmp_path / "s.json", *turns)
    cid = "killed-on-pg"
    args = ["run", "log the notes", "--script", script, "--tools", "demo", "--db", url,
            "--id", cid]
    proc = subprocess.Popen([*TURNLOG, *map(str, args)], env=env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(url, cid, 7, proc)  # the first note is recorded, a wait is under way
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert ok("ls", "--db", url, "--status", "active")[0]["conversation_id"] == cid

    resumed = ok("resume", cid, "--script", script, "--tools", "demo", "--db", url)

    assert resumed["status"] == "completed"
    lines = notes.read_text().splitlines()
    assert sorted(lines) == [f"note {i}" for i in range(4)]  # each note once, none again
    assert ok("verify", "--db", url)["ok"] is True
    assert ok("replay", cid, "--db", url)["ok"] is True
