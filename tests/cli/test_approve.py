"""``turnlog run --approve`` pauses before a marked tool runs; ``turnlog approve`` (another
process) decides; ``turnlog resume`` runs an approved call once or answers a denied one."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from turnlog.engine.cli import cli
from turnlog.journal import Journal

from .conftest import turnlog, write_script


def invoke(*args: object) -> tuple[int, str]:
    done = CliRunner().invoke(cli, [*map(str, args)])
    return done.exit_code, done.output


def paused(tmp_path: Path, db: Path, text: str = "hello") -> tuple[Path, Path]:
    """A run whose ``append_note`` call waits for approval; (script, notes file)."""
    notes = tmp_path / "notes.txt"
    script = write_script(
        tmp_path / "s.json",
        {"tool_calls": [{"name": "append_note", "arguments": {"path": str(notes), "text": text}}]},
        {"text": "Done."})
    code, out = invoke("run", "Write a note.", "--script", script, "--tools", "demo",
                       "--approve", "append_note,add", "--id", "c1", "--db", db, "--json")
    assert code == 0, out
    result = json.loads(out)
    assert result["status"] == "awaiting_approval"
    assert result["awaiting_approval"] == ["call_1_1"]
    assert not notes.exists()
    return script, notes


def resume(script: Path, db: Path) -> dict:
    code, out = invoke("resume", "c1", "--script", script, "--tools", "demo", "--db", db,
                       "--json")
    assert code == 0, out
    return json.loads(out)


def events(db: Path) -> list[tuple[str, dict]]:
    with Journal(db) as journal:
        return [(e.type, json.loads(e.payload)) for e in journal.read("c1")]


def test_approved_from_another_process_the_call_runs_once_on_resume(tmp_path, db):
    script, notes = paused(tmp_path, db)
    decided = turnlog("approve", "c1", "--all", "--yes", "--as", "alice", "--reason", "fine",
                      "--db", db, "--json")
    assert decided.returncode == 0, decided.stderr
    answer = json.loads(decided.stdout)
    assert answer["awaiting_approval"] == []
    assert [(d["call_id"], d["decision"], d["approver"]) for d in answer["decisions"]] == [
        ("call_1_1", "approve", "alice")]
    assert resume(script, db)["status"] == "completed"
    assert resume(script, db)["status"] == "completed"  # a second resume changes nothing
    assert notes.read_text(encoding="utf-8") == "hello\n"
    kinds = [t for t, _ in events(db)]
    assert kinds.count("approval_requested") == kinds.count("approval_decided") == 1
    assert kinds.index("approval_decided") < kinds.index("tool_started")
    assert Journal(db).verify().ok
    assert invoke("replay", "c1", "--db", db)[0] == 0


def test_a_denied_call_never_runs_and_the_model_is_told_who_denied_it_and_why(tmp_path, db):
    script, notes = paused(tmp_path, db)
    code, out = invoke("approve", "c1", "--call", "call_1_1", "--no", "--as", "bob",
                       "--reason", "not today", "--db", db)
    assert code == 0 and "call_1_1: denied by bob" in out
    assert resume(script, db)["status"] == "completed"
    assert not notes.exists()
    answers = [p for t, p in events(db) if t == "tool_call_rejected"]
    assert len(answers) == 1 and "denied by bob: not today" in answers[0]["content"]


def test_approved_with_edited_arguments_the_edited_call_runs(tmp_path, db):
    script, notes = paused(tmp_path, db)
    edited = json.dumps({"path": str(notes), "text": "edited"})
    code, out = invoke("approve", "c1", "--call", "call_1_1", "--yes", "--as", "carol",
                       "--arguments", edited, "--db", db)
    assert code == 0 and "with edited arguments" in out, out
    resume(script, db)
    assert notes.read_text(encoding="utf-8") == "edited\n"
    started = [p for t, p in events(db) if t == "tool_started"]
    assert started[0]["arguments"]["text"] == "edited"
    code, out = invoke("replay", "c1", "--db", db)
    assert code == 0 and "replayed identically" in out, out


@pytest.mark.parametrize(("args", "says"), [
    (("--all", "--as", "a"), "--yes"),
    (("--yes", "--as", "a"), "--call"),
    (("--all", "--call", "call_1_1", "--yes", "--as", "a"), "--call"),
    (("--call", "nope", "--yes", "--as", "a"), "no tool call 'nope'"),
    (("--call", "call_1_1", "--yes", "--as", " "), "approver"),
    (("--call", "call_1_1", "--yes", "--as", "a", "--arguments", "[1]"), "JSON object"),
    (("--call", "call_1_1", "--no", "--as", "a", "--arguments", "{}"), "--yes"),
])
def test_bad_decisions_exit_2_saying_what_was_wrong_and_write_nothing(tmp_path, db, args, says):
    paused(tmp_path, db)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    code, out = invoke("approve", "c1", *args, "--db", db)
    assert code == 2, out
    assert says in out
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_deciding_twice_is_refused(tmp_path, db):
    paused(tmp_path, db)
    assert invoke("approve", "c1", "--all", "--yes", "--as", "a", "--db", db)[0] == 0
    code, out = invoke("approve", "c1", "--call", "call_1_1", "--no", "--as", "b", "--db", db)
    assert code == 2 and "already approved by a" in out
    code, out = invoke("approve", "c1", "--all", "--no", "--as", "b", "--db", db)
    assert code == 2 and "no tool call waiting for approval" in out


def test_a_second_denial_names_the_first_one(tmp_path, db):
    paused(tmp_path, db)
    assert invoke("approve", "c1", "--all", "--no", "--as", "a", "--db", db)[0] == 0
    code, out = invoke("approve", "c1", "--call", "call_1_1", "--yes", "--as", "b", "--db", db)
    assert code == 2 and "already denied by a" in out


def test_the_human_report_says_what_waits_and_how_to_decide(tmp_path, db):
    notes = tmp_path / "n.txt"
    script = write_script(tmp_path / "s.json", {"tool_calls": [
        {"name": "append_note", "arguments": {"path": str(notes), "text": "x"}}]})
    code, out = invoke("run", "Note.", "--script", script, "--tools", "demo", "--approve",
                       "append_note", "--id", "c1", "--db", db)
    assert code == 0, out
    assert "awaiting_approval" in out and "waiting for approval:\n  call_1_1 append_note(" in out
    assert f"turnlog approve c1 --all --yes --as NAME --db {db}" in out


@pytest.mark.parametrize("command", ["run", "resume"])
def test_a_misspelt_approve_name_exits_2_and_runs_nothing(tmp_path, db, command):
    notes = tmp_path / "notes.txt"
    script = write_script(tmp_path / "s.json", {"tool_calls": [
        {"name": "append_note", "arguments": {"path": str(notes), "text": "x"}}]},
        {"text": "Noted."})
    if command == "resume":  # an unfinished conversation: its run stopped before the tool ran
        paused(tmp_path, db)
        before = events(db)
        done = turnlog("resume", "c1", "--script", script, "--tools", "demo",
                       "--approve", "append_notes", "--db", db)
    else:
        done = turnlog("run", "Note it", "--script", script, "--tools", "demo",
                       "--approve", "append_notes", "--db", db)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == (
        "Error: approve names 'append_notes', which no offered tool has (did you mean "
        "'append_note'?); offered tools: add, append_note, get_current_time, get_weather, wait")
    assert not notes.exists()
    if command == "resume":
        assert events(db) == before
    else:
        assert not db.exists()  # refused before the journal was created


@pytest.mark.parametrize("arguments", [{"a": 2, "b": 3}, {}], ids=["with-arguments", "none"])
def test_deciding_a_call_of_an_erased_conversation_exits_2_naming_the_erasure(tmp_path, db,
                                                                                arguments):
    """The content is gone and resume refuses the conversation, so a decision would be a
    record nobody can act on: refused, typed, and the journal stays as it was (a call whose
    arguments were ``{}`` still matched its approval hash, and the decision was recorded)."""
    tool = "add" if arguments else "get_current_time"
    script = write_script(tmp_path / "s.json", {"tool_calls": [
        {"id": "k1", "name": tool, "arguments": arguments}]}, {"text": "Done."})
    code, out = invoke("run", "go", "--script", script, "--tools", "demo", "--approve", tool,
                       "--id", "c1", "--db", db)
    assert code == 0 and "waiting for approval" in out, out
    assert turnlog("erase", "c1", "--reason", "request 9", "--db", db).returncode == 0
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    for decision in ("--yes", "--no"):
        done = turnlog("--debug", "approve", "c1", "--call", "k1", decision, "--as", "bob",
                       "--db", db)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.strip() == (
            "Error: ConversationErasedError: cannot decide call 'k1' of conversation 'c1': "
            "the content of its event at seq 1 was erased (turnlog erase), so what the model "
            "was sent is gone")
        assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert [e[0] for e in events(db)][-1] == "erasure_recorded"
