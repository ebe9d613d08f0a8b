"""The agent loop end to end with the scripted provider: every step an event, every call answered."""

from __future__ import annotations

import json
import logging

import pytest

from turnlog.engine.model.conversation import Conversation, load_state
from turnlog.engine.demo import DEMO_PROMPT, DEMO_SCRIPT, demo_tools
from turnlog.engine.errors import ConversationNotFound, RunnerError, TranscriptLockContention
from turnlog.engine.model.events import ConversationStarted, DuplicatePolicy, ToolCompleted, UserMessage
from turnlog.engine.tools.executor import ToolExecution
from turnlog.engine.loop import Loop, run
from turnlog.engine.model.messages import Message, Text, ToolCall, ToolResult
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.engine.loop.result import result_of
from turnlog.engine.loop.runners import RunnerResult
from turnlog.engine.tools import ToolRegistry, tool
from turnlog.journal import Journal

# the loop suite runs on Loop and on AsyncLoop (tests/engine/conftest.py)
pytestmark = pytest.mark.usefixtures("both_loops")


def types(journal, cid):
    return [e.type for e in journal.read(cid)]


def payloads(journal, cid, kind):
    import json

    return [json.loads(e.payload) for e in journal.read(cid) if e.type == kind]


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


def test_demo_conversation_records_every_step_and_completes(journal):
    result = run(journal, DEMO_PROMPT, provider=ScriptedProvider(DEMO_SCRIPT), tools=demo_tools(),
                 conversation_id="demo")
    assert (result.status, result.completed, result.turn_count) == ("completed", True, 5)
    assert result.final_content.endswith("2 + 3 = 5.")
    kinds = types(journal, "demo")
    assert kinds[:4] == ["conversation_started", "user_message", "model_requested", "model_responded"]
    assert kinds.count("model_requested") == kinds.count("model_responded") == 5
    assert kinds[-1] == "conversation_completed"
    failed = [p for p in payloads(journal, "demo", "tool_completed") if not p["success"]]
    assert len(failed) == 1 and failed[0]["content"].startswith("TOOL FAILED: get_weather")
    (dup,) = payloads(journal, "demo", "tool_call_rejected")
    assert dup["reason"] == "duplicate" and "exact same parameters" in dup["content"]
    assert journal.verify().ok
    # the live result equals the one folded from the journal
    assert result_of(load_state(journal, "demo")) == result


def test_every_tool_call_in_the_history_has_exactly_one_result(journal):
    result = run(journal, DEMO_PROMPT, provider=ScriptedProvider(DEMO_SCRIPT), tools=demo_tools())
    calls = [p.id for m in result.messages for p in m.parts if isinstance(p, ToolCall)]
    answers = [p.call_id for m in result.messages for p in m.parts if isinstance(p, ToolResult)]
    assert sorted(calls) == sorted(answers) and len(set(calls)) == len(calls)


def test_the_request_the_model_sees_carries_the_previous_results(journal):
    seen = []

    class Spy(ScriptedProvider):
        def complete(self, request):
            seen.append(request)
            return super().complete(request)

    run(journal, "go", provider=Spy([{"tool_calls": [call("add", a=1, b=2)]}, {"text": "3"}]),
        tools=demo_tools(), system="Be brief.")
    last = seen[-1]
    assert last.system == "Be brief."
    assert [m.role for m in last.messages] == ["user", "assistant", "tool"]
    assert last.messages[2].parts[0].content.endswith('{"sum":3.0}')
    assert {t.name for t in last.tools} == {"get_weather", "add", "get_current_time", "append_note",
                                            "wait"}


def test_a_chat_continues_with_a_new_user_message_after_it_completed(journal):
    loop = Loop(journal, ScriptedProvider([{"text": "one"}]), demo_tools())
    first = loop.start("hi", conversation_id="chat")
    loop.provider = ScriptedProvider([{"text": "two"}])  # a script counts from its run's start
    second = loop.send("chat", "again")
    assert (first.final_content, second.final_content) == ("one", "two")
    assert second.turn_count == 2 and second.run_turns == 1 and second.status == "completed"


def test_a_provider_failing_on_turn_3_fails_the_run_and_keeps_the_error(journal):
    script = [{"tool_calls": [call("add", a=1, b=1)]}, {"tool_calls": [call("add", a=2, b=2)]},
              {"error": {"type": "server", "message": "upstream exploded"}}]
    failures = []
    result = run(journal, "go", provider=ScriptedProvider(script), tools=demo_tools(),
                 conversation_id="f", observers=[lambda e, p: failures.append(p) if e == "failed" else None])
    assert result.status == "failed" and not result.completed
    assert "upstream exploded" in result.error and result.turn_count == 2
    assert types(journal, "f")[-3:] == ["model_requested", "model_failed", "conversation_failed"]
    (failed,) = payloads(journal, "f", "model_failed")
    assert failed["turn"] == 3 and failed["error_type"] == "ServerError"
    assert failures and "upstream exploded" in failures[0]["error"]


def test_max_turns_reached_with_tool_calls_pending_is_a_halt_with_a_warning(journal):
    script = [{"tool_calls": [call("add", a=i, b=1)]} for i in range(5)]
    budget = []
    result = run(journal, "loop forever", provider=ScriptedProvider(script), tools=demo_tools(),
                 max_turns=3, conversation_id="m",
                 observers=[lambda e, p: budget.append(p) if e == "budget_exceeded" else None])
    assert result.status == "halted" and result.max_turns_reached and result.has_pending_tools
    assert result.turn_count == 3 and "max turns (3)" in result.warning
    (limit,) = payloads(journal, "m", "turn_limit_reached")
    assert limit["pending_tool_calls"] is True
    assert budget[0]["kind"] == "turns"


def test_single_turn_takes_one_model_turn_and_answers_its_tool_calls(journal):
    script = [{"tool_calls": [call("add", a=1, b=1)]}, {"text": "done"}]
    loop = Loop(journal, ScriptedProvider(script), demo_tools())
    first = loop.start("go", conversation_id="s", single_turn=True)
    assert first.status == "active" and first.turn_count == 1 and first.tool_execution_results
    assert loop.resume("s").status == "completed"


def test_a_tool_that_raises_becomes_a_failed_result_and_the_loop_goes_on(journal):
    @tool
    def explode() -> dict:
        """Always fails."""
        raise RuntimeError("kaboom")

    result = run(journal, "go", provider=ScriptedProvider([{"tool_calls": [call("explode")]},
                                                          {"text": "it failed"}]),
                 tools=[explode], conversation_id="x")
    assert result.status == "completed"
    (done,) = payloads(journal, "x", "tool_completed")
    assert done["success"] is False and done["error"] == "kaboom"
    assert done["content"] == "TOOL FAILED: explode execution failed - kaboom"


def test_an_observer_that_raises_is_logged_and_never_changes_the_run(journal, caplog):
    seen = []

    def bad(event, payload):
        raise ValueError("observer bug")

    with caplog.at_level(logging.ERROR, logger="turnlog.observers"):
        result = run(journal, DEMO_PROMPT, provider=ScriptedProvider(DEMO_SCRIPT),
                     tools=demo_tools(), observers=[bad, lambda e, p: seen.append(e)])
    assert result.status == "completed"
    assert "observer bug" in caplog.text
    assert seen.count("turn_started") == 5 and seen[-1] == "completed"
    assert "duplicate_prevented" in seen


def test_a_disabled_tool_called_anyway_is_refused_with_its_reason(journal, monkeypatch):
    monkeypatch.delenv("SECRET_SERVICE_KEY", raising=False)

    @tool(requires_env=["SECRET_SERVICE_KEY"])
    def secret() -> dict:
        """Needs a key."""
        raise AssertionError("must not run")

    @tool(enabled=lambda ctx: "only in pipelines" if ctx.mode != "pipeline" else True)
    def publish() -> dict:
        """Pipeline only."""
        raise AssertionError("must not run")

    script = [{"tool_calls": [call("secret"), call("publish")]}, {"text": "ok"}]
    result = run(journal, "go", provider=ScriptedProvider(script), tools=[secret, publish],
                 conversation_id="d")
    assert result.status == "completed"
    rejected = payloads(journal, "d", "tool_call_rejected")
    assert [r["reason"] for r in rejected] == ["disabled", "disabled"]
    assert "SECRET_SERVICE_KEY" in rejected[0]["content"]
    assert "only in pipelines" in rejected[1]["content"]
    assert "tool_started" not in types(journal, "d")


def test_invalid_arguments_are_refused_with_a_correction_and_never_run(journal):
    script = [{"tool_calls": [call("add", a="two", b=3), call("add", a=1),
                              {"name": "add", "arguments_raw": "{not json"}]},
              {"text": "sorry"}]
    run(journal, "go", provider=ScriptedProvider(script), tools=demo_tools(), conversation_id="i")
    rejected = payloads(journal, "i", "tool_call_rejected")
    assert [r["reason"] for r in rejected] == ["invalid_arguments"] * 3
    assert "`a`" in rejected[0]["content"] and "`b`" in rejected[1]["content"]
    assert "not valid JSON" in rejected[2]["content"]
    assert "tool_started" not in types(journal, "i")


def test_an_unknown_tool_is_refused_naming_the_available_ones(journal):
    script = [{"tool_calls": [call("launch_rockets", target="moon")]}, {"text": "no"}]
    run(journal, "go", provider=ScriptedProvider(script), tools=demo_tools(), conversation_id="u")
    (rejected,) = payloads(journal, "u", "tool_call_rejected")
    assert rejected["reason"] == "unknown" and "get_weather" in rejected["content"]


def test_a_cut_off_call_is_refused_as_cut_off():
    from turnlog.engine.model.messages import ToolCall as TC
    from turnlog.engine.providers.base import ModelResponse
    from turnlog.journal import Journal

    class CutOff:
        name = "fake"
        n = 0

        def complete(self, request):
            self.n += 1
            if self.n == 1:
                return ModelResponse(parts=(TC(id="c1", name="add", raw_arguments='{"a": 1',
                                               invalid="cut off by max_tokens"),),
                                     stop_reason="max_tokens")
            return ModelResponse(parts=(Text(text="ok"),))

    j = Journal(":memory:")
    run(j, "go", provider=CutOff(), tools=demo_tools(), conversation_id="k")
    (rejected,) = payloads(j, "k", "tool_call_rejected")
    assert rejected["reason"] == "cut_off" and "max_tokens" in rejected["content"]


def test_context_parameters_are_injected_and_hidden_from_the_model(journal):
    seen = {}

    @tool(inject=["job_id"])
    def record(value: int, conversation_id: str, turn: int, mode: str, job_id: str) -> dict:
        """Record a value."""
        seen.update(value=value, conversation_id=conversation_id, turn=turn, mode=mode, job_id=job_id)
        return {"ok": True}

    assert set(record.spec.parameters["properties"]) == {"value"}
    run(journal, "go", provider=ScriptedProvider([{"tool_calls": [call("record", value=7)]},
                                                  {"text": "ok"}]),
        tools=[record], mode="pipeline", metadata={"job_id": "J-1"}, conversation_id="ctx")
    assert seen == {"value": 7, "conversation_id": "ctx", "turn": 1, "mode": "pipeline",
                    "job_id": "J-1"}


def test_handler_tools_send_only_their_success_message_and_hooks_replace_it(journal, tmp_path):
    @tool(success_message=lambda name, data, args: f"SUCCESS: saved {args['key']}")
    def save(key: str) -> dict:
        """Save."""
        return {"stored": key}

    notes = tmp_path / "notes.txt"
    script = [{"tool_calls": [call("append_note", path=str(notes), text="hello"), call("save", key="k")]},
              {"text": "ok"}]
    tools = ToolRegistry([demo_tools(), save])
    run(journal, "go", provider=ScriptedProvider(script), tools=tools, conversation_id="h")
    note, saved = payloads(journal, "h", "tool_completed")
    assert note["content"] == ("SUCCESS: Append Note completed successfully. The requested "
                               "operation has been finished as requested.")
    assert note["data"] == {"lines": 1}
    assert saved["content"] == 'SUCCESS: saved k\n\n{"stored":"k"}'


def test_escalation_halts_the_run_after_k_duplicate_refusals(journal):
    script = [{"tool_calls": [call("add", a=1, b=1)]}] * 6
    policy = DuplicatePolicy(max_refusals=2)
    result = run(journal, "go", provider=ScriptedProvider(script), tools=demo_tools(),
                 duplicate_policy=policy, conversation_id="e")
    assert result.status == "halted" and "max_refusals=2" in result.warning
    assert [r["reason"] for r in payloads(journal, "e", "tool_call_rejected")] == ["duplicate"] * 2
    assert types(journal, "e")[-1] == "conversation_halted"


def test_observe_only_runs_the_duplicate_and_warns(journal):
    warned = []
    script = [{"tool_calls": [call("add", a=1, b=1)]}, {"tool_calls": [call("add", a=1, b=1)]},
              {"text": "ok"}]
    run(journal, "go", provider=ScriptedProvider(script), tools=demo_tools(), conversation_id="o",
        duplicate_policy=DuplicatePolicy(observe_only=True),
        observers=[lambda e, p: warned.append(p) if e == "duplicate_prevented" else None])
    started = payloads(journal, "o", "tool_started")
    assert [s.get("duplicate", False) for s in started] == [False, True]
    assert warned and warned[0]["observe_only"] is True
    assert "tool_call_rejected" not in types(journal, "o")


def test_exempt_tools_and_volatile_keys_relax_the_rule(journal):
    script = [{"tool_calls": [call("wait", seconds=0)]}, {"tool_calls": [call("wait", seconds=0)]},
              {"tool_calls": [call("get_weather", city="Paris")]},
              {"tool_calls": [call("get_weather", city="Paris")]}, {"text": "ok"}]
    policy = DuplicatePolicy(exempt=("wait",))
    run(journal, "go", provider=ScriptedProvider(script), tools=demo_tools(), conversation_id="v",
        duplicate_policy=policy)
    assert [r["name"] for r in payloads(journal, "v", "tool_call_rejected")] == ["get_weather"]


def test_a_custom_predicate_decides_duplicates(journal):
    from turnlog.engine.tools.duplicates import register_predicate

    register_predicate("no_paris", lambda name, args, state: args.get("city") == "Paris")
    script = [{"tool_calls": [call("get_weather", city="London"), call("get_weather", city="Paris")]},
              {"text": "ok"}]
    run(journal, "go", provider=ScriptedProvider(script), tools=demo_tools(), conversation_id="p",
        duplicate_policy=DuplicatePolicy(rule="custom", custom="no_paris"))
    assert [r["arguments"] for r in payloads(journal, "p", "tool_call_rejected")] == [{"city": "Paris"}]


def test_pipeline_duplicate_message_tells_the_model_to_use_the_handler(journal):
    script = [{"tool_calls": [call("add", a=1, b=1)]}, {"tool_calls": [call("add", a=1, b=1)]},
              {"text": "ok"}]
    run(journal, "go", provider=ScriptedProvider(script), tools=demo_tools(), mode="pipeline",
        conversation_id="pl")
    (rejected,) = payloads(journal, "pl", "tool_call_rejected")
    assert "call the handler tool" in rejected["content"]


def test_directives_are_rendered_once_into_conversation_started(journal):
    from turnlog.engine.loop.directives import Directives

    d = Directives()
    d.register("global", "id", lambda ctx: "You are turnlog.")
    d.register("mode", "m", lambda ctx: f"Mode: {ctx['mode']}.")
    d.register("agent", "a", "Be helpful.")
    loop = Loop(journal, ScriptedProvider([{"text": "ok"}]), directives=d)
    loop.start("hi", conversation_id="dir", system="Answer in French.")
    (started,) = payloads(journal, "dir", "conversation_started")
    assert started["system"] == "You are turnlog.\n\nMode: chat.\n\nBe helpful.\n\nAnswer in French."
    assert [x["layer"] for x in started["directives"]] == ["global", "mode", "agent", "run"]


def test_a_second_runner_on_the_same_conversation_gets_lock_contention(journal, db_path):
    from turnlog.journal import Journal

    seen = []
    loop = Loop(journal, ScriptedProvider([{"tool_calls": [call("add", a=1, b=1)]}, {"text": "x"}]),
                demo_tools(), observers=[lambda e, p: seen.append(e)])
    loop.start(None, conversation_id="lock")
    conv = Conversation.open(journal, "lock")
    other = Journal(str(db_path))
    Conversation.open(other, "lock").append(UserMessage.of("from elsewhere"))
    with pytest.raises(TranscriptLockContention, match="another runner"):
        loop.send(conv, "mine")
    assert "transcript_lock_contention" in seen
    assert types(journal, "lock") == ["conversation_started", "user_message"]
    other.close()


def test_resume_of_an_unknown_conversation_is_a_typed_error(journal):
    with pytest.raises(ConversationNotFound):
        Loop(journal, ScriptedProvider([])).resume("nope")


def test_a_replay_driver_can_start_from_a_given_started_event_and_serve_recorded_results(journal):
    recorded = {"call_1_1": ToolCompleted(call_id="call_1_1", name="get_weather", success=True,
                                          content="RECORDED", data={"city": "Paris"})}

    class Recorded:
        def execute(self, call, tool, context, validated):
            r = recorded[call.id]
            return ToolExecution(success=r.success, data=r.data, content=r.content,
                                 source="recorded")

    started = ConversationStarted(conversation_id="rp", provider="scripted", model="m",
                                  tools=demo_tools().specs(), max_turns=4)
    loop = Loop(journal, ScriptedProvider([{"tool_calls": [call("get_weather", city="Paris")]},
                                           {"text": "ok"}]), demo_tools(), executor=Recorded())
    result = loop.start("weather?", started=started)
    (done,) = payloads(journal, "rp", "tool_completed")
    assert done["content"] == "RECORDED" and done["source"] == "recorded"
    assert result.status == "completed"


def test_an_external_runner_result_is_normalised_into_events(journal):
    class Runtime:
        def run(self, request):
            assert request.messages[-1].parts[0].text == "hi"
            return RunnerResult(messages=[
                Message(role="assistant", parts=(ToolCall(id="r1", name="add",
                                                          arguments={"a": 1, "b": 2}),)),
                {"role": "tool", "tool_call_id": "r1", "name": "add", "content": "3"},
                {"role": "assistant", "content": "three"}], final_content="three")

    loop = Loop(journal, ScriptedProvider([]), demo_tools(), runner=Runtime())
    result = loop.start("hi", conversation_id="rn")
    assert result.status == "completed" and result.final_content == "three"
    assert [p["source"] for p in payloads(journal, "rn", "model_responded")] == ["runner"] * 2
    assert payloads(journal, "rn", "tool_completed")[0]["source"] == "runner"


def test_a_runner_result_the_lifecycle_refuses_leaves_the_journal_as_it_was(journal):
    class Bad:
        def run(self, request):
            return RunnerResult(messages=[{"role": "tool", "tool_call_id": "ghost", "content": "x"}])

    loop = Loop(journal, ScriptedProvider([]), runner=Bad())
    with pytest.raises(RunnerError, match="ghost"):
        loop.start("hi", conversation_id="bad")
    assert types(journal, "bad") == ["conversation_started", "user_message"]


def test_a_runner_that_declines_lets_the_built_in_loop_run(journal):
    class No:
        def run(self, request):
            return None

    result = Loop(journal, ScriptedProvider([{"text": "built-in"}]), runner=No()).start("hi")
    assert result.final_content == "built-in"


def test_recorded_request_digests_equal_the_requests_own_digest(journal):
    """The loop's incremental digest matches ModelRequest.digest() on every turn."""
    digests = []

    class Spy(ScriptedProvider):
        def complete(self, request):
            digests.append(request.digest())
            return super().complete(request)

    loop = Loop(journal, Spy(DEMO_SCRIPT),
                demo_tools())
    loop.start(DEMO_PROMPT, conversation_id="dg", system="Be brief.", parameters={"temperature": 0})
    recorded = [json.loads(e.payload)["digest"] for e in journal.read("dg")
                if e.type == "model_requested"]
    assert recorded == digests and len(set(digests)) == 5


def test_starting_a_conversation_with_an_id_in_use_is_a_typed_error(journal):
    from turnlog.engine.errors import ConversationExistsError

    loop = Loop(journal, ScriptedProvider([{"text": "a"}]))
    loop.start("hi", conversation_id="dup")
    before = journal.last_seq("dup")
    with pytest.raises(ConversationExistsError, match="'dup' already exists"):
        loop.start("again", conversation_id="dup")
    assert journal.last_seq("dup") == before


def test_staged_steps_are_written_before_each_outside_action(journal):
    """Every model call and tool run finds its preceding events already in the journal."""
    seen = []

    class Watch(ScriptedProvider):
        def complete(self, request):
            seen.append(("model", [e.type for e in journal.read("w")][-1]))
            return super().complete(request)

    @tool
    def probe() -> dict:
        """Probe."""
        # its own connection: AsyncLoop runs a plain tool in a worker thread, and a SQLite
        # connection belongs to the thread that opened it
        with Journal(journal.path) as reader:
            seen.append(("tool", [e.type for e in reader.read("w")][-1]))
        return {}

    Loop(journal, Watch([{"tool_calls": [{"name": "probe"}]}, {"text": "ok"}]), [probe]).start(
        "go", conversation_id="w")
    assert seen == [("model", "model_requested"), ("tool", "tool_started"),
                    ("model", "model_requested")]
    assert [e.type for e in journal.read("w")][-1] == "conversation_completed"


def test_conversation_stage_and_flush_write_staged_events_in_one_transaction(journal, db_path):
    from turnlog.engine.errors import ConcurrencyError, InvalidTransition
    from turnlog.engine.model.events import ModelFailed, ModelRequested
    from turnlog.journal import Journal

    conv = Conversation.start(journal, ConversationStarted(conversation_id="st", provider="p",
                                                           model="m"))
    conv.stage(UserMessage.of("hi"), ModelRequested(turn=1, digest="d", provider="p", model="m"))
    assert journal.last_seq("st") == 1 and conv.staged == 2
    with pytest.raises(InvalidTransition):
        conv.stage(ModelRequested(turn=1, digest="d", provider="p", model="m"))
    assert conv.staged == 2
    assert [e.seq for e in conv.flush()] == [2, 3] and conv.staged == 0
    other = Journal(str(db_path))
    Conversation.open(other, "st").append(ModelFailed(turn=1, error_type="x", message="y"))
    conv.stage(ModelFailed(turn=1, error_type="a", message="b"))
    with pytest.raises(ConcurrencyError):
        conv.flush()
    assert conv.staged == 0 and conv.last_seq == 4 and conv.builder.error == "x: y"
    other.close()
