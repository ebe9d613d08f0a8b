"""Crash-safe resume: the journal says how far a run got, and resume never repeats a recorded tool."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from turnlog.engine.cli import cli
from turnlog.engine.model.conversation import Conversation, load_state
from turnlog.engine.demo import demo_tools
from turnlog.engine.model.events import ConversationStarted, ModelRequested, ModelResponded, ToolStarted, UserMessage
from turnlog.engine.loop import Loop
from turnlog.engine.model.messages import ToolCall
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.engine.loop.resume import INTERRUPTED, idempotency_key
from turnlog.journal import Journal

#: the in-process resume rules run on Loop and on AsyncLoop (tests/engine/conftest.py)
both_loops = pytest.mark.usefixtures("both_loops")

ROOT = Path(__file__).resolve().parents[2]


def _crashed_mid_tool(journal, name, arguments):
    """A conversation whose process died after tool_started, before tool_completed."""
    conv = Conversation.start(journal, ConversationStarted(
        conversation_id="crash", provider="scripted", model="scripted",
        tools=demo_tools().specs()), rest=[UserMessage.of("go")])
    call = ToolCall(id="call_1_1", name=name, arguments=arguments)
    conv.append(ModelRequested(turn=1, digest="x", provider="scripted", model="scripted"),
                ModelResponded(turn=1, parts=(call,), stop_reason="tool_use"),
                ToolStarted(call_id=call.id, name=name, arguments=arguments))
    return conv


@both_loops
def test_an_interrupted_side_effecting_tool_is_not_rerun_but_recorded_as_unknown(journal, tmp_path):
    notes = tmp_path / "notes.txt"
    _crashed_mid_tool(journal, "append_note", {"path": str(notes), "text": "once"})
    result = Loop(journal, ScriptedProvider([{}, {"text": "ok"}]), demo_tools()).resume("crash")
    assert result.status == "completed"
    assert not notes.exists()
    done = [json.loads(e.payload) for e in journal.read("crash") if e.type == "tool_completed"]
    assert done[0]["success"] is False and done[0]["error"] == INTERRUPTED
    assert done[0]["source"] == "interrupted" and INTERRUPTED in done[0]["content"]


@both_loops
def test_an_interrupted_read_only_tool_is_rerun_with_its_idempotency_key(journal):
    _crashed_mid_tool(journal, "get_weather", {"city": "Paris"})
    keys = []

    class Spy:
        def execute(self, call, tool, context, validated):
            from turnlog.engine.tools.executor import LocalExecutor

            keys.append(context.idempotency_key)
            return LocalExecutor().execute(call, tool, context, validated)

    Loop(journal, ScriptedProvider([{}, {"text": "ok"}]), demo_tools(), executor=Spy()).resume("crash")
    state = load_state(journal, "crash", 5)  # as it stood when the tool started
    assert keys == [idempotency_key(state, state.last_tool_calls[0])]
    done = [json.loads(e.payload) for e in journal.read("crash") if e.type == "tool_completed"]
    assert done[0]["success"] is True


def _state(**kw):
    from turnlog.engine.model.state import ConversationState

    call = ToolCall(id=kw.pop("call_id", "call_1"), name="add", arguments=kw.pop("arguments",
                                                                                {"a": 1, "b": 2}))
    base = {"request_digest": "d" * 64, "response_id": "r1", "turn_count": 3}
    return ConversationState(last_tool_calls=(call,), **{**base, **kw}), call


def test_idempotency_key_ignores_the_conversation_id_and_key_order():
    s, call = _state()
    a = idempotency_key(s, call)
    assert a == idempotency_key(*_state(conversation_id="another"))
    assert a == idempotency_key(*_state(arguments={"b": 2.0, "a": 1}))
    assert a != idempotency_key(*_state(turn_count=4))
    assert a != idempotency_key(*_state(request_digest="e" * 64))
    assert a != idempotency_key(*_state(response_id="r2"))
    assert a != idempotency_key(*_state(arguments={"a": 1, "b": 3}))


def test_two_equal_calls_in_one_response_get_different_keys():
    from turnlog.engine.model.state import ConversationState

    calls = (ToolCall(id="x", name="add", arguments={"a": 1}),
             ToolCall(id="x_2", name="add", arguments={"a": 1}))
    s = ConversationState(request_digest="d", response_id="r", turn_count=1, last_tool_calls=calls)
    assert idempotency_key(s, calls[0]) != idempotency_key(s, calls[1])


@both_loops
def test_a_request_without_a_response_is_sent_again_on_resume(journal):
    conv = Conversation.start(journal, ConversationStarted(
        conversation_id="r", provider="scripted", model="scripted"), rest=[UserMessage.of("hi")])
    loop = Loop(journal, ScriptedProvider([{"text": "hello"}]))
    request = loop.build_request(conv.builder)
    conv.append(ModelRequested(turn=1, digest=request.digest(), provider="scripted", model="scripted"))
    result = loop.resume("r")
    assert result.status == "completed" and result.final_content == "hello"
    assert [e.type for e in journal.read("r")].count("model_requested") == 1


@both_loops
def test_resume_of_a_finished_conversation_changes_nothing(journal):
    loop = Loop(journal, ScriptedProvider([{"text": "done"}]))
    loop.start("hi", conversation_id="f")
    before = journal.last_seq("f")
    assert loop.resume("f").status == "completed"
    assert journal.last_seq("f") == before


# --- the crash test: SIGKILL a real `turnlog run` process at random moments ---------------------

TURNS = 6


def _script(tmp_path: Path, notes: Path) -> Path:
    turns = []
    for i in range(TURNS):
        turns.append({"tool_calls": [{"name": "wait", "arguments": {"seconds": 0.02}},
                                     {"name": "append_note",
                                      "arguments": {"path": str(notes), "text": f"note {i}"}}]})
    turns.append({"text": "all noted"})
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns}))
    return path


def _wait_for_stream(db: Path, cid: str, proc: subprocess.Popen) -> None:
    j = Journal(str(db))
    try:
        deadline = time.monotonic() + 20
        while j.last_seq(cid) == 0 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
    finally:
        j.close()


def _cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "turnlog.engine.cli", *args], env=env,
                          capture_output=True, text=True, timeout=60)


def test_sigkill_at_random_moments_then_resume_never_repeats_a_recorded_tool(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rng = random.Random(20261122)
    db = tmp_path / "crash.db"
    trials = 20
    Journal(str(db)).close()  # the schema exists before any child races to create it
    cut_mid_run = 0
    for trial in range(trials):
        notes = tmp_path / f"notes{trial}.txt"
        script = _script(tmp_path, notes)
        cid = f"crash-{trial}"
        args = ["run", "log the notes", "--script", str(script), "--tools", "demo", "--db", str(db),
                "--id", cid, "--max-turns", "10"]
        proc = subprocess.Popen([sys.executable, "-m", "turnlog.engine.cli", *args], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if trial % 5 == 0:  # sometimes kill during start-up, before anything is recorded
            time.sleep(rng.uniform(0.0, 0.3))
        else:  # mostly mid-run: wait until the run has begun, then at a random instant
            _wait_for_stream(db, cid, proc)
            time.sleep(rng.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        j = Journal(str(db))
        exists = j.last_seq(cid) > 0
        if exists and load_state(j, cid).status == "active":
            cut_mid_run += 1
        j.close()
        common = ["--script", str(script), "--tools", "demo", "--db", str(db), "--json"]
        out = (_cli("resume", cid, *common, env=env) if exists
               else _cli(*args, "--json", env=env))
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["status"] == "completed"
        j = Journal(str(db))
        assert j.verify(cid).ok
        done = [json.loads(e.payload) for e in j.read(cid) if e.type == "tool_completed"
                and json.loads(e.payload)["name"] == "append_note"]
        j.close()
        lines = notes.read_text().splitlines() if notes.exists() else []
        # no note was written twice, and every recorded success is in the file exactly once
        assert len(lines) == len(set(lines)), f"trial {trial}: a note ran twice: {lines}"
        recorded = [d for d in done if d["success"]]
        assert len(recorded) + sum(1 for d in done if d.get("error") == INTERRUPTED) == TURNS
        assert len(lines) >= len(recorded)
        assert len(lines) <= TURNS
    assert cut_mid_run >= trials // 4, f"only {cut_mid_run} kills landed mid-run"


def test_resume_cli_on_a_finished_conversation_reports_its_status(tmp_path):
    db = tmp_path / "t.db"
    runner = CliRunner()
    out = runner.invoke(cli, ["demo", "--db", str(db), "--json"])
    cid = json.loads(out.output)["conversation_id"]
    again = runner.invoke(cli, ["resume", cid, "--db", str(db), "--json"])
    assert again.exit_code == 0 and json.loads(again.output)["status"] == "completed"


_FIELD = st.text(max_size=8) | st.just("caf\u00e9 \udd20")


@settings(max_examples=100)
@given(digest=_FIELD, response_id=st.none() | _FIELD, turn=st.integers(0, 10**6),
       ids=st.lists(st.sampled_from(["c1", "c2", "c3"]), unique=True, max_size=3),
       call_id=st.sampled_from(["c1", "c2", "c3"]),
       arguments=st.dictionaries(st.sampled_from(["a", "b", "é"]),
                                 st.integers() | st.floats(allow_nan=False) | _FIELD, max_size=3))
def test_idempotency_key_is_the_documented_chain_hash(digest, response_id, turn, ids, call_id,
                                                      arguments):
    """The key recorded journals hold (replay compares it): SHA-256 over the length-prefixed
    UTF-8 of (request digest, response id, turn, position in the response, call key), its
    first 32 hex digits; a call not in the last response takes position -1."""
    import hashlib

    from turnlog.engine.model.state import ConversationState
    from turnlog.engine.tools.duplicates import call_key

    calls = tuple(ToolCall(id=i, name="add", arguments={}) for i in ids)
    state = ConversationState(request_digest=digest, response_id=response_id, turn_count=turn,
                              last_tool_calls=calls)
    call = ToolCall(id=call_id, name="add", arguments=arguments)
    position = ids.index(call_id) if call_id in ids else -1
    fields = [digest, response_id or "", str(turn), str(position), call_key("add", arguments)]
    data = b"".join(len(b).to_bytes(8, "big") + b
                    for b in (f.encode("utf-8", "surrogatepass") for f in fields))
    assert idempotency_key(state, call) == hashlib.sha256(data).hexdigest()[:32]
