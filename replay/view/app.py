"""The web app: thin Starlette routes that parse a request, call ``engine.audit.queries``, render.

Every request opens its own read-only :class:`~engine.audit.queries.Reader` (a
journal handle belongs to one thread); nothing is ever written. Unknown ids
are 404 pages, bad filters 400 pages; every response carries :data:`CSP`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from turnlog.engine.audit import AuditQuery, ListQuery, Prices, PriceTable, Reader, parse_since
from turnlog.engine.errors import BadFilterError, ConversationNotFound
from turnlog.journal import TurnlogError

from ..diff import diff
from .charts import by_day, hbars
from .render import CSP, environment
from .report import render_report

__all__ = ["create_app"]

_LIST_FILTERS = ("status", "provider", "model", "tool", "since", "until")


def _int(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise BadFilterError(f"{name} {raw!r} is not a whole number") from None


def _param(request: Request, name: str) -> str | None:
    return request.query_params.get(name) or None


class _App:
    """The routes, bound to one journal path and price table."""

    def __init__(self, path: str, prices: Prices, poll: float, live_for: float) -> None:
        self.path, self.prices, self.poll, self.live_for = path, prices, poll, live_for
        self.env = environment()

    def page(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(self.env.get_template(name).render(db=self.path, **context),
                            status_code=status)

    def reader(self) -> Reader:
        return Reader(self.path, self.prices)

    def conversations(self, request: Request) -> Response:
        q = ListQuery(**{k: _param(request, k) for k in _LIST_FILTERS},
                      text=_param(request, "q"), sort=request.query_params.get("sort", "updated"),
                      descending=request.query_params.get("order", "desc") != "asc",
                      page=_int(request, "page", 1), per_page=_int(request, "per_page", 50))
        with self.reader() as r:
            listing, choices, after = r.conversations(q), r.choices(), r.last_position()
        return self.page("list.html", listing=listing, choices=choices,
                         live={"after": after, "conversation": None})

    def conversation(self, request: Request) -> Response:
        cid = request.query_params.get("id", "")
        with self.reader() as r:
            info = r.conversation(cid)
            timeline = r.timeline(cid, _int(request, "page", 1))
            after = r.last_position()
        return self.page("conversation.html", info=info, timeline=timeline,
                         live={"after": after, "conversation": cid})

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
        html = render_report(self.path, cid, self.prices)
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in cid)[:80] or "report"
        return HTMLResponse(html, headers={
            "Content-Disposition": f'attachment; filename="turnlog-{name}.html"'})

    async def live(self, request: Request) -> Response:
        """Server-sent events: ``append`` with the new last position whenever events arrive."""
        cid = request.query_params.get("c") or None
        last_id = request.headers.get("last-event-id", "")  # sent by a reconnecting browser
        after = max(_int(request, "after", 0), int(last_id) if last_id.isdigit() else 0)

        async def stream() -> AsyncIterator[str]:
            nonlocal after
            yield "retry: 1000\n\n"
            with self.reader() as r:
                # for live_for seconds; then the browser reconnects, sending Last-Event-ID
                for _ in range(max(1, int(self.live_for / self.poll))):
                    found = r.appended_after(after, cid)
                    if found is not None:
                        after = found
                        data = json.dumps({"position": after})
                        yield f"id: {after}\nevent: append\ndata: {data}\n\n"
                    await asyncio.sleep(self.poll)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store"})

    def error(self, request: Request, exc: Exception) -> Response:
        status = 404 if isinstance(exc, ConversationNotFound) else 400
        if not isinstance(exc, (ConversationNotFound, BadFilterError)):
            status = 500
        return self.page("error.html", status=status, message=str(exc), code=status)

    def not_found(self, request: Request, exc: Exception) -> Response:
        return self.page("error.html", status=404, code=404,
                         message=f"no page {request.url.path!r}")


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
               live_for: float = 30.0) -> Starlette:
    """The ASGI app over the journal at ``path`` (opened read-only on every request).

    ``poll``: seconds between the live pages' checks for appended events;
    ``live_for``: seconds one event stream lasts before the browser reconnects.
    """
    with Reader(path, prices):  # a missing or foreign file fails here, not on the first page
        pass
    routes = _App(path, Prices.of(prices), poll, live_for)
    static = resources.files("turnlog.replay.view").joinpath("static")
    app = Starlette(routes=[
        Route("/", routes.conversations),
        Route("/conversation", routes.conversation),
        Route("/diff", routes.diff),
        Route("/audit", routes.audit),
        Route("/report", routes.report),
        Route("/live", routes.live),
        Mount("/static", StaticFiles(directory=str(static)), name="static"),
    ], exception_handlers={TurnlogError: routes.error, 404: routes.not_found},
        middleware=[Middleware(_SecurityHeaders)])
    return app
