"""Provider responses recorded through Conversation: no API key ever reaches the journal
(events, raw bodies, file bytes), and refused calls lead to valid next requests."""

from __future__ import annotations

import json

import pytest

from turnlog.engine.model.conversation import Conversation
from turnlog.engine.model.events import (
    ConversationStarted,
    ModelRequested,
    ModelResponded,
    ToolCompleted,
    ToolStarted,
    UserMessage,
)
from turnlog.engine.model.messages import tool_calls_of
from tests.providerkit import KEYS, make_provider, request, run_tool, script_three_turns


@pytest.mark.parametrize("name", ["anthropic", "openai", "gemini", "openai-responses"])
def test_a_recorded_conversation_never_contains_the_api_key(fake_api, journal, db_path, name):
    provider = make_provider(name, fake_api)
    script_three_turns(fake_api, name)
    conv = Conversation.start(journal, ConversationStarted(
        conversation_id="c1", provider=name, model="fake-model", system="sys"))
    conv.append(UserMessage.of("What's the weather in Paris, and 2 + 3?"))
    for turn in range(1, 4):
        req = request(list(conv.state.messages))
        conv.append(ModelRequested(turn=turn, digest=req.digest(), provider=name,
                                   model="fake-model"))
        response = provider.complete(req)
        conv.append(ModelResponded(turn=turn, parts=response.parts,
                                   stop_reason=response.stop_reason, usage=response.usage,
                                   provider=name, model=response.model,
                                   response_id=response.response_id, raw=response.raw))
        for call in tool_calls_of(response.parts):
            content, ok = run_tool(call)
            conv.append(ToolStarted(call_id=call.id, name=call.name, arguments=call.arguments),
                        ToolCompleted(call_id=call.id, name=call.name, success=ok,
                                      content=content))
    assert conv.state.turn_count == 3
    assert conv.state.final_content == "Paris is sunny and 2 + 3 = 5."
    assert fake_api.refusals() == []
    key = KEYS[name]
    assert any(key in json.dumps(r.headers) for r in fake_api.requests), "the key was sent"
    stored = db_path.read_bytes() + (db_path.with_name(db_path.name + "-wal").read_bytes()
                                     if db_path.with_name(db_path.name + "-wal").exists() else b"")
    assert b"Paris is sunny" in stored, "the scan reads the recorded bytes"
    assert key.encode() not in stored
    assert key.split("-")[-1].encode() not in stored, "not even a fragment of it"


@pytest.mark.parametrize("name", ["anthropic", "openai", "gemini", "openai-responses"])
def test_a_failed_call_echoing_the_key_records_no_key(fake_api, journal, db_path, name):
    from turnlog.engine.errors import ProviderError
    from turnlog.engine.model.events import ModelFailed
    from tests.fakeapi import error_reply

    key = KEYS[name]
    fake_api.script(name, [error_reply(name, 401, f"Incorrect API key provided: {key}")])
    conv = Conversation.start(journal, ConversationStarted(
        conversation_id="c1", provider=name, model="fake-model"))
    conv.append(UserMessage.of("hi"))
    req = request(list(conv.state.messages))
    conv.append(ModelRequested(turn=1, digest=req.digest(), provider=name, model="fake-model"))
    with pytest.raises(ProviderError) as info:
        make_provider(name, fake_api).complete(req)
    err = info.value
    conv.append(ModelFailed(turn=1, error_type=type(err).__name__, message=str(err),
                            provider=name, status=err.status, retryable=err.retryable))
    wal = db_path.with_name(db_path.name + "-wal")
    stored = db_path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    assert b"Incorrect API key provided" in stored
    assert key.split("-")[-1].encode() not in stored


@pytest.mark.parametrize("name", ["anthropic", "openai", "gemini", "openai-responses"])
def test_a_cut_off_call_is_refused_and_the_next_request_is_valid(fake_api, journal, name):
    from turnlog.engine.model.events import ToolCallRejected
    from tests.fakeapi import reply

    stop = {"anthropic": "max_tokens", "openai": "length", "gemini": "MAX_TOKENS",
            "openai-responses": "max_output_tokens"}[name]
    fake_api.script(name, [
        reply(name, text="Checking.", tool_calls=[("get_weather", {"city": "Par"})],
              stop_reason=stop),
        reply(name, text="Sorry, let me answer directly: sunny.")])
    provider = make_provider(name, fake_api)
    conv = Conversation.start(journal, ConversationStarted(
        conversation_id="c1", provider=name, model="fake-model"))
    conv.append(UserMessage.of("Weather in Paris?"))
    for turn in (1, 2):
        req = request(list(conv.state.messages))
        conv.append(ModelRequested(turn=turn, digest=req.digest(), provider=name,
                                   model="fake-model"))
        response = provider.complete(req)
        conv.append(ModelResponded(turn=turn, parts=response.parts,
                                   stop_reason=response.stop_reason, provider=name))
        for call in tool_calls_of(response.parts):
            assert call.invalid == "cut off by max_tokens", "never executed"
            conv.append(ToolCallRejected(call_id=call.id, name=call.name, reason="cut_off",
                                         content=f"Error: the call was {call.invalid}."))
    assert fake_api.refusals() == []
    assert conv.state.final_content == "Sorry, let me answer directly: sunny."
    assert "cut off by max_tokens" in str(fake_api.requests_for(name)[1].body)
