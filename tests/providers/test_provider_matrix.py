"""A conversation recorded from each provider renders into a request every provider accepts."""

from __future__ import annotations

import json

import pytest
from tests.fakeapi import reply
from tests.providerkit import make_provider, request, run_three_turns

from turnlog.engine.model.messages import Message, Text, ToolCall, ToolResult

NAMES = ["anthropic", "openai", "gemini", "openai-responses"]


@pytest.mark.parametrize("target", NAMES)
@pytest.mark.parametrize("source", NAMES)
def test_recorded_conversation_continues_on_any_provider(fake_api, source, target):
    history = run_three_turns(make_provider(source, fake_api), fake_api)
    history.append(Message(role="user", parts=(Text(text="And tomorrow?"),)))
    fake_api.script(target, [reply(target, text="Sunny again.")])
    response = make_provider(target, fake_api).complete(request(history))
    assert response.parts == (Text(text="Sunny again."),)
    assert fake_api.refusals() == []
    sent = json.dumps(fake_api.requests_for(target)[-1].body)
    for needle in ("Let me check both.", "Paris is sunny and 2 + 3 = 5.", "And tomorrow?",
                   "add needs two numbers", '\\"temp_c\\": 21'):
        # Gemini takes a structured result back as the object it is
        found = needle in sent or (target == "gemini" and needle.replace("\\", "") in sent)
        assert found, f"{needle!r} is lost from {source} to {target}"
    thought = "The user wants two things."
    if source == target and source in ("anthropic", "gemini"):
        assert thought in sent, "a provider gets its own thinking back"
    else:
        assert thought not in sent, "another provider's thinking is never sent"


FOREIGN = [
    Message(role="user", parts=(Text(text="go"),)),
    Message(role="assistant", provider="kimi", parts=(
        Text(text="  "),
        ToolCall(id="functions.get_weather:0", name="get_weather", arguments={"city": "Oslo"},
                 raw_arguments='{"city": "Oslo"}'),
        ToolCall(id="functions.get_weather:1", name="get_weather", arguments={"city": "Rome"},
                 raw_arguments='{"city": "Rome"}'),
        ToolCall(id="", name="add", arguments={}, raw_arguments="{", invalid="not JSON"))),
    Message(role="tool", parts=(ToolResult(call_id="functions.get_weather:1",
                                           name="get_weather", content="rain"),)),
    Message(role="tool", parts=(ToolResult(call_id="functions.get_weather:0",
                                           name="get_weather", content="snow"),)),
    Message(role="tool", parts=(ToolResult(call_id="nobody-called-this", name="add",
                                           content="orphan"),)),
]


@pytest.mark.parametrize("target", NAMES)
def test_foreign_ids_unanswered_and_orphan_results_still_make_a_valid_request(fake_api, target):
    fake_api.script(target, [reply(target, text="ok")])
    make_provider(target, fake_api).complete(request(FOREIGN))
    assert fake_api.refusals() == []
    body = fake_api.requests_for(target)[-1].body
    sent = json.dumps(body)
    assert "rain" in sent and "snow" in sent and "orphan" in sent
    assert "no result was recorded" in sent, "the unanswered call gets an error result"


def test_anthropic_results_follow_call_order_with_mapped_ids(fake_api):
    fake_api.script("anthropic", [reply("anthropic", text="ok")])
    make_provider("anthropic", fake_api).complete(request(FOREIGN))
    messages = fake_api.requests_for("anthropic")[-1].body["messages"]
    uses = [b["id"] for b in messages[1]["content"] if b["type"] == "tool_use"]
    results = [b for b in messages[2]["content"] if b["type"] == "tool_result"]
    assert uses == ["x_tlfunctions_2eget_5fweather_3a0", "x_tlfunctions_2eget_5fweather_3a1",
                    "x_tl"]
    assert [r["tool_use_id"] for r in results] == uses
    assert [r.get("content") for r in results[:2]] == ["snow", "rain"]
    assert results[2]["is_error"] is True
    assert messages[2]["content"][3]["type"] == "text", "the orphan result follows as text"


REPEATED = [  # some OpenAI-compatible servers number calls from 0 in every response
    Message(role="user", parts=(Text(text="go"),)),
    Message(role="assistant", parts=(
        ToolCall(id="call_0", name="add", arguments={"a": 1}, raw_arguments='{"a": 1}'),
        ToolCall(id="call_0", name="add", arguments={"a": 2}, raw_arguments='{"a": 2}'))),
    Message(role="tool", parts=(ToolResult(call_id="call_0", name="add", content="one"),)),
    Message(role="tool", parts=(ToolResult(call_id="call_0", name="add", content="two"),)),
    Message(role="assistant", parts=(
        ToolCall(id="call_0", name="add", arguments={"a": 3}, raw_arguments='{"a": 3}'),)),
    Message(role="tool", parts=(ToolResult(call_id="call_0", name="add", content="three"),)),
]


@pytest.mark.parametrize("target", NAMES)
def test_repeated_call_ids_are_made_unique_and_results_follow_their_calls(fake_api, target):
    fake_api.script(target, [reply(target, text="ok")])
    make_provider(target, fake_api).complete(request(REPEATED))
    assert fake_api.refusals() == []
    body = fake_api.requests_for(target)[-1].body
    if target == "anthropic":
        pairs = [(b["tool_use_id"], b["content"]) for m in body["messages"]
                 for b in m["content"] if b["type"] == "tool_result"]
        assert pairs == [("call_0", "one"), ("call_0_2", "two"), ("call_0_3", "three")]
    if target == "openai":
        pairs = [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]
        assert pairs == [("call_0", "one"), ("call_0_2", "two"), ("call_0_3", "three")]
