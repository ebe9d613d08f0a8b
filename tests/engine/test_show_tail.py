"""``turnlog show`` reads as a timeline, ``ls`` agrees with the reducer, ``tail`` follows appends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from turnlog.engine.cli import cli
from turnlog.engine.model.conversation import Conversation, load_state
from turnlog.engine.model.events import ConversationStarted, UserMessage
from turnlog.journal import Journal
from tests.engine.audit_data import build

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sample(db_path):
    j = Journal(str(db_path))
    build(j)
    j.close()
    return db_path


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_show_timeline_has_text_calls_results_refusals_usage_and_lineage(sample):
    result = invoke("show", "done", "--db", sample)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    for expected in [
        "conversation done  openai/gpt-4o  mode=chat  status=completed  turns=3  events=14",
        "  forked as fork at seq 8",
        "  replayed as replay",
        "  system: Be brief.",
        "   2  user: Weather in Paris and 2+3?",
        "--- turn 1  (openai/gpt-4o)",
        "   4  model openai/gpt-4o (turn 1, stop: tool_use):",
        "      Let me check.",
        '      -> get_weather({"city": "Paris"})  [c1]',
        "      usage: input 1,000, cached 400; output 100",
        '   6  tool get_weather ok in 10 ms: {"forecast":"sunny"}',
        "   8  tool add FAILED in 30 ms: b is not a number",
        "  11  tool get_weather REFUSED (duplicate)  [c3]",
        "      sent back: You already called get_weather with these arguments.",
        "  14  completed: Paris is sunny.",
    ]:
        assert expected in lines, expected


def test_show_names_failures_halts_and_fork_parents(sample):
    fail = invoke("show", "fail", "--db", sample).output.splitlines()
    assert "   4  MODEL FAILED RateLimitError (HTTP 429): slow down" in fail
    assert "   7  FAILED: ServerError: overloaded" in fail
    halt = invoke("show", "halt", "--db", sample).output.splitlines()
    assert "  10  HALTED: turn limit 2 reached after 2 turns" in halt
    assert "   5  tool teleport REFUSED (unknown)  [h1]" in halt
    fork = invoke("show", "fork", "--db", sample).output.splitlines()
    assert fork[0].endswith("status=completed  turns=2  events=4")
    assert f"  fork of done at seq 8 (turnlog show done --db {sample} for the shared history)" \
        in fork
    replay = invoke("show", "replay", "--db", sample).output.splitlines()
    assert "  replay of done (recorded tools: recorded)" in replay


def test_show_cuts_long_values_unless_full(db_path):
    j = Journal(str(db_path))
    c = Conversation.start(j, ConversationStarted(conversation_id="long", provider="p", model="m"))
    c.append(UserMessage.of("x" * 1000 + "END"))
    j.close()
    cut = invoke("show", "long", "--db", db_path).output
    assert "END" not in cut and "(1,003 chars, --full for all)" in cut
    full = invoke("show", "long", "--db", db_path, "--full").output
    assert "x" * 1000 + "END" in full


def test_show_json_keeps_its_contract(sample):
    out = json.loads(invoke("show", "halt", "--db", sample, "--json").output)
    assert out["conversation_id"] == "halt"
    assert [e["seq"] for e in out["events"]] == list(range(1, 11))
    assert out["events"][4]["type"] == "tool_call_rejected"
    assert out["events"][4]["payload"]["reason"] == "unknown"


def test_show_unknown_id_is_exit_2(sample):
    result = invoke("show", "nope", "--db", sample)
    assert result.exit_code == 2 and "no conversation 'nope'" in result.output


def test_ls_agrees_with_the_reducer_for_every_conversation_forks_included(sample):
    rows = json.loads(invoke("ls", "--db", sample, "--json").output)
    assert [r["conversation_id"] for r in rows][:2] == ["replay", "fork"]  # newest first
    j = Journal(str(sample))
    for r in rows:
        state = load_state(j, r["conversation_id"])
        assert (r["status"], r["provider"], r["model"], r["turn_count"]) == (
            state.status, state.provider, state.model, state.turn_count), r
        assert r["events"] == j.stream(r["conversation_id"]).events
        assert r["parent"] == (state.fork.conversation_id if state.fork else None)
        assert r["replay_of"] == (state.replay_of.conversation_id if state.replay_of else None)
    j.close()


def test_tail_once_prints_what_is_there_by_default_and_from_a_given_position(sample):
    everything = invoke("tail", "--db", sample, "--once", "--json").output.splitlines()
    assert [json.loads(line)["position"] for line in everything] == list(range(1, 50))
    assert invoke("tail", "--db", sample, "--once").output.startswith("       1  ")
    lines = invoke("tail", "--db", sample, "--once", "--json", "--from-position", 47).output
    events = [json.loads(line) for line in lines.splitlines()]
    assert [e["position"] for e in events] == [47, 48, 49]
    assert events[-1]["conversation_id"] == "replay" and events[-1]["type"] == "user_message"
    human = invoke("tail", "--db", sample, "--once", "--from-position", 49).output.splitlines()
    assert human[0].split()[::2] == ["49", "replay"]
    assert human[1].strip() == "2  user: Weather in Paris and 2+3?"


def test_tail_follows_events_another_process_appends(sample):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    follower = subprocess.Popen(
        [sys.executable, "-m", "turnlog.engine.cli", "tail", "--db", str(sample), "--json",
         "--from-position", "50", "--count", "3", "--timeout", "30", "--interval", "0.05"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        j = Journal(str(sample))
        c = Conversation.start(j, ConversationStarted(conversation_id="live", provider="p", model="m"))
        c.append(UserMessage.of("one"))
        c.append(UserMessage.of("two"))
        j.close()
        out, err = follower.communicate(timeout=30)
    finally:
        follower.kill()
    assert follower.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert [(e["position"], e["seq"], e["type"]) for e in events] == [
        (50, 1, "conversation_started"), (51, 2, "user_message"), (52, 3, "user_message")]
    assert events[2]["payload"]["parts"][0]["text"] == "two"


def test_tail_stops_at_its_timeout_with_nothing_new(sample):
    result = invoke("tail", "--db", sample, "--timeout", "0.1", "--interval", "0.05")
    assert result.exit_code == 0 and result.output == ""
