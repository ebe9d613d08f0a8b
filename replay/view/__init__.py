"""``turnlog view`` and ``turnlog report``: a conversation journal seen in a browser.

A read-only local web app (Starlette, Jinja2 templates, served by uvicorn)
over ``engine.audit.queries``: the conversation list, one conversation's timeline
with its chain state, fork tree and replays, the diff of two conversations
(``replay.diff``) and the audit dashboard with server-drawn SVG charts; and a
self-contained HTML report of one conversation. It lives above ``replay``
because it shows diffs; it needs the ``view`` extra (``pip install
-e '.[view]'``), which only these commands import::

    from turnlog.replay.view import create_app, render_report
    app = create_app("turnlog.db")          # an ASGI app, e.g. for uvicorn.run(app)
    html = render_report("turnlog.db", "c-1a2b")

Every value from a model, a tool or an imported file is escaped by the
templates' autoescaping; every response carries a Content-Security-Policy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app
    from .report import render_report

__all__ = ["create_app", "render_report"]


def __getattr__(name: str) -> Any:
    """Import the web stack on first use: ``replay.view.cli`` must load without it."""
    if name == "create_app":
        from .app import create_app

        return create_app
    if name == "render_report":
        from .report import render_report

        return render_report
    raise AttributeError(f"module 'turnlog.replay.view' has no attribute {name!r}")
