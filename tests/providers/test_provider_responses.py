"""Response mapping: malformed bodies, invalid arguments, cut-off calls, usage, stop reasons, images."""

from __future__ import annotations

import pytest

from turnlog.engine.errors import MalformedResponseError
from turnlog.engine.model.messages import Image, Message, Opaque, Text, ToolCall, Usage
from turnlog.engine.providers import anthropic, gemini, openai
from tests.fakeapi import reply

MODULES = {"anthropic": anthropic, "openai": openai, "gemini": gemini}


def _openai_call(arguments):
    body = reply("openai", tool_calls=[("add", "{}")])
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = arguments
    return openai.map_response(body).parts[0]


@pytest.mark.parametrize("arguments,why", [
    ('{"a": 1,', "not valid JSON"), ("", "empty"), ("[1, 2]", "got list"), ("3", "got int"),
    (None, "got NoneType"), ('{"a": NaN}', "NaN and Infinity"), ('{"a": -Infinity}', "NaN"),
])
def test_openai_invalid_arguments_are_kept_raw_and_marked(arguments, why):
    call = _openai_call(arguments)
    assert type(call) is ToolCall and call.name == "add" and call.arguments == {}
    assert why in call.invalid
    if isinstance(arguments, str):
        assert call.raw_arguments == arguments, "never silently replaced"


def test_openai_valid_arguments_keep_their_exact_text():
    call = _openai_call('{"b": 2,  "a": 1}')
    assert call.invalid is None and call.arguments == {"a": 1, "b": 2}
    assert call.raw_arguments == '{"b": 2,  "a": 1}'


@pytest.mark.parametrize("name,body,where", [
    ("openai", {"choices": []}, "no choices"),
    ("openai", {"choices": [{"finish_reason": "stop"}]}, "choices[0].message"),
    ("openai", {"choices": [{"message": {"tool_calls": [{"type": "function",
                                                          "function": {"name": "x"}}]}}]},
     "tool_calls[0].id"),
    ("anthropic", {"id": "m"}, "content"),
    ("anthropic", {"content": [{"type": "tool_use", "id": "t1", "input": {}}]}, "content[0].name"),
    ("anthropic", {"content": [{"type": "no_such_block", "id": "s"}]}, "'no_such_block'"),
    ("anthropic", {"content": [{"text": "no type"}]}, "content[0].type"),
    ("gemini", {"candidates": []}, "no candidates"),
    ("gemini", {"candidates": [{"content": {"role": "model"}}]}, "content.parts"),
    ("gemini", {"candidates": [{"content": {"parts": [{"noSuchPart": {}}]}}]},
     "unknown part kind"),
    ("gemini", {"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]},
     "functionCall.name"),
    ("anthropic", ["not", "an", "object"], "not an object"),
])
def test_malformed_bodies_are_typed_errors_naming_the_problem(name, body, where):
    with pytest.raises(MalformedResponseError, match=None) as info:
        MODULES[name].map_response(body)
    assert where in str(info.value) and info.value.provider == name


def test_anthropic_non_object_input_is_an_invalid_call_not_a_crash():
    body = {"content": [{"type": "tool_use", "id": "t1", "name": "add", "input": [1]}],
            "stop_reason": "tool_use"}
    call = anthropic.map_response(body).parts[0]
    assert call.invalid and call.raw_arguments == "[1]" and call.arguments == {}


def test_openai_unknown_tool_call_type_is_kept_and_marked_not_dropped():
    body = reply("openai", text="x")
    body["choices"][0]["message"]["tool_calls"] = [
        {"id": "c9", "type": "custom", "custom": {"name": "grep", "input": "foo"}}]
    (text, call) = openai.map_response(body).parts
    assert call.id == "c9" and call.name == "grep" and "unsupported" in call.invalid


@pytest.mark.parametrize("name,stop", [("anthropic", "max_tokens"), ("openai", "length"),
                                       ("gemini", "MAX_TOKENS")])
def test_a_call_cut_off_by_max_tokens_is_marked_so_it_never_runs(name, stop):
    body = reply(name, text="Sure.", tool_calls=[("get_weather", {"city": "Paris"}),
                                                 ("add", {"a": 1})], stop_reason=stop)
    response = MODULES[name].map_response(body)
    assert response.stop_reason == "max_tokens"
    first, last = response.parts[1], response.parts[2]
    assert first.invalid is None and first.arguments == {"city": "Paris"}
    assert last.invalid == "cut off by max_tokens" and last.arguments == {}


@pytest.mark.parametrize("name,stop,expected", [
    ("anthropic", "end_turn", "end_turn"), ("anthropic", "stop_sequence", "end_turn"),
    ("anthropic", "refusal", "refusal"), ("anthropic", "pause_turn", "other"),
    ("openai", "stop", "end_turn"), ("openai", "content_filter", "refusal"),
    ("openai", "weird", "other"), ("gemini", "STOP", "end_turn"), ("gemini", "SAFETY", "refusal"),
    ("gemini", "MALFORMED_FUNCTION_CALL", "other"),
])
def test_stop_reasons_map_to_the_neutral_table(name, stop, expected):
    assert MODULES[name].map_response(reply(name, text="x", stop_reason=stop)).stop_reason == expected


@pytest.mark.parametrize("name", ["anthropic", "openai", "gemini"])
def test_tool_calls_make_the_stop_reason_tool_use(name):
    body = reply(name, tool_calls=[("add", {"a": 1, "b": 2})])
    if name == "gemini":
        assert body["candidates"][0]["finishReason"] == "STOP"  # Gemini says STOP
    assert MODULES[name].map_response(body).stop_reason == "tool_use"


def test_gemini_blocked_prompt_is_a_refusal_with_no_parts():
    response = gemini.map_response({"promptFeedback": {"blockReason": "SAFETY"}})
    assert response.parts == () and response.stop_reason == "refusal"


def test_gemini_ids_without_a_turn_come_from_the_body_and_are_stable():
    body = reply("gemini", tool_calls=[("add", {"a": 1}), ("add", {"a": 2})])
    first = [p.id for p in gemini.map_response(body).parts]
    assert first == [p.id for p in gemini.map_response(body).parts]
    assert len(set(first)) == 2 and all(i.startswith("gemini_") for i in first)
    body["candidates"][0]["content"]["parts"][0]["functionCall"]["id"] = "native-1"
    assert gemini.map_response(body, turn=4).parts[0].id == "native-1"
    assert gemini.map_response(body, turn=4).parts[1].id == "gemini_t4_2"


def test_openai_refusal_is_text_with_a_refusal_stop():
    body = reply("openai", text=None)
    body["choices"][0]["message"]["refusal"] = "I can't help with that."
    response = openai.map_response(body)
    assert response.parts == (Text(text="I can't help with that."),)
    assert response.stop_reason == "refusal"


PNG = "iVBORw0KGgo="


@pytest.mark.parametrize("image", [Image(media_type="image/png", data=PNG),
                                   Image(url=f"data:image/png;base64,{PNG}")])
def test_images_map_between_data_urls_and_base64_sources(image):
    msgs = [Message(role="user", parts=(Text(text="what is this?"), image))]
    _, a = anthropic.map_messages("", msgs)
    assert a[0]["content"][1] == {"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": PNG}}
    _, o = openai.map_messages("", msgs)
    assert o[0]["content"][1] == {"type": "image_url",
                                  "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    _, g = gemini.map_messages("", msgs)
    assert g[0]["parts"][1] == {"inlineData": {"mimeType": "image/png", "data": PNG}}
    for back in (anthropic.unmap_messages("", a)[1], openai.unmap_messages(None, o)[1],
                 gemini.unmap_messages(None, g)[1]):
        assert back[0].parts[1] == Image(media_type="image/png", data=PNG)


def test_remote_image_urls_stay_urls():
    msgs = [Message(role="user", parts=(Image(url="https://example.org/cat.png"),))]
    assert anthropic.map_messages("", msgs)[1][0]["content"][0]["source"] == {
        "type": "url", "url": "https://example.org/cat.png"}
    assert openai.map_messages("", msgs)[1][0]["content"][0]["image_url"]["url"] == \
        "https://example.org/cat.png"


PYDANTIC_SCHEMA = {  # what pydantic's model_json_schema() produces for a small model
    "$schema": "https://json-schema.org/draft/2020-12/schema", "title": "Args", "type": "object",
    "additionalProperties": False, "required": ["city"],
    "properties": {"city": {"title": "City", "type": "string"},
                   "unit": {"anyOf": [{"type": "string", "const": "c"}, {"type": "null"}],
                            "default": None},
                   "days": {"type": ["integer", "null"], "items": {"type": "integer",
                                                                  "exclusiveMinimum": 0}}}}


def test_gemini_tool_schemas_are_reduced_to_the_subset_gemini_accepts(fake_api):
    from turnlog.engine.model.events import ToolSpec
    from turnlog.engine.providers import ModelRequest
    from tests.fakerules import check_gemini
    from tests.providerkit import make_provider

    spec = ToolSpec(name="get_weather", parameters=PYDANTIC_SCHEMA)
    req = ModelRequest(model="m", messages=(Message(role="user", parts=(Text(text="hi"),)),),
                       tools=(spec,))
    assert check_gemini({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                         "tools": [{"functionDeclarations": [
                             {"name": "x", "parameters": PYDANTIC_SCHEMA}]}]}) is not None
    fake_api.script("gemini", [reply("gemini", text="ok")])
    make_provider("gemini", fake_api).complete(req)
    assert fake_api.refusals() == []
    sent = fake_api.requests[0].body["tools"][0]["functionDeclarations"][0]["parameters"]
    assert sent["properties"]["days"] == {"type": "integer", "nullable": True,
                                          "items": {"type": "integer"}}
    assert sent["properties"]["unit"]["anyOf"][0] == {"type": "string", "enum": ["c"]}
    assert sent["required"] == ["city"] and "additionalProperties" not in sent


def test_responses_api_keeps_the_order_of_text_and_calls():
    from turnlog.engine.providers import openai_responses
    from turnlog.engine.model.messages import ToolResult

    msgs = [Message(role="user", parts=(Text(text="go"),)),
            Message(role="assistant", parts=(
                Text(text="First "), Text(text="this."),
                ToolCall(id="c1", name="add", arguments={"a": 1}, raw_arguments='{"a":1}'),
                Text(text="Then that."),
                ToolCall(id="c2", name="add", arguments={"a": 2}, raw_arguments='{"a":2}'))),
            Message(role="tool", parts=(ToolResult(call_id="c2", name="add", content="4",
                                                   is_error=True),)),
            Message(role="tool", parts=(ToolResult(call_id="c1", name="add", content="2"),))]
    instructions, items = openai_responses.map_messages("sys", msgs)
    assert instructions == "sys"
    assert [(i.get("type") or i["role"]) for i in items] == [
        "user", "assistant", "function_call", "assistant", "function_call",
        "function_call_output", "function_call_output"]
    assert items[1]["content"] == "First this."
    assert [(i["call_id"], i["output"]) for i in items[5:]] == [("c1", "2"), ("c2", "Error: 4")]


def test_responses_api_incomplete_and_failed_responses():
    from turnlog.engine.errors import ServerError
    from turnlog.engine.providers import openai_responses

    body = reply("openai-responses", tool_calls=[("add", '{"a": 1, "b"')],
                 stop_reason="max_output_tokens")
    response = openai_responses.map_response(body)
    assert response.stop_reason == "max_tokens"
    assert response.parts[0].invalid == "cut off by max_tokens"
    with pytest.raises(ServerError, match="overloaded"):
        openai_responses.map_response({"status": "failed", "output": [],
                                       "error": {"message": "overloaded"}})
    with pytest.raises(MalformedResponseError, match="hologram_call"):
        openai_responses.map_response({"status": "completed",
                                       "output": [{"type": "hologram_call", "id": "h"}]})
    # a built-in tool's item is the provider's own: kept verbatim, bound to this wire
    search = {"type": "web_search_call", "id": "w", "status": "completed"}
    answer = openai_responses.map_response({"status": "completed", "output": [
        search, {"type": "message", "content": [{"type": "output_text", "text": "found"}]}]})
    assert answer.parts == (Opaque(provider="openai-responses", kind="web_search_call",
                                   data=search), Text(text="found"))


def test_gemini_max_tokens_spent_on_thinking_is_an_empty_max_tokens_answer():
    body = {"candidates": [{"content": {"role": "model"}, "finishReason": "MAX_TOKENS"}],
            "usageMetadata": {"promptTokenCount": 5, "thoughtsTokenCount": 100}}
    response = gemini.map_response(body)
    assert response.parts == () and response.stop_reason == "max_tokens"
    assert response.usage.reasoning_tokens == 100 and response.usage.output_tokens == 100
