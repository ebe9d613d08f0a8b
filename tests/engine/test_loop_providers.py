"""The loop end to end through each real SDK adapter against the loopback fake API server."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from turnlog.engine.cli import cli
from turnlog.engine.demo import demo_tools
from turnlog.engine.loop import run
from turnlog.engine.providers import get_provider
from tests.fakeapi import fake_api, reply  # noqa: F401 - fake_api is a fixture

REAL = ("anthropic", "openai", "openai-responses", "gemini")


def _conversation(provider: str) -> list:
    """Two tool turns (one failing call, one refused duplicate), then an answer."""
    return [
        reply(provider, text="Checking.", tool_calls=[("get_weather", {"city": "Paris"}),
                                                      ("get_weather", {"city": "Atlantis"})]),
        reply(provider, tool_calls=[("get_weather", {"city": "Atlantis"})]),
        reply(provider, text="Paris is sunny; Atlantis is unknown."),
    ]


@pytest.mark.parametrize("provider", REAL)
def test_the_loop_runs_end_to_end_through_the_sdk(provider, fake_api, journal):  # noqa: F811
    fake_api.script(provider, _conversation(provider))
    p = get_provider(provider, model="fake-model", api_key="test-key",
                     base_url=fake_api.base_url(provider))
    result = run(journal, "Weather in Paris and Atlantis?", provider=p, tools=demo_tools(),
                 conversation_id="sdk")
    assert result.status == "completed", result.error
    assert result.final_content == "Paris is sunny; Atlantis is unknown."
    assert result.turn_count == 3
    assert fake_api.refusals() == []  # every request (with results and refusals) was valid
    kinds = [e.type for e in journal.read("sdk")]
    assert kinds.count("tool_call_rejected") == 1 and kinds.count("tool_completed") == 2
    assert journal.verify().ok
    assert all("test-key" not in e.payload for e in journal.read("sdk"))


@pytest.mark.parametrize("provider", ("anthropic", "openai", "gemini"))
def test_turnlog_run_with_a_real_provider_reads_the_environment(provider, fake_api, db_path,  # noqa: F811
                                                                 monkeypatch):
    for name, value in fake_api.env(provider, "env-key").items():
        monkeypatch.setenv(name, value)
    fake_api.script(provider, _conversation(provider))
    out = CliRunner().invoke(cli, ["run", "Weather?", "--provider", provider, "--model",
                                   "fake-model", "--db", str(db_path), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["status"] == "completed" and data["turn_count"] == 3


def test_turnlog_run_without_a_key_is_bad_usage(db_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    out = CliRunner().invoke(cli, ["run", "hi", "--provider", "anthropic", "--model", "m",
                                   "--db", str(db_path)])
    assert out.exit_code == 2 and "ANTHROPIC_API_KEY" in out.output


def test_a_provider_error_mid_run_fails_the_run_with_its_status(fake_api, journal):  # noqa: F811
    from tests.fakeapi import error_reply

    fake_api.script("openai", [reply("openai", tool_calls=[("add", {"a": 1, "b": 2})]),
                               error_reply("openai", 500, "upstream down")])
    p = get_provider("openai", model="fake-model", api_key="k", base_url=fake_api.base_url("openai"))
    result = run(journal, "go", provider=p, tools=demo_tools(), conversation_id="e")
    assert result.status == "failed" and "upstream down" in result.error
    failed = [json.loads(e.payload) for e in journal.read("e") if e.type == "model_failed"]
    assert failed[0]["status"] == 500 and failed[0]["error_type"] == "ServerError"
