"""A second opinion on every request body: the SDKs' own request types (pydantic TypeAdapter).

The fake API server validates every request it receives with ``tests.sdktypes``
too; these tests check the validator is live and run it over random histories,
tools and parameters without the server.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnlog.engine.model.events import ToolSpec
from turnlog.engine.providers import anthropic, openai, openai_responses
from turnlog.engine.providers.base import ModelRequest
from tests.providers.test_provider_properties import SETTINGS, messy_histories
from tests.sdktypes import sdk_problem

MAPPERS = {"anthropic": anthropic.map_request, "openai": openai.map_request,
           "openai-responses": openai_responses.map_request}

TOOLS = st.lists(st.builds(
    lambda n, d, p: ToolSpec(name=n, description=d, parameters=p),
    st.sampled_from(["add", "get_weather", "now"]), st.text(max_size=5),
    st.sampled_from([{"type": "object", "properties": {}},
                     {"type": "object", "properties": {"a": {"type": "integer"}},
                      "required": ["a"]}])), max_size=3, unique_by=lambda t: t.name)
PARAMETERS = st.fixed_dictionaries({}, optional={
    "max_tokens": st.integers(1, 4096), "temperature": st.floats(0, 1), "top_p": st.floats(0, 1),
    "top_k": st.integers(1, 40), "seed": st.integers(0, 2**31), "stop": st.sampled_from(
        ["END", ["a", "b"]])})


@SETTINGS
@given(messy_histories(), st.text(max_size=5), TOOLS, PARAMETERS)
def test_every_sdk_request_type_accepts_what_the_adapters_build(messages, system, tools, params):
    request = ModelRequest(model="m", system=system, messages=tuple(messages), tools=tuple(tools),
                           parameters=params)
    for name, map_request in MAPPERS.items():
        assert sdk_problem(name, map_request(request)) is None, name


@pytest.mark.parametrize(("name", "body", "where"), [
    ("anthropic", {"model": "m", "max_tokens": 1, "messages": [
        {"role": "user", "content": [{"type": "tool_result"}]}]}, "tool_use_id"),
    ("openai", {"model": "m", "messages": [{"role": "tool", "content": "x"}]}, "tool_call_id"),
    ("openai-responses", {"model": "m", "input": [], "tools": [
        {"type": "function", "name": "f", "parameters": {}}]}, "strict"),
])
def test_the_second_opinion_refuses_a_body_the_sdk_types_refuse(name, body, where):
    assert where in (sdk_problem(name, body) or "")


def test_the_fake_server_refuses_what_the_sdk_types_refuse(fake_api):
    import httpx

    response = httpx.post(fake_api.base_url("openai") + "/chat/completions",
                          json={"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                "seed": "not a number"},
                          headers={"authorization": "Bearer k"})
    assert response.status_code == 400
    assert "SDK request type" in response.json()["error"]["message"]
