"""Exports to openai/anthropic/gemini are requests the providers' fake API server accepts."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import given, settings

from turnlog.engine.model.conversation import Conversation
from turnlog.engine.formats.exporter import export_data
from turnlog.engine.formats.importer import import_entries
from turnlog.journal import Journal
from tests.fakeapi import WIRES, FakeAPI, bedrock_post, reply
from tests.formats.test_context import MIXED
from tests.formats.test_roundtrip import build, conversations


@pytest.fixture(scope="module")
def fake():
    with FakeAPI() as server:
        yield server


def post(fake: FakeAPI, provider: str, data: dict) -> httpx.Response:
    fake.script(provider, [reply(provider, text="ok")])
    if provider == "openai":
        return httpx.post(f"{fake.base_url('openai')}/chat/completions",
                          json={"model": "gpt-x", **data},
                          headers={"authorization": "Bearer test"}, timeout=60)
    if provider == "openai-responses":
        return httpx.post(f"{fake.base_url(provider)}/responses",
                          json={"model": "gpt-x", "store": False, **data},
                          headers={"authorization": "Bearer test"}, timeout=60)
    if provider == "bedrock":
        return bedrock_post(fake, data)
    if provider == "anthropic":
        return httpx.post(f"{fake.base_url('anthropic')}/v1/messages",
                          json={"model": "claude-x", "max_tokens": 64, **data},
                          headers={"x-api-key": "test"}, timeout=60)
    return httpx.post(f"{fake.base_url('gemini')}/v1beta/models/gemini-x:generateContent",
                      json=data, headers={"x-goog-api-key": "test"}, timeout=60)


def assert_accepted(fake: FakeAPI, journal: Journal, cid: str) -> None:
    for provider in WIRES:
        response = post(fake, provider, export_data(journal, cid, provider))
        assert response.status_code == 200, (provider, response.text)
    assert fake.refusals() == []


@settings(max_examples=25, deadline=None)
@given(conversations)
def test_exports_of_generated_conversations_are_accepted(fake, spec):
    journal = Journal(":memory:")
    started, events = build(spec)
    Conversation.start(journal, started, rest=events)
    assert_accepted(fake, journal, "orig")


def test_exports_of_imported_transcripts_are_accepted(fake):
    journal = Journal(":memory:")
    import_entries(journal, MIXED, conversation_id="mixed")
    dm = [{"role": "user", "content": "go"},
          {"role": "assistant", "content": "AI ACTION (Turn 1): Executing Add with parameters: a: 1"},
          {"role": "user", "content": "TOOL RESPONSE (Turn 1): SUCCESS: ok"},
          {"role": "user", "content": "You just called the Add tool with the exact same parameters "
                                      "as your previous action. Please try a different approach or "
                                      "use different parameters instead."},
          {"role": "assistant", "content": "AI ACTION (Turn 2): Executing Add with parameters: a: 2"}]
    import_entries(journal, dm, conversation_id="dm")
    anthropic = [
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image", "source": {"type": "base64",
                                                                  "media_type": "image/png",
                                                                  "data": "AAAA"}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": "x", "is_error": True}]}]
    import_entries(journal, anthropic, conversation_id="an")
    for cid in ("mixed", "dm", "an"):
        assert_accepted(fake, journal, cid)
    sent = fake.requests_for("openai")[-1].body
    assert json.dumps(sent).count("tool_call_id") == 1
