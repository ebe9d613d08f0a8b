"""The web app: thin Starlette routes that parse a request, call ``engine.audit.queries``, render.

Every request opens its own read-only :class:`~engine.audit.queries.Reader` (a
journal handle belongs to one thread); nothing is ever written, and the live
pages' streams share one follower (``replay.view.live``). Unknown ids are 404
pages, bad filters and out-of-range numbers 400 pages, a stream past the cap
a 503; every response carries :data:`CSP`. Only requests whose ``Host`` is one
of the app's hosts are served (400 otherwise): a page on another domain that
resolves to this address (DNS rebinding) reads nothing.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from importlib import resources
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from turnlog.engine.audit import AuditQuery, ListQuery, Prices, PriceTable, Reader, parse_since
from turnlog.engine.audit.queries import RecentOrder
from turnlog.engine.errors import BadFilterError, ConversationNotFound
from turnlog.journal import TurnlogError, shown_url

from ..diff import diff
from .charts import by_day, hbars
from .live import MAX_STREAMS, Follower, TooManyStreams
from .render import CSP, environment
from .report import iter_report

__all__ = ["FLUSH", "LOOPBACK_HOSTS", "create_app", "hosts_for"]

_LIST_FILTERS = ("status", "provider", "model", "tool", "since", "until")

#: the names a browser on this machine uses for a loopback address
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")

#: the most conversations one ``/chains`` request verifies (a list page's most rows)
_MAX_CHAINS = 500

#: the largest number a query parameter takes (a page, a position: SQL's BIGINT)
_LARGEST = 2**63 - 1


def _int(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadFilterError(f"{name} {raw[:40]!r} is not a whole number") from None
    if not 0 <= value <= _LARGEST:
        raise BadFilterError(f"{name} {raw[:40]!r} is out of range (0 to 2**63 - 1)")
    return value


def hosts_for(bound: str, extra: Iterable[str] = ()) -> list[str]:
    """The ``Host`` names a viewer listening on address ``bound`` answers to.

    The loopback names always (``LOOPBACK_HOSTS``); the bound address itself
    (an IPv6 one in brackets, as a ``Host`` header writes it); for an address
    that listens everywhere (``0.0.0.0``, ``::``), this machine's host names
    too; and ``extra`` (``--allow-host``; ``*`` answers any name).

    >>> hosts_for("127.0.0.1")
    ['127.0.0.1', 'localhost', '[::1]']
    >>> hosts_for("::1", ["Viewer.Example"])
    ['127.0.0.1', 'localhost', '[::1]', 'viewer.example']
    """
    import socket

    names = [*LOOPBACK_HOSTS, f"[{bound}]" if ":" in bound else bound]
    if bound in ("", "0.0.0.0", "::"):
        names = names[:len(LOOPBACK_HOSTS)] + [socket.gethostname(), socket.getfqdn()]
    names += list(extra)
    return list(dict.fromkeys(n.lower() for n in names if n))


def _param(request: Request, name: str) -> str | None:
    return request.query_params.get(name) or None


class _Chains:
    """The chain states this viewer verified, by conversation and head (the position of its
    last event), the newest ``size`` kept: the journal is append-only, so a state stays true
    until the conversation grows, and a page shows it without verifying again."""

    def __init__(self, size: int = 10_000) -> None:
        self._states: OrderedDict[tuple[str, int], dict[str, Any]] = OrderedDict()
        self._size, self._lock = size, threading.Lock()

    def get(self, conversation_id: str, head: int) -> dict[str, Any] | None:
        with self._lock:
            state = self._states.get((conversation_id, head))
            if state is not None:
                self._states.move_to_end((conversation_id, head))
            return state

    def state(self, reader: Reader, conversation_id: str) -> dict[str, Any]:
        """The conversation's chain state, verified now, and kept for the list's next paint
        (``ConversationNotFound`` for an unknown id). Never answered from what is kept: a
        file edited in place keeps its heads, and only verifying again shows the edit."""
        head = reader.head(conversation_id)
        state = reader.chain(conversation_id)
        with self._lock:
            self._states[(conversation_id, head)] = state
            while len(self._states) > self._size:
                self._states.popitem(last=False)
        return state


class _App:
    """The routes, bound to one journal path and price table."""

    def __init__(self, path: str, prices: Prices, poll: float, live_for: float,
                 max_streams: int) -> None:
        self.path, self.prices, self.poll, self.live_for = path, prices, poll, live_for
        self.env = environment()
        self.follower = Follower(self.reader, poll, max_streams)
        self._choices: tuple[int, dict[str, list[str]]] | None = None
        self.verified = _Chains()
        self.recent = RecentOrder()  # the list's default order, caught up with each page

    def page(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(self.env.get_template(name).render(db=shown_url(self.path), **context),
                            status_code=status)

    def choices(self, reader: Reader, position: int) -> dict[str, list[str]]:
        """The filters' values (``Reader.choices``: distinct values over the whole journal),
        read once, then with those of the events appended since added
        (``Reader.choices_after``)."""
        known = self._choices
        if known is not None and known[0] == position:
            return known[1]
        fresh = None
        if known is not None and known[0] < position:
            fresh = reader.choices_after(known[0], known[1])
        self._choices = (position, fresh if fresh is not None else reader.choices())
        return self._choices[1]

    def reader(self) -> Reader:
        return Reader(self.path, self.prices, self.recent)

    def conversations(self, request: Request) -> Response:
        q = ListQuery(**{k: _param(request, k) for k in _LIST_FILTERS},
                      text=_param(request, "q"), sort=request.query_params.get("sort", "updated"),
                      descending=request.query_params.get("order", "desc") != "asc",
                      page=_int(request, "page", 1), per_page=_int(request, "per_page", 50))
        with self.reader() as r:
            listing, after = r.conversations(q), r.last_position()
            choices = self.choices(r, after)
        for row in listing["rows"]:  # chains verified before are shown, and checked again
            kept = self.verified.get(row["conversation_id"], row["last_position"])  # after paint
            if kept:  # (an edit in place keeps every head): the page's script asks /chains
                row["chain"] = dict(kept, recheck=True, events=row["chain"].get("events"))
        return self.page("list.html", listing=listing, choices=choices,
                         live={"after": after, "conversation": None})

    def conversation(self, request: Request) -> Response:
        cid = request.query_params.get("id", "")
        with self.reader() as r:
            info = r.conversation(cid)
            timeline = r.timeline(cid, _int(request, "page", 1))
            after = r.last_position()
        # a stream: the page's turns are sent before the whole conversation's are counted
        pieces = self.env.get_template("conversation.html").generate(
            db=shown_url(self.path), info=info, timeline=timeline,
            live={"after": after, "conversation": cid})
        return StreamingResponse(_flushed(pieces), media_type="text/html; charset=utf-8")

    def chain(self, request: Request) -> Response:
        """One conversation's chain state as JSON (``Reader.chain``, kept per head): what a page
        too long to verify before answering (``CHAIN_INLINE``) fetches after it is shown."""
        with self.reader() as r:
            state = self.verified.state(r, request.query_params.get("id", ""))
        return JSONResponse(state, headers={"Cache-Control": "no-store"})

    def chains(self, request: Request) -> Response:
        """Several conversations' chain states (``id`` repeated, at most a list page's rows)
        as one JSON object by id: what the list page fetches after it is shown."""
        ids = list(dict.fromkeys(request.query_params.getlist("id")))
        if not 1 <= len(ids) <= _MAX_CHAINS:
            raise BadFilterError(f"/chains takes 1 to {_MAX_CHAINS} ids, not {len(ids)}")
        with self.reader() as r:
            states = {cid: self.verified.state(r, cid) for cid in ids}
        return JSONResponse(states, headers={"Cache-Control": "no-store"})

    def diff(self, request: Request) -> Response:
        a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
        with self.reader() as r:
            result = diff(r.journal, a, b).to_dict()
        return self.page("diff.html", d=result)

    def audit(self, request: Request) -> Response:
        since = _param(request, "since")
        query = AuditQuery(since=parse_since(since) if since else None,
                           provider=_param(request, "provider"), model=_param(request, "model"),
                           status=_param(request, "status"), tool=_param(request, "tool"))
        with self.reader() as r:
            report, choices, signed = r.dashboard(query), r.choices(), r.last_signed()
        tools = report["tools"]
        charts = {
            "tokens": by_day(report["by_day"], "input"),
            "output": by_day(report["by_day"], "output"),
            "cost": by_day(report["by_day"], "cost"),
            "failure_rate": hbars([(n, 100 * t["failures"] / t["calls"] if t["calls"] else 0)
                                   for n, t in tools.items()], percent=True),
            "duplicate_rate": hbars([(n, 100 * t["duplicates_prevented"] / t["calls"]
                                      if t["calls"] else 0) for n, t in tools.items()],
                                    percent=True),
            "median": hbars([(n, t["median_ms"]) for n, t in tools.items()]),
            "p95": hbars([(n, t["p95_ms"]) for n, t in tools.items()]),
        }
        return self.page("audit.html", r=report, charts=charts, choices=choices, signed=signed,
                         filters={"since": since, **{k: _param(request, k) for k in
                                                     ("provider", "model", "status", "tool")}})

    def report(self, request: Request) -> Response:
        cid = request.query_params.get("id", "")
        with self.reader() as r:
            r.conversation_row(cid)  # an unknown id is a 404 page, before the stream starts
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in cid)[:80] or "report"
        # written as the timeline is read, all in one thread (a reader belongs to its thread)
        return StreamingResponse(
            _in_one_thread(lambda: iter_report(self.path, cid, self.prices)),
            media_type="text/html; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="turnlog-{name}.html"'})

    async def live(self, request: Request) -> Response:
        """Server-sent events: ``append`` with the new last position whenever events arrive
        (``replay.view.live``: one follower for every stream; 503 past its cap)."""
        cid = request.query_params.get("c") or None
        last_id = request.headers.get("last-event-id", "")  # sent by a reconnecting browser
        after = max(_int(request, "after", 0),
                    int(last_id) if last_id.isdigit() and len(last_id) < 19 else 0)
        try:
            self.follower.acquire()
        except TooManyStreams as exc:
            return self.page("error.html", status=503, message=str(exc), code=503)
        return _Stream(self.follower.stream(after, cid, self.live_for), self.follower.release)

    def error(self, request: Request, exc: Exception) -> Response:
        status = 404 if isinstance(exc, ConversationNotFound) else 400
        if not isinstance(exc, (ConversationNotFound, BadFilterError)):
            status = 500
        return self.page("error.html", status=status, message=str(exc), code=status)

    def not_found(self, request: Request, exc: Exception) -> Response:
        return self.page("error.html", status=404, code=404,
                         message=f"no page {request.url.path!r}")


#: where a streamed page's template marks the end of what it shows at once
FLUSH = "<!-- flush -->"


def _flushed(pieces: Iterable[str], size: int = 16384) -> Iterator[bytes]:
    """A template's output in chunks of about ``size`` characters, one ending at each
    :data:`FLUSH` mark (what comes after it may take longer to compute)."""
    buffer: list[str] = []
    held = 0
    for piece in pieces:
        buffer.append(piece)
        held += len(piece)
        if held >= size or FLUSH in piece:
            yield "".join(buffer).encode()
            buffer, held = [], 0
    if buffer:
        yield "".join(buffer).encode()


async def _in_one_thread(pieces: Callable[[], Iterable[str]]) -> AsyncIterator[bytes]:
    """``pieces()`` iterated in one worker thread (``_flushed`` chunks handed over through a
    small buffer: the thread waits while the client reads); it stops when the client goes."""
    send, receive = anyio.create_memory_object_stream[bytes](4)

    def produce() -> None:
        with send:
            for chunk in _flushed(pieces(), 65536):
                try:
                    anyio.from_thread.run(send.send, chunk)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return  # the client went away

    async with anyio.create_task_group() as group:
        group.start_soon(functools.partial(anyio.to_thread.run_sync, produce))
        async with receive:
            async for chunk in receive:
                yield chunk


class _Stream(StreamingResponse):
    """An event stream that gives its place back (``release``) however it ends."""

    def __init__(self, content: Any, release: Any) -> None:
        super().__init__(content, media_type="text/event-stream",
                         headers={"Cache-Control": "no-store"})
        self._release = release

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


class _SecurityHeaders:
    """ASGI middleware: the CSP and friends on every response (streams included)."""

    _HEADERS = [(b"content-security-policy", CSP.encode()),
                (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer")]

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        async def with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *self._HEADERS]}
            await send(message)

        await self.app(scope, receive, with_headers if scope["type"] == "http" else send)


def create_app(path: str, prices: Prices | PriceTable | None = None, *, poll: float = 0.5,
               live_for: float = 30.0, hosts: Iterable[str] = LOOPBACK_HOSTS,
               max_streams: int = MAX_STREAMS) -> Starlette:
    """The ASGI app over the journal at ``path`` (opened read-only on every request).

    ``poll``: seconds between the live pages' checks for appended events;
    ``live_for``: seconds one event stream lasts before the browser reconnects;
    ``hosts``: the ``Host`` names served (``hosts_for``; default the loopback
    names; ``"*"`` any), others get a 400; ``max_streams``: live streams open
    at once, one more gets a 503.
    """
    with Reader(path, prices):  # a missing or foreign file fails here, not on the first page
        pass
    routes = _App(path, Prices.of(prices), poll, live_for, max_streams)
    static = resources.files("turnlog.replay.view").joinpath("static")
    app = Starlette(routes=[
        Route("/", routes.conversations),
        Route("/conversation", routes.conversation),
        Route("/chain", routes.chain),
        Route("/chains", routes.chains),
        Route("/diff", routes.diff),
        Route("/audit", routes.audit),
        Route("/report", routes.report),
        Route("/live", routes.live),
        Mount("/static", StaticFiles(directory=str(static)), name="static"),
    ], exception_handlers={TurnlogError: routes.error, 404: routes.not_found},
        middleware=[Middleware(_SecurityHeaders),
                    Middleware(TrustedHostMiddleware, allowed_hosts=[h.lower() for h in hosts],
                               www_redirect=False)])
    return app
