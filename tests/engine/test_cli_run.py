"""`turnlog demo`, `turnlog run`, `turnlog resume` as CLI.md documents them."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from turnlog.engine.cli import cli
from turnlog.journal import Journal


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": [
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        {"text": "Let me also add.", "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
        {"text": "Paris is sunny and 2 + 3 = 5."}]}))
    return path


def test_demo_prints_a_timeline_and_the_next_commands(db_path):
    out = invoke("demo", "--db", db_path)
    assert out.exit_code == 0, out.output
    assert "REFUSED (duplicate)" in out.output  # the shared timeline renderer of `show`
    assert "FAILED" in out.output and "Next, try:" in out.output
    assert f"turnlog verify --db {db_path}" in out.output
    assert Journal(str(db_path)).verify().ok


def test_demo_json_has_the_documented_fields(db_path):
    out = invoke("demo", "--db", db_path, "--json")
    data = json.loads(out.output)
    assert {"conversation_id", "status", "turn_count", "final_content"} <= set(data)
    assert data["status"] == "completed" and data["turn_count"] == 5


def test_run_json_reports_the_documented_fields(db_path, script):
    out = invoke("run", "Weather?", "--script", script, "--tools", "demo", "--db", db_path,
                 "--json", "--id", "r1")
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert {"conversation_id", "status", "turn_count", "final_content", "usage", "error"} <= set(data)
    assert (data["conversation_id"], data["status"], data["turn_count"]) == ("r1", "completed", 3)


def test_run_with_an_existing_id_adds_the_next_user_message(db_path, tmp_path):
    s = tmp_path / "s.json"
    s.write_text(json.dumps({"turns": [{"text": "one"}, {"text": "two"}]}))
    invoke("run", "first", "--script", s, "--db", db_path, "--id", "chat")
    out = invoke("run", "second", "--script", s, "--db", db_path, "--id", "chat", "--json")
    # a script's turns count from the start of the current run: the new message starts at turn 0
    assert json.loads(out.output)["final_content"] == "one"


def test_a_failed_run_exits_1(db_path, tmp_path):
    s = tmp_path / "s.json"
    s.write_text(json.dumps({"turns": [{"error": {"type": "server", "message": "down"}}]}))
    out = invoke("run", "hi", "--script", s, "--db", db_path, "--json", "--retries", "0")
    assert out.exit_code == 1
    assert json.loads(out.output)["status"] == "failed"


def test_run_max_turns_halts_and_exits_1(db_path, script):
    out = invoke("run", "hi", "--script", script, "--tools", "demo", "--db", db_path,
                 "--max-turns", "1", "--json")
    assert out.exit_code == 1 and json.loads(out.output)["status"] == "halted"


def test_scripted_run_without_a_script_is_bad_usage(db_path):
    out = invoke("run", "hi", "--db", db_path)
    assert out.exit_code == 2 and "--script" in out.output


def test_a_broken_script_is_bad_input_naming_the_file(db_path, tmp_path):
    s = tmp_path / "bad.json"
    s.write_text("{nope")
    out = invoke("run", "hi", "--script", s, "--db", db_path)
    assert out.exit_code == 2 and "bad.json" in out.output


def test_unknown_tools_module_is_bad_usage(db_path, script):
    out = invoke("run", "hi", "--script", script, "--tools", "no_such_mod:tools", "--db", db_path)
    assert out.exit_code == 2 and "no_such_mod" in out.output


def test_tools_from_module_attr(db_path, script):
    out = invoke("run", "hi", "--script", script, "--tools", "turnlog.engine.demo:demo_tools",
                 "--db", db_path, "--json")
    # a plain function is registered as a tool: the demo tools are then unknown to the model
    assert out.exit_code == 0
    out = invoke("run", "hi", "--script", script, "--tools", "turnlog.engine.demo:get_weather",
                 "--tools", "turnlog.engine.demo:add", "--db", db_path, "--json")
    assert json.loads(out.output)["status"] == "completed"


def test_resume_of_an_unknown_conversation_exits_2(db_path):
    invoke("demo", "--db", db_path)
    out = invoke("resume", "ghost", "--db", db_path)
    assert out.exit_code == 2 and "ghost" in out.output
