"""Helpers for provider tests: demo tools, a 3-turn tool conversation, provider builders.

``make_provider(name, fake)`` builds a real provider pointed at the fake API;
``run_three_turns(provider, fake)`` plays the standard conversation (turn 1:
text + two tool calls, one of which fails; turn 2: one corrected call;
turn 3: final text) the way the loop would, and returns the neutral history.
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakeapi import AWS_KEYS, FakeAPI, reply

from turnlog.engine.model.events import ToolSpec
from turnlog.engine.model.messages import Message, Text, ToolCall, ToolResult, tool_calls_of
from turnlog.engine.providers import ModelRequest, get_provider

KEYS = {"anthropic": "sk-ant-test-KEY-5b1d7e", "openai": "sk-test-KEY-93a0c4",
        "gemini": "AIza-test-KEY-77f2e1", "openai-responses": "sk-test-KEY-r3sp0n",
        "bedrock": next(iter(AWS_KEYS.values()))}  # Bedrock's: the AWS secret key
SYSTEM = "You are a careful assistant."
TOOLS = (
    ToolSpec(name="get_weather", description="Weather for a city",
             parameters={"type": "object", "properties": {"city": {"type": "string"}},
                         "required": ["city"]}),
    ToolSpec(name="add", description="Add two numbers",
             parameters={"type": "object", "properties": {"a": {"type": "number"},
                                                          "b": {"type": "number"}}}),
)
PARAMETERS = {"max_tokens": 512, "temperature": 0.2}


def make_provider(name: str, fake: FakeAPI, **kw: Any):
    """A real provider for ``name`` whose client talks to ``fake`` (Bedrock: signed with
    the fake's AWS credentials)."""
    if name == "bedrock":
        key_id, secret = next(iter(AWS_KEYS.items()))
        kw = {"model": "fake-model", "aws_access_key_id": key_id,
              "aws_secret_access_key": secret, "region": "us-east-1", **kw}
        return get_provider(name, base_url=fake.base_url(name), **kw)
    kw.setdefault("api_key", KEYS[name])
    return get_provider(name, model="fake-model", base_url=fake.base_url(name), **kw)


def run_tool(call: ToolCall) -> tuple[str, bool]:
    """The demo tools: ``add`` fails on a non-number, as a real tool would."""
    if call.name == "get_weather":
        return json.dumps({"city": call.arguments["city"], "forecast": "sunny", "temp_c": 21}), True
    if not all(isinstance(call.arguments.get(k), (int, float)) for k in "ab"):
        return "Error: add needs two numbers a and b", False
    return json.dumps({"sum": call.arguments["a"] + call.arguments["b"]}), True


def script_three_turns(fake: FakeAPI, name: str) -> None:
    fake.script(name, [
        reply(name, text="Let me check both.", thinking="The user wants two things.",
              tool_calls=[("get_weather", {"city": "Paris"}), ("add", {"a": 2, "b": "three"})]),
        reply(name, tool_calls=[("add", {"a": 2, "b": 3})]),
        reply(name, text="Paris is sunny and 2 + 3 = 5."),
    ])


def request(history: list[Message], **kw: Any) -> ModelRequest:
    return ModelRequest(model=kw.pop("model", "fake-model"), system=SYSTEM,
                        messages=tuple(history), tools=TOOLS, parameters=PARAMETERS, **kw)


def run_three_turns(provider, fake: FakeAPI, name: str | None = None) -> list[Message]:
    """Script and play the 3-turn conversation; return the neutral history."""
    script_three_turns(fake, name or provider.name)
    history = [Message(role="user", parts=(Text(text="What's the weather in Paris, and 2 + 3?"),))]
    for _ in range(3):
        response = provider.complete(request(history))
        history.append(Message(role="assistant", parts=response.parts,
                               provider=response.provider, model=response.model))
        for call in tool_calls_of(response.parts):
            content, ok = run_tool(call)
            history.append(Message(role="tool", parts=(
                ToolResult(call_id=call.id, name=call.name, content=content, is_error=not ok),)))
    return history
