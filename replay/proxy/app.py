"""The proxy's ASGI app: forward each request upstream, answer unchanged, record after.

A streamed answer is passed on chunk by chunk as it arrives (the upstream is
asked for an uncompressed body, so the bytes the client gets are the bytes
the proxy parses); its server-sent events are folded by the wire's stream
assembler on the side. The exchange is handed to the ``Recorder`` once the
answer is complete (or the client went away), never before, so recording
adds no latency. Requests to paths the proxy does not know are forwarded to
the upstream their path points at; a POST among them, like a body the
wire's reader refuses, is recorded as an unparsed exchange.
"""

from __future__ import annotations

import json
import ssl
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import certifi
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from turnlog.engine.errors import MalformedResponseError, ProviderError
from turnlog.engine.providers._common import error_for_status, error_message
from turnlog.engine.providers._redact import CREDENTIAL, Redactor, credential_values, read_body

from .recorder import SPOOL_MEMORY, Exchange, Recorder, settle_request
from .replaying import Divergence, ReplayBook
from .streams import sse_events
from .translate import response_body, target_request
from .upstream import Answer, Upstream, UpstreamError, UpstreamTimeout
from .wires import (
    DEFAULT_UPSTREAMS,
    WIRES,
    UnparsedRequest,
    Wire,
    error_body,
    parse_request,
    wire_for_path,
)

__all__ = ["CONVERSATION_HEADER", "create_app"]

#: The request header that names the conversation an exchange belongs to.
CONVERSATION_HEADER = "x-turnlog-conversation"
_HOP = {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "te",
        "upgrade", "proxy-authorization", "proxy-connection", "accept-encoding", "trailer",
        "expect", CONVERSATION_HEADER}  # expect: the body is sent at once (no interim answer)
_BACK_HOP = {"content-length", "connection", "keep-alive", "transfer-encoding", "content-encoding"}


def _secrets(request: Request) -> tuple[str, ...]:
    """Every credential the request carries: any header or query parameter whose name
    says it holds one (``Authorization`` in any scheme, ``x-api-key``,
    ``x-goog-api-key``, ``api-key``, ``key=`` ...), each value and its token."""
    found: list[str] = []
    for name, value in request.headers.items():
        if CREDENTIAL.search(name.lower()):
            found += credential_values(value)
    for name, value in request.query_params.multi_items():
        if CREDENTIAL.search(name.lower()):
            found += credential_values(value)
    return tuple(dict.fromkeys(v for v in found if v))


def _fallback_wire(path: str) -> Wire:
    if path.startswith("/v1beta") or path.startswith("/v1alpha"):
        return WIRES["gemini"]
    if path.startswith("/v1/messages"):
        return WIRES["anthropic"]
    return WIRES["openai"]


class _Proxy:
    def __init__(self, recorder: Recorder | None, upstreams: dict[str, str],
                 timeout: float, book: ReplayBook | None = None,
                 to: tuple[str, str] | None = None) -> None:
        self.recorder = recorder
        self.book = book
        self.to = to
        self.upstreams = {**DEFAULT_UPSTREAMS, **upstreams}
        self.timeout = timeout
        self.upstream: Upstream | None = None

    def open(self) -> None:
        """The upstream client (``upstream``): keep-alive connections, one TLS context."""
        tls = ssl.create_default_context(cafile=certifi.where())
        self.upstream = Upstream(self.timeout, min(self.timeout, 10.0), tls)

    async def close(self) -> None:
        if self.upstream is not None:
            await self.upstream.aclose()

    def url(self, wire: Wire, request: Request) -> str:
        base = self.upstreams[wire.upstream].rstrip("/")
        path = request.url.path
        if wire.strip_prefix and path.startswith(wire.strip_prefix):
            path = path[len(wire.strip_prefix):]
        query = request.url.query
        return f"{base}{path}" + (f"?{query}" if query else "")

    def submit(self, exchange: Exchange) -> None:
        if self.recorder is not None:
            self.recorder.submit(exchange)

    async def replay(self, request: Request) -> Response:
        """Answer from the ``ReplayBook``: the recorded answer, or the divergence as an error."""
        path = request.url.path
        wire = wire_for_path(path) or _fallback_wire(path)
        raw = await request.body()
        try:
            parsed = parse_request(wire, path, raw)
            status, body = self.book.answer(wire.name, parsed)
        except (UnparsedRequest, Divergence) as exc:
            message = f"turnlog proxy --replay: {exc}"
            print(message, file=sys.stderr, flush=True)
            return JSONResponse(error_body(wire, 400, message), status_code=400)
        if status == 200 and parsed.stream:
            return StreamingResponse(iter(sse_events(wire.name, body)),
                                     media_type="text/event-stream")
        return JSONResponse(body, status_code=status)

    async def handle(self, request: Request) -> Response:
        if self.book is not None:
            return await self.replay(request)
        path = request.url.path
        wire = wire_for_path(path)
        known = wire is not None
        wire = wire or _fallback_wire(path)
        exchange = Exchange(wire=wire, path=path, client=request.headers.get("user-agent", ""),
                            secrets=_secrets(request), started=time.monotonic(),
                            conversation=request.headers.get(CONVERSATION_HEADER))
        record = request.method == "POST"
        exchange.known = known
        if self.to is not None and known and record:
            exchange.raw_request = await request.body()
            settle_request(exchange)  # the translation needs it now
            return await self.swap(wire, exchange)
        headers = [(k, v) for k, v in request.headers.items() if k not in _HOP]
        headers.append(("accept-encoding", "identity"))
        size = request.headers.get("content-length", "")
        if size.isdigit() and int(size) <= SPOOL_MEMORY:
            exchange.raw_request = await request.body()
            content: Any = exchange.raw_request
        else:  # large or chunked: through a spool (bounded memory) that the recorder reads
            exchange.spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY)
            if size.isdigit():  # streamed upstream as it arrives, with its length
                headers.append(("content-length", size))
                content = _tee(request, exchange.spool)
            else:  # no length: spooled whole first, then sent with one (not every upstream
                async for chunk in _tee(request, exchange.spool):  # reads a chunked body)
                    pass
                headers.append(("content-length", str(exchange.spool.tell())))
                content = _unspooled(exchange.spool)
        try:
            answer = await self.upstream.send(request.method, self.url(wire, request), headers,
                                              content)
        except UpstreamError as exc:
            return self._not_sent(exchange, wire, exc, record)
        exchange.status = answer.status_code
        back = {k: v for k, v in answer.headers if k.lower() not in _BACK_HOP}
        streamed = answer.header("content-type").startswith("text/event-stream")
        if streamed and answer.status_code == 200:
            return StreamingResponse(self._relay(answer, exchange, record),
                                     status_code=answer.status_code, headers=back)
        try:
            data = await answer.aread()
        except UpstreamError as exc:
            await answer.aclose()
            return self._unreachable(exchange, wire, 502, "ProviderConnectionError",
                                     f"the upstream's answer broke ({type(exc).__name__})", record)
        await answer.aclose()
        if record:
            exchange.ended = time.monotonic()
            exchange.raw_response = data
            self.submit(exchange)
        return Response(data, status_code=answer.status_code, headers=back)

    async def swap(self, wire: Wire, exchange: Exchange) -> Response:
        """Send the request to the ``--to`` provider and answer in the client's wire."""
        target, model = self.to
        exchange.target, exchange.target_model = target, model
        parsed = exchange.parsed
        if parsed is None:
            message = f"turnlog proxy --to {target}: cannot translate this request: {exchange.unparsed}"
            exchange.status, exchange.ended = 400, time.monotonic()
            self.submit(exchange)
            return JSONResponse(error_body(wire, 400, message), status_code=400)
        target_wire = WIRES[target]
        url, headers, body, _ = target_request(target, model, parsed,
                                               self.upstreams[target_wire.upstream], wire.name)
        exchange.secrets += tuple(v for value in headers.values()
                                  for v in credential_values(value))
        sent = [(k, v) for k, v in headers.items() if k.lower() != "content-type"]
        sent.append(("content-type", "application/json"))
        try:
            answer = await self.upstream.send("POST", url, sent, json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())
            text = (await answer.aread()).decode(errors="replace")
        except UpstreamError as exc:
            return self._not_sent(exchange, wire, exc, True)
        exchange.status = answer.status_code
        exchange.ended = time.monotonic()
        redactor = exchange.redactor
        try:
            data = read_body(text, target, redactor)
        except MalformedResponseError:
            data = None
        if answer.status_code == 200:
            try:
                if not isinstance(data, dict):
                    raise MalformedResponseError("the answer is not a JSON object")
                exchange.response = target_wire.map_response(data)
            except ProviderError as exc:
                exchange.failure = (type(exc).__name__, str(exc), False, False, ())
                self.submit(exchange)
                return JSONResponse(error_body(wire, 502, f"turnlog proxy --to {target}: {exc}"),
                                    status_code=502)
            self.submit(exchange)
            out = response_body(wire.name, exchange.response, parsed.model)
            if parsed.stream:
                return StreamingResponse(iter(sse_events(wire.name, out)),
                                         media_type="text/event-stream")
            return JSONResponse(out)
        text = error_message(data, redactor.message(text[:2000]))
        exc = error_for_status(answer.status_code, text, target)
        exchange.failure = (type(exc).__name__, str(exc), bool(getattr(exc, "retryable", False)),
                            False, ())
        self.submit(exchange)
        return JSONResponse(error_body(wire, answer.status_code, f"{target}: {text}"),
                            status_code=answer.status_code, headers={
                                k.lower(): v for k, v in answer.headers
                                if k.lower() == "retry-after"})

    def _not_sent(self, exchange: Exchange, wire: Wire, exc: UpstreamError,
                  record: bool) -> Response:
        """What the client gets when the upstream timed out (504) or could not be reached (502)."""
        if isinstance(exc, UpstreamTimeout):
            return self._unreachable(exchange, wire, 504, "ProviderTimeout",
                                     f"the upstream timed out ({type(exc).__name__})", record)
        return self._unreachable(exchange, wire, 502, "ProviderConnectionError",
                                 f"the upstream cannot be reached ({type(exc).__name__}: {exc})",
                                 record)

    def _unreachable(self, exchange: Exchange, wire: Wire, status: int, error_type: str,
                     message: str, record: bool) -> Response:
        body = error_body(wire, status, message)
        exchange.status = status
        exchange.raw_response = json.dumps(body).encode()
        exchange.failure = (error_type, message, True, False, ())
        if record:
            exchange.ended = time.monotonic()
            self.submit(exchange)
        return JSONResponse(body, status_code=status)

    async def _relay(self, answer: Answer, exchange: Exchange,
                     record: bool) -> AsyncIterator[bytes]:
        """Pass the stream on chunk by chunk; keep the chunks for the recorder to read."""
        chunks: list[bytes] = []
        exchange.chunks = chunks
        try:
            async for chunk in answer.aiter_raw():
                yield chunk
                chunks.append(chunk)
            exchange.complete = True
        except UpstreamError as exc:
            exchange.broken = f"the stream broke mid-way ({type(exc).__name__}: {exc})"
        finally:
            if record:
                exchange.ended = time.monotonic()
                self.submit(exchange)
            try:
                await answer.aclose()
            except BaseException:  # noqa: BLE001 - the client is gone; nothing to tell it
                pass


async def _tee(request: Request, spool: Any) -> AsyncIterator[bytes]:
    """The request body chunk by chunk as it arrives, each kept in ``spool`` on the way."""
    async for chunk in request.stream():
        if chunk:
            spool.write(chunk)
            yield chunk


async def _unspooled(spool: Any) -> AsyncIterator[bytes]:
    """A spooled body from its start, in pieces of at most ``SPOOL_MEMORY``."""
    spool.seek(0)
    while chunk := spool.read(SPOOL_MEMORY):
        yield chunk


def create_app(recorder: Recorder | None, upstreams: dict[str, str] | None = None, *,
               timeout: float = 600.0, book: ReplayBook | None = None,
               to: tuple[str, str] | None = None) -> Starlette:
    """The proxy app: forwards to ``upstreams`` (wire -> base URL), records into ``recorder``;
    with a ``book``, answers from it instead and reaches no upstream; with ``to``
    (provider, model), translates every request to that provider and the answer back."""
    proxy = _Proxy(recorder, upstreams or {}, timeout, book, to)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        proxy.open()
        try:
            yield
        finally:
            await proxy.close()

    app = Starlette(routes=[Route("/{path:path}", proxy.handle,
                                  methods=["GET", "POST", "PUT", "PATCH", "DELETE"])],
                    lifespan=lifespan)
    app.state.proxy = proxy
    return app
