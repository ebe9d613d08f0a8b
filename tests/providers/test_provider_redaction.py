"""The configured key never reaches an event, an exception or the terminal, whatever echoes it."""

from __future__ import annotations

import base64
import doctest
import json
import urllib.parse

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from turnlog.engine.cli import cli
from turnlog.engine.demo import demo_tools
from turnlog.engine.errors import MalformedResponseError, ProviderError
from turnlog.engine.loop import Loop
from turnlog.engine.providers import _common, _redact, get_provider
from turnlog.engine.providers._redact import MASK, MAX_DEPTH, Redactor, read_body
from turnlog.engine.loop.retry import RetryPolicy
from tests.fakeapi import PROVIDERS, Reply, error_body, error_reply, reply

KEY = "sk-live/echo+TEST_0123456789abcdefXYZ"
B64 = base64.b64encode(f"user:{KEY}".encode()).decode()


def _windows(secret: str, size: int = 12) -> set[str]:
    return {secret[i:i + size] for i in range(len(secret) - size + 1)}


FORBIDDEN = (_windows(KEY) | _windows(urllib.parse.quote(KEY, safe=""))
             | _windows(base64.b64encode(KEY.encode()).decode(), 16) | _windows(B64[8:-4], 16))


def leaks(text: str) -> list[str]:
    return sorted(w for w in FORBIDDEN if w in text)


def _escaped(text: str) -> str:
    """JSON text with the key written as \\u escapes (parses to the key itself)."""
    return text.replace(KEY, "".join(f"\\u{ord(c):04x}" for c in KEY))


def _echoing(name: str) -> dict:
    body = reply(name, text=f"Your key is {KEY}, url {urllib.parse.quote(KEY, safe='')}",
                 tool_calls=[("get_weather", {"city": KEY})])
    body["echo"] = {"key": KEY, "basic": f"Basic {B64}", KEY: "as a field name"}
    return body


def _answers(name: str) -> dict[str, list[Reply]]:
    ok = reply(name, text="done")
    return {
        "json fields": [Reply(body=_echoing(name)), Reply(body=ok)],
        "escaped json": [Reply(raw=_escaped(json.dumps(_echoing(name))).encode()),
                         Reply(body=ok)],
        "non-json 200": [Reply(raw=("<html>" + "x" * 180 + KEY + " " + B64).encode())],
        "error body": [error_reply(name, 401, f"Incorrect API key provided: {KEY} ({B64})")],
        "non-json error": [Reply(raw=f"upstream said {KEY}".encode(), status=502)],
        "headers": [Reply(body=error_body(name, 429, "slow"), status=429,
                          headers={"retry-after": KEY, "x-echo": KEY}),
                    Reply(body=ok, headers={"x-echo": KEY, "x-request-id": B64})],
    }


CASES = [(name, case) for name in PROVIDERS for case in _answers("openai")]


@pytest.mark.parametrize(("name", "case"), CASES)
def test_the_library_keeps_the_key_out_of_events_and_errors(fake_api, journal, name, case):
    fake_api.script(name, _answers(name)[case])
    provider = get_provider(name, model="fake-model", api_key=KEY,
                            base_url=fake_api.base_url(name))
    result = Loop(journal, provider, demo_tools(),
                  retry=RetryPolicy(max_attempts=2, sleep=lambda s: None)).start(
        "hi", conversation_id="c")
    assert fake_api.requests, "the fake saw the request"
    stored = "\n".join(e.payload for e in journal.read("c"))
    assert leaks(stored) == [] and leaks(str(result.error)) == []
    assert leaks(repr(result.summary())) == []
    if case in ("json fields", "escaped json"):
        assert MASK in stored and result.status == "completed"
    if case in ("non-json 200", "error body"):
        assert result.status == "failed" and MASK in stored


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_provider_error_message_never_holds_the_key(fake_api, name):
    fake_api.script(name, [Reply(raw=(KEY + " " * 190 + KEY).encode())])
    provider = get_provider(name, model="m", api_key=KEY, base_url=fake_api.base_url(name))
    with pytest.raises(MalformedResponseError) as info:
        provider.complete(_request())
    assert leaks(str(info.value)) == [] and MASK in str(info.value)


@pytest.mark.parametrize("name", PROVIDERS)
def test_the_async_path_is_redacted_too(fake_api, name):
    import asyncio

    fake_api.script(name, [Reply(body=_echoing(name))])
    provider = get_provider(name, model="m", api_key=KEY, base_url=fake_api.base_url(name))
    response = asyncio.run(provider.acomplete(_request()))
    assert leaks(json.dumps(response.raw)) == [] and leaks(repr(response.parts)) == []


@pytest.mark.parametrize("name", ["anthropic", "openai", "openai-responses", "gemini"])
@pytest.mark.parametrize("case", ["json fields", "non-json 200", "error body", "headers"])
def test_the_cli_keeps_the_key_off_the_terminal_and_out_of_the_journal(fake_api, db_path,
                                                                       monkeypatch, name, case):
    for var, value in fake_api.env(name, KEY).items():
        monkeypatch.setenv(var, value)
    fake_api.script(name, _answers(name)[case])
    out = CliRunner().invoke(cli, ["run", "hi", "--provider", name, "--model", "m",
                                   "--db", str(db_path), "--retries", "1"])
    assert out.exit_code in (0, 1), out.output
    assert leaks(out.output) == []
    listed = CliRunner().invoke(cli, ["ls", "--db", str(db_path), "--json"])
    (cid,) = [c["conversation_id"] for c in json.loads(listed.output)]
    shown = CliRunner().invoke(cli, ["show", cid, "--db", str(db_path)])
    assert shown.exit_code == 0 and leaks(listed.output + shown.output) == []
    raw = db_path.read_bytes() + (db_path.with_name(db_path.name + "-wal").read_bytes()
                                  if db_path.with_name(db_path.name + "-wal").exists() else b"")
    assert leaks(raw.decode("utf-8", "replace")) == []


def _request():
    from turnlog.engine.model.messages import Message, Text
    from turnlog.engine.providers.base import ModelRequest

    return ModelRequest(model="m", messages=(Message(role="user", parts=(Text(text="hi"),)),))


# --- the redactor itself ------------------------------------------------------------------------

@given(secret=st.text(st.characters(codec="utf-8"), min_size=8, max_size=40),
       before=st.text(max_size=20), after=st.text(max_size=20))
def test_every_form_of_the_secret_is_masked(secret, before, after):
    r = Redactor(secret)
    for form in (secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret),
                 json.dumps(secret)[1:-1], repr(secret)[1:-1]):
        assert secret not in r.text(before + form + after).replace(MASK, "\0")
    encoded = base64.b64encode((before + secret + after).encode()).decode()
    assert MASK in r.text(encoded)


@given(secrets=st.lists(st.text(st.characters(codec="utf-8", exclude_characters="\0"),
                                min_size=8, max_size=30), min_size=1, max_size=4),
       glue=st.text(max_size=10))
def test_every_secret_of_several_is_masked_in_every_order(secrets, glue):
    """A request's credentials are masked together: none survives, whichever comes first
    and whether one contains another."""
    text = glue.join(secrets + [json.dumps(s)[1:-1] for s in reversed(secrets)])
    for order in (secrets, list(reversed(secrets))):
        masked = Redactor(*order).text(text).replace(MASK, "\0")
        assert [s for s in secrets if s in masked] == []


def test_a_parsed_body_has_the_secret_masked_in_keys_values_and_escapes():
    text = _escaped(json.dumps({"a": [KEY, {KEY: 1}], "b": f"x{KEY}y"}))
    assert KEY not in text
    data = read_body(text, "p", Redactor(KEY))
    assert data == {"a": [MASK, {MASK: 1}], "b": f"x{MASK}y"}


def test_deep_nesting_is_a_malformed_response_not_a_recursion_error():
    for depth in (MAX_DEPTH + 1, 100_000):
        with pytest.raises(MalformedResponseError, match="nests deeper"):
            _common.parse_body("[" * depth + "]" * depth, "p")
    assert _common.parse_body("[" * 50 + "]" * 50, "p") is not None


def test_a_lone_surrogate_in_a_response_is_a_malformed_response_naming_where():
    with pytest.raises(MalformedResponseError, match=r"body.choices\[0\].*U\+DD20"):
        _common.parse_body('{"choices": ["a\\udd20b"]}', "p")


def test_arguments_with_a_lone_surrogate_or_deep_nesting_are_invalid_not_raised():
    _, _, invalid = _common.parse_arguments('{"city": "\\ud800"}')
    assert invalid and "surrogate" in invalid
    _, _, invalid = _common.parse_arguments('{"a":' + "[" * 100_000 + "]" * 100_000 + "}")
    assert invalid and "deep" in invalid


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize("raw", [b"[" * 5000 + b"]" * 5000, b'{"x": "\\udd20"}',
                                 b'{"choices": [{"message": {"content": "\\ud800"}}]}'])
def test_hostile_bodies_are_provider_errors_through_every_adapter(fake_api, name, raw):
    fake_api.script(name, [Reply(raw=raw)])
    provider = get_provider(name, model="m", api_key=KEY, base_url=fake_api.base_url(name))
    with pytest.raises(ProviderError):
        provider.complete(_request())


@pytest.mark.parametrize("value", ["soon", "1e400", "-5", "nan", "Wed, 99 Foo 2015", "inf", ""])
def test_a_hostile_retry_after_header_is_ignored_never_raised(value):
    assert _common.parse_retry_after({"retry-after": value}) is None


@pytest.mark.parametrize("module", [_redact, _common])
def test_docstring_examples_hold(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
