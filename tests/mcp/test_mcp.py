"""MCP tools: a real MCP server (``tests/mcp/server.py``, the SDK's FastMCP) over stdio and HTTP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from turnlog.engine.cli import cli
from turnlog.engine.model.conversation import load_state
from turnlog.engine.model.events import ToolSpec
from turnlog.engine.formats.exporter import export_data
from turnlog.engine.loop import Loop
from turnlog.engine.tools.mcp import MCPError, MCPToolset, effect_of, tools_from_mcp
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.journal import Journal
from turnlog.replay.deterministic import replay

from tests.cli.conftest import write_script

SERVER = Path(__file__).with_name("server.py")
COMMAND = f"{sys.executable} {SERVER}"
#: a server's start imports the SDK's server stack: slow on a loaded machine
TIMEOUT = 240


def call(tool_name, **arguments):
    return {"name": tool_name, "arguments": arguments}


def log_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture(scope="module")
def calls_log(tmp_path_factory):
    path = tmp_path_factory.mktemp("mcp") / "calls.log"
    old = os.environ.get("TURNLOG_TEST_MCP_LOG")
    os.environ["TURNLOG_TEST_MCP_LOG"] = str(path)
    yield path
    if old is None:
        os.environ.pop("TURNLOG_TEST_MCP_LOG", None)
    else:
        os.environ["TURNLOG_TEST_MCP_LOG"] = old


@pytest.fixture(scope="module")
def toolset(calls_log):
    with tools_from_mcp(COMMAND, timeout=TIMEOUT) as tools:
        yield tools


def test_the_servers_tools_come_with_their_schemas_and_effects_from_annotations(toolset):
    specs = {s.name: s for s in toolset.specs()}
    assert set(specs) == {"lookup", "set_flag", "delete_file", "fail", "die", "slow", "reading",
                          "confirm_delete", "long_job", "flaky", "traced", "refuse",
                          "gated_job"}
    assert {s.server for s in specs.values()} == {"testserver"}
    assert specs["lookup"].description == "Look up a city's weather."
    assert specs["lookup"].parameters["required"] == ["city"]
    assert specs["lookup"].parameters["properties"]["city"]["type"] == "string"
    assert {n: s.effect for n, s in specs.items()} == {
        "lookup": "read_only", "set_flag": "idempotent", "delete_file": "side_effecting",
        "fail": "side_effecting", "die": "side_effecting", "slow": "side_effecting",
        "reading": "read_only", "confirm_delete": "side_effecting",
        "long_job": "side_effecting", "flaky": "side_effecting", "traced": "side_effecting",
        "refuse": "side_effecting", "gated_job": "side_effecting"}


def test_effect_classes_follow_the_hints():
    from mcp.types import ToolAnnotations as A

    assert effect_of(A(read_only_hint=True, destructive_hint=True)) == "read_only"
    assert effect_of(A(idempotent_hint=True, destructive_hint=False)) == "idempotent"
    # the spec's default for destructiveHint is true: leaving it out is writing it out
    assert effect_of(A(idempotent_hint=True)) == "side_effecting"
    assert effect_of(A(idempotent_hint=True, destructive_hint=True)) == "side_effecting"
    assert effect_of(A(destructive_hint=False)) == "side_effecting"
    assert effect_of(A()) == effect_of(None) == "side_effecting"


@given(st.sampled_from([None, True, False]), st.sampled_from([None, True, False]),
       st.sampled_from([None, True, False]))
def test_only_a_claim_makes_a_tool_safer_than_side_effecting(read_only, idempotent, destructive):
    """Law: read_only iff readOnlyHint; idempotent iff idempotentHint and destructiveHint false,
    and a hint left out is the same as the spec's default written out."""
    from mcp.types import ToolAnnotations

    effect = effect_of(ToolAnnotations(read_only_hint=read_only, idempotent_hint=idempotent,
                                       destructive_hint=destructive))
    assert (effect == "read_only") == (read_only is True)
    assert (effect == "idempotent") == (read_only is not True and idempotent is True
                                        and destructive is False)
    spelled = ToolAnnotations(read_only_hint=bool(read_only), idempotent_hint=bool(idempotent),
                              destructive_hint=True if destructive is None else destructive)
    assert effect_of(spelled) == effect


@pytest.fixture(scope="module")
def recorded(toolset, tmp_path_factory, calls_log):
    """One conversation that called the server: a success, an isError result, bad arguments."""
    path = tmp_path_factory.mktemp("j") / "j.db"
    journal = Journal(str(path))
    script = [{"tool_calls": [call("lookup", city="Paris"), call("fail", reason="boom")]},
              {"tool_calls": [call("set_flag", name="x")]},
              {"text": "done"}]
    result = Loop(journal, ScriptedProvider(script), toolset).start("go", conversation_id="m")
    yield journal, result
    journal.close()


def test_each_call_is_recorded_naming_server_and_tool(recorded):
    journal, result = recorded
    assert result.status == "completed"
    state = load_state(journal, "m")
    assert {s.name for s in state.tools} >= {"lookup", "fail"}
    assert all(isinstance(s, ToolSpec) and s.server == "testserver" for s in state.tools)
    done = [json.loads(e.payload) for e in journal.read("m") if e.type == "tool_completed"]
    lookup, fail, bad = done
    assert lookup["success"] is True
    assert lookup["data"]["server"] == "testserver" and lookup["data"]["tool"] == "lookup"
    assert lookup["data"]["content"] == [{"type": "text", "text": "Paris: sunny, 21 C"}]
    assert "Paris: sunny" in lookup["content"]
    # over stdio too the call speaks 2026-07-28 and is recorded in full
    assert lookup["data"]["mcp"]["protocolVersion"] == "2026-07-28"
    assert lookup["data"]["mcp"]["serverInfo"]["name"] == "testserver"
    assert lookup["data"]["mcp"]["resultType"] == "complete"
    assert fail["success"] is False
    assert "MCP server 'testserver', tool 'fail' reported an error" in fail["error"]
    assert bad["success"] is False and "set_flag" in bad["error"] and "value" in bad["error"]
    started = [json.loads(e.payload) for e in journal.read("m") if e.type == "tool_started"]
    assert [s.get("idempotency_key") is not None for s in started] == [True, False, True]


def test_mcp_tool_spans_are_extensions(recorded):
    journal, _ = recorded
    spans = export_data(journal, "m", "otlp")["resourceSpans"][0]["scopeSpans"][0]["spans"]
    types = {a["value"]["stringValue"] for s in spans for a in s["attributes"]
             if a["key"] == "gen_ai.tool.type"}
    assert types == {"extension"}


def test_replay_serves_recorded_results_without_the_server(recorded, calls_log):
    journal, _ = recorded
    before = log_lines(calls_log)
    result = replay(journal, "m", collect=True)
    assert result.ok, result.divergence and result.divergence.render()
    assert log_lines(calls_log) == before


def test_resume_never_reruns_a_destructive_call_and_reruns_a_read_only_one(toolset, tmp_path,
                                                                          calls_log):
    class Crash:
        def execute(self, call, tool, context, validated):
            raise KeyboardInterrupt

    journal = Journal(str(tmp_path / "r.db"))
    script = [{"tool_calls": [call("delete_file", path="/a"), call("lookup", city="Oslo")]},
              {"text": "ok"}]
    with pytest.raises(KeyboardInterrupt):
        Loop(journal, ScriptedProvider(script), toolset, executor=Crash()).start(
            "go", conversation_id="r")
    before = log_lines(calls_log)
    # the first call was started when the process "died"; resume answers both
    result = Loop(journal, ScriptedProvider(script), toolset).resume("r")
    assert result.status == "completed"
    done = [json.loads(e.payload) for e in journal.read("r") if e.type == "tool_completed"]
    assert done[0]["name"] == "delete_file" and done[0]["source"] == "interrupted"
    assert done[1]["name"] == "lookup" and done[1]["success"] is True
    assert log_lines(calls_log)[len(before):] == ["lookup Oslo"]
    journal.close()


def test_a_server_killed_mid_call_is_a_failed_result_and_the_run_goes_on(tmp_path, calls_log):
    journal = Journal(str(tmp_path / "d.db"))
    script = [{"tool_calls": [call("die")]}, {"tool_calls": [call("lookup", city="Rome")]},
              {"text": "the server is gone"}]
    with tools_from_mcp(COMMAND, timeout=TIMEOUT) as tools:
        result = Loop(journal, ScriptedProvider(script), tools).start("go", conversation_id="d")
    assert result.status == "completed"
    died, after = [json.loads(e.payload) for e in journal.read("d") if e.type == "tool_completed"]
    assert died["success"] is False and "the server died" in died["error"]
    assert "MCP server 'testserver', tool 'die'" in died["error"]
    assert after["success"] is False and "not running" in after["error"]
    journal.close()


def test_a_server_that_cannot_start_is_a_clear_error():
    with pytest.raises(MCPError, match="cannot use MCP server 'no-such-command-turnlog'"):
        MCPToolset("no-such-command-turnlog", timeout=TIMEOUT)
    with pytest.raises(MCPError, match="command line or an http"):
        MCPToolset("   ")


def test_tools_over_streamable_http(tmp_path, calls_log):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        with tools_from_mcp(f"http://127.0.0.1:{port}/mcp", timeout=TIMEOUT) as tools:
            assert tools.get("lookup").effect == "read_only"
            journal = Journal(str(tmp_path / "h.db"))
            script = [{"tool_calls": [call("lookup", city="Lima")]}, {"text": "ok"}]
            result = Loop(journal, ScriptedProvider(script), tools).start("go")
            assert result.status == "completed"
            (done,) = [json.loads(e.payload) for e in journal.read(result.conversation_id)
                       if e.type == "tool_completed"]
            assert done["data"]["content"][0]["text"] == "Lima: sunny, 21 C"
            journal.close()
    finally:
        proc.kill()
        proc.wait(30)


# --- the command line ---------------------------------------------------------------------------

def invoke(*args, **env):
    return CliRunner().invoke(cli, [str(a) for a in args], env=env)


def test_run_records_and_replay_replays_without_the_server_then_live_with_it(tmp_path,
                                                                             calls_log):
    db = tmp_path / "cli.db"
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [{"tool_calls": [call("lookup", city="Kyiv")]},
                                            {"text": "Kyiv is sunny."}]}))
    env = {"TURNLOG_MCP_TIMEOUT": str(TIMEOUT)}
    result = invoke("run", "weather?", "--script", script, "--mcp", COMMAND, "--id", "c1",
                    "--db", db, "--json", **env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["status"] == "completed"
    assert log_lines(calls_log)[-1] == "lookup Kyiv"
    before = log_lines(calls_log)
    result = invoke("replay", "c1", "--db", db)
    assert result.exit_code == 0 and "ok" in result.output, result.output
    assert log_lines(calls_log) == before
    result = invoke("replay", "c1", "--mcp", COMMAND, "--db", db)
    assert result.exit_code == 2 and "--tools live" in result.output
    result = invoke("replay", "c1", "--provider", "scripted", "--script", script, "--tools",
                    "live", "--mcp", COMMAND, "--id", "c1-live", "--db", db, **env)
    assert result.exit_code == 0, result.output
    assert log_lines(calls_log)[len(before):] == ["lookup Kyiv"]


def test_run_with_a_server_that_cannot_start_exits_2_and_writes_nothing(tmp_path):
    db = tmp_path / "none.db"
    (tmp_path / "s.json").write_text('{"turns": [{"text": "hi"}]}')
    result = invoke("run", "hi", "--script", tmp_path / "s.json", "--mcp",
                    "no-such-command-turnlog", "--db", db)
    assert result.exit_code == 2 and "cannot use MCP server" in result.output
    assert not db.exists()


def _console(*args, **env):
    from tests.cli.conftest import turnlog

    return turnlog(*args, TURNLOG_MCP_TIMEOUT=str(TIMEOUT), **env)


def test_a_stdio_servers_traceback_goes_to_a_log_named_in_one_line(tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [{"tool_calls": [call("fail", reason="boom")]},
                                            {"text": "ok"}]}))
    out = _console("run", "go", "--script", script, "--mcp", COMMAND, "--db", tmp_path / "t.db")
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    (note,) = out.stderr.splitlines()
    assert note.startswith("MCP server 'testserver' wrote ") and "Error executing tool fail" in note
    log = Path(note.split(" in ", 1)[1].split(" (last: ", 1)[0])
    assert "Traceback (most recent call last)" in log.read_text() and "ValueError: boom" in \
        log.read_text()
    log.unlink()


def test_turnlog_mcp_log_chooses_the_file_and_a_quiet_server_leaves_nothing(tmp_path):
    chosen = tmp_path / "servers.log"
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [{"tool_calls": [call("fail", reason="once")]},
                                            {"text": "ok"}]}))
    _console("run", "go", "--script", script, "--mcp", COMMAND, "--db", tmp_path / "a.db",
             TURNLOG_MCP_LOG=str(chosen))
    assert "ValueError: once" in chosen.read_text()
    quiet = tmp_path / "q.json"
    quiet.write_text(json.dumps({"turns": [{"text": "no tools needed"}]}))
    before = set(Path(os.environ.get("TMPDIR", "/tmp")).glob("turnlog-mcp-*.log"))
    out = _console("run", "go", "--script", quiet, "--mcp", COMMAND, "--db", tmp_path / "b.db")
    assert out.returncode == 0 and out.stderr == ""
    assert set(Path(os.environ.get("TMPDIR", "/tmp")).glob("turnlog-mcp-*.log")) <= before


def test_a_server_that_dies_at_start_is_reported_with_its_last_stderr_line(tmp_path):
    dying = f"{sys.executable} -c \"import sys; sys.exit('bad config: no API key')\""
    with pytest.raises(MCPError, match="last: bad config: no API key"):
        MCPToolset(dying, timeout=TIMEOUT)


def test_a_credential_on_the_servers_command_line_never_reaches_the_journal(tmp_path):
    """A server that leaves its name empty is named by its command line, which may carry a
    credential (``--api-key KEY``, ``--token=KEY``, ``env NAME_TOKEN=KEY server``): every
    one is masked in what is recorded (the tools' ``server``, the results, the errors), and
    in what the server echoes (its description, its result), through the one redaction
    boundary (a short one where turnlog shows the command line)."""
    unnamed = Path(__file__).with_name("unnamed_server.py")
    secrets = ["sk-live-CMDLINE0123456789", "tok-EQUALS-9876543210", "env-TOKEN-5555-abcdef",
               "p4ss"]
    command = (f"env MCP_TOKEN={secrets[2]} {sys.executable} {unnamed} --api-key {secrets[0]} "
               f"--token={secrets[1]} --password {secrets[3]} --verbose")
    script = write_script(tmp_path / "s.json",
                          {"tool_calls": [{"id": "w1", "name": "whoami", "arguments": {}}]},
                          {"text": "done"})
    db = tmp_path / "t.db"
    out = _console("run", "who?", "--script", script, "--mcp", command, "--id", "c1",
                   "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    with Journal(db) as journal:
        (tool,) = load_state(journal, "c1").tools
        (result,) = [json.loads(e.payload) for e in journal.read("c1")
                     if e.type == "tool_completed"]
    assert tool.server.startswith("env 'MCP_TOKEN=[redacted key]' ") and tool.server.endswith(
        "--api-key '[redacted key]' '--token=[redacted key]' --password '[redacted key]' "
        "--verbose")
    assert "--api-key [redacted key]" in tool.description
    assert result["data"]["server"] == tool.server and result["success"]
    assert "token=[redacted key]" in result["content"]
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("t.db"))
    shown = _console("show", "c1", "--db", db).stdout + out.stdout + out.stderr
    for secret in secrets[:3]:
        assert secret.encode() not in stored and secret not in shown
    # a 4-character one is masked where turnlog names the server (above); in text the server
    # writes, the Redactor leaves values under 8 characters, which would mask ordinary words


def test_a_header_word_or_a_url_flag_value_on_the_command_line_never_reaches_the_journal(
        tmp_path):
    """Two common ways a server is handed its credential (``mcp-remote URL --header
    'Authorization: Bearer KEY'``, ``--db=postgresql://me:PASSWORD@host/db``) are masked in
    the server's name as recorded and in what the server echoes."""
    unnamed = Path(__file__).with_name("unnamed_server.py")
    secrets = ["HEADER-secret-0123456789", "URLPASS-secret-42"]
    command = (f"{sys.executable} {unnamed} --header 'Authorization: Bearer {secrets[0]}' "
               f"--db=postgresql://me:{secrets[1]}@db/x")
    script = write_script(tmp_path / "s.json",
                          {"tool_calls": [{"id": "w1", "name": "whoami", "arguments": {}}]},
                          {"text": "done"})
    db = tmp_path / "t.db"
    out = _console("run", "who?", "--script", script, "--mcp", command, "--id", "c1",
                   "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    with Journal(db) as journal:
        (tool,) = load_state(journal, "c1").tools
    assert "'Authorization: [redacted key]'" in tool.server
    assert "'--db=postgresql://me:[redacted key]@db/x'" in tool.server
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("t.db"))
    for secret in secrets:
        assert secret.encode() not in stored and secret not in out.stdout + out.stderr
