"""``--replay``: the same client scripts pass against the journal with the upstream stopped;
a changed request gets the divergence error, in the wire's shape, naming the first
differing message."""

from __future__ import annotations

import anthropic
import openai
import pytest

from tests.fakeapi import FakeAPI
from tests.providerkit import KEYS, SYSTEM, script_three_turns

from .clients import QUESTION, RUNNERS, openai_tools, run_openai
from .harness import ProxyServer

WIRES = sorted(RUNNERS)


def record(tmp_path, wire: str, stream: bool, **kw) -> str:
    db = tmp_path / "rec.db"
    with FakeAPI() as fake, ProxyServer(db, fake) as proxy:
        script_three_turns(fake, wire)
        RUNNERS[wire](proxy.base_url(wire), stream=stream, **kw)
        proxy.drain()
    return str(db)  # the fake is stopped: no upstream from here on


@pytest.mark.parametrize("recorded_stream, replayed_stream", [(False, False), (True, True),
                                                              (False, True)])
@pytest.mark.parametrize("wire", WIRES)
def test_the_client_script_passes_against_the_replay_with_no_upstream(
        tmp_path, wire, recorded_stream, replayed_stream):
    db = record(tmp_path, wire, recorded_stream)
    with ProxyServer(db, replay=True, upstreams={"openai": "http://127.0.0.1:9/v1",
                                                 "anthropic": "http://127.0.0.1:9",
                                                 "gemini": "http://127.0.0.1:9"}) as proxy:
        final = RUNNERS[wire](proxy.base_url(wire), stream=replayed_stream)
    assert final == "Paris is sunny and 2 + 3 = 5."


def test_a_changed_prompt_gets_the_divergence_naming_the_first_differing_message(tmp_path):
    db = record(tmp_path, "openai", False)
    with ProxyServer(db, replay=True) as proxy:
        with pytest.raises(openai.BadRequestError) as caught:
            run_openai(proxy.base_url("openai"), question="What's the weather in Rome?")
    message = caught.value.body["message"]
    assert caught.value.body["type"] == "invalid_request_error"
    assert "message 1" in message and "px-" in message
    assert "recorded user message \"What's the weather in Paris, and 2 + 3?\"" in message
    assert "got user message \"What's the weather in Rome?\"" in message


def test_a_changed_tool_result_is_named_as_the_differing_message(tmp_path, monkeypatch):
    db = record(tmp_path, "anthropic", False)
    import tests.proxy.clients as clients

    real = clients._run
    monkeypatch.setattr(clients, "_run", lambda name, args, call_id="": (
        ("cloudy", True) if name == "get_weather" else real(name, args)))
    with ProxyServer(db, replay=True) as proxy:
        with pytest.raises(anthropic.BadRequestError) as caught:
            clients.run_anthropic(proxy.base_url("anthropic"))
    message = caught.value.body["error"]["message"]
    assert "message 3" in message and "recorded tool result for get_weather" in message
    assert "got tool result for get_weather 'cloudy'" in message


def test_ignored_fields_never_count_and_others_do(tmp_path):
    db = record(tmp_path, "openai", False)
    with ProxyServer(db, replay=True, ignore=("temperature",)) as proxy:
        client = openai.OpenAI(api_key=KEYS["openai"], base_url=proxy.base_url("openai"),
                               max_retries=0)
        # the recorded first request, with a user, metadata and a temperature added
        first = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
        answer = client.chat.completions.create(
            model="fake-model", messages=first, tools=openai_tools(), user="someone",
            metadata={"run": "7"}, temperature=0.9)
        assert answer.choices[0].message.tool_calls[0].function.name == "get_weather"
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="fake-model", messages=first,
                                           tools=openai_tools(), top_p=0.5)
    assert "its top_p differs: recorded 'None', got '0.5'" in caught.value.body["message"]
    assert "--ignore top_p" in caught.value.body["message"]
