"""Each provider plays a 3-turn tool conversation through its real client against the fake API."""

from __future__ import annotations

import json

import pytest
from tests.providerkit import KEYS, make_provider, run_three_turns

from turnlog.engine.model.messages import Text, Thinking, ToolCall, ToolResult, text_of, tool_calls_of


@pytest.mark.parametrize("name", ["anthropic", "openai", "gemini", "openai-responses"])
def test_three_turn_tool_conversation_is_accepted_at_every_turn(fake_api, name):
    history = run_three_turns(make_provider(name, fake_api), fake_api)
    assert fake_api.refusals() == []
    assert len(fake_api.requests_for(name)) == 3
    assistant = [m for m in history if m.role == "assistant"]
    assert [len(tool_calls_of(m.parts)) for m in assistant] == [2, 1, 0]
    assert text_of(assistant[-1].parts) == "Paris is sunny and 2 + 3 = 5."
    first_calls = tool_calls_of(assistant[0].parts)
    assert [(c.name, c.arguments) for c in first_calls] == [
        ("get_weather", {"city": "Paris"}), ("add", {"a": 2, "b": "three"})]
    ids = [c.id for m in assistant for c in tool_calls_of(m.parts)]
    assert len(set(ids)) == 3, "call ids are unique within the conversation"
    results = [p for m in history if m.role == "tool" for p in m.parts]
    assert [r.is_error for r in results] == [False, True, False]


def test_anthropic_puts_all_results_of_a_turn_in_one_user_message_first(fake_api):
    run_three_turns(make_provider("anthropic", fake_api), fake_api)
    second = fake_api.requests_for("anthropic")[1]
    sent = second.headers.get("x-api-key") or second.headers["authorization"].split()[-1]
    assert sent == KEYS["anthropic"]
    body = second.body
    assert body["system"] == "You are a careful assistant."
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assistant, results = body["messages"][1]["content"], body["messages"][2]["content"]
    assert [b["type"] for b in assistant] == ["thinking", "text", "tool_use", "tool_use"]
    assert assistant[0]["signature"], "own thinking goes back with its signature"
    assert [b["type"] for b in results] == ["tool_result", "tool_result"]
    assert [b["tool_use_id"] for b in results] == [b["id"] for b in assistant[2:]]
    assert "is_error" not in results[0] and results[1]["is_error"] is True
    # sampling parameters travel in the body (extra_body), max_tokens as an argument
    assert body["temperature"] == 0.2 and body["max_tokens"] == 512


def test_openai_sends_one_tool_message_per_result_after_the_calls(fake_api):
    run_three_turns(make_provider("openai", fake_api), fake_api)
    third = fake_api.requests_for("openai")[2]
    assert third.headers["authorization"] == f"Bearer {KEYS['openai']}"
    roles = [m["role"] for m in third.body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "assistant", "tool"]
    only_calls = third.body["messages"][5]
    assert only_calls["content"] is None and len(only_calls["tool_calls"]) == 1
    args = only_calls["tool_calls"][0]["function"]["arguments"]
    assert isinstance(args, str) and json.loads(args) == {"a": 2, "b": 3}
    failed = third.body["messages"][4]
    assert failed["content"].startswith("Error") and failed["tool_call_id"] == \
        third.body["messages"][2]["tool_calls"][1]["id"]
    assert third.body["max_completion_tokens"] == 512


def test_gemini_answers_function_calls_by_name_and_order(fake_api):
    run_three_turns(make_provider("gemini", fake_api), fake_api)
    second = fake_api.requests_for("gemini")[1]
    assert second.path == "/v1beta/models/fake-model:generateContent"
    assert second.headers["x-goog-api-key"] == KEYS["gemini"]
    assert "key=" not in second.path, "the key never goes in the URL"
    body = second.body
    assert body["systemInstruction"] == {"parts": [{"text": "You are a careful assistant."}]}
    assert body["tools"][0]["functionDeclarations"][0]["name"] == "get_weather"
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
    responses = [p["functionResponse"] for p in body["contents"][2]["parts"]]
    assert [r["name"] for r in responses] == ["get_weather", "add"]
    # a result that is a JSON object goes as that object; other text as {"output": ...}
    assert "temp_c" in responses[0]["response"] and "error" in responses[1]["response"]
    assert body["generationConfig"] == {"maxOutputTokens": 512, "temperature": 0.2}


def test_gemini_call_ids_are_deterministic_per_turn_and_index(fake_api):
    history = run_three_turns(make_provider("gemini", fake_api), fake_api)
    ids = [c.id for m in history for c in tool_calls_of(m.parts)]
    assert ids == ["gemini_t1_1", "gemini_t1_2", "gemini_t2_1"]


@pytest.mark.parametrize("name", ["anthropic", "gemini"])
def test_thinking_is_kept_in_neutral_form_for_its_own_provider(fake_api, name):
    history = run_three_turns(make_provider(name, fake_api), fake_api)
    thinking = [p for p in history[1].parts if type(p) is Thinking]
    assert thinking and thinking[0].provider == name
    assert thinking[0].text == "The user wants two things."
    assert [type(p) for p in history[1].parts if type(p) is not Thinking] == [
        Text, ToolCall, ToolCall]
    assert all(type(p) is ToolResult for m in history if m.role == "tool" for p in m.parts)
