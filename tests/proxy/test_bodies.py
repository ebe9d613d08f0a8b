"""Large request bodies: streamed upstream as they arrive, the proxy's memory bounded; recorded
whole up to ``RECORD_LIMIT``, beyond it as an unparsed exchange naming the size."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.fakeapi import reply

from turnlog.journal import Journal
from turnlog.replay.proxy.recorder import RECORD_LIMIT, SPOOL_MEMORY

from .test_record import conversations

SCRIPT = Path(sys.executable).parent / "turnlog"
KEY = {"authorization": "Bearer sk-bodies-test-0000"}
MB = 1 << 20


def body_of(size: int) -> tuple[bytes, bytes, bytes]:
    """A chat request whose user message makes it ``size`` bytes: (head, filler, tail)."""
    head = b'{"model": "fake-model", "messages": [{"role": "user", "content": "'
    tail = b'"}]}'
    return head, b"x" * (size - len(head) - len(tail)), tail


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.mark.parametrize("length", [True, False], ids=["content-length", "chunked"])
def test_a_body_above_the_spool_goes_upstream_whole_and_is_recorded(proxy, fake_api, length):
    """With a length it is streamed; chunked, it is spooled first and sent with its length."""
    fake_api.script("openai", [reply("openai", text="seen")])
    size = 2 * SPOOL_MEMORY + 17
    head, filler, tail = body_of(size)
    extra = {"content-length": str(size)} if length else {}
    answer = httpx.post(f"{proxy.base_url('openai')}/chat/completions", headers={**KEY, **extra},
                        content=iter([head, filler[:SPOOL_MEMORY], filler[SPOOL_MEMORY:], tail]),
                        timeout=60)
    assert answer.status_code == 200, answer.text
    (sent,) = fake_api.requests_for("openai")
    assert sent.body["messages"][0]["content"] == filler.decode()
    proxy.drain()
    (events,) = conversations(Path(proxy.db)).values()
    user = next(e for e in events if e.type == "user_message")
    assert filler.decode() in user.payload
    assert events[-1].type == "conversation_completed"


def test_a_50_mb_body_streams_through_with_the_proxy_memory_bounded(fake_api, tmp_path):
    """The proxy runs in its own process; its peak RSS (VmHWM) while it forwards and
    records a 50 MB body stays within a bound far below the body's size."""
    fake_api.script("openai", [reply("openai", text="small"), reply("openai", text="big")])
    db = tmp_path / "big.db"
    proc = subprocess.Popen([str(SCRIPT), "proxy", "--port", "0", "--db", str(db),
                             "--upstream", f"openai={fake_api.base_url('openai')}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("proxy on "), (line, proc.stderr.read())
        base = line.removeprefix("proxy on ") + "/v1"
        small = httpx.post(f"{base}/chat/completions", headers=KEY, timeout=60, json={
            "model": "fake-model", "messages": [{"role": "user", "content": "warm up"}]})
        assert small.status_code == 200
        # the peak so far is forgotten (Linux: 5 > clear_refs resets VmHWM), the baseline is now
        Path(f"/proc/{proc.pid}/clear_refs").write_text("5")
        baseline = status_kb(proc.pid, "VmRSS")
        size = 50 * MB
        head, filler, tail = body_of(size)
        chunks = [head] + [filler[i:i + MB] for i in range(0, len(filler), MB)] + [tail]
        big = httpx.post(f"{base}/chat/completions", headers={**KEY, "content-length": str(size)},
                         content=iter(chunks), timeout=300)
        assert big.status_code == 200, big.text
        assert json.loads(big.text)["choices"][0]["message"]["content"] == "big"
        deadline = time.monotonic() + 120
        while len(conversations(db)) < 2:  # the writer records it after the answer
            assert time.monotonic() < deadline, "the big exchange was not recorded"
            time.sleep(0.2)
        growth_mb = (status_kb(proc.pid, "VmHWM") - baseline) / 1024
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    sent = fake_api.requests_for("openai")[-1]
    assert len(sent.body["messages"][0]["content"]) == len(filler)  # forwarded whole
    # a tenth of the body: the spool keeps 1 MiB in memory, the recorder reads 64 kB of it
    assert growth_mb < 5 * SPOOL_MEMORY / MB, f"the proxy grew by {growth_mb:.1f} MB"
    with Journal(db) as journal:
        assert journal.verify().ok
    found = conversations(db)
    big_events = [events for events in found.values() if events[-1].type == "conversation_failed"]
    (events,) = big_events
    meta = json.loads(events[0].payload)["metadata"]["proxy"]
    assert meta["unparsed"].startswith(f"the request body ({size:,} bytes) is larger than")
    assert f"{RECORD_LIMIT:,}" in meta["unparsed"]
    assert meta["request"].startswith(head.decode()) and len(meta["request"]) <= 64_000
    small_events = [e for events in found.values() for e in events if e.type == "user_message"]
    assert len(small_events) == 1 and "warm up" in small_events[0].payload
