"""A real agent framework through the proxy, offline against the fake API: the OpenAI Agents
SDK (``openai-agents``) with a function tool, recorded as one conversation per run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.fakeapi import reply
from tests.providerkit import KEYS

from turnlog.engine.model.conversation import load_state
from turnlog.engine.model.messages import ToolCall, ToolResult
from turnlog.journal import Journal

from .test_record import conversations, journal_bytes

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

set_tracing_disabled(True)  # the SDK would export traces to OpenAI otherwise
CALLS: list[str] = []


@function_tool
def get_weather(city: str) -> str:
    """The weather for a city."""
    CALLS.append(city)
    return json.dumps({"city": city, "forecast": "sunny", "temp_c": 21})


def run_agent(base_url: str, model_class, wire: str, question: str) -> str:
    client = AsyncOpenAI(api_key=KEYS["openai"], base_url=base_url, max_retries=0)
    agent = Agent(name="weather", instructions="Answer with the weather tool.",
                  tools=[get_weather], model=model_class(model="fake-model", openai_client=client))
    return asyncio.run(Runner.run(agent, question)).final_output


@pytest.mark.parametrize("model_class, wire", [(OpenAIChatCompletionsModel, "openai"),
                                               (OpenAIResponsesModel, "openai-responses")])
def test_an_agents_sdk_run_with_a_function_tool_is_one_conversation(
        proxy, fake_api, model_class, wire):
    CALLS.clear()
    for city in ("Paris", "Rome"):
        fake_api.script(wire, [reply(wire, tool_calls=[("get_weather", {"city": city})]),
                               reply(wire, text=f"{city} is sunny, 21 °C.")])
    finals = [run_agent(proxy.base_url(wire), model_class, wire, f"Weather in {city}?")
              for city in ("Paris", "Rome")]
    proxy.drain()
    assert finals == ["Paris is sunny, 21 °C.", "Rome is sunny, 21 °C."]
    assert CALLS == ["Paris", "Rome"] and fake_api.refusals() == []
    found = conversations(Path(proxy.db))
    assert len(found) == 2  # one per run
    with Journal(proxy.db) as journal:
        assert journal.verify().ok
        for conv_id, events in found.items():
            assert [e.type for e in events] == [
                "conversation_started", "user_message", "model_requested", "model_responded",
                "tool_started", "tool_completed", "model_requested", "model_responded",
                "conversation_completed"]
            state = load_state(journal, conv_id)
            (call,) = [p for m in state.messages for p in m.parts if type(p) is ToolCall]
            (result,) = [p for m in state.messages for p in m.parts if type(p) is ToolResult]
            assert result.call_id == call.id and call.arguments["city"] in result.content
            assert state.system == "Answer with the weather tool."
            assert state.metadata["proxy"]["client"].startswith("Agents/Python")
    assert KEYS["openai"].encode() not in journal_bytes(Path(proxy.db))
