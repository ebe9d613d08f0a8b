"""The proxy's upstream client against a keep-alive HTTP/1.1 upstream: connections are reused,
and one the upstream closed while idle is replaced without the client seeing it; a HEAD
request's answer has no body, whatever its length says."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from tests.fakeapi import reply
from tests.providerkit import KEYS

from .harness import ProxyServer
from .test_record import conversations

KEY = {"authorization": f"Bearer {KEYS['openai']}"}


class _KeepAlive(BaseHTTPRequestHandler):
    """HTTP/1.1 with content-length; closes each connection silently after ``per_connection``
    answers (no ``connection: close``), as upstreams do with idle connections."""

    protocol_version = "HTTP/1.1"
    connections = 0
    per_connection = 2
    lock = threading.Lock()

    def setup(self) -> None:
        super().setup()
        self.answered = 0
        with _KeepAlive.lock:
            _KeepAlive.connections += 1

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        data = json.dumps(reply("openai", text=f"to {body['messages'][-1]['content']}")).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.answered += 1
        self.close_connection = self.answered >= self.per_connection

    def log_message(self, *args) -> None:
        pass


def test_a_keep_alive_upstream_s_connections_are_reused_and_replaced_when_it_closes_them(
        tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _KeepAlive)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _KeepAlive.connections = 0
    upstream = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        with ProxyServer(tmp_path / "p.db", upstreams={"openai": upstream}) as proxy:
            with httpx.Client(headers=KEY, timeout=30) as client:
                answers = [client.post(proxy.base_url("openai") + "/chat/completions", json={
                    "model": "m", "messages": [{"role": "user", "content": f"q{i}"}]})
                    for i in range(6)]
            proxy.drain()
    finally:
        server.shutdown()
        server.server_close()
    assert [a.status_code for a in answers] == [200] * 6
    assert [a.json()["choices"][0]["message"]["content"] for a in answers] == [
        f"to q{i}" for i in range(6)]
    # two answers per connection: each reused once, then replaced after the upstream closed it
    assert _KeepAlive.connections == 3
    assert len(conversations(Path(tmp_path / "p.db"))) == 6


def test_a_head_request_gets_its_answer_without_waiting_for_a_body(fake_api, tmp_path):
    # the fake has no HEAD: its 501 names a content-length and, answering a HEAD, sends no body
    with ProxyServer(tmp_path / "p.db", fake_api, timeout=5) as proxy:
        answer = httpx.head(proxy.base_url("openai") + "/models", timeout=10)
    assert answer.status_code == 501
    assert answer.elapsed.total_seconds() < 4
