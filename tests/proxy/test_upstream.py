"""The proxy's upstream client against a keep-alive HTTP/1.1 upstream: connections are reused,
and one the upstream closed while idle is replaced without the client seeing it (a POST too,
which aiohttp retries only for idempotent methods), while a request a fresh connection lost is
not sent twice; a HEAD request's answer has no body, whatever its length says; the
environment's HTTP proxy is used, and NO_PROXY honoured, without ~/.netrc adding credentials."""

from __future__ import annotations

import json
import socket
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


class _DropsReused(BaseHTTPRequestHandler):
    """Answers the first request on each connection; reads the next one and closes without an
    answer, as an upstream that closed an idle connection just as the request came."""

    protocol_version = "HTTP/1.1"
    connections = requests = 0
    first_only = False  # drop even a new connection's first request
    lock = threading.Lock()

    def setup(self) -> None:
        super().setup()
        self.answered = 0
        with _DropsReused.lock:
            _DropsReused.connections += 1

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        with _DropsReused.lock:
            _DropsReused.requests += 1
        if self.answered or _DropsReused.first_only:
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        data = json.dumps(reply("openai", text=f"to {body['messages'][-1]['content']}")).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.answered += 1

    def log_message(self, *args) -> None:
        pass


def _serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_post_a_reused_connection_lost_is_not_sent_twice(tmp_path):
    """The upstream read q1 whole on a kept connection and dropped it: it may have run
    the model, so the proxy does not send q1 again (a second send is billed twice); the
    client gets a 502 in its wire's shape, recorded, and q2 goes on a new connection."""
    _DropsReused.connections = _DropsReused.requests = 0
    _DropsReused.first_only = False
    server = _serve(_DropsReused)
    upstream = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        with ProxyServer(tmp_path / "p.db", upstreams={"openai": upstream}) as proxy:
            with httpx.Client(headers=KEY, timeout=30) as client:
                answers = [client.post(proxy.base_url("openai") + "/chat/completions", json={
                    "model": "m", "messages": [{"role": "user", "content": f"q{i}"}]})
                    for i in range(3)]
            proxy.drain()
    finally:
        server.shutdown()
        server.server_close()
    assert [a.status_code for a in answers] == [200, 502, 200]
    assert answers[1].json()["error"]["message"]
    assert answers[2].json()["choices"][0]["message"]["content"] == "to q2"
    # each question reached the upstream once
    assert (_DropsReused.connections, _DropsReused.requests) == (2, 3)


def test_a_request_a_new_connection_lost_is_not_sent_twice(tmp_path):
    _DropsReused.connections = _DropsReused.requests = 0
    _DropsReused.first_only = True
    server = _serve(_DropsReused)
    upstream = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        with ProxyServer(tmp_path / "p.db", upstreams={"openai": upstream}) as proxy:
            answer = httpx.post(proxy.base_url("openai") + "/chat/completions", headers=KEY,
                                json={"model": "m", "messages": [{"role": "user", "content": "q"}]},
                                timeout=30)
            proxy.drain()
    finally:
        _DropsReused.first_only = False
        server.shutdown()
        server.server_close()
    assert answer.status_code == 502
    assert "ProviderConnectionError" in answer.text or "cannot be reached" in answer.text
    assert _DropsReused.requests == 1


class _ForwardProxy(BaseHTTPRequestHandler):
    """An HTTP proxy that answers for any origin, keeping the target and headers it was sent."""

    seen: list[tuple[str, dict[str, str]]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["content-length"]))
        _ForwardProxy.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        data = json.dumps(reply("openai", text="via the proxy")).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


def test_the_environment_s_http_proxy_is_used_and_no_proxy_honoured_and_netrc_ignored(
        fake_api, tmp_path, monkeypatch):
    _ForwardProxy.seen = []
    forward = _serve(_ForwardProxy)
    netrc = tmp_path / "netrc"
    netrc.write_text("machine upstream.test login someone password their-secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{forward.server_address[1]}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    body = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
    fake_api.script("openai", [reply("openai", text="direct")])
    try:
        with ProxyServer(tmp_path / "a.db", upstreams={"openai": "http://upstream.test/v1"}) \
                as proxy, httpx.Client(headers=KEY, timeout=30, trust_env=False) as client:
            via = client.post(proxy.base_url("openai") + "/chat/completions", json=body)
        with ProxyServer(tmp_path / "b.db", fake_api) as proxy, \
                httpx.Client(headers=KEY, timeout=30, trust_env=False) as client:
            direct = client.post(proxy.base_url("openai") + "/chat/completions", json=body)
    finally:
        forward.shutdown()
        forward.server_close()
    assert via.status_code == 200
    assert via.json()["choices"][0]["message"]["content"] == "via the proxy"
    # the fake on 127.0.0.1, named in NO_PROXY, was reached without the proxy
    assert direct.json()["choices"][0]["message"]["content"] == "direct"
    assert [path for path, _ in _ForwardProxy.seen] == [
        "http://upstream.test/v1/chat/completions"]
    headers = _ForwardProxy.seen[0][1]
    assert headers["authorization"] == KEY["authorization"]  # the client's, not netrc's
    assert headers["user-agent"].startswith("python-httpx/")  # the client's, not aiohttp's
