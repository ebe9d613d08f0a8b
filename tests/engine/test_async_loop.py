"""AsyncLoop: many conversations at once on one journal, through the real async SDK clients."""

from __future__ import annotations

import asyncio
import json

import pytest

from turnlog.engine import AsyncLoop
from turnlog.engine.tools import tool
from turnlog.replay import replay
from tests.fakeapi import FakeAPI, reply
from tests.providerkit import make_provider

N = 20


@pytest.fixture(scope="module")
def fake():
    with FakeAPI() as server:
        yield server


@tool(effect="read_only")
def add(a: float, b: float) -> dict:
    """Add two numbers."""
    return {"sum": a + b}


@tool(effect="idempotent")
async def echo(text: str) -> str:
    """Echo ``text`` (an async tool, awaited on the event loop)."""
    await asyncio.sleep(0)
    return text


# 20 conversations through AsyncAnthropic; the other async clients with fewer (CI time)
@pytest.mark.parametrize(("name", "n"), [("anthropic", N), ("openai", 5), ("gemini", 5)])
def test_twenty_conversations_at_once_on_one_journal(journal, fake, name, n):
    # each conversation takes one tool-calling turn and one answer; requests arrive in any
    # order, so the reply depends on the request: its first (the prompt alone) gets the calls
    fake.requests.clear()
    calls = reply(name, tool_calls=[("add", {"a": 2, "b": 3}), ("echo", {"text": "x"})])
    done = reply(name, text="done")
    fake.answer_with(name, lambda body: calls if len(body.get("messages") or body["contents"]) == 1
                     else done)
    provider = make_provider(name, fake)
    loop = AsyncLoop(journal, provider, [add, echo])

    async def main():
        try:
            return await asyncio.gather(*(loop.start(f"prompt {i}", conversation_id=f"{name}-{i}")
                                          for i in range(n)))
        finally:
            await provider.aclose()

    try:
        results = asyncio.run(main())
    finally:
        fake.answer_with(name, None)
    assert [r.status for r in results] == ["completed"] * n, [r.error for r in results if r.error]
    assert fake.refusals() == []
    assert journal.verify().ok
    for i, result in enumerate(results):
        cid = f"{name}-{i}"
        rows = list(journal.read(cid))
        assert {r.stream_id for r in rows} == {cid}
        users = [json.loads(r.payload)["parts"][0]["text"] for r in rows if r.type == "user_message"]
        assert users == [f"prompt {i}"]
        # every tool result answers a call of this conversation's own responses
        own_calls = {p.id for m in result.messages if m.role == "assistant" for p in m.parts
                     if type(p).__name__ == "ToolCall"}
        answered = {json.loads(r.payload)["call_id"] for r in rows if r.type == "tool_completed"}
        assert answered == own_calls
    assert replay(journal, f"{name}-0").ok
    # no request carried another conversation's prompt
    for request in fake.requests_for(name):
        text = json.dumps(request.body)
        assert sum(f'"prompt {i}"' in text for i in range(n)) == 1
