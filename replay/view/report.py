"""``turnlog report``: one conversation as a single self-contained HTML file.

The page's CSS and its few lines of JS are inline, allowed by hash in the
file's own Content-Security-Policy, which also forbids every network request:
the file can be attached to a ticket and opened anywhere, offline.
"""

from __future__ import annotations

from typing import Any

from turnlog.engine.audit import Prices, PriceTable, Reader
from turnlog.journal import shown_url

from .render import asset, environment, script_hash

__all__ = ["render_report", "report_data"]


def report_data(reader: Reader, conversation_id: str) -> dict[str, Any]:
    """What the report shows: the conversation's header data and every turn's entries."""
    info = reader.conversation(conversation_id, verify_up_to=None)  # a file: no later request
    first = reader.timeline(conversation_id, 1, 500)
    entries = list(first["entries"])
    for page in range(2, first["pages"] + 1):
        entries += reader.timeline(conversation_id, page, 500)["entries"]
    max_ms = max([x.get("ms") or 0 for x in entries]
                 + [p["outcome"].get("ms") or 0 for x in entries for p in x.get("parts", ())
                    if p["type"] == "tool_call"], default=0)
    return {"info": info, "timeline": {"entries": entries, "page": 1, "pages": 1,
                                       "turns": first["turns"], "max_ms": max_ms}}


def render_report(path: str, conversation_id: str, prices: Prices | PriceTable | None = None) -> str:
    """The report of ``conversation_id`` in the journal at ``path``, as HTML text.

    Raises ``ConversationNotFound`` for an unknown id; opens the journal read-only.
    """
    with Reader(path, prices) as reader:
        data = report_data(reader, conversation_id)
        data["generated_from"] = shown_url(path)
    css, js = asset("app.css"), asset("report.js")
    csp = (f"default-src 'none'; style-src {script_hash(css)}; script-src {script_hash(js)}; "
           "img-src data:; base-uri 'none'; form-action 'none'")
    return environment().get_template("report.html").render(**data, css=css, js=js, csp=csp)
