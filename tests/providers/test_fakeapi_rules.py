"""The fake API refuses what the real APIs refuse, so its acceptance means something."""

from __future__ import annotations

import httpx
import pytest

from turnlog.engine.errors import BadRequestError
from turnlog.engine.model.messages import Message, Text
from tests.fakeapi import reply
from tests.fakerules import check_anthropic, check_gemini, check_openai
from tests.providerkit import make_provider, request

U = {"role": "user", "content": "hi"}
USE = {"type": "tool_use", "id": "t1", "name": "add", "input": {}}
USE2 = {"type": "tool_use", "id": "t2", "name": "add", "input": {}}
RES = {"type": "tool_result", "tool_use_id": "t1", "content": "3"}
RES2 = {"type": "tool_result", "tool_use_id": "t2", "content": "4"}


def a(*messages, **kw):
    return {"model": "m", "max_tokens": 5, "messages": list(messages), **kw}


@pytest.mark.parametrize("body,problem", [
    (a(U, {"role": "assistant", "content": [USE, USE2]}, {"role": "user", "content": [RES]},
       {"role": "assistant", "content": "x"}), "without `tool_result`"),
    (a(U, {"role": "assistant", "content": [USE, USE2]}, {"role": "user", "content": [RES]},
       {"role": "user", "content": [RES2]}), "without `tool_result` blocks immediately after: t2"),
    (a(U, {"role": "assistant", "content": [USE]},
       {"role": "user", "content": [{"type": "text", "text": "ok"}, RES]}), "come first"),
    (a({"role": "user", "content": [{"type": "text", "text": "  "}]}), "non-whitespace"),
    (a({"role": "user", "content": ""}), "non-empty"),
    (a(U, {"role": "assistant", "content": [dict(USE, id="functions.add:0")]}), "pattern"),
    (a({"role": "system", "content": "s"}, U), "role"),
    (a(U, {"role": "assistant", "content": [USE]}), "without `tool_result`"),
    (a(U, {"role": "assistant", "content": "x"}, {"role": "user", "content": [RES]}),
     "unexpected `tool_use_id`"),
    (a(U, temperature=1, frequency_penalty=1), "Extra inputs"),
    ({"model": "m", "messages": [U]}, "max_tokens"),
    (a(U, {"role": "assistant", "content": [USE]}, {"role": "user", "content": [RES]},
       {"role": "assistant", "content": [USE]}, {"role": "user", "content": [RES]}),
     "ids must be unique"),
])
def test_anthropic_rules(body, problem):
    assert problem in (check_anthropic(body) or "")


def test_anthropic_rules_accept_a_well_formed_tool_turn():
    assert check_anthropic(a(U, {"role": "assistant", "content": [USE, USE2]},
                             {"role": "user", "content": [RES2, dict(RES, is_error=True),
                                                          {"type": "text", "text": "go on"}]},
                             system="s", temperature=0.1)) is None


CALL = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}


def o(*messages):
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}, *messages]}


@pytest.mark.parametrize("body,problem", [
    (o({"role": "assistant", "content": None, "tool_calls": [CALL]}),
     "responding to each 'tool_call_id'"),
    (o({"role": "assistant", "content": None, "tool_calls": [CALL]},
       {"role": "user", "content": "x"}), "did not have response"),
    (o({"role": "assistant", "content": "", "tool_calls": [CALL]},
       {"role": "tool", "tool_call_id": "c1", "content": "3"}), "not an empty string"),
    (o({"role": "assistant", "content": None,
        "tool_calls": [dict(CALL, function={"name": "add", "arguments": {}})]},
       {"role": "tool", "tool_call_id": "c1", "content": "3"}), "JSON string"),
    (o({"role": "tool", "tool_call_id": "c1", "content": "3"}), "preceeding"),
    (o({"role": "assistant", "content": None}), "content is required"),
    (o({"role": "assistant", "content": None, "tool_calls": [dict(CALL, id="")]}), "1 to 40"),
])
def test_openai_rules(body, problem):
    assert problem in (check_openai(body) or "")


def test_openai_rules_accept_a_well_formed_tool_turn():
    assert check_openai(o({"role": "assistant", "content": "let me", "tool_calls": [CALL]},
                          {"role": "tool", "tool_call_id": "c1", "content": "3"},
                          {"role": "assistant", "content": "3"})) is None


FC = {"functionCall": {"name": "add", "args": {}}}
FC2 = {"functionCall": {"name": "mul", "args": {}}}


def fr(name):
    return {"functionResponse": {"name": name, "response": {"output": "3"}}}


def g(*contents, **kw):
    return {"contents": [{"role": "user", "parts": [{"text": "hi"}]}, *contents], **kw}


@pytest.mark.parametrize("body,problem", [
    (g({"role": "model", "parts": [FC, FC2]}, {"role": "user", "parts": [fr("mul"), fr("add")]}),
     "number of function response parts"),
    (g({"role": "model", "parts": [FC, FC2]}, {"role": "user", "parts": [fr("add")]}),
     "number of function response parts"),
    (g({"role": "model", "parts": [FC]}), "no function response turn"),
    (g({"role": "assistant", "parts": [{"text": "x"}]}), "valid role"),
    (g({"role": "user", "parts": [{"text": "again"}]}), "consecutive user"),
    (g({"role": "model", "parts": [{"text": ""}]}), "non-empty"),
    (g({"role": "model", "parts": []}), "must not be empty"),
    (g(system_instruction={"parts": [{"text": "s"}]}), "Unknown name"),
    (g({"role": "model", "parts": [{"text": "x", "functionCall": {"name": "a"}}]}),
     "exactly one data field"),
])
def test_gemini_rules(body, problem):
    assert problem in (check_gemini(body) or "")


def test_gemini_rules_accept_a_well_formed_tool_turn():
    assert check_gemini(g({"role": "model", "parts": [{"text": "x"}, FC, FC2]},
                          {"role": "user", "parts": [fr("add"), fr("mul"), {"text": "more"}]},
                          systemInstruction={"parts": [{"text": "s"}]})) is None


def test_a_refused_request_is_a_400_in_the_apis_shape_and_is_recorded(fake_api):
    fake_api.script("openai", [reply("openai", text="never sent")])
    url = fake_api.base_url("openai") + "/chat/completions"
    response = httpx.post(url, json=o({"role": "tool", "tool_call_id": "x", "content": "3"}),
                          headers={"authorization": "Bearer k"})
    assert response.status_code == 400
    assert "preceeding" in response.json()["error"]["message"]
    assert fake_api.refusals() and fake_api.requests[0].refused


def test_a_request_without_a_key_gets_401(fake_api):
    response = httpx.post(fake_api.base_url("gemini") + "/v1beta/models/m:generateContent",
                          json=g())
    assert response.status_code == 401
    assert response.json()["error"]["status"] == "UNAUTHENTICATED"


def test_a_provider_surfaces_the_fakes_refusal_as_bad_request(fake_api):
    # an empty history breaks these APIs' rules (OpenAI takes a system message alone)
    for name in ("anthropic", "gemini"):
        with pytest.raises(BadRequestError, match="HTTP 400"):
            make_provider(name, fake_api).complete(request([]))
    assert len(fake_api.refusals()) == 2


def test_running_out_of_script_is_a_clear_server_error(fake_api):
    from turnlog.engine.errors import ServerError

    with pytest.raises(ServerError, match="no scripted anthropic reply left"):
        make_provider("anthropic", fake_api).complete(
            request([Message(role="user", parts=(Text(text="hi"),))]))


FCALL = {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{}"}
FOUT = {"type": "function_call_output", "call_id": "c1", "output": "3"}


def r(*items):
    return {"model": "m", "input": [{"role": "user", "content": "hi"}, *items]}


@pytest.mark.parametrize("body,problem", [
    (r(FCALL), "No tool output found"),
    (r(FOUT), "No tool call found"),
    (r(FCALL, FOUT, FOUT), "No tool call found"),
    (r(dict(FCALL, arguments={})), "string arguments"),
    (r({"role": "assistant", "content": ""}), "must not be empty"),
    (dict(r(), messages=[]), "Unknown parameter"),
])
def test_responses_rules(body, problem):
    from tests.fakerules import check_responses

    assert problem in (check_responses(body) or "")


def test_responses_rules_accept_a_well_formed_tool_turn():
    from tests.fakerules import check_responses

    assert check_responses(r({"role": "assistant", "content": "let me"}, FCALL, FOUT,
                             {"role": "assistant", "content": "3"})) is None


def test_the_fake_works_as_a_context_manager_and_gives_client_environment(monkeypatch):
    from turnlog.engine.providers import get_provider
    from tests.fakeapi import FakeAPI

    with FakeAPI() as fake:
        for key, value in fake.env("gemini", "k-123").items():
            monkeypatch.setenv(key, value)
        fake.script("gemini", [reply("gemini", text="hello")])
        answer = get_provider("gemini", model="m").complete(
            request([Message(role="user", parts=(Text(text="hi"),))]))
        assert answer.parts == (Text(text="hello"),)
        assert fake.requests[0].headers["x-goog-api-key"] == "k-123"
