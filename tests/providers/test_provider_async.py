"""``acomplete`` shares the mapping with ``complete``: same requests, same neutral answers."""

from __future__ import annotations

import asyncio

import pytest

from turnlog.engine.errors import ProviderError, RateLimitError
from turnlog.engine.model.messages import Message, Text
from tests.fakeapi import error_reply, reply
from tests.providerkit import make_provider, request

NAMES = ["anthropic", "openai", "gemini", "openai-responses"]
HISTORY = [Message(role="user", parts=(Text(text="hi"),))]


@pytest.mark.parametrize("name", NAMES)
def test_async_and_sync_send_the_same_body_and_map_the_same_answer(fake_api, name):
    body = reply(name, text="hello", tool_calls=[("add", {"a": 1, "b": 2})])
    fake_api.script(name, [body, body])
    provider = make_provider(name, fake_api)
    sync = provider.complete(request(HISTORY))
    asynchronous = asyncio.run(provider.acomplete(request(HISTORY)))
    assert asynchronous == sync
    first, second = fake_api.requests_for(name)
    assert first.body == second.body and fake_api.refusals() == []


@pytest.mark.parametrize("name", NAMES)
def test_async_errors_are_translated_too(fake_api, name):
    fake_api.script(name, [error_reply(name, 429, "slow", retry_after=2)])
    with pytest.raises(RateLimitError) as info:
        asyncio.run(make_provider(name, fake_api).acomplete(request(HISTORY)))
    assert info.value.retry_after == 2.0


@pytest.mark.parametrize("name", NAMES)
def test_providers_close_their_clients(fake_api, name):
    fake_api.script(name, [reply(name, text="a"), reply(name, text="b")])
    provider = make_provider(name, fake_api)

    async def both() -> None:
        await provider.acomplete(request(HISTORY))
        await provider.aclose()

    asyncio.run(both())
    provider.complete(request(HISTORY))
    provider.close()
    with pytest.raises(ProviderError, match="closed"):
        provider.complete(request(HISTORY))
