"""``--to PROVIDER --model M``: the OpenAI SDK client completes its tool conversation on
Anthropic and Gemini (and the Anthropic client on OpenAI), streamed and not; the requests
sent upstream pass the fake's rules and the target SDK's request types; both sides recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakeapi import error_reply
from tests.providerkit import KEYS, script_three_turns

from turnlog.engine.model.conversation import load_state
from turnlog.journal import Journal

from .clients import RUNNERS
from .harness import ProxyServer
from .test_record import TYPES, conversations, journal_bytes


@pytest.fixture
def keys(monkeypatch):
    for name, env in (("anthropic", "ANTHROPIC_API_KEY"), ("gemini", "GEMINI_API_KEY"),
                      ("openai", "OPENAI_API_KEY")):
        monkeypatch.setenv(env, KEYS[name])


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("client, target", [("openai", "anthropic"), ("openai", "gemini"),
                                            ("anthropic", "openai"),
                                            ("openai-responses", "anthropic")])
def test_a_client_completes_its_tool_conversation_on_another_provider(
        fake_api, tmp_path, keys, client, target, stream):
    script_three_turns(fake_api, target)
    with ProxyServer(tmp_path / "s.db", fake_api, to=(target, "target-model")) as proxy:
        final = RUNNERS[client](proxy.base_url(client), stream=stream)
        proxy.drain()
    assert final == "Paris is sunny and 2 + 3 = 5."
    sent = fake_api.requests_for(target)
    assert len(sent) == 3 and fake_api.refusals() == []
    assert not fake_api.requests_for(client)  # the client's own wire was never called
    found = conversations(tmp_path / "s.db")
    assert len(found) == 1
    (conv_id, events), = found.items()
    assert [e.type for e in events] == TYPES
    with Journal(tmp_path / "s.db") as journal:
        state = load_state(journal, conv_id)
    assert state.provider == target and state.model == "target-model"
    assert state.metadata["proxy"] == {**state.metadata["proxy"], "wire": client, "to": target}
    responded = [json.loads(e.payload) for e in events if e.type == "model_responded"]
    assert all(r["provider"] == target and r["raw"] for r in responded)
    assert KEYS[target].encode() not in journal_bytes(Path(tmp_path / "s.db"))


def test_a_target_error_reaches_the_client_in_its_own_wires_shape(fake_api, tmp_path, keys):
    import openai

    fake_api.script("anthropic", [error_reply("anthropic", 429, "slow down", retry_after=2)])
    with ProxyServer(tmp_path / "s.db", fake_api, to=("anthropic", "claude-x")) as proxy:
        client = openai.OpenAI(api_key="sk-client-side-key", base_url=proxy.base_url("openai"),
                               max_retries=0)
        with pytest.raises(openai.RateLimitError) as caught:
            client.chat.completions.create(model="gpt-x",
                                           messages=[{"role": "user", "content": "hi"}])
        proxy.drain()
    assert caught.value.body["message"] == "anthropic: slow down"
    assert caught.value.response.headers["retry-after"] == "2"
    (_, events), = conversations(tmp_path / "s.db").items()
    failed = json.loads(events[-1].payload)
    assert events[-1].type == "model_failed" and failed["status"] == 429
    assert failed["provider"] == "anthropic" and failed["error_type"] == "RateLimitError"
