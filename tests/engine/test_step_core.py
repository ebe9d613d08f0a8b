"""The step knows no caller: it reads one frozen ``StepSettings`` and answers with actions.

A driver written here, with no ``Loop`` at all, performs the same actions and
journals the same events as ``Loop``; the step never writes to the loop that
built its settings.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnlog.engine.model.conversation import Conversation
from turnlog.engine.demo import DEMO_PROMPT, DEMO_SCRIPT, demo_tools
from turnlog.engine.tools.duplicates import register_predicate
from turnlog.engine.model.events import ConversationStarted, DuplicatePolicy, UserMessage
from turnlog.engine.tools.executor import LocalExecutor
from turnlog.engine.loop import Loop
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.engine.loop.request_digest import RequestDigest
from turnlog.engine.loop.retry import NO_RETRY
from turnlog.engine.loop.step import (
    CallModel,
    Record,
    RunTools,
    Step,
    StepSettings,
    Stop,
    Wait,
    ordered,
)
from turnlog.journal import Journal

_NOON = datetime(2026, 1, 1, 12, tzinfo=UTC)


def _bare_run(journal: Journal, conversation_id: str) -> None:
    """Run the demo conversation with nothing but a ``Step`` and a ``Conversation``."""
    tools = demo_tools()
    provider = ScriptedProvider(DEMO_SCRIPT)
    settings = StepSettings(tools=tools, provider=provider.name, digest=RequestDigest(),
                            retry=NO_RETRY, clock=lambda: _NOON, executor=LocalExecutor(),
                            max_parallel_tools=8)
    started = ConversationStarted(conversation_id=conversation_id, provider=provider.name,
                                  model=provider.name, tools=tools.specs())
    conv = Conversation.start(journal, started, rest=[UserMessage.of(DEMO_PROMPT)])
    step = Step(settings, conv)
    executor = LocalExecutor()
    while True:
        action = step.next()
        if isinstance(action, Record):
            conv.stage(*action.events)
            if action.flush:
                conv.flush()
        elif isinstance(action, CallModel):
            conv.flush()
            conv.stage(*step.responded(action, provider.complete(action.request), 0.0).events)
        elif isinstance(action, RunTools):
            conv.flush()
            left = len(action.runs)
            for run in ordered(action.runs, action.order):
                left -= 1
                outcome = executor.execute(run.call, run.tool, run.context, run.validated)
                conv.stage(*step.tool_done(run, outcome, left).events)
        elif isinstance(action, Wait):
            pytest.fail("no retry policy: the step never waits")
        else:
            assert isinstance(action, Stop)
            conv.flush()
            return


def _comparable(journal: Journal, cid: str) -> list[tuple[str, dict]]:
    rows = []
    for row in journal.read(cid):
        payload = json.loads(row.payload)
        for volatile in ("latency_ms", "duration_ms", "charge"):
            payload.pop(volatile, None)
        rows.append((row.type, payload))
    return rows


def test_a_driver_without_a_loop_journals_what_the_loop_journals(tmp_path):
    with Journal(tmp_path / "j.db") as journal:
        _bare_run(journal, "bare")
        Loop(journal, ScriptedProvider(DEMO_SCRIPT), demo_tools(), clock=lambda: _NOON,
             prices=None).start(DEMO_PROMPT, conversation_id="loop")
        bare, loop = _comparable(journal, "bare"), _comparable(journal, "loop")
    for rows in (bare, loop):
        rows[0][1].pop("conversation_id")
        rows[0][1].pop("approve", None)
        rows[0][1].pop("approve_reason", None)
    assert [t for t, _ in bare] == [t for t, _ in loop]
    assert bare[1:] == loop[1:] and bare[-1][0] == "conversation_completed"


def test_the_settings_are_frozen_and_taken_per_run(tmp_path):
    with Journal(tmp_path / "j.db") as journal:
        loop = Loop(journal, ScriptedProvider([{"text": "one"}]), demo_tools())
        settings = loop.step_settings()
        with pytest.raises(dataclasses.FrozenInstanceError):
            settings.max_parallel_tools = 2  # type: ignore[misc]
        loop.max_parallel_tools = 1
        assert settings.max_parallel_tools == 8 and loop.step_settings().max_parallel_tools == 1


def test_the_step_writes_nothing_to_the_loop(tmp_path):
    """A custom duplicate rule resolved from the policy and the default prices stay the step's."""
    script = [{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
              {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
              {"text": "done"}]
    register_predicate("step_core_after_first", lambda name, arguments, state:
                       state.call_count > 0)
    policy = DuplicatePolicy(rule="custom", custom="step_core_after_first")
    with Journal(tmp_path / "j.db") as journal:
        loop = Loop(journal, ScriptedProvider(script), demo_tools())
        result = loop.start("add twice", conversation_id="c", duplicate_policy=policy)
        kinds = [row.type for row in journal.read("c")]
    assert result.status == "completed" and "tool_call_rejected" in kinds
    assert loop.predicate is None and loop.prices is None


_HOSTILE = st.recursive(
    st.none() | st.integers() | st.floats() | st.sampled_from(["ok", "bad \udd20", "\ud800"]),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["k", "k\udd20"]) | st.integers(0, 1), inner, max_size=3),
    max_leaves=12)


def _outcome(check, data):
    try:
        check(data)
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)
    return None


@given(_HOSTILE)
def test_a_tool_results_json_check_is_the_check_of_its_repaired_data(data):
    """``check_result_json`` (checked as it is, walked only when the encoder meets a lone
    surrogate) refuses exactly what checking the repaired data refuses, with the same error."""
    from turnlog.engine.loop.step import check_result_json
    from turnlog.engine.model.canonical import valid_unicode
    from turnlog.engine.model.events import check_json_data

    assert _outcome(check_result_json, data) == _outcome(
        lambda d: check_json_data(valid_unicode(d)[0]), data)
