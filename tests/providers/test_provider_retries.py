"""Retries through the real SDK clients against the loopback fake API server."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from turnlog.engine.cli import cli
from turnlog.engine.demo import demo_tools
from turnlog.engine.loop import Loop
from turnlog.engine.providers import get_provider
from turnlog.engine.loop.retry import RetryPolicy
from tests.fakeapi import PROVIDERS, Reply, error_body, error_reply, reply


def _provider(fake, name):
    return get_provider(name, model="fake-model", api_key="test-key",
                        base_url=fake.base_url(name))


def _loop(fake, journal, name, sleeps, attempts=4):
    return Loop(journal, _provider(fake, name), demo_tools(),
                retry=RetryPolicy(max_attempts=attempts, sleep=sleeps.append,
                                  random=lambda: 0.5))


def _kinds(journal, cid):
    return [e.type for e in journal.read(cid)]


def _payloads(journal, cid, kind):
    return [json.loads(e.payload) for e in journal.read(cid) if e.type == kind]


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_429_with_retry_after_then_a_200_succeeds(fake_api, journal, name):
    fake_api.script(name, [error_reply(name, 429, "slow down", retry_after=3),
                           reply(name, text="hello")])
    sleeps: list[float] = []
    result = _loop(fake_api, journal, name, sleeps).start("hi", conversation_id="c")
    assert result.status == "completed" and result.final_content == "hello"
    assert sleeps == [3.0] and len(fake_api.requests_for(name)) == 2
    assert _kinds(journal, "c")[2:] == ["model_requested", "model_failed", "model_requested",
                                        "model_responded", "conversation_completed"]
    (failed,) = _payloads(journal, "c", "model_failed")
    assert (failed["error_type"], failed["status"], failed["retryable"],
            failed["retry_after"]) == ("RateLimitError", 429, True, 3.0)


@pytest.mark.parametrize("name", PROVIDERS)
def test_an_overloaded_529_is_retried_with_backoff(fake_api, journal, name):
    fake_api.script(name, [Reply(body=error_body(name, 529, "Overloaded"), status=529),
                           reply(name, text="hello")])
    sleeps: list[float] = []
    result = _loop(fake_api, journal, name, sleeps).start("hi", conversation_id="c")
    assert result.status == "completed" and sleeps == [0.25]


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize("status", [401, 400])
def test_a_401_or_400_fails_at_once(fake_api, journal, name, status):
    fake_api.script(name, [error_reply(name, status, "no"), reply(name, text="never sent")])
    sleeps: list[float] = []
    result = _loop(fake_api, journal, name, sleeps).start("hi", conversation_id="c")
    assert result.status == "failed" and sleeps == []
    assert len(fake_api.requests_for(name)) == 1
    assert _kinds(journal, "c")[2:] == ["model_requested", "model_failed", "conversation_failed"]


@pytest.mark.parametrize("name", PROVIDERS)
def test_exhausted_retries_fail_with_every_attempt_in_the_journal(fake_api, journal, name):
    fake_api.script(name, [error_reply(name, 500, f"boom {i}") for i in range(3)])
    sleeps: list[float] = []
    result = _loop(fake_api, journal, name, sleeps, attempts=3).start("hi", conversation_id="c")
    assert result.status == "failed" and "boom 2" in result.error
    assert len(fake_api.requests_for(name)) == 3 and sleeps == [0.25, 0.5]
    assert _kinds(journal, "c")[2:] == ["model_requested", "model_failed"] * 3 + [
        "conversation_failed"]
    assert [f["message"].split(": ")[-1] for f in _payloads(journal, "c", "model_failed")] == [
        "boom 0", "boom 1", "boom 2"]
    assert journal.verify().ok


def test_a_timeout_is_retried(fake_api, journal):
    fake_api.script("openai", [Reply(hang=5.0), reply("openai", text="late but fine")])
    provider = get_provider("openai", model="m", api_key="k", base_url=fake_api.base_url("openai"),
                            timeout=1.5)
    sleeps: list[float] = []
    result = Loop(journal, provider, demo_tools(),
                  retry=RetryPolicy(sleep=sleeps.append, random=lambda: 0.0)).start(
        "hi", conversation_id="c")
    assert result.status == "completed"
    assert _payloads(journal, "c", "model_failed")[0]["error_type"] == "ProviderTimeout"


@pytest.mark.parametrize("name", ["anthropic", "gemini"])
def test_turnlog_run_retries_by_default_and_retries_0_fails_at_once(fake_api, db_path, monkeypatch,
                                                                    name):
    for key, value in fake_api.env(name, "env-key").items():
        monkeypatch.setenv(key, value)
    fake_api.script(name, [error_reply(name, 429, "slow", retry_after=0), reply(name, text="ok")])
    args = ["run", "hi", "--provider", name, "--model", "fake-model", "--db", str(db_path),
            "--json", "--id", "ok"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["final_content"] == "ok"
    fake_api.script(name, [error_reply(name, 429, "slow", retry_after=0), reply(name, text="ok")])
    out = CliRunner().invoke(cli, [*args[:-1], "once", "--retries", "0"])
    assert out.exit_code == 1 and json.loads(out.output)["status"] == "failed"


def test_turnlog_resume_takes_retries_too(fake_api, db_path, monkeypatch):
    from turnlog.journal import Journal

    for key, value in fake_api.env("openai", "env-key").items():
        monkeypatch.setenv(key, value)
    with Journal(str(db_path)) as j:  # a run a crash left at model_requested
        with pytest.raises(KeyError):
            class Bug:
                name, model = "openai", "fake-model"

                def complete(self, request):
                    raise KeyError("crash")
            Loop(j, Bug(), demo_tools()).start("hi", conversation_id="r")
    fake_api.script("openai", [error_reply("openai", 503, "busy", retry_after=0),
                               reply("openai", text="resumed")])
    out = CliRunner().invoke(cli, ["resume", "r", "--db", str(db_path), "--json",
                                   "--retries", "1"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["final_content"] == "resumed"
