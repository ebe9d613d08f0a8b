"""``turnlog view`` as a server meets the network: it answers only its own Host names (no DNS
rebinding), refuses numbers out of range with a 400, and serves many live pages from one
journal follower, refusing streams past its cap with a 503 instead of running out of file
descriptors."""

from __future__ import annotations

import json
import os
import re
import resource
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from turnlog.engine.demo import demo_tools
from turnlog.engine.loop import Loop
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.engine.audit.views import EXTENSIONS
from turnlog.journal import Journal
from turnlog.replay.view.app import LOOPBACK_HOSTS, hosts_for
from turnlog.replay.view.live import MAX_STREAMS

from ..cli.conftest import TURNLOG, env

#: file descriptors the server may open: what it needs idle, the cap's sockets, a few spare;
#: far below what MAX_STREAMS streams of one reader each (about five descriptors) would take
FD_LIMIT = 40 + MAX_STREAMS + 30


def _limit_fds() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


@pytest.fixture
def served(db: Path):
    """``turnlog view --db DB --port 0 --allow-host viewer.test`` under a low descriptor limit:
    (base URL, port, process)."""
    proc = subprocess.Popen([*TURNLOG, "view", "--db", str(db), "--port", "0", "--allow-host",
                             "Viewer.Test"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env(), preexec_fn=_limit_fds)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("serving on http://127.0.0.1:"), (line, proc.stderr.read())
        url = line.removeprefix("serving on ")
        yield url, int(url.rsplit(":", 1)[1]), proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def fds(proc: subprocess.Popen) -> int:
    return len(os.listdir(f"/proc/{proc.pid}/fd"))


def test_only_the_servers_own_host_names_are_answered(served):
    url, port, _ = served
    with httpx.Client(base_url=url, timeout=60) as client:
        for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example",
                     "localhost.", "[::2]"):
            refused = client.get("/conversation", params={"id": "demo"}, headers={"Host": host})
            assert refused.status_code == 400, host
            assert "demo" not in refused.text and refused.text == "Invalid host header"
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", "viewer.test",
                     f"[::1]:{port}"):
            page = client.get("/conversation", params={"id": "demo"}, headers={"Host": host})
            assert page.status_code == 200, host
            assert "demo" in page.text


def test_the_hosts_follow_the_bound_address():
    assert hosts_for("127.0.0.1") == list(LOOPBACK_HOSTS)
    assert hosts_for("192.0.2.7") == [*LOOPBACK_HOSTS, "192.0.2.7"]
    assert hosts_for("2001:db8::7") == [*LOOPBACK_HOSTS, "[2001:db8::7]"]
    everywhere = hosts_for("0.0.0.0", ["lan.example"])
    assert everywhere[:3] == list(LOOPBACK_HOSTS) and everywhere[-1] == "lan.example"
    assert socket.gethostname().lower() in everywhere and "0.0.0.0" not in everywhere


@pytest.mark.parametrize("target", ["/?page=" + "1" + "0" * 30, "/?per_page=" + "9" * 25,
                                    "/?page=-1", "/conversation?id=demo&page=" + "9" * 40,
                                    "/live?after=" + "9" * 30, "/?page=12x"])
def test_numbers_out_of_range_are_a_400(served, target):
    url, _, proc = served
    response = httpx.get(url + target, timeout=60)
    assert response.status_code == 400, response.text[:300]
    assert "out of range" in response.text or "not a whole number" in response.text
    assert proc.poll() is None


def test_the_largest_page_is_an_empty_page(served):
    url, _, _ = served
    response = httpx.get(url + f"/?page={2**63 - 1}", timeout=60)
    assert response.status_code == 200 and "demo-fork" not in response.text


def _open_stream(port: int, query: str = "after=0") -> tuple[socket.socket, bytes]:
    """A raw ``/live`` request, left open: (socket, the response's first bytes)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(f"GET /live?{query} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return sock, sock.recv(4096)


def test_live_streams_share_one_follower_and_past_the_cap_get_a_503(served):
    url, port, proc = served
    assert httpx.get(url + "/", timeout=60).status_code == 200  # the event loop is up
    idle = fds(proc)
    opened, refused = [], []
    try:
        for _ in range(MAX_STREAMS + 10):
            sock, head = _open_stream(port)
            (opened if head.startswith(b"HTTP/1.1 200") else refused).append((sock, head))
        assert len(opened) == MAX_STREAMS and len(refused) == 10
        assert all(b"text/event-stream" in head for _, head in opened)
        assert all(head.startswith(b"HTTP/1.1 503") for _, head in refused)
        # one socket per stream, one reader for all of them
        assert fds(proc) - idle <= len(opened) + len(refused) + 8
        # and the server still serves pages (no "Too many open files")
        assert httpx.get(url + "/", timeout=60).status_code == 200
    finally:
        for sock, _ in opened + refused:
            sock.close()
    deadline = time.monotonic() + 30
    while fds(proc) > idle and time.monotonic() < deadline:
        time.sleep(0.1)
    assert fds(proc) <= idle  # the last stream closed the shared reader
    sock, head = _open_stream(port)  # and streams are served again
    sock.close()
    assert head.startswith(b"HTTP/1.1 200")
    refused_page = httpx.get(url + "/", timeout=60)
    assert refused_page.status_code == 200


def test_a_shared_follower_tells_each_page_about_its_own_conversation(served, db):
    url, port, _ = served
    page = httpx.get(url + "/", timeout=60).text
    position = json.loads(re.search(r'id="live-config">([^<]*)<', page).group(1))["after"]
    everything, _ = _open_stream(port, f"after={position}")
    mine, _ = _open_stream(port, f"after={position}&c=new-one")
    other, _ = _open_stream(port, f"after={position}&c=demo")
    try:
        with Journal(db, extensions=EXTENSIONS) as journal:
            Loop(journal, ScriptedProvider([{"text": "hi"}]), demo_tools()).start(
                "hello", conversation_id="new-one")
        for sock in (everything, mine):
            assert b"event: append" in _read_until(sock, b"event: append")
        other.settimeout(1.5)
        with pytest.raises(TimeoutError):
            while b"event: append" not in other.recv(4096):
                pass
    finally:
        for sock in (everything, mine, other):
            sock.close()


def _read_until(sock: socket.socket, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = sock.recv(4096)
        assert chunk, data
        data += chunk
    return data
