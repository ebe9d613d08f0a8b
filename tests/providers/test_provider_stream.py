"""Streaming through each real SDK against the fake server's server-sent events.

A streamed response assembles into exactly the ``ModelResponse`` the same
content gets unstreamed (one mapping path); deltas arrive piece by piece; a
stream cut mid-way raises ``StreamInterrupted`` with the partial parts.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnlog.engine.errors import RateLimitError, StreamInterrupted
from turnlog.engine.model.messages import Message, Text, Thinking, ToolCall
from turnlog.engine.providers._stream import CUT_BY_STREAM, StreamDelta
from turnlog.engine.providers.registry import wire
from tests.fakeapi import Reply, error_reply, reply, sse_events
from tests.providerkit import make_provider, request

NAMES = ["anthropic", "openai", "gemini", "openai-responses"]


def cut(name: str, events: int) -> int:
    """Cut after ``events`` events, counted past the Responses API's longer preamble
    (``response.in_progress``, the item and its content part announced before any text)."""
    return events + (3 if name == "openai-responses" else 0)
HISTORY = [Message(role="user", parts=(Text(text="hi"),))]
SHAPES = {
    "text": {"text": "Hello there, how are you today?"},
    "thinking": {"text": "Paris.", "thinking": "The capital of France is Paris."},
    "tools": {"text": "Let me check.", "tool_calls": [("add", {"a": 1, "b": 2}),
                                                      ("get_weather", {"city": "Zürich"})]},
    "only_tool": {"tool_calls": [("add", {"a": 10, "b": -2.5})]},
}
ASSEMBLERS = {name: wire(name).ASSEMBLER for name in NAMES}  # each in its wire's module


def _shape(name: str, shape: str) -> dict:
    kw = dict(SHAPES[shape])
    if name == "openai":
        kw.pop("thinking", None)  # Chat Completions has no thinking in the fake's shape
    return reply(name, **kw)


def _drain(handle) -> list[StreamDelta]:
    return list(handle)


async def _adrain(handle) -> list[StreamDelta]:
    return [d async for d in handle]


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("name", NAMES)
def test_a_streamed_response_is_the_unstreamed_one(fake_api, name, shape):
    body = _shape(name, shape)
    fake_api.script(name, [body, body, body])
    provider = make_provider(name, fake_api)
    plain = provider.complete(request(HISTORY))
    handle = provider.stream(request(HISTORY))
    deltas = _drain(handle)
    assert handle.response == plain
    ahandle = provider.astream(request(HISTORY))
    assert asyncio.run(_adrain(ahandle)) == deltas and ahandle.response == plain
    assert fake_api.refusals() == []
    # the deltas are the response's pieces, in order
    text = "".join(p.text for p in plain.parts if type(p) is Text)
    assert "".join(d.text for d in deltas if d.kind == "text") == text
    thinking = "".join(p.text for p in plain.parts if type(p) is Thinking)
    assert "".join(d.text for d in deltas if d.kind == "thinking") == thinking
    calls = [p for p in plain.parts if type(p) is ToolCall]
    pieces = [d for d in deltas if d.kind == "tool_arguments"]
    assert {d.name for d in pieces} == {c.name for c in calls}
    joined = {}
    for d in pieces:
        joined[d.index] = joined.get(d.index, "") + d.text
    assert [json.loads(v) for _, v in sorted(joined.items())] == [c.arguments for c in calls]
    if text:
        assert len([d for d in deltas if d.kind == "text"]) > 1  # really piece by piece


@pytest.mark.parametrize("name", NAMES)
def test_a_streamed_request_says_so_on_the_wire(fake_api, name):
    fake_api.script(name, [reply(name, text="hi")])
    _drain(make_provider(name, fake_api).stream(request(HISTORY)))
    sent = fake_api.requests_for(name)[0]
    if name == "gemini":
        assert sent.path.endswith(":streamGenerateContent?alt=sse")
    else:
        assert sent.body["stream"] is True
    if name == "openai":
        assert sent.body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("name", NAMES)
def test_a_cut_stream_raises_with_the_partial_parts(fake_api, name):
    body = reply(name, text="The answer is forty-two, of course.")
    fake_api.script(name, [Reply(body=body, cut=cut(name, 4)), Reply(body=body, cut=cut(name, 4))])
    provider = make_provider(name, fake_api)
    with pytest.raises(StreamInterrupted) as info:
        _drain(provider.stream(request(HISTORY)))
    (part,) = info.value.partial
    assert type(part) is Text and part.text and "The answer is forty-two".startswith(part.text)
    assert info.value.retryable
    with pytest.raises(StreamInterrupted) as ainfo:
        asyncio.run(_adrain(provider.astream(request(HISTORY))))
    assert ainfo.value.partial == info.value.partial


@pytest.mark.parametrize("name", NAMES)
def test_a_cut_tool_call_is_kept_invalid_never_run(fake_api, name):
    body = reply(name, tool_calls=[("get_weather", {"city": "Reykjavík, Iceland"})])
    events = len(sse_events(name, body))
    fake_api.script(name, [Reply(body=body, cut=events - 3)])
    with pytest.raises(StreamInterrupted) as info:
        _drain(make_provider(name, fake_api).stream(request(HISTORY)))
    (call,) = [p for p in info.value.partial if type(p) is ToolCall]
    # even one whose arguments happen to parse: the stream never said the call was complete
    assert call.name == "get_weather" and call.invalid == CUT_BY_STREAM and call.arguments == {}


@pytest.mark.parametrize("name", NAMES)
def test_an_error_before_the_stream_is_the_error_complete_raises(fake_api, name):
    fake_api.script(name, [error_reply(name, 429, "slow", retry_after=3)])
    with pytest.raises(RateLimitError) as info:
        _drain(make_provider(name, fake_api).stream(request(HISTORY)))
    assert info.value.retry_after == 3.0


def _events(name: str, body: dict) -> list[dict]:
    out = []
    for chunk in sse_events(name, body):
        data = [line[6:] for line in chunk.decode().splitlines() if line.startswith("data: ")]
        if data and data[0] != "[DONE]":
            out.append(json.loads(data[0]))
    return out


_texts = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
_args = st.dictionaries(st.text("abcxyz", min_size=1, max_size=4),
                        st.one_of(st.integers(), _texts, st.booleans()), max_size=3)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(NAMES), text=_texts, thinking=_texts,
       calls=st.lists(st.tuples(st.sampled_from(["add", "get_weather"]), _args), max_size=3))
def test_assembling_the_events_of_a_body_gives_the_body_back(name, text, thinking, calls):
    """The law: for any body, fold(events(body)) == body (text, thinking, calls, usage, stop)."""
    body = reply(name, text=text or None, thinking=thinking or None, tool_calls=calls)
    assembler = ASSEMBLERS[name]()
    deltas = [d for event in _events(name, body) for d in assembler.feed(event)]
    assert assembler.done and assembler.body() == body
    assert "".join(d.text for d in deltas if d.kind == "text") == text


_junk = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-2, 5), _texts),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.sampled_from(["type", "index", "delta", "text",
                                                        "content_block", "message", "usage",
                                                        "choices", "candidates", "response",
                                                        "item", "output_index", "content_index",
                                                        "partial_json", "tool_calls"]),
                                       inner, max_size=4), max_leaves=12)
_event_types = st.sampled_from([
    "message_start", "content_block_start", "content_block_delta", "content_block_stop",
    "message_delta", "message_stop", "response.created", "response.output_item.added",
    "response.output_text.delta", "response.function_call_arguments.delta",
    "response.reasoning_summary_text.delta", "response.completed", "error"])


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(NAMES), events=st.lists(st.one_of(
    st.dictionaries(st.sampled_from(["index", "delta", "content_block", "message", "usage",
                                     "item", "output_index", "content_index", "response",
                                     "choices", "candidates"]), _junk, max_size=4)
    .flatmap(lambda d: _event_types.map(lambda t: {**d, "type": t})),
    _junk.filter(lambda v: isinstance(v, dict))), max_size=8))
def test_malformed_stream_events_give_a_typed_error_never_a_crash(name, events):
    from turnlog.engine.errors import MalformedResponseError

    assembler = ASSEMBLERS[name]()
    try:
        for event in events:
            assembler.feed(event)
        assembler.body()
    except MalformedResponseError:
        pass
