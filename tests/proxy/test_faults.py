"""Record mode's faults: upstream errors, an unreachable or slow upstream, unreadable requests,
a client that goes away mid-stream, threading across forks, names and restarts."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from tests.fakeapi import Reply, error_reply, reply, sse_events
from tests.providerkit import KEYS, SYSTEM, script_three_turns

from turnlog.engine.model.conversation import load_state
from turnlog.journal import Journal

from .clients import QUESTION, run_openai
from .harness import ProxyServer
from .test_record import conversations, journal_bytes


def events_of(db, conv_id=None):
    found = conversations(Path(db))
    if conv_id is None:
        (conv_id,) = found
    return [(e.type, json.loads(e.payload)) for e in found[conv_id]]


def test_an_upstream_error_goes_back_as_sent_and_is_recorded_as_model_failed(proxy, fake_api):
    fake_api.script("anthropic", [error_reply("anthropic", 429, "slow down " + KEYS["anthropic"],
                                              retry_after=3)])
    client = anthropic.Anthropic(api_key=KEYS["anthropic"], base_url=proxy.base_url("anthropic"),
                                 max_retries=0)
    with pytest.raises(anthropic.RateLimitError) as caught:
        client.messages.create(model="fake-model", max_tokens=10,
                               messages=[{"role": "user", "content": "hi"}])
    assert caught.value.response.headers["retry-after"] == "3"
    assert caught.value.body["error"]["message"] == "slow down " + KEYS["anthropic"]
    proxy.drain()
    types, payloads = zip(*events_of(proxy.db))
    assert types == ("conversation_started", "user_message", "model_requested", "model_failed")
    failed = payloads[-1]
    assert failed["status"] == 429 and failed["error_type"] == "RateLimitError"
    assert "slow down" in failed["message"] and KEYS["anthropic"] not in failed["message"]
    assert KEYS["anthropic"].encode() not in journal_bytes(Path(proxy.db))


def test_a_retry_after_a_failure_continues_the_same_conversation(proxy, fake_api):
    fake_api.script("openai", [error_reply("openai", 500, "boom"), reply("openai", text="ok")])
    client = openai.OpenAI(api_key=KEYS["openai"], base_url=proxy.base_url("openai"),
                           max_retries=1)
    answer = client.chat.completions.create(model="fake-model",
                                            messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content == "ok"
    proxy.drain()
    events = events_of(proxy.db)
    assert [t for t, _ in events] == ["conversation_started", "user_message", "model_requested",
                                      "model_failed", "model_requested", "model_responded",
                                      "conversation_completed"]
    assert [p.get("attempt", 1) for t, p in events if t == "model_requested"] == [1, 2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_upstream_is_a_502_in_the_wires_shape_and_recorded(tmp_path):
    down = f"http://127.0.0.1:{_free_port()}"
    with ProxyServer(tmp_path / "p.db", upstreams={"anthropic": down}) as proxy:
        client = anthropic.Anthropic(api_key=KEYS["anthropic"],
                                     base_url=proxy.base_url("anthropic"), max_retries=0)
        with pytest.raises(anthropic.APIStatusError) as caught:
            client.messages.create(model="fake-model", max_tokens=10,
                                   messages=[{"role": "user", "content": "hi"}])
        proxy.drain()
    assert caught.value.status_code == 502
    assert caught.value.body["error"]["type"] == "api_error"
    assert "cannot be reached" in caught.value.body["error"]["message"]
    failed = events_of(tmp_path / "p.db")[-1]
    assert failed[0] == "model_failed" and failed[1]["status"] == 502
    assert failed[1]["error_type"] == "ProviderConnectionError" and failed[1]["retryable"]


def test_a_slow_upstream_is_a_504_in_the_wires_shape_and_recorded(fake_api, tmp_path):
    fake_api.script("openai", [Reply(hang=3.0)])
    with ProxyServer(tmp_path / "p.db", fake_api, timeout=0.3) as proxy:
        client = openai.OpenAI(api_key=KEYS["openai"], base_url=proxy.base_url("openai"),
                               max_retries=0)
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model="fake-model",
                                           messages=[{"role": "user", "content": "hi"}])
        proxy.drain()
    assert caught.value.status_code == 504
    assert caught.value.body["type"] == "timeout"  # the SDK hands over body["error"]
    failed = events_of(tmp_path / "p.db")[-1][1]
    assert failed["status"] == 504 and failed["error_type"] == "ProviderTimeout"


@pytest.mark.parametrize("path, body, reason", [
    ("/v1/chat/completions", b"{not json", "not JSON"),
    ("/v1/chat/completions", b'["a list"]', "not an object"),
    ("/v1/messages", b'{"model": "m", "max_tokens": 5}', "no 'messages'"),
    ("/v1/embeddings", b'{"model": "m", "input": "x"}', "not a path the proxy reads"),
])
def test_an_unreadable_request_is_forwarded_untouched_and_recorded_unparsed(
        proxy, fake_api, path, body, reason):
    headers = {"authorization": "Bearer " + KEYS["openai"], "x-api-key": KEYS["anthropic"],
               "content-type": "application/json"}
    answer = httpx.post(proxy.base_url("anthropic") + path, content=body, headers=headers)
    proxy.drain()
    if path == "/v1/embeddings":  # the fake has no such endpoint: its own 404 came back
        assert answer.json()["error"]["message"] == "no such endpoint /v1/embeddings"
    else:
        sent = fake_api.requests[-1]
        assert sent.path == path
        try:
            assert sent.body == json.loads(body)
        except ValueError:
            assert sent.body == body.decode()
    assert answer.status_code in (400, 404)  # what the upstream said, passed on
    (event_types, payloads) = zip(*events_of(proxy.db))
    assert event_types == ("conversation_started", "conversation_failed")
    meta = payloads[0]["metadata"]["proxy"]
    assert reason in meta["unparsed"] and meta["path"] == path and meta["status"] == answer.status_code
    assert payloads[1]["error_type"] == "unparsed"
    assert b"test-KEY-" not in journal_bytes(Path(proxy.db))


class _SlowStream(BaseHTTPRequestHandler):
    """An upstream that sends the start of an Anthropic stream, then waits for ``release``."""

    release = threading.Event()

    def log_message(self, *args):
        pass

    def do_POST(self):  # noqa: N802 - the stdlib's name
        self.rfile.read(int(self.headers.get("content-length") or 0))
        events = sse_events("anthropic", reply("anthropic", text="a long answer " * 20))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for event in events[:6]:
            self.wfile.write(event)
            self.wfile.flush()
        self.release.wait(10)
        try:
            for event in events[6:]:
                self.wfile.write(event)
        except OSError:
            pass


def wait_for_events(db, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = conversations(Path(db))
        except Exception:  # noqa: BLE001 - not created yet
            found = {}
        if found:
            return events_of(db)
        time.sleep(0.05)
    raise AssertionError("nothing was recorded")


def test_a_client_that_goes_away_mid_stream_leaves_a_partial_interrupted_record(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowStream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    upstream = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with ProxyServer(tmp_path / "p.db", upstreams={"anthropic": upstream}) as proxy:
            with httpx.stream("POST", proxy.base_url("anthropic") + "/v1/messages",
                              headers={"x-api-key": KEYS["anthropic"]},
                              json={"model": "fake-model", "max_tokens": 10, "stream": True,
                                    "messages": [{"role": "user", "content": "hi"}]}) as answer:
                first = next(answer.iter_raw())
            assert b"message_start" in first
            # the proxy learns of the close from its event loop (ASGI http.disconnect); an
            # upstream released before that would have its rest written into the dead
            # transport, which uvicorn drops silently, and the answer would count as complete
            time.sleep(0.5)
            _SlowStream.release.set()  # the next chunk meets the closed connection
            events = wait_for_events(tmp_path / "p.db")
    finally:
        _SlowStream.release.set()
        server.shutdown()
        server.server_close()
    kind, failed = events[-1]
    assert kind == "model_failed" and failed["interrupted"]
    assert failed["error_type"] == "StreamInterrupted"
    assert "went away" in failed["message"]
    assert failed["partial"][0]["text"].startswith("a long")


def test_a_history_that_departs_part_way_is_a_fork_at_that_point(proxy, fake_api):
    script_three_turns(fake_api, "openai")
    run_openai(proxy.base_url("openai"))
    # the same agent, asked something else after the same first user message? no: a different
    # first question shares only the system prompt; ask the same one with a different turn 2
    script_three_turns(fake_api, "openai")
    fake_api.script("openai", [])
    run_openai(proxy.base_url("openai"))  # the same run again: shares the whole history
    proxy.drain()
    with Journal(proxy.db) as journal:
        streams = {s.stream_id: s for s in journal.streams()}
        assert journal.verify().ok
    assert len(streams) == 2
    fork = next(s for s in streams.values() if s.parent_stream_id)
    parent = streams[fork.parent_stream_id]
    # the second run forked where its first request ended: after the user message
    assert fork.parent_seq == 2 and parent.last_seq == 15
    with Journal(proxy.db) as journal:
        assert len(load_state(journal, fork.stream_id).messages) == 7


def test_the_conversation_header_names_the_conversation(proxy, fake_api):
    script_three_turns(fake_api, "openai")
    run_openai(proxy.base_url("openai"), headers={"x-turnlog-conversation": "agent-7"})
    proxy.drain()
    assert list(conversations(Path(proxy.db))) == ["agent-7"]
    assert "x-turnlog-conversation" not in fake_api.requests[0].headers


def test_a_restarted_proxy_threads_onto_what_it_recorded_before(fake_api, tmp_path):
    fake_api.script("openai", [reply("openai", text="first"), reply("openai", text="second")])
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    with ProxyServer(tmp_path / "p.db", fake_api) as proxy:
        client = openai.OpenAI(api_key=KEYS["openai"], base_url=proxy.base_url("openai"))
        first = client.chat.completions.create(model="fake-model", messages=messages)
    messages += [{"role": "assistant", "content": first.choices[0].message.content},
                 {"role": "user", "content": "and tomorrow?"}]
    with ProxyServer(tmp_path / "p.db", fake_api) as proxy:
        client = openai.OpenAI(api_key=KEYS["openai"], base_url=proxy.base_url("openai"))
        client.chat.completions.create(model="fake-model", messages=messages)
    found = conversations(tmp_path / "p.db")
    assert len(found) == 1
    assert [e.type for e in next(iter(found.values()))][-5:] == [
        "conversation_completed", "user_message", "model_requested", "model_responded",
        "conversation_completed"]


def test_sessions_that_share_only_the_system_prompt_are_separate_conversations(proxy, fake_api):
    script_three_turns(fake_api, "openai")
    run_openai(proxy.base_url("openai"))
    script_three_turns(fake_api, "openai")
    run_openai(proxy.base_url("openai"), question="And in Rome, and 4 + 4?")
    proxy.drain()
    with Journal(proxy.db) as journal:
        streams = list(journal.streams())
    assert len(streams) == 2 and not any(s.parent_stream_id for s in streams)
    assert all(s.last_seq == 15 for s in streams)


def test_a_locked_journal_still_serves_the_request_and_records_once_it_is_free(
        proxy, fake_api):
    import sqlite3

    fake_api.script("openai", [reply("openai", text="served")])
    Journal(proxy.db).close()  # the file exists (the proxy created it)
    blocker = sqlite3.connect(proxy.db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the journal
    try:
        client = openai.OpenAI(api_key=KEYS["openai"], base_url=proxy.base_url("openai"))
        answer = client.chat.completions.create(model="fake-model",
                                                messages=[{"role": "user", "content": "hi"}])
        assert answer.choices[0].message.content == "served"
        time.sleep(0.5)
        assert proxy.recorder.recorded == 0  # still waiting for the lock, not dropped
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    proxy.drain()
    assert proxy.recorder.recorded == 1 and proxy.recorder.lost == 0
    assert [t for t, _ in events_of(proxy.db)][-2:] == ["model_responded",
                                                        "conversation_completed"]
