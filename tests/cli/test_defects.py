"""Issue 12's defects, each reproduced as a user meets it: the console script in a subprocess."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from .conftest import TURNLOG, env, turnlog, write_script

NOTE = {"name": "append_note", "arguments": {"path": "NOTE", "text": "hello"}}


def _events(db: Path, cid: str) -> list[dict]:
    out = turnlog("show", cid, "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["events"]


def _demo(db: Path) -> str:
    out = turnlog("demo", "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["conversation_id"]


# 1. no tools unless named -------------------------------------------------------------------

def test_run_offers_no_tools_unless_named_so_append_note_writes_nothing(tmp_path, db):
    note = tmp_path / "note.txt"
    call = {"name": "append_note", "arguments": {"path": str(note), "text": "hello"}}
    script = write_script(tmp_path / "s.json", {"tool_calls": [call]}, {"text": "done"})
    out = turnlog("run", "note it", "--script", script, "--db", db, "--id", "plain", "--json")
    assert out.returncode == 0, out.stderr
    assert not note.exists()
    started, *rest = _events(db, "plain")
    assert started["payload"].get("tools", []) == []
    assert [e["payload"]["reason"] for e in rest if e["type"] == "tool_call_rejected"] == ["unknown"]
    out = turnlog("run", "note it", "--script", script, "--tools", "none", "--db", db, "--json")
    assert out.returncode == 0 and not note.exists()
    out = turnlog("run", "note it", "--script", script, "--tools", "demo", "--db", db, "--json")
    assert out.returncode == 0 and note.read_text() == "hello\n"


def test_fork_with_a_message_offers_no_tools_unless_named(tmp_path, db):
    cid = _demo(db)
    note = tmp_path / "fork-note.txt"
    call = {"name": "append_note", "arguments": {"path": str(note), "text": "x"}}
    script = write_script(tmp_path / "s.json", {"tool_calls": [call]}, {"text": "done"})
    out = turnlog("fork", cid, "--at", "2", "--message", "note", "--script", script, "--db", db,
                  "--json")
    assert out.returncode == 0, out.stderr
    assert not note.exists()


# 2. no tracebacks; the right exit codes ------------------------------------------------------

def test_export_to_an_unwritable_path_is_one_line_and_exit_2(tmp_path, db):
    cid = _demo(db)
    before = db.read_bytes()
    out = turnlog("export", cid, "--format", "markdown", "-o", tmp_path / "no" / "dir" / "x.md",
                  "--db", db)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "x.md" in out.stderr and "No such file" in out.stderr
    assert db.read_bytes() == before


def test_demo_exits_1_when_its_run_fails(db, monkeypatch):
    from click.testing import CliRunner

    import turnlog.engine.cli.run as run_module
    from turnlog.engine.cli import cli

    monkeypatch.setattr(run_module, "DEMO_SCRIPT", {"turns": [{"error": {"type": "server"}}]})
    result = CliRunner().invoke(cli, ["demo", "--db", str(db)])
    assert result.exit_code == 1 and "status: failed" in result.output


# 3. unfinished runs: Ctrl-C, run --id, resume ------------------------------------------------

def _wait_for(db: Path, cid: str, kind: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if db.exists():
            try:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
                    if con.execute("SELECT 1 FROM events WHERE stream_id = ? AND type = ?",
                                   (cid, kind)).fetchone():
                        return
            except sqlite3.OperationalError:
                pass  # the schema is being created
        time.sleep(0.1)
    raise AssertionError(f"no {kind} in {cid} after {timeout} s")


def test_ctrl_c_exits_130_names_the_conversation_records_it_and_resume_finishes(tmp_path, db):
    script = write_script(tmp_path / "s.json",
                          {"tool_calls": [{"name": "wait", "arguments": {"seconds": 60}}]},
                          {"text": "waited"})
    proc = subprocess.Popen([*TURNLOG, "run", "wait a minute", "--id", "slow", "--script",
                             str(script), "--tools", "demo", "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        _wait_for(db, "slow", "tool_started")
        time.sleep(0.3)  # inside the tool's sleep
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Aborted" not in err
    assert "conversation slow" in err
    assert f"turnlog resume slow --tools demo --script {script} --db {db}" in err
    events = _events(db, "slow")
    assert events[-1]["type"] == "run_interrupted"
    shown = turnlog("show", "slow", "--db", db)
    assert "INTERRUPTED" in shown.stdout and "turnlog resume" in shown.stdout
    # another message cannot start a new run before this one is finished: plain words, exit 2
    out = turnlog("run", "and then?", "--id", "slow", "--script", script, "--db", db)
    assert out.returncode == 2
    assert "unfinished" in out.stderr and "turnlog resume slow" in out.stderr
    assert "InvalidTransition" not in out.stderr and "awaiting_tools" not in out.stderr
    # resume finishes it: the script continues at the run's next turn; no tools named, so the
    # interrupted wait is recorded as an unknown outcome instead of running for a minute
    out = turnlog("resume", "slow", "--script", script, "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (data["status"], data["final_content"]) == ("completed", "waited")
    assert turnlog("verify", "--db", db).returncode == 0
    assert turnlog("replay", "slow", "--db", db).returncode == 0


def test_resume_of_a_finished_conversation_changes_nothing_says_so_and_exits_0(db):
    cid = _demo(db)
    before = db.read_bytes()
    out = turnlog("resume", cid, "--db", db)
    assert out.returncode == 0, out.stderr
    assert "nothing to resume" in out.stdout and "completed" in out.stdout
    assert db.read_bytes() == before


# 4. flags are applied or refused, never ignored ---------------------------------------------

def test_new_conversation_flags_on_an_existing_chat_are_refused_with_exit_2(tmp_path, db):
    script = write_script(tmp_path / "s.json", {"text": "one"})
    assert turnlog("run", "hi", "--id", "chat", "--script", script, "--db", db).returncode == 0
    before = db.read_bytes()
    for flags in (["--max-turns", "3"], ["--mode", "pipeline"], ["--system", "Be terse."]):
        out = turnlog("run", "again", "--id", "chat", "--script", script, "--db", db, *flags)
        assert out.returncode == 2, flags
        assert flags[0] in out.stderr and "chat" in out.stderr
        assert db.read_bytes() == before
    # the recorded values themselves are no change
    out = turnlog("run", "again", "--id", "chat", "--script", script, "--db", db,
                  "--max-turns", "8", "--mode", "chat")
    assert out.returncode == 0, out.stderr


# 5. copy-paste traps -------------------------------------------------------------------------

def test_fork_and_replay_hints_carry_the_db(tmp_path, db):
    cid = _demo(db)
    out = turnlog("fork", cid, "--at", "2", "--message", "London?", "--no-run", "--db", db)
    assert out.returncode == 0, out.stderr
    assert f"turnlog show {cid}.fork2-" in out.stdout and f"--db {db}" in out.stdout
    script = write_script(tmp_path / "s.json", {"text": "5"}, {"text": "x"})
    out = turnlog("replay", cid, "--provider", "scripted", "--script", script, "--db", db)
    assert f"turnlog diff {cid} " in out.stdout and f"--db {db}" in out.stdout


def test_verify_heads_accepts_plain_heads_output_as_well_as_json(tmp_path, db):
    _demo(db)
    plain, as_json = tmp_path / "heads.txt", tmp_path / "heads.json"
    plain.write_text(turnlog("heads", "--db", db).stdout)
    as_json.write_text(turnlog("heads", "--db", db, "--json").stdout)
    for saved in (plain, as_json):
        out = turnlog("verify", "--db", db, "--heads", saved)
        assert out.returncode == 0, out.stderr
    plain.write_text("not a heads line\n")
    out = turnlog("verify", "--db", db, "--heads", plain)
    assert out.returncode == 2 and "line 1" in out.stderr


def test_import_accepts_jsonl_as_the_name_of_turnlogs_own_format(tmp_path, db):
    cid = _demo(db)
    exported = tmp_path / "demo.jsonl"
    assert turnlog("export", cid, "--format", "jsonl", "-o", exported, "--db", db).returncode == 0
    for name in ("jsonl", "turnlog"):
        out = turnlog("import", exported, "--format", name, "--db", tmp_path / f"{name}.db",
                      "--json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["formats"] == {"turnlog": 22}


def test_fork_mid_tool_batch_lists_the_seqs_a_message_can_follow(db):
    cid = _demo(db)
    out = turnlog("fork", cid, "--at", "6", "--message", "Try another way", "--db", db)
    assert out.returncode == 2
    assert f"cannot fork {cid} at seq 6" in out.stderr
    assert "a message can follow seq 1-2, 8, 12, 16, 19, 21-22" in out.stderr
    out = turnlog("fork", cid, "--at", "8", "--message", "Try another way", "--no-run",
                  "--db", db)
    assert out.returncode == 0, out.stderr


# 6. a script counts from the start of the current run ---------------------------------------

def test_continuing_a_chat_with_a_script_starts_it_at_turn_0(tmp_path, db):
    script = write_script(tmp_path / "s.json",
                          {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
                          {"text": "Sunny."})
    out = turnlog("run", "Weather in Paris?", "--script", script, "--tools", "demo", "--id", "w",
                  "--db", db, "--json")
    assert json.loads(out.stdout)["status"] == "completed"
    out = turnlog("run", "And again?", "--id", "w", "--script", script, "--tools", "demo",
                  "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (data["status"], data["final_content"], data["turn_count"]) == ("completed", "Sunny.", 4)


# 8. plain words, one term, class names only with --debug ------------------------------------

def test_errors_are_plain_words_about_conversations_and_debug_names_the_class(db):
    _demo(db)
    for args in (("show", "nope"), ("verify", "nope"), ("export", "nope", "--format", "jsonl"),
                 ("replay", "nope"), ("resume", "nope")):
        out = turnlog(*args, "--db", db)
        assert out.returncode == 2, args
        assert "no conversation 'nope'" in out.stderr, (args, out.stderr)
        assert "stream" not in out.stderr and "Error:" in out.stderr
        assert "ConversationNotFound" not in out.stderr
    out = turnlog("--debug", "show", "nope", "--db", db)
    assert "ConversationNotFound: no conversation 'nope'" in out.stderr


# 10. an uninstalled checkout lists every command --------------------------------------------

def test_python_m_engine_cli_lists_replay_fork_and_diff_without_the_entry_point(tmp_path):
    import sys

    from .conftest import ROOT

    code = ("import importlib.metadata as m; m.entry_points = lambda **kw: []\n"
            "from turnlog.engine.cli import cli; cli(['--help'], prog_name='turnlog')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env=env(), timeout=120)
    listed = out.stdout.split("Commands:", 1)[1]
    for name in ("replay", "fork", "diff", "run", "ls"):
        assert f"\n  {name} " in listed, name
    out = subprocess.run([sys.executable, "-m", "turnlog.engine.cli", "fork", "--help"],
                         capture_output=True, text=True, cwd=ROOT, env=env(), timeout=120)
    assert out.returncode == 0 and "--at" in out.stdout


def test_import_prints_each_warning_on_stderr_and_lists_them_in_json(tmp_path, db):
    transcript = tmp_path / "vendor.json"
    transcript.write_text(json.dumps([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "vendor_score": 0.9, "trace": {"id": 1}}]))
    plain = turnlog("import", transcript, "--db", db, "--id", "p")
    assert plain.returncode == 0, plain.stderr
    warnings = [line for line in plain.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings == ["warning: entry 1: unknown keys kept as `extra` and exported to no "
                        "wire: trace, vendor_score"]  # an API-format message stays api (issue 25.18)
    as_json = turnlog("import", transcript, "--db", db, "--id", "j", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["warnings"] == [w.removeprefix("warning: ") for w in warnings]
    assert as_json.stderr.splitlines() == warnings
    clean = tmp_path / "clean.json"
    clean.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    quiet = turnlog("import", clean, "--db", db, "--id", "q", "--json")
    assert (json.loads(quiet.stdout)["warnings"], quiet.stderr) == ([], "")
