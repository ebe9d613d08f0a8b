"""Provider swap: a run recorded through OpenAI's wire format, re-run against Anthropic and
Gemini (the loopback fake API), with the three tool policies."""

from __future__ import annotations

from functools import partial

import pytest

from turnlog.engine.demo import demo_tools
from turnlog.engine.errors import ConversationExistsError
from turnlog.engine.loop import run
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.replay import diff, rebuild, replay
from turnlog.replay.driver import loop_driver
from turnlog.replay.errors import ReplayError
from turnlog.replay.rebuild import own_events
from turnlog.replay.swap import swap
from tests.fakeapi import error_reply, reply
from tests.providerkit import make_provider

TOOLS = demo_tools()


def record_openai(journal, fake):
    fake.script("openai", [
        reply("openai", text="Checking.", tool_calls=[("get_weather", {"city": "Paris"}),
                                                      ("add", {"a": 2, "b": 3})]),
        reply("openai", text="Paris is sunny and 2 + 3 = 5."),
    ])
    run(journal, "Weather in Paris, and 2 + 3?", provider=make_provider("openai", fake),
        tools=TOOLS, conversation_id="oa", system="Be brief.",
        parameters={"max_tokens": 256})
    assert fake.refusals() == [] and rebuild(journal, "oa").status == "completed"
    assert replay(journal, "oa").ok  # the OpenAI recording replays deterministically


def script_target(fake, name):
    fake.script(name, [
        # the target calls add with other key order (same call), then an unrecorded city
        reply(name, thinking="Let me think.", tool_calls=[("add", {"b": 3, "a": 2}),
                                                          ("get_weather", {"city": "Rome"})]),
        reply(name, text="2 + 3 = 5; I have no weather for Rome."),
    ])


@pytest.mark.parametrize("target", ["anthropic", "gemini", "bedrock"])
def test_an_openai_run_replays_against_another_provider_with_recorded_tools(
        journal, fake_api, target):
    record_openai(journal, fake_api)
    script_target(fake_api, target)
    result = swap(journal, "oa", make_provider(target, fake_api), tools="recorded",
                  new_id=f"to-{target}")
    assert fake_api.refusals() == []  # every request the target got was valid for it
    assert len(fake_api.requests_for(target)) == 2
    assert (result.conversation_id, result.replay_of, result.status) == (
        f"to-{target}", "oa", "completed")
    events = [e for _, e in own_events(journal, f"to-{target}")]
    started = events[0]
    assert started.replay_of.conversation_id == "oa" and started.replay_of.tools == "recorded"
    assert (started.provider, started.system, started.tools) == (target, "Be brief.",
                                                                 TOOLS.specs())
    answers = {e.name: e for e in events if type(e).__name__ in ("ToolCompleted",
                                                                  "ToolCallRejected")}
    assert answers["add"].source == "recorded" and '"sum":5' in answers["add"].content
    assert answers["get_weather"].reason == "unrecorded"
    assert "'oa'" in answers["get_weather"].content and "not run" in answers["get_weather"].content
    # provenance: each model event names the provider and model that wrote it
    assert {(e.provider, e.model) for e in events if type(e).__name__ == "ModelResponded"} == {
        (target, "fake-model")}
    assert replay(journal, f"to-{target}").ok  # a swapped run replays deterministically too
    d = diff(journal, "oa", f"to-{target}")
    assert not d.same and d.turns[0].differences == ["text", "calls"]
    assert d.turns[0].a.provider == "openai" and d.turns[0].b.provider == target
    assert journal.verify().ok


def test_the_request_the_target_refuses_is_recorded_as_a_failure_not_history(journal, fake_api):
    record_openai(journal, fake_api)
    fake_api.script("anthropic", [error_reply("anthropic", 400, "messages: bad request")])
    result = swap(journal, "oa", make_provider("anthropic", fake_api), new_id="x")
    assert result.status == "failed" and "bad request" in result.error
    types = [type(e).__name__ for _, e in own_events(journal, "x")]
    assert types == ["ConversationStarted", "UserMessage", "ModelRequested", "ModelFailed",
                     "ConversationFailed"]


def test_refuse_policy_refuses_every_call_and_live_runs_them(journal, fake_api):
    record_openai(journal, fake_api)
    calls = [("add", {"a": 2, "b": 3})]
    fake_api.script("gemini", [reply("gemini", tool_calls=calls), reply("gemini", text="ok"),
                               reply("gemini", tool_calls=calls), reply("gemini", text="ok")])
    swap(journal, "oa", make_provider("gemini", fake_api), tools="refuse", new_id="r")
    swap(journal, "oa", make_provider("gemini", fake_api), tools="live", new_id="l",
         live_tools=demo_tools())
    assert replay(journal, "r").ok and replay(journal, "l", driver=partial(
        loop_driver, registry=demo_tools())).ok
    refused = [e for _, e in own_events(journal, "r") if type(e).__name__ == "ToolCallRejected"]
    assert [e.reason for e in refused] == ["refused"]
    live = [e for _, e in own_events(journal, "l") if type(e).__name__ == "ToolCompleted"]
    assert [(e.source, e.data) for e in live] == [("live", {"sum": 5})]
    assert fake_api.refusals() == []


def test_swap_bad_input_is_refused_before_anything_is_written(journal, fake_api):
    record_openai(journal, fake_api)
    before = journal.last_seq("oa"), len(list(journal.streams()))
    with pytest.raises(ReplayError, match="unknown tool policy 'sometimes'"):
        swap(journal, "oa", ScriptedProvider([]), tools="sometimes")
    with pytest.raises(ConversationExistsError, match="already exists"):
        swap(journal, "oa", ScriptedProvider([]), new_id="oa")
    assert (journal.last_seq("oa"), len(list(journal.streams()))) == before
