"""The recorder's group commit: exchanges queued together are recorded in one transaction,
threaded in arrival order; a request that arrives before its predecessor is committed still
threads onto it; an exchange the journal refuses is reported, the rest of its batch recorded;
a proxy killed while recording leaves whole exchanges only."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from tests.fakeapi import reply
from tests.providerkit import KEYS

from turnlog.journal import Journal

from .harness import ProxyServer
from .test_record import conversations

KEY = {"authorization": f"Bearer {KEYS['openai']}"}
ENDS = {"conversation_completed", "conversation_failed", "model_failed"}


def _echo(body):
    """The fake's answer depends only on the request: concurrent clients arrive in any order."""
    return reply("openai", text=f"answer to {body['messages'][-1]['content']}")


def _agent(base: str, name: str, turns: int, errors: list) -> None:
    messages = [{"role": "system", "content": f"agent {name}"}]
    try:
        with httpx.Client(headers=KEY, timeout=30) as client:
            for t in range(turns):
                messages.append({"role": "user", "content": f"{name} turn {t}"})
                r = client.post(f"{base}/chat/completions", json={"model": "m",
                                                                  "messages": messages})
                assert r.status_code == 200, r.text
                messages.append(r.json()["choices"][0]["message"])
    except Exception as exc:  # noqa: BLE001 - collected, asserted by the caller
        errors.append(exc)


def _user_texts(events) -> list[str]:
    return [json.loads(e.payload)["parts"][0]["text"] for e in events if e.type == "user_message"]


def test_concurrent_conversations_are_each_recorded_whole_and_in_order(proxy, fake_api):
    fake_api.answer_with("openai", _echo)
    errors: list = []
    agents = [threading.Thread(target=_agent, args=(proxy.base_url("openai"), f"a{i}", 4, errors))
              for i in range(12)]
    for agent in agents:
        agent.start()
    for agent in agents:
        agent.join()
    assert errors == []
    proxy.drain()
    found = conversations(Path(proxy.db))
    assert len(found) == 12
    for events in found.values():
        (name,) = {t.split()[0] for t in _user_texts(events)}
        assert _user_texts(events) == [f"{name} turn {t}" for t in range(4)]
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert events[-1].type == "conversation_completed"
    assert proxy.recorder.recorded == 48 and proxy.recorder.lost == 0
    assert proxy.recorder.commits <= 48
    with Journal(proxy.db) as journal:
        assert journal.verify().ok


def _hold(db: str) -> sqlite3.Connection:
    Journal(db).close()
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the journal
    return blocker


def _ask(client: httpx.Client, base: str, messages: list) -> dict:
    r = client.post(f"{base}/chat/completions", json={"model": "m", "messages": messages})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]


def test_a_request_that_arrives_before_its_predecessor_is_committed_threads_onto_it(
        proxy, fake_api):
    fake_api.answer_with("openai", _echo)
    base = proxy.base_url("openai")
    blocker = _hold(proxy.db)
    try:
        with httpx.Client(headers=KEY, timeout=30) as client:
            history = [{"role": "user", "content": "first"}]
            history += [_ask(client, base, history), {"role": "user", "content": "second"}]
            time.sleep(0.2)  # the writer holds the first exchange, retrying the lock
            _ask(client, base, history)  # its predecessor is not committed yet
            _ask(client, base, [{"role": "user", "content": "elsewhere"}])
        time.sleep(0.3)
        assert proxy.recorder.recorded == 0 and proxy.recorder.lost == 0  # waiting, not lost
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    proxy.drain()
    assert proxy.recorder.recorded == 3 and proxy.recorder.lost == 0
    # the first exchange alone (taken while the journal was locked), then the two queued
    # behind it in one transaction
    assert proxy.recorder.commits == 2
    found = conversations(Path(proxy.db))
    assert sorted(_user_texts(events) for events in found.values()) == [
        ["elsewhere"], ["first", "second"]]
    with Journal(proxy.db) as journal:
        assert journal.verify().ok


def test_an_exchange_the_journal_refuses_is_reported_and_the_rest_of_its_batch_recorded(
        proxy, fake_api, capfd):
    fake_api.answer_with("openai", _echo)
    base = proxy.base_url("openai")
    blocker = _hold(proxy.db)
    blocker.execute("CREATE TRIGGER refuse BEFORE INSERT ON events WHEN NEW.payload LIKE "
                    "'%poison%' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")
    blocker.execute("COMMIT")
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with httpx.Client(headers=KEY, timeout=30) as client:
            _ask(client, base, [{"role": "user", "content": "before"}])
            time.sleep(0.2)  # the writer holds it; the next three queue behind it
            for text in ("one", "poison", "two"):
                _ask(client, base, [{"role": "user", "content": text}])
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    proxy.drain()
    assert proxy.recorder.recorded == 3 and proxy.recorder.lost == 1
    # "before", then the batch of three refused whole and recorded again one by one
    assert proxy.recorder.commits == 3
    err = capfd.readouterr().err
    assert "could not record the openai exchange to /v1/chat/completions" in err
    assert "refused by the test" in err
    found = conversations(Path(proxy.db))
    assert sorted(_user_texts(events) for events in found.values()) == [
        ["before"], ["one"], ["two"]]
    assert all(events[-1].type == "conversation_completed" for events in found.values())


def test_an_exchange_whose_planning_fails_after_staging_records_none_of_its_events(
        proxy, fake_api, capfd):
    """Found by review: an exchange that failed after its events were staged was reported
    lost, yet the batch's commit wrote its staged events (half an exchange)."""
    fake_api.answer_with("openai", _echo)
    base = proxy.base_url("openai")
    recorder = proxy.recorder
    real_stage, real_add, staged, failed = recorder._stage, recorder.index.add, [], []

    def stage(pending, conversation, events, *rest, **named):
        staged.append(repr(events))
        return real_stage(pending, conversation, events, *rest, **named)

    def add(conv_id, *rest):  # the step after staging fails for the exchange of "poison"
        if not failed and "poison" in staged[-1]:
            failed.append(conv_id)
            raise RuntimeError("planning failed after staging")
        return real_add(conv_id, *rest)

    recorder._stage, recorder.index.add = stage, add
    blocker = _hold(proxy.db)
    try:
        with httpx.Client(headers=KEY, timeout=30) as client:
            _ask(client, base, [{"role": "user", "content": "before"}])
            time.sleep(0.2)  # the writer holds it; the next three queue behind it
            for text in ("one", "poison", "two"):
                _ask(client, base, [{"role": "user", "content": text}])
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    proxy.drain()
    assert failed and proxy.recorder.lost == 1 and proxy.recorder.recorded == 3
    assert "planning failed after staging" in capfd.readouterr().err
    found = conversations(Path(proxy.db))
    assert sorted(_user_texts(events) for events in found.values()) == [
        ["before"], ["one"], ["two"]]
    with sqlite3.connect(proxy.db) as conn:
        assert not conn.execute("SELECT count(*) FROM events WHERE payload LIKE '%poison%'"
                                ).fetchone()[0]
    with Journal(proxy.db) as journal:
        assert journal.verify().ok


def test_a_proxy_killed_while_recording_leaves_whole_exchanges_and_threads_on_after(
        fake_api, tmp_path):
    fake_api.answer_with("openai", _echo)
    db = tmp_path / "p.db"
    proc = subprocess.Popen([str(Path(sys.executable).parent / "turnlog"), "proxy", "--port", "0",
                             "--db", str(db), "--upstream",
                             f"openai={fake_api.base_url('openai')}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        base = proc.stdout.readline().strip().removeprefix("proxy on ") + "/v1"
        errors: list = []
        agents = [threading.Thread(target=_agent, args=(base, f"k{i}", 6, errors), daemon=True)
                  for i in range(16)]
        for agent in agents:
            agent.start()
        deadline = time.monotonic() + 30
        while len(fake_api.requests) < 40:  # mid-run: exchanges answered, records in flight
            assert time.monotonic() < deadline, "the agents did not get going"
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
        for agent in agents:
            agent.join(30)
    finally:
        proc.kill()
        proc.communicate()
    with Journal(db) as journal:
        assert journal.verify().ok
    found = conversations(db)
    assert found, "nothing was committed before the kill"
    for events in found.values():
        assert events[-1].type in ENDS  # never a request without its answer
        texts = _user_texts(events)
        (name,) = {t.split()[0] for t in texts}
        assert texts == [f"{name} turn {t}" for t in range(len(texts))]
    # the next request of a recorded conversation threads onto what the killed proxy committed
    conv_id, events = max(found.items(), key=lambda item: len(item[1]))
    texts = _user_texts(events)
    name = texts[0].split()[0]
    history = [{"role": "system", "content": f"agent {name}"}]
    for text in texts:
        history += [{"role": "user", "content": text},
                    {"role": "assistant", "content": f"answer to {text}"}]
    history.append({"role": "user", "content": f"{name} turn {len(texts)}"})
    with ProxyServer(db, fake_api) as proxy:
        with httpx.Client(headers=KEY, timeout=30) as client:
            _ask(client, proxy.base_url("openai"), history)
        proxy.drain()
    after = conversations(db)
    assert len(after) == len(found)
    assert _user_texts(after[conv_id]) == [*texts, f"{name} turn {len(texts)}"]
