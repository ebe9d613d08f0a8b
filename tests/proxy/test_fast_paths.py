"""The recorder's fast paths record exactly what its slow paths record.

The writer keeps, per open conversation, a ``RequestDigest`` (``model_requested``
hashes only the messages new since the last request) and adopts the state that
planned an exchange instead of applying its events again. ``Recorder.fast = False``
takes the slow paths: a full ``request.digest()`` and every event applied again.
Random multi-turn sessions, with tool calls, forks (a history edited part-way) and
new conversations, go through both; the journals must hold the same events, the
same threading and the same forks.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import msgspec
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.fakeapi import reply

from turnlog.engine.model.events import ModelRequested, decode_event
from turnlog.engine.providers import ModelRequest
from turnlog.journal import Journal
from turnlog.replay.proxy import recorder as recorder_module
from turnlog.replay.proxy.recorder import Exchange, Recorder
from turnlog.replay.proxy.wires import WIRES

KEY = "sk-fast-path-key-0000"
TOOLS = [{"type": "function", "function": {"name": "look", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}}}}]

WORDS = st.text(st.sampled_from("ab é\u212b1"), min_size=1, max_size=6)
#: one step: (which session, what it does, a word, whether the answer calls the tool)
STEPS = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["turn", "turn", "fork", "new"]),
                           WORDS, st.booleans()), min_size=1, max_size=14)


def _sessions(steps):
    """The exchanges of ``steps``: (raw request, raw response) pairs, as a client sends them."""
    histories: list[list[dict]] = []
    out = []
    for which, kind, word, call in steps:
        if kind == "new" or not histories:
            histories.append([{"role": "system", "content": f"agent {len(histories)}"}])
            history = histories[-1]
        else:
            history = histories[which % len(histories)]
            if kind == "fork" and len(history) > 2:
                history = history[:max(2, len(history) // 2)]
                while history[-1]["role"] != "assistant" and len(history) > 1:
                    history = history[:-1]
                history = [dict(m) for m in history]
                histories.append(history)
        last = history[-1]
        if last["role"] == "assistant" and last.get("tool_calls"):
            history += [{"role": "tool", "tool_call_id": c["id"], "content": f"got {word}"}
                        for c in last["tool_calls"]]
        else:
            history.append({"role": "user", "content": f"say {word}"})
        body = reply("openai", text=None if call else f"ok {word}",
                     tool_calls=[("look", {"q": word})] if call else [])
        out.append((json.dumps({"model": "m", "messages": history, "tools": TOOLS}).encode(),
                    json.dumps(body).encode()))
        history.append(body["choices"][0]["message"])
    return out


class _Counted:
    """``uuid`` for the recorder, whose ``uuid4`` counts: both runs name their
    conversations and forks alike, in the order they make them."""

    def __init__(self) -> None:
        self.n = 0

    def uuid4(self) -> uuid.UUID:
        self.n += 1
        return uuid.UUID(int=self.n << 96)  # ids take the first hex digits


def _unhashed(state):
    """``state`` without its fork point's chain hash (it covers when the parent was recorded)."""
    if state.fork is None:
        return state
    return msgspec.structs.replace(state, fork=msgspec.structs.replace(state.fork, hash=""))


def _record(db: Path, exchanges, fast: bool) -> list[tuple]:
    recorder = Recorder(str(db))
    recorder.fast = fast
    held, recorder_module.uuid = recorder_module.uuid, _Counted()
    try:
        recorder.start()
        for n, (raw, answer) in enumerate(exchanges):
            recorder.submit(Exchange(wire=WIRES["openai"], path="/v1/chat/completions",
                                     client="test", secrets=(KEY,), started=float(n),
                                     raw_request=raw, status=200, raw_response=answer,
                                     ended=n + 0.5))
            if n % 3 == 0:
                recorder.drain()  # some exchanges alone, some in one transaction
        recorder.close()
    finally:
        recorder_module.uuid = held
    # the state each open conversation holds (adopted, or applied event by event)
    states = {cid: (c.last_seq, _unhashed(c.builder.state())) for cid, c in recorder._open.items()}
    assert recorder.lost == 0
    journal = Journal.open(str(db))
    try:
        recorded = []
        for info in sorted(journal.streams(), key=lambda s: s.stream_id):
            events = []
            for row in journal.lineage(info.stream_id):
                if row.stream_id != info.stream_id:
                    continue
                event = decode_event(row.type, row.version, row.payload)
                payload = row.payload if isinstance(row.payload, str) else json.dumps(row.payload)
                # the parent's chain hash at the fork point covers when it was recorded
                payload = re.sub(r'"hash":"[0-9a-f]{64}"', '"hash":…', payload)
                events.append(f"{type(event).__name__} {row.seq} {payload}")
            recorded.append((info.stream_id, info.parent_stream_id, info.parent_seq, events))
        return recorded, states
    finally:
        journal.close()


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(STEPS)
def test_the_fast_paths_record_what_the_slow_paths_record(tmp_path_factory, steps):
    exchanges = _sessions(steps)
    tmp = tmp_path_factory.mktemp("fast")
    fast, fast_states = _record(tmp / "fast.db", exchanges, fast=True)
    slow, slow_states = _record(tmp / "slow.db", exchanges, fast=False)
    assert fast == slow
    assert fast_states == slow_states
    assert sum(len(stream[-1]) for stream in fast) > len(exchanges)


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(STEPS)
def test_every_recorded_digest_is_the_full_digest_of_the_state_before_it(tmp_path_factory, steps):
    """Independently of the slow path: each ``model_requested`` digest is ``request.digest()``
    of the conversation's state just before it (as ``engine.step.request_of`` builds it)."""
    from turnlog.engine.model.state import StateBuilder

    db = tmp_path_factory.mktemp("digest") / "d.db"
    _record(db, _sessions(steps), fast=True)
    journal = Journal.open(str(db))
    try:
        checked = 0
        for info in journal.streams():
            builder = StateBuilder()
            for row in journal.lineage(info.stream_id):
                event = decode_event(row.type, row.version, row.payload)
                if type(event) is ModelRequested and row.stream_id == info.stream_id:
                    request = ModelRequest(model=builder.model, system=builder.system,
                                           messages=tuple(builder.message_list),
                                           tools=builder.tools, parameters=builder.parameters)
                    assert event.digest == request.digest()
                    checked += 1
                builder.apply(event, row.seq)
        assert checked >= len(steps)
    finally:
        journal.close()


#: messages a history may hold, some unreadable (an unknown role, a call without its id's
#: string, nested too deep, NaN), some alike but for a value's type (1 / 1.0 / true)
RAW_MESSAGES = st.sampled_from([
    {"role": "user", "content": "hi"},
    {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    {"role": "system", "content": "be brief"},
    {"role": "developer", "content": "be briefer"},
    {"role": "assistant", "content": "ok"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
     "function": {"name": "look", "arguments": "{\"q\": 1}"}}]},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
     "function": {"name": "look", "arguments": "{\"q\": 1.0}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "found"},
    {"role": "tool", "tool_call_id": "c2", "content": "Error: none"},
    {"role": "tool", "content": "no id"},
    {"role": "user", "content": "x", "extra": 1},
    {"role": "user", "content": "x", "extra": 1.0},
    {"role": "user", "content": "x", "extra": True},
    {"role": "user", "content": "x", "extra": None},
    {"role": "user", "content": "x", "extra": "NAN"},
    {"role": "wizard", "content": "?"},
    {"role": "user", "content": "deep", "extra": "DEEP"},
])


def _raw(history) -> bytes:
    text = json.dumps({"model": "m", "messages": history, "tools": TOOLS})
    deep = "[" * 250 + "]" * 250
    return text.replace('"DEEP"', deep).replace('"NAN"', "NaN").encode()


def _read(raw, cache):
    from turnlog.replay.proxy.wires import UnparsedRequest, parse_request

    try:
        return parse_request(WIRES["openai"], "/v1/chat/completions", raw, cache)
    except UnparsedRequest as exc:
        return ("unparsed", str(exc))


@settings(max_examples=150, deadline=None)
@example([(0, [{"role": "user", "content": "x", "extra": "NAN"}]),  # NaN, then null: the
          (0, [{"role": "user", "content": "x", "extra": None},  # same JSON in msgspec
               {"role": "user", "content": "hi"}])])
@given(st.lists(st.tuples(st.integers(0, 5), st.lists(RAW_MESSAGES, max_size=4)),
                min_size=1, max_size=10))
def test_a_history_read_past_its_cached_prefix_reads_as_it_does_whole(requests):
    """Each request resends a prefix of an earlier one (whole: it extends it; cut: an
    edit or fork) and adds messages; read with the cache it is the same ``ParsedRequest``,
    or the same refusal, as read whole."""
    from turnlog.replay.proxy.wires import HistoryCache

    cache = HistoryCache(size=4)  # small: points are dropped as well as kept
    sent: list[list[dict]] = [[]]
    for which, added in requests:
        base = sent[which % len(sent)]
        cut = base if which % 3 else base[:len(base) // 2]
        history = cut + added
        raw = _raw(history)
        assert _read(raw, cache) == _read(raw, None)
        sent.append(history)
    assert len(cache) <= 4


def test_the_cache_reads_a_resent_history_only_past_what_it_read():
    from turnlog.replay.proxy import wires

    cache = wires.HistoryCache()
    history = [{"role": "user", "content": "hi"}]
    read = []
    real = wires.registry.wire("openai").HistoryReader.feed

    def feed(self, messages, start=0):
        read.append((start, len(messages)))
        return real(self, messages, start)

    wires.registry.wire("openai").HistoryReader.feed = feed
    try:
        for turn in range(4):
            _read(_raw(history), cache)
            history = history + [{"role": "assistant", "content": f"ok {turn}"},
                                 {"role": "user", "content": f"more {turn}"}]
        _read(_raw([{"role": "user", "content": "other"}] + history[1:]), cache)  # an edit
    finally:
        wires.registry.wire("openai").HistoryReader.feed = real
    assert read == [(0, 1), (1, 2), (3, 2), (5, 2), (0, 9)]
    assert cache.hits == 3


@given(st.lists(st.lists(RAW_MESSAGES, max_size=4), min_size=1, max_size=6),
       st.integers(1, 6))
def test_the_key_memo_keys_a_history_as_history_keys_does(requests, size):
    """Resent message objects (from the history cache) and new ones alike, whatever
    the memo's size."""
    from turnlog.replay.proxy.threads import KeyMemo, history_keys
    from turnlog.replay.proxy.wires import HistoryCache

    memo, cache, history = KeyMemo(size), HistoryCache(), []
    for added in requests:
        history = history + added
        parsed = _read(_raw(history), cache)
        if isinstance(parsed, tuple):  # unparsed: nothing to key
            history = history[:-len(added)] if added else history
            continue
        assert memo.history_keys("openai", parsed.system, parsed.messages) == history_keys(
            "openai", parsed.system, parsed.messages)
        assert len(memo._memo) <= size
