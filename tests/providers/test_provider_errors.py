"""HTTP failures become the right ProviderError, with a clear message; no SDK exception escapes."""

from __future__ import annotations

import socket

import pytest
from tests.fakeapi import Reply, error_reply
from tests.providerkit import KEYS, make_provider, request

from turnlog.engine.errors import (
    AuthenticationError,
    BadRequestError,
    MalformedResponseError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    ServerError,
    UnknownProviderError,
)
from turnlog.engine.model.messages import Message, Text
from turnlog.engine.providers import get_provider

NAMES = ["anthropic", "openai", "gemini", "openai-responses"]
HISTORY = [Message(role="user", parts=(Text(text="hi"),))]


def _fail(fake, name, answer, **kw):
    fake.script(name, [answer])
    with pytest.raises(ProviderError) as info:
        make_provider(name, fake, **kw).complete(request(HISTORY))
    assert info.value.provider == name
    assert str(info.value).startswith(f"{name}: ")
    return info.value


@pytest.mark.parametrize("name", NAMES)
def test_401_is_an_authentication_error_that_says_to_check_the_key(fake_api, name):
    err = _fail(fake_api, name, error_reply(name, 401, "invalid api key"))
    assert type(err) is AuthenticationError and err.status == 401 and not err.retryable
    assert "invalid api key" in str(err) and "check the API key" in str(err)


@pytest.mark.parametrize("name", NAMES)
def test_429_is_a_rate_limit_error_carrying_retry_after(fake_api, name):
    err = _fail(fake_api, name, error_reply(name, 429, "slow down", retry_after=7))
    assert type(err) is RateLimitError and err.retryable
    assert err.retry_after == 7.0 and "retry after 7s" in str(err) and "slow down" in str(err)


@pytest.mark.parametrize("name", NAMES)
def test_500_is_a_retryable_server_error(fake_api, name):
    err = _fail(fake_api, name, error_reply(name, 500, "internal boom"))
    assert type(err) is ServerError and err.retryable and err.status == 500
    assert "internal boom" in str(err)


@pytest.mark.parametrize("name", NAMES)
def test_400_is_a_bad_request_error_with_the_apis_message(fake_api, name):
    err = _fail(fake_api, name, error_reply(name, 400, "messages.0: bad thing"))
    assert type(err) is BadRequestError and "messages.0: bad thing" in str(err)


@pytest.mark.parametrize("name", NAMES)
def test_no_answer_in_time_is_a_provider_timeout(fake_api, name):
    err = _fail(fake_api, name, Reply(hang=3.0), timeout=0.3)
    assert type(err) is ProviderTimeout and err.retryable and "timeout" in str(err)


@pytest.mark.parametrize("raw", [b'{"id": "x", "content": [tru', b'{"usage": NaN}', b""])
@pytest.mark.parametrize("name", NAMES)
def test_a_body_that_is_not_json_is_a_malformed_response(fake_api, name, raw):
    err = _fail(fake_api, name, Reply(raw=raw))
    assert type(err) is MalformedResponseError and "not JSON" in str(err)


@pytest.mark.parametrize("name", NAMES)
def test_json_of_the_wrong_shape_is_a_malformed_response(fake_api, name):
    err = _fail(fake_api, name, Reply(body={"unexpected": True}))
    assert type(err) is MalformedResponseError


@pytest.mark.parametrize("name", NAMES)
def test_an_unreachable_endpoint_is_a_provider_error_not_an_sdk_error(name):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}" + ("/v1" if name.startswith("openai") else "")
    provider = get_provider(name, model="m", api_key=KEYS[name], base_url=base, timeout=2)
    with pytest.raises(ProviderError, match="cannot reach the API") as info:
        provider.complete(request(HISTORY))
    assert type(info.value) is ProviderConnectionError and info.value.retryable


@pytest.mark.parametrize("name,env", [("anthropic", "ANTHROPIC_API_KEY"),
                                      ("openai", "OPENAI_API_KEY"), ("gemini", "GEMINI_API_KEY")])
def test_a_missing_key_names_the_environment_variable(monkeypatch, name, env):
    monkeypatch.delenv(env, raising=False)
    with pytest.raises(AuthenticationError, match=env):
        get_provider(name)


@pytest.mark.parametrize("name,env", [("anthropic", "ANTHROPIC_API_KEY"),
                                      ("openai", "OPENAI_API_KEY"), ("gemini", "GEMINI_API_KEY"),
                                      ("openai-responses", "OPENAI_API_KEY")])
def test_keys_and_base_urls_come_from_the_environment(monkeypatch, fake_api, name, env):
    base_env = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL",
                "openai-responses": "OPENAI_BASE_URL",
                "gemini": "GEMINI_BASE_URL"}[name]
    monkeypatch.setenv(env, "env-key-123")
    monkeypatch.setenv(base_env, fake_api.base_url(name))
    from tests.fakeapi import reply

    fake_api.script(name, [reply(name, text="ok")])
    response = get_provider(name, model="m").complete(request(HISTORY))
    assert response.parts == (Text(text="ok"),)
    assert "env-key-123" in str(fake_api.requests[0].headers)


def test_an_unknown_provider_name_is_a_typed_error_listing_the_known_ones():
    known = "anthropic, bedrock, gemini, openai, openai-responses, scripted"
    with pytest.raises(UnknownProviderError, match=f"'mistral'.*{known}"):
        get_provider("mistral")


@pytest.mark.parametrize("status,kind", [
    (400, BadRequestError), (402, BadRequestError), (403, AuthenticationError),
    (404, BadRequestError), (408, ProviderTimeout), (409, BadRequestError),
    (413, BadRequestError), (422, BadRequestError), (500, ServerError), (502, ServerError),
    (503, ServerError), (529, ServerError),
])
@pytest.mark.parametrize("name", NAMES)
def test_every_error_status_becomes_its_provider_error(fake_api, name, status, kind):
    err = _fail(fake_api, name, error_reply(name, status, f"status {status} here"))
    assert type(err) is kind and err.status == status and f"status {status} here" in str(err)


@pytest.mark.parametrize("name", NAMES)
def test_a_key_echoed_in_an_error_message_is_redacted(fake_api, name):
    key = KEYS[name]
    masked = key[:5] + "*" * 10 + key[-3:]
    err = _fail(fake_api, name, error_reply(
        name, 401, f"Incorrect API key provided: {masked}. Or was it {key}?"))
    assert key not in str(err) and masked not in str(err) and key[-6:] not in str(err)
    assert "Incorrect API key provided: [redacted key]" in str(err)
