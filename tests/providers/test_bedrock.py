"""The fifth wire, Amazon Bedrock's Converse API: run, stream, import, export and swap.

Requests are SigV4-signed by botocore and checked by the fake server (the
signature recomputed with the key's secret, the body validated by
``fakerules.check_bedrock`` and botocore's service model); streamed answers
arrive in AWS's binary event-stream framing.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from turnlog.engine.model.conversation import load_state
from turnlog.engine.demo import demo_tools
from turnlog.engine.errors import (
    AuthenticationError,
    BadRequestError,
    RateLimitError,
    StreamInterrupted,
)
from turnlog.engine.formats.cassette import split_document
from turnlog.engine.formats.detect import detect_entry
from turnlog.engine.formats.exporter import export_data
from turnlog.engine.formats.otlp import otlp_request
from turnlog.engine.formats.importer import import_entries, read_transcript
from turnlog.engine.loop import run
from turnlog.engine.model.messages import Message, Text, Thinking, ToolCall, ToolResult
from turnlog.engine.audit.prices import Prices
from turnlog.engine.providers import bedrock
from turnlog.engine.providers.registry import wire
from turnlog.replay import rebuild
from turnlog.replay.rebuild import own_events
from turnlog.replay.swap import swap
from tests.fakeapi import (
    AWS_KEYS,
    PROVIDERS,
    Reply,
    bedrock_post,
    error_reply,
    event_frames,
    reply,
)
from tests.providerkit import KEYS, make_provider, request, run_three_turns
from tests.sdktypes import bedrock_problem

HI = [Message(role="user", parts=(Text(text="hi"),))]


def test_a_three_turn_tool_conversation_is_signed_valid_and_read_back(fake_api):
    history = run_three_turns(make_provider("bedrock", fake_api), fake_api)
    assert fake_api.refusals() == []
    sent = fake_api.requests_for("bedrock")
    assert [r.path for r in sent] == ["/model/fake-model/converse"] * 3
    assert sent[0].headers["authorization"].startswith(
        "AWS4-HMAC-SHA256 Credential=AKIDTURNLOGTEST/")
    assert "/us-east-1/bedrock/aws4_request" in sent[0].headers["authorization"]
    second = sent[1].body
    assert second["system"] == [{"text": "You are a careful assistant."}]
    assert second["inferenceConfig"] == {"maxTokens": 512, "temperature": 0.2}
    results = second["messages"][2]["content"]  # both results in ONE user message
    assert [b["toolResult"]["status"] for b in results] == ["success", "error"]
    assert [m.role for m in history] == ["user", "assistant", "tool", "tool", "assistant",
                                         "tool", "assistant"]
    thinking = history[1].parts[0]
    assert type(thinking) is Thinking and thinking.provider == "bedrock" and thinking.signature
    assert history[-1].parts == (Text(text="Paris is sunny and 2 + 3 = 5."),)
    assert second["messages"][1]["content"][0] == {"reasoningContent": {"reasoningText": {
        "text": "The user wants two things.", "signature": "sig-The user"}}}


def test_a_wrong_secret_fails_the_signature_check(fake_api):
    provider = make_provider("bedrock", fake_api, aws_secret_access_key="not-the-secret")
    fake_api.script("bedrock", [reply("bedrock", text="never")])
    with pytest.raises(AuthenticationError, match="403"):
        provider.complete(request(HI))


def test_api_errors_become_typed_errors_with_the_exception_name_and_no_secret(fake_api):
    provider = make_provider("bedrock", fake_api)
    secret = KEYS["bedrock"]
    fake_api.script("bedrock", [error_reply("bedrock", 429, "slow down", retry_after=3),
                                error_reply("bedrock", 400, f"bad input near {secret}")])
    with pytest.raises(RateLimitError) as limited:
        provider.complete(request(HI))
    assert limited.value.retry_after == 3 and "ThrottlingException" in str(limited.value)
    with pytest.raises(BadRequestError) as refused:
        provider.complete(request(HI))
    assert "ValidationException" in str(refused.value) and secret not in str(refused.value)


def test_missing_credentials_name_the_variables(monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(AuthenticationError, match="AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"):
        wire("bedrock").create_provider("amazon.nova-pro-v1:0")
    with pytest.raises(AuthenticationError, match="both"):
        wire("bedrock").create_provider(aws_access_key_id="AKID")


def test_a_stream_in_event_stream_framing_gives_deltas_and_the_same_response(fake_api):
    provider = make_provider("bedrock", fake_api)
    body = reply("bedrock", text="Paris is sunny.", thinking="Check first.",
                 tool_calls=[("get_weather", {"city": "Paris"})])
    fake_api.script("bedrock", [body, body])
    handle = provider.stream(request(HI))
    deltas = list(handle)
    assert "".join(d.text for d in deltas if d.kind == "text") == "Paris is sunny."
    assert "".join(d.text for d in deltas if d.kind == "thinking") == "Check first."
    args = [d for d in deltas if d.kind == "tool_arguments"]
    assert json.loads("".join(d.text for d in args)) == {"city": "Paris"}
    assert {d.name for d in args} == {"get_weather"}
    unstreamed = provider.complete(request(HI))
    assert handle.response.parts == unstreamed.parts
    assert handle.response.usage == unstreamed.usage and handle.response.stop_reason == "tool_use"
    assert [r.path for r in fake_api.requests_for("bedrock")] == [
        "/model/fake-model/converse-stream", "/model/fake-model/converse"]
    assert fake_api.refusals() == []


def test_the_async_stream_reads_the_same_frames(fake_api):
    provider = make_provider("bedrock", fake_api)
    fake_api.script("bedrock", [reply("bedrock", text="Bonjour tout le monde")])

    async def read():
        handle = provider.astream(request(HI))
        texts = [d.text async for d in handle]
        await provider.aclose()
        return texts, handle.response

    texts, response = asyncio.run(read())
    assert "".join(texts) == "Bonjour tout le monde"
    assert response.parts == (Text(text="Bonjour tout le monde"),)


def test_a_cut_stream_keeps_its_partial_answer_and_a_call_never_runs(fake_api):
    provider = make_provider("bedrock", fake_api)
    body = reply("bedrock", text="Let me look.", tool_calls=[("add", {"a": 1, "b": 2})])
    fake_api.script("bedrock", [Reply(body=body, cut=6)])
    with pytest.raises(StreamInterrupted) as cut:
        list(provider.stream(request(HI)))
    text, call = cut.value.partial
    assert text == Text(text="Let me look.")
    assert type(call) is ToolCall and call.invalid  # its arguments may be cut: never run


def test_an_exception_event_mid_stream_is_the_error_it_names(fake_api):
    provider = make_provider("bedrock", fake_api)
    frames = event_frames(reply("bedrock", text="partial answer"))[:3]
    from tests.fakeapi import _frame

    frames.append(_frame({":message-type": "exception", ":exception-type": "throttlingException",
                          ":content-type": "application/json"},
                         json.dumps({"message": "Too many tokens"}).encode()))
    fake_api.script("bedrock", [Reply(raw=b"".join(frames))])
    with pytest.raises(StreamInterrupted, match="throttlingException: Too many tokens") as broken:
        list(provider.stream(request(HI)))
    assert broken.value.partial == (Text(text="partial "),)  # the two 4-character pieces


@pytest.mark.parametrize("other", PROVIDERS)
def test_histories_swap_to_and_from_each_other_wire(fake_api, other):
    there = run_three_turns(make_provider(other, fake_api), fake_api)
    fake_api.script("bedrock", [reply("bedrock", text="ok")])
    make_provider("bedrock", fake_api).complete(request(there))  # another wire's history
    here = run_three_turns(make_provider("bedrock", fake_api), fake_api)
    fake_api.script(other, [reply(other, text="ok")])
    make_provider(other, fake_api).complete(request(here))  # Bedrock's history elsewhere
    assert fake_api.refusals() == []


@pytest.mark.parametrize("target", ["openai", "bedrock"])
def test_a_recorded_run_replays_against_another_wire(journal, fake_api, target):
    source = "anthropic" if target == "bedrock" else "bedrock"
    fake_api.script(source, [reply(source, text="Checking.", tool_calls=[("add", {"a": 2, "b": 3})]),
                             reply(source, text="2 + 3 = 5.")])
    run(journal, "2 + 3?", provider=make_provider(source, fake_api), tools=demo_tools(),
        conversation_id="src", system="Be brief.", parameters={"max_tokens": 256})
    fake_api.script(target, [reply(target, tool_calls=[("add", {"b": 3, "a": 2})]),
                             reply(target, text="5")])
    result = swap(journal, "src", make_provider(target, fake_api), tools="recorded",
                  new_id="swapped")
    assert fake_api.refusals() == []
    assert (result.status, rebuild(journal, "swapped").status) == ("completed", "completed")
    started = own_events(journal, "swapped")[0][1]
    assert started.provider == target and started.replay_of.conversation_id == "src"


def _conversation(journal, fake_api):
    fake_api.script("bedrock", [
        reply("bedrock", text="Adding.", tool_calls=[("add", {"a": 2, "b": 3})],
              usage={"inputTokens": 20, "outputTokens": 7, "totalTokens": 27,
                     "cacheReadInputTokens": 4}),
        reply("bedrock", text="5")])
    run(journal, "2 + 3?", provider=make_provider("bedrock", fake_api, model="amazon.nova-pro-v1:0"),
        tools=demo_tools(), conversation_id="b", system="Be brief.")


def test_export_validates_against_botocore_and_imports_back(journal, fake_api):
    _conversation(journal, fake_api)
    data = export_data(journal, "b", "bedrock")
    assert data["system"] == [{"text": "Be brief."}]
    assert bedrock_problem({"modelId": "m", **data, "toolConfig": {"tools": bedrock.map_tools(
        load_state(journal, "b").tools)}}) is None
    fake_api.script("bedrock", [reply("bedrock", text="ok")])
    assert bedrock_post(fake_api, data).status_code == 200 and fake_api.refusals() == []
    again = import_entries(journal, data["messages"], conversation_id="again",
                           envelope={"system": data["system"], "format": "bedrock"})
    assert again.formats == {"bedrock": len(data["messages"])}
    before, after = load_state(journal, "b"), load_state(journal, "again")
    assert after.system == "Be brief."
    assert [(m.role, m.parts) for m in after.messages] == [(m.role, m.parts)
                                                           for m in before.messages]


def test_converse_entries_are_detected_and_bodies_and_cassettes_import(journal):
    message = {"role": "user", "content": [{"text": "hi"}]}
    assert detect_entry(message) == "bedrock"
    body = {"modelId": "amazon.nova-pro-v1:0", "system": [{"text": "Be brief."}],
            "messages": [message, {"role": "assistant", "content": [
                {"toolUse": {"toolUseId": "t1", "name": "add", "input": {"a": 1}}}]},
                {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "status": "error",
                                                             "content": [{"json": {"e": 1}}]}}]}],
            "inferenceConfig": {"maxTokens": 64},
            "toolConfig": {"tools": [{"toolSpec": {"name": "add", "description": "Add",
                                                   "inputSchema": {"json": {"type": "object"}}}}]}}
    assert bedrock_problem(body) is None  # a real request body
    streamed = event_frames(reply("bedrock", text="Done."))  # recorded as boto3 yields it
    events = [{"messageStart": {"role": "assistant"}},
              {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "Do"}}},
              {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "ne."}}},
              {"contentBlockStop": {"contentBlockIndex": 0}},
              {"messageStop": {"stopReason": "end_turn"}},
              {"metadata": {"usage": {"inputTokens": 9, "outputTokens": 2, "totalTokens": 11}}}]
    assert len(streamed) == len(events)
    entries, envelope = split_document({"request": body, "response": {"stream": events}})
    assert (envelope["wire"], envelope["format"], envelope["model"]) == (
        "bedrock", "bedrock", "amazon.nova-pro-v1:0")
    result = import_entries(journal, entries, envelope=envelope, conversation_id="cas")
    state = load_state(journal, "cas")
    assert result.formats == {"bedrock": 4} and state.system == "Be brief."
    assert [t.name for t in state.tools] == ["add"] and state.provider == "bedrock"
    tool = state.messages[2].parts[0]
    assert type(tool) is ToolResult and tool.is_error and tool.content == '{"e": 1}'
    assert state.messages[-1].parts == (Text(text="Done."),)
    assert state.usage.input_tokens == 9 and state.usage.output_tokens == 2
    entries, envelope = read_transcript(json.dumps({"request": body, "response": reply(
        "bedrock", text="Done.")}))
    assert envelope["usage"]["inputTokens"] == 10


def test_traces_and_prices_know_the_wire(journal, fake_api):
    _conversation(journal, fake_api)
    trace = json.dumps(otlp_request(journal, "b"))
    assert '"aws.bedrock"' in trace
    usage = load_state(journal, "b").usage
    charge = Prices.default().charge("bedrock", "amazon.nova-pro-v1:0", "2025-06-01", usage)
    assert charge.priced_as == "aws/amazon.nova-pro-v1:0"  # genai-prices' Bedrock models
    assert charge.amount is not None and charge.amount > 0


def test_the_secret_key_is_never_sent(fake_api):
    run_three_turns(make_provider("bedrock", fake_api), fake_api)
    secret = next(iter(AWS_KEYS.values()))
    for sent in fake_api.requests_for("bedrock"):
        assert secret not in json.dumps(sent.headers) and secret not in json.dumps(sent.body)
