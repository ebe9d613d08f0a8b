"""The proxy's upstream client: HTTP/1.1 over asyncio streams, answers parsed by httptools.

The proxy needs little of an HTTP client: send one request with the client's
headers and body (bytes, or an async iterator with its length given), and
pass the answer on as it arrives, its transfer encoding undone and nothing
else. httpx did that through its client, anyio and h11 for about 1.2 ms of
CPU per request (most of what the proxy added); this does it with the
parser uvicorn uses (the ``view`` extra's httptools) on the running loop.

Connections are kept alive and reused per origin when the upstream allows it;
a reused connection that the upstream closed while idle is replaced once,
before any of the answer was read, when the body can be sent again. What
went wrong is one of three errors: ``UpstreamTimeout`` (no byte for
``timeout`` seconds, or no connection in ``connect_timeout``),
``UpstreamUnreachable`` (no connection), ``UpstreamBroken`` (the answer
stopped part-way or is not HTTP).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httptools

__all__ = ["KEEP_IDLE", "Answer", "Upstream", "UpstreamBroken", "UpstreamError", "UpstreamTimeout",
           "UpstreamUnreachable"]

#: Idle connections kept per origin.
KEEP_IDLE = 32
_READ = 1 << 16


class UpstreamError(Exception):
    """The upstream did not answer in full."""


class UpstreamTimeout(UpstreamError):
    """No connection, or no byte of the answer, in time."""


class UpstreamUnreachable(UpstreamError):
    """No connection could be made."""


class UpstreamBroken(UpstreamError):
    """The answer stopped part-way, or is not HTTP."""


class _Conn:
    """One connection and the parser of the answer being read on it."""

    def __init__(self, origin: tuple[str, str, int], reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.origin = origin
        self.reader, self.writer = reader, writer
        self.reused = False
        self.parser = httptools.HttpResponseParser(self)
        self.headers: list[tuple[str, str]] = []
        self.chunks: list[bytes] = []
        self.head_done = self.done = self.keep = False
        self.framed = False  # a length or chunks say where the body ends (else: at EOF)

    def reset(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.headers, self.chunks = [], []
        self.head_done = self.done = self.framed = self.keep = False

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("latin-1"), value.decode("latin-1")))
        if name.lower() in (b"content-length", b"transfer-encoding"):
            self.framed = True

    def on_headers_complete(self) -> None:
        self.head_done = True

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        self.done = True
        # asked here: once the feed that completed the message returns, the parser says False
        self.keep = self.parser.should_keep_alive()

    async def feed(self, timeout: float) -> bool:
        """Read once and parse; ``False`` at the end of the connection."""
        try:
            async with asyncio.timeout(timeout):
                data = await self.reader.read(_READ)
        except TimeoutError:
            raise UpstreamTimeout(f"no answer from the upstream in {timeout:g} s") from None
        except OSError as exc:
            raise UpstreamBroken(f"{type(exc).__name__}: {exc}") from None
        if not data:
            return False
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            raise UpstreamBroken(f"the upstream's answer is not HTTP ({exc})") from None
        return True

    def close(self) -> None:
        self.writer.close()


class Answer:
    """The upstream's answer: its status and headers, its body read with ``aiter_raw``
    (chunk by chunk as it arrives) or ``aread`` (whole). ``aclose`` when done with it."""

    def __init__(self, upstream: Upstream, conn: _Conn) -> None:
        self._upstream, self._conn = upstream, conn
        self.status_code = conn.parser.get_status_code()
        self.headers = conn.headers

    def header(self, name: str) -> str:
        """The first value of header ``name`` (lower-case), or ``""``."""
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return ""

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (chunked transfer encoding undone)."""
        conn = self._conn
        if conn is None:
            return
        while True:
            if conn.chunks:
                chunks, conn.chunks = conn.chunks, []
                for chunk in chunks:
                    yield chunk
            if conn.done:
                break
            if not await conn.feed(self._upstream.timeout):
                if conn.framed:
                    raise UpstreamBroken("the upstream closed the connection mid-answer")
                conn.done = True  # the body ended with the connection (which is not kept)
        self._release()

    async def aread(self) -> bytes:
        """The whole body."""
        return b"".join([chunk async for chunk in self.aiter_raw()])

    async def aclose(self) -> None:
        """Give the connection back (whole answer read, and the upstream keeps it) or close it."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if conn.keep:
            self._upstream._idle(conn)
        else:
            conn.close()


class Upstream:
    """Keep-alive connections to the upstreams, and ``send``."""

    def __init__(self, timeout: float, connect_timeout: float, tls: ssl.SSLContext) -> None:
        self.timeout, self.connect_timeout, self.tls = timeout, connect_timeout, tls
        self._pools: dict[tuple[str, str, int], list[_Conn]] = {}

    async def send(self, method: str, url: str, headers: list[tuple[str, str]],
                   content: bytes | AsyncIterator[bytes]) -> Answer:
        """Send one request; its answer once its head arrived.

        ``headers`` go as given, after ``host``; a ``bytes`` body gets its
        ``content-length`` here, an iterator's is the caller's to give.
        """
        parts = urlsplit(url)
        scheme = parts.scheme
        host = parts.hostname or ""
        port = parts.port or (443 if scheme == "https" else 80)
        origin = (scheme, host, port)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        lines = [f"{method} {target} HTTP/1.1", f"host: {parts.netloc.rpartition('@')[2]}"]
        lines += [f"{k}: {v}" for k, v in headers]
        replayable = isinstance(content, bytes)
        if replayable and (content or method in ("POST", "PUT", "PATCH")):
            lines.append(f"content-length: {len(content)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        while True:
            conn = self._take(origin) if replayable else None
            reused = conn is not None
            if conn is None:
                conn = await self._connect(origin)
            try:
                await self._write(conn, head, content)
                while not conn.head_done:
                    if not await conn.feed(self.timeout):
                        raise UpstreamBroken("the upstream closed the connection "
                                             "before it answered")
            except UpstreamBroken:
                conn.close()
                if reused and not conn.chunks and not conn.head_done:
                    continue  # closed while idle: once more on a new connection
                raise
            except BaseException:
                conn.close()
                raise
            if method == "HEAD":  # its answer has no body, whatever its length says
                conn.chunks, conn.done, conn.keep = [], True, False
            return Answer(self, conn)

    async def aclose(self) -> None:
        """Close every idle connection."""
        for pool in self._pools.values():
            for conn in pool:
                conn.close()
        self._pools.clear()

    def _take(self, origin: tuple[str, str, int]) -> _Conn | None:
        pool = self._pools.get(origin)
        while pool:
            conn = pool.pop()
            if not conn.writer.is_closing() and not conn.reader.at_eof():
                conn.reset()
                return conn
            conn.close()
        return None

    def _idle(self, conn: _Conn) -> None:
        pool = self._pools.setdefault(conn.origin, [])
        if len(pool) < KEEP_IDLE and not conn.writer.is_closing():
            pool.append(conn)
        else:
            conn.close()

    async def _connect(self, origin: tuple[str, str, int]) -> _Conn:
        scheme, host, port = origin
        tls: Any = self.tls if scheme == "https" else None
        try:
            async with asyncio.timeout(self.connect_timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=tls, server_hostname=host if tls else None, limit=_READ)
        except TimeoutError:
            raise UpstreamTimeout(f"no connection to {host}:{port} in "
                                  f"{self.connect_timeout:g} s") from None
        except OSError as exc:
            raise UpstreamUnreachable(f"{host}:{port}: {exc.strerror or exc}") from None
        return _Conn(origin, reader, writer)

    async def _write(self, conn: _Conn, head: bytes,
                     content: bytes | AsyncIterator[bytes]) -> None:
        writer = conn.writer
        try:
            if isinstance(content, bytes):
                writer.write(head + content)
            else:
                writer.write(head)
                async for chunk in content:
                    writer.write(chunk)
                    await writer.drain()
            async with asyncio.timeout(self.timeout):
                await writer.drain()
        except TimeoutError:
            raise UpstreamTimeout(f"the upstream took no request bytes for "
                                  f"{self.timeout:g} s") from None
        except OSError as exc:
            raise UpstreamBroken(f"{type(exc).__name__}: {exc}") from None
