"""``turnlog replay`` (deterministic, --all, provider swap) through the CLI."""

from __future__ import annotations

import json

from turnlog.engine.demo import DEMO_PROMPT, DEMO_SCRIPT, demo_tools
from turnlog.engine.model.events import DuplicatePolicy
from turnlog.engine.loop import run
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.journal import Journal
from turnlog.replay.reports import latest_report
from tests.conftest import FixedClock
from tests.replay.helpers import invoke, invoke_json


def record(db_path, **kw):
    with Journal(db_path, clock=FixedClock()) as journal:
        run(journal, DEMO_PROMPT, provider=ScriptedProvider(DEMO_SCRIPT), tools=demo_tools(),
            conversation_id="demo", **kw)


def test_replay_of_a_recorded_run_exits_0_with_ok(db_path):
    record(db_path)
    result, out = invoke_json("replay", "demo", db=db_path)
    assert result.exit_code == 0, result.output
    assert out["ok"] is True and out["divergence"] is None and out["checked"] > 10
    result = invoke("replay", "demo", "--tool-set", "demo", db=db_path)
    assert result.exit_code == 0 and "replayed identically" in result.stdout


def test_replay_divergence_exits_1_with_seq_expected_and_actual(db_path):
    from turnlog.engine.tools.duplicates import is_duplicate, register_predicate

    def previous(name, args, state):  # the default rule, as a user's custom predicate
        return is_duplicate(DuplicatePolicy(), state.call_index, state.call_count, name, args)

    register_predicate("cli_rule", previous)
    record(db_path, duplicate_policy=DuplicatePolicy(rule="custom", custom="cli_rule"))
    assert invoke("replay", "demo", db=db_path).exit_code == 0
    register_predicate("cli_rule", lambda name, args, state: False)  # the user changes the rule
    result, out = invoke_json("replay", "demo", db=db_path)
    assert result.exit_code == 1
    d = out["divergence"]
    assert d["expected"]["type"] == "tool_call_rejected" and d["actual"]["type"] == "tool_started"
    with Journal(db_path) as journal:
        assert json.loads(next(journal.read("demo", d["seq"], d["seq"])).payload)["reason"] == \
            "duplicate"
    text = invoke("replay", "demo", db=db_path)
    assert text.exit_code == 1 and f"diverges at seq {d['seq']}" in text.stdout


def test_replay_all_records_a_report_and_exits_0(db_path):
    record(db_path)
    result, out = invoke_json("replay", "--all", db=db_path)
    assert result.exit_code == 0 and out["ok"] is True and out["conversations"] == 1
    [row] = latest_report(str(db_path))
    assert row["conversation_id"] == "demo" and row["ok"] == 1 and row["run_id"] == out["run_id"]


def test_replay_with_a_provider_swaps_and_reports_the_new_conversation(db_path, tmp_path):
    record(db_path)
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [
        {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}, {"text": "5"}]}))
    result, out = invoke_json("replay", "demo", "--provider", "scripted", "--model", "other",
                              "--script", str(script), "--id", "swapped", db=db_path)
    assert result.exit_code == 0, result.output
    assert (out["conversation_id"], out["replay_of"], out["status"], out["tools"]) == (
        "swapped", "demo", "completed", "recorded")
    result, out = invoke_json("diff", "demo", "swapped", db=db_path)
    assert out["same"] is False


def test_replay_usage_errors_exit_2(db_path):
    record(db_path)
    for args, message in [(("replay",), "conversation ID or --all"),
                          (("replay", "demo", "--model", "x"), "need --provider"),
                          (("replay", "nope"), "'nope'"),
                          (("replay", "demo", "--provider", "scripted"), "--script"),
                          (("replay", "demo", "--provider", "scripted", "--script", "x.json",
                            "--tools", "live"), "--tool-set")]:
        result = invoke(*args, db=db_path)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.stderr, (args, result.stderr)


def test_audit_reports_the_divergences_of_the_last_replay_all(db_path):
    from turnlog.engine.tools.duplicates import is_duplicate, register_predicate

    register_predicate("audit_rule", lambda name, args, state: is_duplicate(
        DuplicatePolicy(), state.call_index, state.call_count, name, args))
    record(db_path, duplicate_policy=DuplicatePolicy(rule="custom", custom="audit_rule"))
    assert invoke("replay", "--all", db=db_path).exit_code == 0
    register_predicate("audit_rule", lambda name, args, state: False)
    result, out = invoke_json("replay", "--all", db=db_path)
    assert result.exit_code == 1 and out["diverged"] == ["demo"]
    seq = out["results"][0]["divergence"]["seq"]
    result, audit = invoke_json("audit", db=db_path)
    assert audit["divergences"]["diverged"] == [{"conversation_id": "demo", "seq": seq}]
    assert audit["divergences"]["checked"] == 1


def test_fork_with_a_message_continues_at_once_with_another_model(db_path, tmp_path):
    record(db_path)
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [{"text": "Rome is sunny too."}]}))
    result, out = invoke_json("fork", "demo", "--at", "2", "--id", "f", "--model", "m-2",
                              "--message", "And Rome?", "--script", str(script), db=db_path)
    assert result.exit_code == 0, result.output
    assert (out["conversation_id"], out["parent"], out["fork_seq"], out["status"]) == (
        "f", "demo", 2, "completed")
    assert out["final_content"] == "Rome is sunny too."
    with Journal(db_path) as journal:
        types = [e.type for e in journal.read("f")]
        assert types[:2] == ["conversation_started", "user_message"]
        assert types[-1] == "conversation_completed" and journal.verify().ok
        responded = [json.loads(e.payload) for e in journal.read("f")
                     if e.type == "model_responded"]
        assert responded[0]["model"] == "m-2"


def test_fork_that_cannot_run_writes_nothing_and_exits_2(db_path):
    record(db_path)
    result = invoke("fork", "demo", "--at", "2", "--id", "f", "--message", "hi", db=db_path)
    assert result.exit_code == 2 and "--script" in result.stderr
    with Journal(db_path) as journal:
        assert journal.last_seq("f") == 0
    result, out = invoke_json("fork", "demo", "--at", "2", "--id", "f", "--message", "hi",
                              "--no-run", db=db_path)
    assert result.exit_code == 0 and "status" not in out


def test_fork_with_a_message_at_a_missing_seq_says_so(db_path):
    record(db_path)
    result = invoke("fork", "demo", "--at", "999", "--message", "hi", db=db_path)
    assert result.exit_code == 2 and "cannot fork 'demo' at seq 999" in result.stderr
