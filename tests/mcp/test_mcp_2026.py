"""MCP 2026-07-28 recorded faithfully: a real server (``tests/mcp/server.py``, the SDK's server
side) over streamable HTTP on 127.0.0.1, called through the SDK's client by ``engine.tools.mcp``.

Each call's record (``data["mcp"]``), its ``input_required`` rounds and elicitation answers,
a task polled to its end, cancelled, and picked up by its id after a SIGKILL, a request
re-issued after its response stream was cut, ``traceparent`` in ``_meta``, and replay of all
of it without the server.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from turnlog.engine.model.canonical import digest
from turnlog.engine.cli import cli
from turnlog.engine.model.conversation import load_state
from turnlog.engine.loop import Loop
from turnlog.engine.tools.mcp import MCPError, MCPTool, call_record, elicitor, tools_from_mcp
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.journal import Journal
from turnlog.replay.deterministic import replay

SERVER = Path(__file__).with_name("server.py")
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 240


def call(tool_name, **arguments):
    return {"name": tool_name, "arguments": arguments}


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


class Server:
    """``tests/mcp/server.py --http PORT`` in its own process, logging each call to a file."""

    def __init__(self, tmp: Path, **env: str) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log = tmp / f"calls-{self.port}.log"
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVER), "--http", str(self.port)],
            env={**os.environ, "TURNLOG_TEST_MCP_LOG": str(self.log), **env},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)
        raise AssertionError("the test server did not start")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(30)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("mcp2026"))
    yield s
    s.stop()


def payloads(journal, cid, kind):
    return [json.loads(e.payload) for e in journal.read(cid) if e.type == kind]


def run(journal, tools, script, cid, **loop_options):
    return Loop(journal, ScriptedProvider(script), tools, **loop_options).start(
        "go", conversation_id=cid)


def listed_by_sdk(url):
    """The server's tool catalogue as the SDK's own client lists it (wire form)."""
    from mcp import Client

    async def main():
        async with Client(url) as client:
            page = await client.list_tools()
            return [t.model_dump(mode="json", by_alias=True, exclude_none=True)
                    for t in page.tools]

    return asyncio.run(main())


# --- the record of a call --------------------------------------------------------------------

def test_a_call_records_server_protocol_result_type_schema_and_catalogue(server, tmp_path):
    journal = Journal(str(tmp_path / "j.db"))
    with tools_from_mcp(server.url, timeout=TIMEOUT) as tools:
        result = run(journal, tools, [{"tool_calls": [call("lookup", city="Oslo")]},
                                      {"text": "ok"}], "rec")
    assert result.status == "completed"
    (done,) = payloads(journal, "rec", "tool_completed")
    record = done["data"]["mcp"]
    catalogue = listed_by_sdk(server.url)
    schema = next(t for t in catalogue if t["name"] == "lookup")["outputSchema"]
    assert record["serverInfo"]["name"] == "testserver"
    assert record["protocolVersion"] == "2026-07-28"
    assert record["resultType"] == "complete" and record["resultTypes"] == ["complete"]
    assert record["isError"] is False and record["validated"] is True
    assert record["catalogueDigest"] == digest(catalogue)
    assert record["outputSchemaDigest"] == digest(schema)
    assert done["data"]["content"] == [{"type": "text", "text": "Oslo: sunny, 21 C"}]
    # the model reads the result, never the record
    assert "catalogueDigest" not in done["content"] and "Oslo: sunny" in done["content"]
    journal.close()


def test_structured_output_is_checked_against_the_output_schema(server, tmp_path):
    journal = Journal(str(tmp_path / "s.db"))
    with tools_from_mcp(server.url, timeout=TIMEOUT) as tools:
        run(journal, tools, [{"tool_calls": [call("reading", city="Oslo"),
                                             call("reading", city="Hell")]},
                             {"text": "ok"}], "schema")
    # read-only calls may run together: their results come in any order
    good, bad = sorted(payloads(journal, "schema", "tool_completed"),
                       key=lambda d: d["data"]["structuredContent"]["city"] != "Oslo")
    assert good["success"] is True, good
    assert good["data"]["structuredContent"] == {
        "city": "Oslo", "celsius": 21.5}
    assert good["data"]["mcp"]["validated"] is True
    # the server's schema caps celsius at 60: the result is kept as sent, and fails
    assert bad["data"]["structuredContent"] == {"city": "Hell", "celsius": 99.0}
    assert bad["data"]["mcp"]["validated"] is False
    assert "greater than the maximum of 60" in bad["data"]["mcp"]["validationError"]
    assert bad["success"] is False and "does not match its output schema" in bad["error"]
    assert good["data"]["mcp"]["outputSchemaDigest"] == bad["data"]["mcp"]["outputSchemaDigest"]
    journal.close()


def test_is_error_is_recorded_apart_from_a_protocol_error(server):
    with tools_from_mcp(server.url, timeout=TIMEOUT) as tools:
        tool_error = tools.call("fail", {"reason": "boom"})
        unknown = tools.call("no_such_tool", {})
        protocol_error = tools.call("refuse", {})
    assert tool_error["success"] is False and tool_error["data"]["mcp"]["isError"] is True
    assert "tool 'fail' reported an error: Error executing tool fail" in tool_error["error"]
    # a protocol error has no result: nothing says isError, the error says what happened
    assert protocol_error["success"] is False
    assert "isError" not in protocol_error["data"]["mcp"]
    assert protocol_error["data"]["mcp"]["resultTypes"] == []
    assert protocol_error["data"]["mcp"]["protocolError"] == {
        "code": -32602, "message": "refused at the protocol level"}
    assert "refused at the protocol level" in protocol_error["error"]
    # the SDK's server answers an unknown tool with an isError result, recorded as such
    assert unknown["data"]["mcp"]["isError"] is True and "protocolError" not in unknown["data"]["mcp"]


def test_a_record_written_before_calls_were_recorded_in_full_still_reads(server):
    old = {"server": "testserver", "tool": "lookup",
           "content": [{"type": "text", "text": "Paris: sunny"}]}
    assert call_record(old) is None and call_record("text") is None
    with tools_from_mcp(server.url, timeout=TIMEOUT) as tools:
        tool = tools.get("lookup")
        assert isinstance(tool, MCPTool)
        text = tool.render(success=True, data=old, error=None, arguments={})
        recorded = tool.render(success=True, data={**old, "mcp": {"isError": False}},
                               error=None, arguments={})
    assert "Paris: sunny" in text and text == recorded


# --- input_required rounds -------------------------------------------------------------------

def test_an_elicitation_declined_by_policy_is_a_linked_round_and_replays(server, tmp_path):
    journal = Journal(str(tmp_path / "e.db"))
    with tools_from_mcp(server.url, timeout=TIMEOUT) as tools:
        run(journal, tools, [{"tool_calls": [call("confirm_delete", path="/tmp/a")]},
                             {"text": "ok"}], "elicit")
    (started,) = payloads(journal, "elicit", "tool_started")
    news = payloads(journal, "elicit", "tool_progressed")
    assert [n["data"]["kind"] for n in news] == ["input_required", "elicitation"]
    assert {n["call_id"] for n in news} == {started["call_id"]}
    asked, answered = news[0]["data"], news[1]["data"]
    assert asked["inputRequests"]["confirm"]["method"] == "elicitation/create"
    assert asked["inputRequests"]["confirm"]["params"]["message"] == "Really delete /tmp/a?"
    assert "requestStateDigest" in asked  # the opaque state is the server's: only its digest
    assert answered["action"] == "decline" and answered["approver"] == "policy:decline"
    assert answered["decided_at"].endswith("Z")
    (done,) = payloads(journal, "elicit", "tool_completed")
    record = done["data"]["mcp"]
    assert record["resultTypes"] == ["input_required", "complete"]
    assert record["rounds"][0]["answers"]["confirm"]["action"] == "decline"
    assert done["data"]["content"][0]["text"] == "kept /tmp/a"
    shown = CliRunner().invoke(cli, ["show", "elicit", "--db", str(tmp_path / "e.db")]).output
    assert "tool confirm_delete input required (round 1): confirm (elicitation/create)" in shown
    assert "tool confirm_delete elicitation 'confirm' answered decline by policy:decline" in shown
    before = lines(server.log)
    result = replay(journal, "elicit", collect=True)
    assert result.ok, result.divergence and result.divergence.render()
    assert lines(server.log) == before  # replay served every round without the server
    journal.close()


def test_the_async_loop_records_the_rounds_as_they_happen_too(server, tmp_path):
    from turnlog.engine.loop import AsyncLoop

    journal = Journal(str(tmp_path / "a.db"))
    script = [{"tool_calls": [call("confirm_delete", path="/tmp/z")]}, {"text": "ok"}]
    with tools_from_mcp(server.url, timeout=TIMEOUT) as tools:
        result = asyncio.run(AsyncLoop(journal, ScriptedProvider(script), tools).start(
            "go", conversation_id="async"))
    assert result.status == "completed"
    kinds = [e.type for e in journal.read("async")]
    i = kinds.index("tool_started")
    assert kinds[i:i + 4] == ["tool_started", "tool_progressed", "tool_progressed",
                              "tool_completed"]
    assert replay(journal, "async", collect=True).ok
    journal.close()


def test_an_elicitation_a_person_accepts_sends_their_answer(server, tmp_path):
    asked = []
    answers = iter(["y", "yes"])

    def person(prompt):
        asked.append(prompt)
        return next(answers)

    journal = Journal(str(tmp_path / "p.db"))
    with tools_from_mcp(server.url, timeout=TIMEOUT,
                        elicit=elicitor("ask", ask=person)) as tools:
        run(journal, tools, [{"tool_calls": [call("confirm_delete", path="/tmp/b")]},
                             {"text": "ok"}], "person")
    assert "Really delete /tmp/b?" in asked[0] and asked[1] == "sure"
    (done,) = payloads(journal, "person", "tool_completed")
    answer = done["data"]["mcp"]["rounds"][0]["answers"]["confirm"]
    assert answer["action"] == "accept" and answer["content"] == {"sure": True}
    assert answer["approver"].startswith("person:")
    assert done["data"]["content"][0]["text"] == "deleted /tmp/b"
    assert lines(server.log)[-1] == "confirm_delete /tmp/b deleted"
    journal.close()


def test_an_unknown_elicitation_policy_is_refused():
    with pytest.raises(MCPError, match="'maybe' is not one of decline, cancel, ask"):
        elicitor("maybe")
    with pytest.raises(MCPError, match="needs a person"):
        elicitor("ask")


# --- tasks ------------------------------------------------------------------------------------

def test_a_task_is_polled_to_its_end_with_each_state_recorded(server, tmp_path):
    journal = Journal(str(tmp_path / "t.db"))
    with tools_from_mcp(server.url, timeout=TIMEOUT) as tools:
        result = run(journal, tools, [{"tool_calls": [call("long_job", steps=3)]},
                                      {"text": "ok"}], "task")
    assert result.status == "completed"
    (done,) = payloads(journal, "task", "tool_completed")
    record = done["data"]["mcp"]
    assert record["resultType"] == "task"
    states = record["task"]["states"]
    assert states[0]["status"] == "working" and states[-1]["status"] == "completed"
    # every state the polls saw, in the server's order (a poll may miss a short-lived one)
    order = ["started", "step 1 of 3", "step 2 of 3", "step 3 of 3", "done"]
    seen = [s["statusMessage"] for s in states]
    assert seen[0] == "started" and seen[-1] == "done" and len(seen) >= 3
    assert seen == sorted(seen, key=order.index)
    news = [n["data"] for n in payloads(journal, "task", "tool_progressed")]
    assert [(n["status"], n["statusMessage"]) for n in news] == [
        (s["status"], s["statusMessage"]) for s in states]
    assert {n["taskId"] for n in news} == {record["task"]["taskId"]}
    assert done["success"] is True and done["data"]["content"][0]["text"] == "job of 3 steps done"
    shown = CliRunner().invoke(cli, ["show", "task", "--db", str(tmp_path / "t.db")]).output
    assert f"tool long_job task {record['task']['taskId']} working: started" in shown
    assert f"tool long_job task {record['task']['taskId']} completed: done" in shown
    before = lines(server.log)
    assert replay(journal, "task", collect=True).ok
    assert lines(server.log) == before
    journal.close()


def test_a_task_that_asks_for_input_is_answered_with_tasks_update(server, tmp_path):
    journal = Journal(str(tmp_path / "g.db"))
    with tools_from_mcp(server.url, timeout=TIMEOUT) as tools:
        run(journal, tools, [{"tool_calls": [call("gated_job", what="backup")]},
                             {"text": "ok"}], "gated")
    (done,) = payloads(journal, "gated", "tool_completed")
    record = done["data"]["mcp"]
    assert [s["status"] for s in record["task"]["states"]] == [
        "working", "input_required", "completed"]
    (asked,) = record["rounds"]
    assert asked["inputRequests"]["approve"]["params"]["message"] == "Run backup?"
    assert asked["answers"]["approve"]["action"] == "decline"
    assert done["data"]["content"][0]["text"] == "not run (decline)"
    kinds = [n["data"]["kind"] for n in payloads(journal, "gated", "tool_progressed")]
    assert kinds == ["task", "task", "input_required", "elicitation", "task"]
    assert lines(server.log)[-1] == "gated_job not run (decline)"
    assert replay(journal, "gated", collect=True).ok
    journal.close()


def test_a_task_without_news_for_the_timeout_is_cancelled(tmp_path):
    slow = Server(tmp_path, TURNLOG_TEST_TASK_STEP="30")
    try:
        journal = Journal(str(tmp_path / "c.db"))
        with tools_from_mcp(slow.url, timeout=TIMEOUT) as tools:
            tools.timeout = 1.0  # calls only: the job's steps take 30 s each
            run(journal, tools, [{"tool_calls": [call("long_job", steps=2)]},
                                 {"text": "ok"}], "cancel")
        (done,) = payloads(journal, "cancel", "tool_completed")
        states = done["data"]["mcp"]["task"]["states"]
        assert [s["status"] for s in states] == ["working", "cancelled"]
        assert done["success"] is False and "was cancelled: no news for 1 s" in done["error"]
        assert "long_job 2 done" not in lines(slow.log)
        journal.close()
    finally:
        slow.stop()


def test_resume_after_a_sigkill_picks_the_task_up_by_its_id(server, tmp_path):
    db = tmp_path / "kill.db"
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"tool_calls": [call("long_job", steps=25)]},
                                            {"text": "done"}]}))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TURNLOG_MCP_TIMEOUT": str(TIMEOUT)}
    args = ["--script", str(script), "--mcp", server.url, "--db", str(db)]
    Journal(str(db)).close()
    proc = subprocess.Popen([sys.executable, "-m", "turnlog.engine.cli", "run", "go",
                             "--id", "kill", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:  # until the task's first states are durable
            with sqlite3.connect(db) as conn:
                seen = conn.execute("SELECT count(*) FROM events WHERE type = "
                                    "'tool_progressed'").fetchone()[0]
            if seen >= 2:
                break
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    journal = Journal(str(db))
    assert not payloads(journal, "kill", "tool_completed")  # killed mid-call
    task_id = payloads(journal, "kill", "tool_progressed")[0]["data"]["taskId"]
    journal.close()
    resumed = subprocess.run([sys.executable, "-m", "turnlog.engine.cli", "resume", "kill",
                              *args, "--json"], env=env, capture_output=True, text=True,
                             timeout=TIMEOUT)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "completed"
    journal = Journal(str(db))
    (done,) = payloads(journal, "kill", "tool_completed")
    assert done["success"] is True and done.get("source", "live") == "live"
    assert done["data"]["mcp"]["resumedTask"] == task_id
    assert done["data"]["mcp"]["task"]["states"][-1]["status"] == "completed"
    assert len(payloads(journal, "kill", "tool_started")) == 1
    # the server was called once: the resume followed the task, it never called again
    assert lines(server.log).count("long_job 25 task") == 1
    assert lines(server.log).count("long_job 25 done") == 1
    news = payloads(journal, "kill", "tool_progressed")
    assert {n["data"]["taskId"] for n in news} == {task_id}
    before = lines(server.log)
    result = replay(journal, "kill", collect=True)
    assert result.ok, result.divergence and result.divergence.render()
    assert lines(server.log) == before
    journal.close()


def test_a_call_picked_up_by_its_task_id_is_never_sent_again(server):
    from turnlog.engine.tools.registry import ToolContext

    with tools_from_mcp(server.url, timeout=TIMEOUT) as tools:
        first = tools.call("long_job", {"steps": 1})
        task_id = first["mcp"]["task"]["taskId"]
        tool = tools.get("long_job")
        ended = {"kind": "task", "taskId": task_id, "status": "completed"}
        assert tool.picks_up(({"kind": "task", "taskId": task_id, "status": "working"},))
        assert tool.picks_up((ended,))  # a completed task gives its result again
        assert not tool.picks_up(({**ended, "status": "cancelled"},))
        assert not tool.picks_up(({"kind": "input_required", "round": 1},))
        before = lines(server.log)
        again = tools.call("long_job", {"steps": 1}, ToolContext(
            conversation_id="x", turn=1, resumed=(ended,)))
    assert lines(server.log) == before  # no tools/call: only tasks/get
    assert again["mcp"]["resumedTask"] == task_id
    assert again["content"] == first["content"]


# --- a broken stream ------------------------------------------------------------------------

def test_a_request_reissued_after_a_cut_stream_is_one_call(server, tmp_path):
    journal = Journal(str(tmp_path / "f.db"))
    with tools_from_mcp(server.url, timeout=TIMEOUT) as tools:
        result = run(journal, tools, [{"tool_calls": [call("flaky", word="hi")]},
                                      {"text": "ok"}], "flaky")
    assert result.status == "completed"
    assert not payloads(journal, "flaky", "tool_call_rejected")  # never refused as a duplicate
    (started,) = payloads(journal, "flaky", "tool_started")
    (done,) = payloads(journal, "flaky", "tool_completed")
    assert done["success"] is True and done["data"]["content"][0]["text"] == "echo hi"
    assert done["data"]["mcp"]["reissued"] == 1
    (news,) = payloads(journal, "flaky", "tool_progressed")
    assert news["data"]["kind"] == "reissued" and "stream" in news["data"]["error"]
    assert load_state(journal, "flaky").call_count == 1  # counted once
    # the server ran it for the lost answer and again for the re-issued request
    assert lines(server.log).count("flaky hi") == 2
    assert replay(journal, "flaky", collect=True).ok
    journal.close()


# --- traceparent ------------------------------------------------------------------------------

def test_traceparent_travels_in_meta_when_an_otel_observer_watches(server, tmp_path):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from turnlog.engine.loop.otel import OTelObserver

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    journal = Journal(str(tmp_path / "o.db"))
    script = [{"tool_calls": [call("traced")]}, {"text": "ok"}]
    with tools_from_mcp(server.url, timeout=TIMEOUT) as tools:
        run(journal, tools, script, "traced",
            observers=[OTelObserver(provider, journal=journal)])
        run(journal, tools, script, "untraced")
    (done,) = payloads(journal, "traced", "tool_completed")
    sent = done["data"]["content"][0]["text"]
    root = next(s for s in exporter.get_finished_spans() if s.name == "invoke_agent")
    assert sent == (f"00-{root.context.trace_id:032x}-{root.context.span_id:016x}-"
                    f"{int(root.context.trace_flags):02x}")
    (plain,) = payloads(journal, "untraced", "tool_completed")
    assert plain["data"]["content"][0]["text"] == "none"
    journal.close()


# --- the command line -------------------------------------------------------------------------

def test_run_asks_a_person_when_told_to_and_replay_needs_no_server(server, tmp_path):
    db = tmp_path / "cli.db"
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [{"tool_calls": [call("confirm_delete", path="/c")]},
                                            {"text": "deleted"}]}))
    runner = CliRunner()
    result = runner.invoke(cli, ["run", "go", "--script", str(script), "--mcp", server.url,
                                 "--id", "cli", "--db", str(db), "--json"], input="y\ny\n",
                           env={"TURNLOG_MCP_ELICIT": "ask", "TURNLOG_MCP_TIMEOUT": "240"})
    assert result.exit_code == 0, result.output
    journal = Journal(str(db))
    (done,) = payloads(journal, "cli", "tool_completed")
    assert done["data"]["content"][0]["text"] == "deleted /c"
    journal.close()
    before = lines(server.log)
    result = runner.invoke(cli, ["replay", "cli", "--db", str(db)])
    assert result.exit_code == 0 and "ok" in result.output, result.output
    assert lines(server.log) == before
    result = runner.invoke(cli, ["run", "go", "--script", str(script), "--mcp", server.url,
                                 "--id", "cli2", "--db", str(db)],
                           env={"TURNLOG_MCP_ELICIT": "maybe"})
    assert result.exit_code == 2 and "'maybe' is not one of" in result.output


def test_output_schemas_are_read_as_json_schema_2020_12_unless_they_name_a_draft():
    from turnlog.engine.tools.mcp import _invalid

    pair = {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}
    assert _invalid(pair, ["a", 1]) is None
    assert "is not of type 'integer'" in _invalid(pair, ["a", "b"])  # 2020-12's prefixItems
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array",
              "items": [{"type": "string"}, {"type": "integer"}]}
    assert "is not of type 'integer'" in _invalid(draft7, ["a", "b"])  # draft-07's items
    assert _invalid(17, {"any": "value"}).startswith("its output schema is not a valid JSON")
    assert _invalid({"type": "integer"}, 3) is None and _invalid(True, [None]) is None
    assert "(at /x)" in _invalid({"properties": {"x": {"type": "string"}}}, {"x": 1})
