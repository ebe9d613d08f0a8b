"""turnlog.replay.testing: the strategies generate valid conversations; the pytest plugin replays journals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from hypothesis import given, settings

from turnlog.engine.model.events import ConversationStarted, DuplicatePolicy, ToolCallRejected, ToolCompleted
from turnlog.engine.model.state import fold
from turnlog.engine.model.canonical import canonical_json
from turnlog.replay.testing import arguments, conversations, tool_calls

ROOT = Path(__file__).resolve().parents[2]


@settings(max_examples=60, deadline=None)
@given(conversations())
def test_generated_conversations_fold_and_end(events):
    state = fold(events)  # raises InvalidTransition if the lifecycle refused any event
    assert type(events[0]) is ConversationStarted
    assert state.status in ("completed", "failed", "halted")
    assert not state.pending_calls


@settings(max_examples=60, deadline=None)
@given(conversations(policy=DuplicatePolicy(rule="previous")))
def test_generated_refusals_follow_the_previous_call_rule(events):
    previous = None
    calls = {}
    for event in events:
        if hasattr(event, "parts"):
            calls.update((p.id, p) for p in event.parts if type(p).__name__ == "ToolCall")
        if type(event) in (ToolCompleted, ToolCallRejected):
            call = calls[event.call_id]
            key = (call.name, canonical_json(call.arguments))
            assert (type(event) is ToolCallRejected) == (key == previous)
            previous = key


@settings(max_examples=60, deadline=None)
@given(tool_calls(), arguments())
def test_tool_calls_and_arguments_are_json_objects(call, args):
    import json
    assert json.loads(call.raw_arguments) == call.arguments
    assert isinstance(args, dict) and all(type(k) is str for k in args)
    canonical_json(args)  # always canonicalisable: finite numbers, str keys


def test_the_pytest_plugin_makes_one_test_per_recorded_conversation(tmp_path):
    from turnlog.journal import Journal
    from turnlog.engine.providers.scripted import ScriptedProvider
    from tests.replay import miniloop
    from tests.replay.test_replay_machinery import TURNS, started

    db = tmp_path / "runs.db"
    with Journal(db) as journal:
        miniloop.record(journal, started("good"), ["hi"], ScriptedProvider(TURNS))
        miniloop.record(journal, started("other"), ["hi"], ScriptedProvider(TURNS[3:]))
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["turnlog.replay.testing"]\n')
    (tmp_path / "test_runs.py").write_text(textwrap.dedent("""
        import os
        from tests.replay import miniloop

        def test_replays(turnlog_conversation):
            # a user's test: replay each recorded run; this one breaks the 'other' run
            if turnlog_conversation.conversation_id == "other":
                os.environ["BREAK"] = "1"
            def driver(scratch, rec, provider, tools):
                if os.environ.pop("BREAK", None):
                    return  # produce nothing: a divergence at seq 1
                miniloop.driver(scratch, rec, provider, tools)
            turnlog_conversation.assert_replays(driver=driver)
    """))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
         str(tmp_path), "--turnlog-journal", str(db), str(tmp_path / "test_runs.py")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "1 failed, 1 passed" in out
    assert "runs.db::other" in out
    assert "diverges at seq 1" in out, out


def test_the_plugin_skips_with_its_reason_what_replay_did_not_check(tmp_path):
    # a journal made as a user makes it: a demo run (replayable) and an imported transcript
    # (replay cannot re-run imported messages: skipped, so never reported as passed)
    from tests.cli.conftest import turnlog, write_script

    db = tmp_path / "runs.db"
    transcript = tmp_path / "t.json"
    transcript.write_text(json.dumps([{"role": "user", "content": "hi"},
                                      {"role": "assistant", "content": "hello"}]))
    script = write_script(tmp_path / "s.json", {"text": "hello"})
    assert turnlog("run", "hi", "--script", script, "--id", "ran", "--db", db).returncode == 0
    imported = turnlog("import", transcript, "--format", "anthropic", "--id", "imported",
                       "--db", db)
    assert imported.returncode == 0, imported.stderr
    skipped = turnlog("replay", "imported", "--db", db)
    assert skipped.returncode == 0 and "imported: skipped (" in skipped.stdout, skipped.stdout
    reason = skipped.stdout.strip().removeprefix("imported: skipped (").removesuffix(")")

    (tmp_path / "conftest.py").write_text('pytest_plugins = ["turnlog.testing"]\n')
    (tmp_path / "test_runs.py").write_text(textwrap.dedent("""
        def test_replays(turnlog_conversation):
            turnlog_conversation.assert_replays()
    """))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--rootdir",
         str(tmp_path), "--turnlog-journal", str(db), str(tmp_path / "test_runs.py")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "1 passed, 1 skipped" in out, out
    assert "SKIPPED [1] " in out and f": runs.db::imported: not replayed: {reason}\n" in out, out
