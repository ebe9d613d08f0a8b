"""Record mode: the official SDKs through the proxy to the fake API, each client session one
conversation with every message, call and result; keys never in the journal's bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.providerkit import KEYS, SYSTEM, script_three_turns

from turnlog.engine.model.conversation import load_state
from turnlog.engine.model.messages import ToolCall, ToolResult, text_of
from turnlog.journal import Journal
from turnlog.replay import replay

from .clients import QUESTION, RUNNERS

WIRES = sorted(RUNNERS)
TYPES = ["conversation_started", "user_message", "model_requested", "model_responded",
         "tool_started", "tool_completed", "tool_started", "tool_completed", "model_requested",
         "model_responded", "tool_started", "tool_completed", "model_requested",
         "model_responded", "conversation_completed"]


def conversations(db: Path) -> dict[str, list]:
    with Journal(db) as journal:
        return {s.stream_id: list(journal.read(s.stream_id)) for s in journal.streams()}


def journal_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(db.parent.glob(db.name + "*")))


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("wire", WIRES)
def test_a_client_session_is_one_conversation_with_every_message_call_and_result(
        proxy, fake_api, wire, stream):
    script_three_turns(fake_api, wire)
    final = RUNNERS[wire](proxy.base_url(wire), stream=stream)
    proxy.drain()
    assert final == "Paris is sunny and 2 + 3 = 5."
    assert fake_api.refusals() == []
    found = conversations(Path(proxy.db))
    assert len(found) == 1, found.keys()
    (conv_id, events), = found.items()
    assert [e.type for e in events] == TYPES
    with Journal(proxy.db) as journal:
        state = load_state(journal, conv_id)
        assert journal.verify().ok
        # the loop re-runs it from the recording: every request digest as the loop computes it
        assert replay(journal, conv_id, collect=True).divergence is None
    assert state.system == SYSTEM and state.provider == wire
    assert state.metadata["proxy"]["wire"] == wire and state.metadata["proxy"]["client"]
    assert text_of(state.messages[0].parts) == QUESTION
    calls = [p for m in state.messages for p in m.parts if type(p) is ToolCall]
    results = [p for m in state.messages for p in m.parts if type(p) is ToolResult]
    assert [(c.name, c.arguments) for c in calls] == [
        ("get_weather", {"city": "Paris"}), ("add", {"a": 2, "b": "three"}), ("add", {"a": 2, "b": 3})]
    assert [r.call_id for r in results] == [c.id for c in calls]
    assert "sum" in results[-1].content and "sunny" in results[0].content
    assert state.final_content == final
    # every byte the journal holds (database and WAL): no key, in any wire
    data = journal_bytes(Path(proxy.db))
    assert KEYS[wire].encode() not in data and b"test-KEY-" not in data


def test_the_requests_reach_the_upstream_unchanged_with_their_keys(proxy, fake_api):
    script_three_turns(fake_api, "anthropic")
    RUNNERS["anthropic"](proxy.base_url("anthropic"))
    sent = fake_api.requests_for("anthropic")
    assert len(sent) == 3
    assert all(KEYS["anthropic"] in (r.headers.get("x-api-key", "") + r.headers.get(
        "authorization", "")) for r in sent)
    assert sent[0].body["messages"] == [{"role": "user", "content": QUESTION}]
    assert "x-turnlog-conversation" not in sent[0].headers
