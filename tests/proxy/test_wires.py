"""Each served wire's request is read through its registry module's one interface."""

from __future__ import annotations

import json

import pytest

from turnlog.engine.model.messages import Text, ToolCall
from turnlog.engine.providers import ModelResponse, registry
from turnlog.replay.proxy.translate import TARGETS, response_body
from turnlog.replay.proxy.wires import WIRES, UnparsedRequest, parse_request

#: one request per wire: system "be brief", a user "hi", one tool, temperature 0.5
BODIES = {
    "openai": ("/v1/chat/completions", {
        "model": "m", "temperature": 0.5,
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "look", "description": "d",
                                                    "parameters": {"type": "object"}}}]}),
    "openai-responses": ("/v1/responses", {
        "model": "m", "temperature": 0.5, "instructions": "be brief", "input": "hi",
        "tools": [{"type": "function", "name": "look", "description": "d",
                   "parameters": {"type": "object"}}]}),
    "anthropic": ("/v1/messages", {
        "model": "m", "temperature": 0.5, "max_tokens": 10, "system": "be brief",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "look", "description": "d", "input_schema": {"type": "object"}}]}),
    "gemini": ("/v1beta/models/m:generateContent", {
        "generationConfig": {"temperature": 0.5},
        "system_instruction": {"parts": [{"text": "be brief"}]},
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "tools": [{"functionDeclarations": [{"name": "look", "description": "d",
                                             "parameters": {"type": "object"}}]}]}),
}


@pytest.mark.parametrize("name", sorted(WIRES))
def test_a_request_of_every_wire_reads_to_the_same_neutral_request(name):
    path, body = BODIES[name]
    parsed = parse_request(WIRES[name], path, json.dumps(body).encode())
    assert parsed.model == "m" and parsed.system == "be brief"
    assert [(m.role, m.parts) for m in parsed.messages] == [("user", (Text(text="hi"),))]
    assert [t.name for t in parsed.tools] == ["look"]
    # history, system and tools are structure, never parameters
    assert not {"messages", "input", "contents", "system", "instructions", "system_instruction",
                "tools", "model"} & set(parsed.parameters)


def test_the_wires_are_the_registry_modules():
    for name, served in WIRES.items():
        assert served.module is registry.wire(name)
        assert type(served.assembler()) is registry.wire(name).ASSEMBLER


def test_a_history_the_wire_refuses_is_an_unparsed_request_naming_the_wire():
    with pytest.raises(UnparsedRequest, match="not a readable anthropic request"):
        parse_request(WIRES["anthropic"], "/v1/messages",
                      b'{"model": "m", "messages": "hi"}')


@pytest.mark.parametrize("name", TARGETS)
def test_a_neutral_answer_written_on_a_wire_reads_back_through_that_wire(name):
    call = ToolCall(id="call_1", name="look", arguments={"q": "x"}, raw_arguments='{"q": "x"}')
    response = ModelResponse(parts=(Text(text="ok"), call), model="m", stop_reason="tool_use")
    back = registry.wire(name).map_response(response_body(name, response, "m"))
    assert [type(p) for p in back.parts] == [Text, ToolCall]
    assert back.parts[0].text == "ok"
    assert (back.parts[1].name, back.parts[1].arguments) == ("look", {"q": "x"})


@pytest.mark.parametrize("name", sorted(WIRES))
@pytest.mark.parametrize("body", [b"[" * 100_000, b'{"messages": ' + b"[" * 5_000 + b"]" * 5_000 + b"}"])
def test_a_body_nested_past_the_limit_is_unparsed_not_a_recursion_error(name, body):
    wire = WIRES[name]
    with pytest.raises(UnparsedRequest, match="nests deeper"):
        parse_request(wire, "/v1/any", body)
