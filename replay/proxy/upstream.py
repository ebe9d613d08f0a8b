"""The proxy's upstream client: aiohttp's, kept to passing bytes on.

The proxy needs little of an HTTP client, but needs it exact: send one
request with the client's headers and body (bytes, or an async iterator with
its length given) and pass the answer on as it arrives, its transfer encoding
undone and nothing else. aiohttp's ``ClientSession`` does that on the running
loop with a C parser and a keep-alive pool (``TCPConnector``); httpx's client
cost about 1.2 ms of CPU per request through anyio and h11. The session is
set so it adds nothing of its own: no ``User-Agent``, ``Accept`` or
``Accept-Encoding`` of aiohttp's (the caller's own go), no decompression (the
bytes the client gets are the bytes the upstream sent), no cookie jar (one
client's cookies never reach another's requests), no redirects followed (a
3xx goes back to the client as it came).

Environment proxies: ``HTTPS_PROXY``/``HTTP_PROXY`` and ``NO_PROXY`` are
honoured, as the official SDKs' httpx clients honour them, so an agent that
reaches its API through a corporate proxy still does through turnlog. They
are read once per origin with the standard library's ``getproxies`` and
``proxy_bypass``, not with aiohttp's ``trust_env``: that would also read
``~/.netrc`` and add an ``Authorization`` of its own (refusing the request
when the client sent one), and look both up in a thread on every request.

A request is sent once. A connection that fails under it, reused or new, is a
502 to the client, never a second send: the proxy cannot tell an upstream that
closed an idle connection from one that read the whole request, ran the model
and died, and a model call sent twice is billed twice. aiohttp checks a pooled
connection before reusing it, and the official SDKs retry a 502 themselves
(aiohttp's own rule: retry only idempotent methods; the model APIs are POSTs). What went
wrong is one of three errors: ``UpstreamTimeout`` (no byte for ``timeout``
seconds, or no connection in ``connect_timeout``), ``UpstreamUnreachable`` (no
connection), ``UpstreamBroken`` (the answer stopped part-way or is not HTTP).
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from yarl import URL

__all__ = ["KEEP_IDLE", "Answer", "Upstream", "UpstreamBroken", "UpstreamError", "UpstreamTimeout",
           "UpstreamUnreachable"]

#: Seconds an idle connection to an upstream is kept for reuse.
KEEP_IDLE = 30
# what aiohttp would add of its own; the client's own go instead
_SKIP = frozenset({"User-Agent", "Accept", "Accept-Encoding", "Content-Type"})


class UpstreamError(Exception):
    """The upstream did not answer in full."""


class UpstreamTimeout(UpstreamError):
    """No connection, or no byte of the answer, in time."""


class UpstreamUnreachable(UpstreamError):
    """No connection could be made."""


class UpstreamBroken(UpstreamError):
    """The answer stopped part-way, or is not HTTP."""


class Answer:
    """The upstream's answer: its status and headers, its body read with ``aiter_raw``
    (chunk by chunk as it arrives) or ``aread`` (whole). ``aclose`` when done with it."""

    def __init__(self, response: aiohttp.ClientResponse, timeout: float) -> None:
        self._response, self._timeout = response, timeout
        self.status_code = response.status
        self.headers = [(k.decode("latin-1"), v.decode("latin-1"))
                        for k, v in response.raw_headers]

    def header(self, name: str) -> str:
        """The first value of header ``name``, or ``""``."""
        return self._response.headers.get(name, "")

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (chunked transfer encoding undone)."""
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except asyncio.TimeoutError:
            raise UpstreamTimeout(f"no answer from the upstream in {self._timeout:g} s") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise UpstreamBroken(f"{type(exc).__name__}: {exc}") from None

    async def aread(self) -> bytes:
        """The whole body."""
        return b"".join([chunk async for chunk in self.aiter_raw()])

    async def aclose(self) -> None:
        """Give the connection back (whole answer read, and the upstream keeps it) or close it."""
        response = self._response
        if response.content.is_eof():
            response.release()
        else:
            response.close()


class Upstream:
    """Keep-alive connections to the upstreams, and ``send``."""

    def __init__(self, timeout: float, connect_timeout: float, tls: ssl.SSLContext) -> None:
        self.timeout, self.connect_timeout, self.tls = timeout, connect_timeout, tls
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[tuple[str, str], tuple[URL | None, aiohttp.BasicAuth | None]] = {}

    def _open(self) -> aiohttp.ClientSession:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.tls, limit=0, keepalive_timeout=KEEP_IDLE),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout,
                                          sock_read=self.timeout),
            skip_auto_headers=_SKIP, auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(), trust_env=False)
        return self._session

    async def send(self, method: str, url: str, headers: list[tuple[str, str]],
                   content: bytes | AsyncIterator[bytes]) -> Answer:
        """Send one request; its answer once its head arrived.

        ``headers`` go as given, after ``host``; a ``bytes`` body gets its
        ``content-length`` here, an iterator's is the caller's to give.
        """
        session = self._session or self._open()
        target = URL(url, encoded=True)
        proxy, proxy_auth = self._proxy(target)
        headers = [(k, v) for k, v in headers if k.lower() != "expect"]
        data: Any = content or None  # no body: content-length 0 where the method takes one
        try:
            response = await session.request(
                method, target, headers=headers, data=data, allow_redirects=False,
                proxy=proxy, proxy_auth=proxy_auth)
        except aiohttp.ConnectionTimeoutError:
            raise UpstreamTimeout(f"no connection to {target.host}:{target.port} in "
                                  f"{self.connect_timeout:g} s") from None
        except asyncio.TimeoutError:
            raise UpstreamTimeout(f"no answer from the upstream in {self.timeout:g} s") from None
        except (aiohttp.ClientConnectorError, aiohttp.InvalidURL) as exc:
            raise UpstreamUnreachable(f"{target.host}:{target.port}: {exc}") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise UpstreamBroken(f"{type(exc).__name__}: {exc}") from None
        return Answer(response, self.timeout)

    async def aclose(self) -> None:
        """Close every connection."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _proxy(self, url: URL) -> tuple[URL | None, aiohttp.BasicAuth | None]:
        """The environment's proxy for ``url``'s origin, and its credentials (looked up once)."""
        key = (url.scheme, url.host or "")
        found = self._proxies.get(key)
        if found is None:
            proxy = urllib.request.getproxies().get(url.scheme)
            if proxy and not urllib.request.proxy_bypass(url.host or ""):
                proxy_url = URL(proxy)
                found = (proxy_url.with_user(None), aiohttp.BasicAuth.from_url(proxy_url))
            else:
                found = (None, None)
            self._proxies[key] = found
        return found

