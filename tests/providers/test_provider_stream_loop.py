"""``Loop(stream=True)`` through each real SDK against the fake server's events.

Observers hear the deltas; the journal holds the same events as an
unstreamed run except timing; a cut stream (or a run stopped mid-stream) is
a ``model_failed`` marked ``interrupted`` with the partial parts, the run
stops unfinished and ``resume`` sends the request again.
"""

from __future__ import annotations

import asyncio
import json

import msgspec
import pytest

from turnlog.engine.loop.aloop import AsyncLoop
from turnlog.engine.audit import audit
from turnlog.engine.demo import demo_tools
from turnlog.engine.model.events import ModelFailed, decode_event
from turnlog.engine.loop import Loop
from turnlog.engine.model.messages import Text
from turnlog.engine.loop.retry import RetryPolicy
from turnlog.engine.audit.views import connect_readonly
from turnlog.journal import Journal
from tests.fakeapi import Reply, reply
from tests.providerkit import make_provider

NAMES = ["anthropic", "openai", "gemini", "openai-responses"]


def cut(name: str, events: int) -> int:
    """Cut after ``events`` events, counted past the Responses API's longer preamble
    (``response.in_progress``, the item and its content part announced before any text)."""
    return events + (3 if name == "openai-responses" else 0)
TIMING = {"latency_ms", "duration_ms", "timestamp", "now"}


def _bodies(name: str) -> list[dict]:
    return [reply(name, text="Adding them.", tool_calls=[("add", {"a": 2, "b": 3})]),
            reply(name, text="2 + 3 = 5, as it always was.")]


def _events(journal: Journal, cid: str) -> list[tuple[str, dict]]:
    out = []
    for row in journal.read(cid):
        data = msgspec.to_builtins(decode_event(row.type, row.version, row.payload))
        out.append((row.type, {k: v for k, v in data.items() if k not in TIMING}))
    return out


def _run(fake, name, bodies, *, stream, seen=None, path=":memory:", **kw):
    fake.script(name, bodies)
    journal = Journal(path)
    loop = Loop(journal, make_provider(name, fake), demo_tools(), stream=stream,
                observers=[lambda e, p: seen.append((e, p))] if seen is not None else (), **kw)
    result = loop.start("What is 2 + 3?", conversation_id="c1")
    return journal, loop, result


@pytest.mark.parametrize("name", NAMES)
def test_streaming_changes_nothing_replay_sees(fake_api, name):
    bodies = _bodies(name)
    plain, _, r1 = _run(fake_api, name, bodies, stream=False)
    seen: list = []
    streamed, _, r2 = _run(fake_api, name, bodies, stream=True, seen=seen)
    assert r1.status == r2.status == "completed" and r2.final_content == r1.final_content
    assert _events(streamed, "c1") == _events(plain, "c1")
    assert fake_api.refusals() == []
    deltas = [p for e, p in seen if e == "model_delta"]
    assert "".join(d["text"] for d in deltas if d["kind"] == "text" and d["turn"] == 2) == (
        "2 + 3 = 5, as it always was.")
    args = "".join(d["text"] for d in deltas if d["kind"] == "tool_arguments")
    assert json.loads(args) == {"a": 2, "b": 3}
    assert all(d["conversation_id"] == "c1" for d in deltas)
    # every delta of a turn arrives before that turn's model_responded
    order = [(e, p.get("turn")) for e, p in seen if e in ("model_delta", "model_responded")]
    assert order.index(("model_responded", 1)) > order.index(("model_delta", 1))


def _failures(journal: Journal) -> list[ModelFailed]:
    return [e for e in (decode_event(r.type, r.version, r.payload) for r in journal.read("c1"))
            if type(e) is ModelFailed]


@pytest.mark.parametrize("name", NAMES)
def test_a_cut_stream_is_recorded_interrupted_and_resume_sends_again(fake_api, name, tmp_path):
    first, second = _bodies(name)
    seen: list = []
    journal, loop, result = _run(fake_api, name, [first, Reply(body=second, cut=cut(name, 3))],
                                 stream=True, seen=seen, path=tmp_path / "j.db")
    assert result.status == "active"  # unfinished, not failed: resume sends again
    (failure,) = _failures(journal)
    assert failure.interrupted and failure.error_type == "StreamInterrupted"
    (part,) = failure.partial
    assert type(part) is Text and "2 + 3 = 5, as it always was.".startswith(part.text)
    assert ("failed", True) in [(e, p.get("interrupted")) for e, p in seen]
    assert journal.verify().ok
    fake_api.script(name, [second])
    resumed = loop.resume("c1")
    assert resumed.status == "completed" and resumed.final_content == "2 + 3 = 5, as it always was."
    # the partial answer never entered the conversation
    assert [m.role for m in resumed.messages].count("assistant") == 2
    types = [t for t, _ in _events(journal, "c1")]
    assert types.count("model_requested") == 3 and types[-1] == "conversation_completed"
    journal.close()
    conn = connect_readonly(str(tmp_path / "j.db"))  # the audit counts the broken stream
    try:
        assert audit(conn)["model_failures"] == {"StreamInterrupted": 1}
    finally:
        conn.close()


@pytest.mark.parametrize("name", NAMES)
def test_a_retry_policy_sends_a_cut_stream_again_in_the_same_run(fake_api, name):
    first, second = _bodies(name)
    journal, _, result = _run(fake_api, name, [first, Reply(body=second, cut=cut(name, 2)), second],
                              stream=True, retry=RetryPolicy(max_attempts=2, base_delay=0))
    assert result.status == "completed"
    assert [f.interrupted for f in _failures(journal)] == [True]


class _Stop:
    """An observer that stops the process (Ctrl-C) at the n-th delta."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __call__(self, event, payload):
        if event == "model_delta":
            self.n -= 1
            if self.n == 0:
                raise KeyboardInterrupt


@pytest.mark.parametrize("name", NAMES)
def test_a_run_stopped_mid_stream_keeps_the_partial_and_resumes(fake_api, name):
    first, second = _bodies(name)
    fake_api.script(name, [first, second])
    journal = Journal(":memory:")
    provider = make_provider(name, fake_api)
    loop = Loop(journal, provider, demo_tools(), stream=True, observers=[_Stop(5)])
    with pytest.raises(KeyboardInterrupt):
        loop.start("What is 2 + 3?", conversation_id="c1")
    (failure,) = _failures(journal)
    assert failure.interrupted and failure.partial
    fake_api.script(name, [second])
    resumed = Loop(journal, provider, demo_tools(), stream=True).resume("c1")
    assert resumed.status == "completed"


@pytest.mark.parametrize("name", NAMES)
def test_the_async_loop_streams_the_same_events_and_keeps_a_cut(fake_api, name):
    bodies = _bodies(name)
    plain, _, _ = _run(fake_api, name, bodies, stream=False)
    fake_api.script(name, [*bodies, bodies[0], Reply(body=bodies[1], cut=cut(name, 3))])
    journal = Journal(":memory:")
    seen: list = []
    loop = AsyncLoop(journal, make_provider(name, fake_api), demo_tools(), stream=True,
                     observers=[lambda e, p: seen.append(e)])

    async def both():
        return (await loop.start("What is 2 + 3?", conversation_id="c1"),
                await loop.start("What is 2 + 3?", conversation_id="c2"))

    done, broken = asyncio.run(both())
    assert done.status == "completed" and _events(journal, "c1") == _events(plain, "c1")
    assert "model_delta" in seen
    assert broken.status == "active"
    failures = [e for e in (decode_event(r.type, r.version, r.payload)
                            for r in journal.read("c2")) if type(e) is ModelFailed]
    assert [f.interrupted for f in failures] == [True] and failures[0].partial
