"""A proxy served in-process (uvicorn in a thread) in front of the fake API, for tests.

``ProxyServer(db, fake).start()`` records into the SQLite file ``db`` and
forwards each wire to ``fake``; ``base_url(wire)`` is what an SDK takes;
``drain()`` waits until every answered exchange is recorded.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn

from tests.fakeapi import FakeAPI

from turnlog.replay.proxy.app import create_app
from turnlog.journal import Journal
from turnlog.replay.proxy.recorder import Recorder
from turnlog.replay.proxy.replaying import ReplayBook


class ProxyServer:
    def __init__(self, db: Path | str, fake: FakeAPI | None = None, *,
                 upstreams: dict[str, str] | None = None, timeout: float = 30.0,
                 replay: bool = False, ignore: tuple[str, ...] = (),
                 to: tuple[str, str] | None = None) -> None:
        self.replay, self.ignore, self.to = replay, ignore, to
        self.db = str(db)
        if upstreams is None and fake is not None:
            upstreams = {"openai": fake.base_url("openai"), "anthropic": fake.base_url("anthropic"),
                         "gemini": fake.base_url("gemini")}
        self.upstreams = upstreams or {}
        self.timeout = timeout
        self.recorder: Recorder | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    def start(self) -> ProxyServer:
        book = None
        if self.replay:
            with Journal(self.db) as journal:
                book = ReplayBook(journal, self.ignore)
        else:
            self.recorder = Recorder(self.db).start()
        app = create_app(self.recorder, self.upstreams, timeout=self.timeout, book=book,
                         to=self.to)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert time.monotonic() < deadline, "the proxy did not start"
            time.sleep(0.01)
        return self

    def base_url(self, wire: str) -> str:
        root = f"http://127.0.0.1:{self.port}"
        return f"{root}/v1" if wire.startswith("openai") else root

    def drain(self) -> None:
        """Wait until every answered exchange is recorded: first until no request is in
        flight (a streamed answer is submitted after its last chunk left, which the
        client may have read already), then until the recorder's queue is empty."""
        deadline = time.monotonic() + 10
        while self._server is not None and self._server.server_state.tasks:
            assert time.monotonic() < deadline, "requests still in flight"
            time.sleep(0.005)
        if self.recorder is not None:
            self.recorder.drain()

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._thread.join(10)
        if self.recorder is not None:
            self.recorder.close()

    def __enter__(self) -> ProxyServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
