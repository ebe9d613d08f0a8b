"""Deterministic replay of conversations recorded by the engine's loop, and swaps through it."""

from __future__ import annotations

from functools import partial

import msgspec
import pytest

from turnlog.engine.demo import DEMO_PROMPT, DEMO_SCRIPT, demo_tools
from turnlog.engine.loop.directives import Directives
from turnlog.engine.tools.duplicates import register_predicate
from turnlog.engine.model.events import DuplicatePolicy
from turnlog.engine.loop import Loop, run
from turnlog.engine.tools import tool
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.replay import Divergence, fork, replay, replay_all, swap
from turnlog.replay.driver import loop_driver
from turnlog.replay.rebuild import own_events


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


def record_everything(journal) -> None:
    """One conversation per loop behaviour the suite exercises."""
    tools = demo_tools()

    def go(cid, script, prompt="go", **kw):
        run(journal, prompt, provider=ScriptedProvider(script), tools=tools, conversation_id=cid,
            **kw)

    go("demo", DEMO_SCRIPT, DEMO_PROMPT)
    go("failing", [{"tool_calls": [call("add", a=1, b=1)]},
                   {"error": {"type": "server", "message": "upstream exploded"}}])
    go("limit", [{"tool_calls": [call("add", a=i, b=1)]} for i in range(5)], max_turns=3)
    go("halt", [{"tool_calls": [call("add", a=1, b=1)]}] * 6,
       duplicate_policy=DuplicatePolicy(max_refusals=2))
    go("observe", [{"tool_calls": [call("add", a=1, b=1)]}] * 2 + [{"text": "ok"}],
       duplicate_policy=DuplicatePolicy(observe_only=True))
    go("exempt", [{"tool_calls": [call("wait", seconds=0)]}] * 2
       + [{"tool_calls": [call("get_weather", city="Paris")]}] * 2 + [{"text": "ok"}],
       duplicate_policy=DuplicatePolicy(exempt=("wait",)))
    go("invalid", [{"tool_calls": [call("add", a="two", b=3), call("launch", x=1),
                                   {"name": "add", "arguments_raw": "{not json"}]},
                   {"text": "sorry"}])
    go("pipeline", [{"tool_calls": [call("add", a=1, b=1)]}] * 2 + [{"text": "ok"}],
       mode="pipeline", system="Finish with the handler.")
    chat = Loop(journal, ScriptedProvider([{"text": "hi"}, {"tool_calls": [call("add", a=2, b=2)]},
                                           {"text": "4"}]), tools)
    chat.start("hello", conversation_id="chat")
    chat.send("chat", "2 + 2?")
    single = Loop(journal, ScriptedProvider([{"tool_calls": [call("add", a=1, b=1)]},
                                             {"text": "done"}]), tools)
    single.start("go", conversation_id="single", single_turn=True)
    single.resume("single")
    fork(journal, "demo", 4, new_id="demo-fork")
    Loop(journal, ScriptedProvider([{"tool_calls": [call("add", a=1, b=2)]}, {"text": "3"}]),
         tools).resume("demo-fork")


def test_every_conversation_the_loop_records_replays_without_divergence(journal):
    record_everything(journal)
    # the real tools, so validation, unknown tools and enablement are checked too
    report = replay_all(journal, driver=partial(loop_driver, registry=demo_tools()))
    assert [r.conversation_id for r in report.divergences] == []
    assert all(r.checked == journal.last_seq(r.conversation_id) for r in report.results)
    assert len(report.results) == 11 and not any(r.skipped for r in report.results)


def test_spec_stand_in_tools_replay_recordings_without_the_tools_code(journal, monkeypatch):
    record_everything(journal)
    monkeypatch.delenv("SECRET_SERVICE_KEY", raising=False)

    @tool(requires_env=["SECRET_SERVICE_KEY"])
    def secret() -> dict:
        """Needs a key."""
        raise AssertionError("must not run")

    run(journal, "go", provider=ScriptedProvider([{"tool_calls": [call("secret")]},
                                                   {"text": "ok"}]),
        tools=[secret], conversation_id="disabled")
    report = replay_all(journal)  # stand-ins: invalid and disabled calls refused as recorded
    assert report.ok and len(report.results) == 12, [r.divergence for r in report.divergences]


def test_a_changed_tool_result_rendering_diverges_at_that_result(journal):
    record_everything(journal)
    tools = demo_tools()
    rerun = partial(loop_driver, registry=tools, rerender=True)
    assert replay(journal, "demo", driver=rerun).ok  # same rules: same texts
    tools.get("get_weather").success_message = lambda name, data, args: f"{name} changed"
    result = replay(journal, "demo", collect=True, driver=rerun)
    first = next(row.seq for row, e in own_events(journal, "demo")
                 if type(e).__name__ == "ToolCompleted" and e.name == "get_weather")
    assert result.divergence.seq == first
    assert result.divergence.actual["content"].startswith("get_weather changed")
    assert result.divergence.expected["content"].startswith("SUCCESS: Get Weather")


def test_a_changed_duplicate_rule_diverges_where_the_recording_refused(journal):
    register_predicate("replay_no_paris", lambda name, args, state: args.get("city") == "Paris")
    run(journal, "go", provider=ScriptedProvider([
        {"tool_calls": [call("get_weather", city="London"), call("get_weather", city="Paris")]},
        {"text": "ok"}]), tools=demo_tools(), conversation_id="p",
        duplicate_policy=DuplicatePolicy(rule="custom", custom="replay_no_paris"))
    assert replay(journal, "p").ok
    # the user changes their rule: Paris is fine now, London is not
    register_predicate("replay_no_paris", lambda name, args, state: args.get("city") == "London")
    with pytest.raises(Divergence) as info:
        replay(journal, "p")
    seqs = {type(e).__name__: row.seq for row, e in own_events(journal, "p")}
    assert info.value.seq == seqs["ToolStarted"]  # the recorded London call ran
    assert info.value.actual["type"] == "tool_call_rejected"


def test_a_changed_directive_diverges_at_the_started_event(journal):
    directives = Directives()
    directives.register("global", "identity", lambda ctx: "You are a careful agent.")
    Loop(journal, ScriptedProvider([{"text": "ok"}]), demo_tools(),
         directives=directives).start("go", conversation_id="d", system="Be brief.")
    assert replay(journal, "d", driver=partial(loop_driver, directives=directives)).ok
    changed = Directives()
    changed.register("global", "identity", lambda ctx: "You are a reckless agent.")
    result = replay(journal, "d", collect=True, driver=partial(loop_driver, directives=changed))
    d = result.divergence
    assert d.seq == 1  # the started event records the rendered directive
    assert d.expected["system"] == "You are a careful agent.\n\nBe brief."
    assert d.actual["system"] == "You are a reckless agent.\n\nBe brief."


def test_a_loop_that_builds_another_request_diverges_at_it_with_a_request_diff(journal):
    run(journal, "go", provider=ScriptedProvider([{"text": "ok"}]), tools=demo_tools(),
        conversation_id="t", parameters={"temperature": 0.5})
    # tomorrow's loop sends the requests to another model than the recorded one
    result = replay(journal, "t", collect=True, driver=partial(loop_driver, model="m-2"))
    d = result.divergence
    assert d.seq == 3 and d.expected["type"] == d.actual["type"] == "model_requested"
    assert d.expected["digest"] != d.actual["digest"] and d.actual["model"] == "m-2"
    assert '+  "model": "m-2",' in d.request_diff.splitlines()
    assert "@@" in d.render()


def test_swap_through_the_loop_serves_recorded_results_and_refuses_unrecorded(journal):
    run(journal, "Weather in Paris and 2 + 3?", provider=ScriptedProvider([
        {"tool_calls": [call("get_weather", city="Paris"), call("add", a=2, b=3)]},
        {"text": "Sunny, 5."}]), tools=demo_tools(), conversation_id="src")
    target = ScriptedProvider([
        {"tool_calls": [call("add", b=3, a=2.0), call("get_weather", city="Rome")]},
        {"text": "5; no Rome."}], model="other-model")
    result = swap(journal, "src", target, new_id="dst")
    assert (result.status, result.replay_of, result.model) == ("completed", "src", "other-model")
    events = [e for _, e in own_events(journal, "dst")]
    done = [e for e in events if type(e).__name__ == "ToolCompleted"]
    rejected = [e for e in events if type(e).__name__ == "ToolCallRejected"]
    assert [(d.name, d.source) for d in done] == [("add", "recorded")]
    assert [(r.name, r.reason) for r in rejected] == [("get_weather", "unrecorded")]
    assert "was not run" in rejected[0].content
    assert events[0].replay_of.tools == "recorded" and events[0].model == "other-model"
    assert journal.verify().ok


def test_swap_live_runs_the_tools_and_refuse_runs_none(journal):
    run(journal, "2 + 3?", provider=ScriptedProvider([
        {"tool_calls": [call("add", a=2, b=3)]}, {"text": "5"}]), tools=demo_tools(),
        conversation_id="src")
    script = [{"tool_calls": [call("add", a=4, b=4)]}, {"text": "8"}]
    live = swap(journal, "src", ScriptedProvider(script), tools="live",
                live_tools=demo_tools(), new_id="live")
    refused = swap(journal, "src", ScriptedProvider(script), tools="refuse", new_id="refused")
    assert live.status == refused.status == "completed"
    [done] = [e for _, e in own_events(journal, "live") if type(e).__name__ == "ToolCompleted"]
    assert done.source == "live" and done.data == {"sum": 8}
    [no] = [e for _, e in own_events(journal, "refused") if type(e).__name__ == "ToolCallRejected"]
    assert no.reason == "refused"
