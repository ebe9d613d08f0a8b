"""``turnlog report``: one conversation as a single self-contained HTML file.

The page's CSS and its few lines of JS are inline, allowed by hash in the
file's own Content-Security-Policy, which also forbids every network request:
the file can be attached to a ticket and opened anywhere, offline.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from turnlog.engine.audit import Prices, PriceTable, Reader
from turnlog.engine.audit.queries import count_turns
from turnlog.journal import shown_url

from .render import asset, environment, script_hash

__all__ = ["iter_report", "render_report", "report_data"]


def report_data(reader: Reader, conversation_id: str) -> dict[str, Any]:
    """What the report shows: the conversation's header data and every turn's entries."""
    info = reader.conversation(conversation_id, verify_up_to=None)  # a file: no later request
    entries: list[dict[str, Any]] = []
    max_ms = 0
    for page, longest in reader.timeline_pages(conversation_id):
        entries += page
        max_ms = max(max_ms, longest)
    return {"info": info, "timeline": {"entries": entries, "page": 1, "pages": 1,
                                       "turns": count_turns(reader.path, conversation_id),
                                       "max_ms": max_ms}}


def iter_report(path: str, conversation_id: str,
                prices: Prices | PriceTable | None = None) -> Iterator[str]:
    """:func:`render_report`'s HTML in pieces, rendered as the timeline is read: one page of
    turns in memory at a time (the timeline is read twice: first for the longest latency,
    which scales every bar). ``ConversationNotFound`` before the first piece."""
    with Reader(path, prices) as reader:
        info = reader.conversation(conversation_id, verify_up_to=None)
        max_ms = max((longest for _, longest in reader.timeline_pages(conversation_id)),
                     default=0)
        timeline = {"entries": (e for page, _ in reader.timeline_pages(conversation_id)
                                for e in page),
                    "page": 1, "pages": 1, "turns": count_turns(path, conversation_id),
                    "max_ms": max_ms}
        css, js = asset("app.css"), asset("report.js")
        yield from environment().get_template("report.html").generate(
            info=info, timeline=timeline, generated_from=shown_url(path), css=css, js=js,
            csp=_csp(css, js))


def _csp(css: str, js: str) -> str:
    return (f"default-src 'none'; style-src {script_hash(css)}; script-src {script_hash(js)}; "
            "img-src data:; base-uri 'none'; form-action 'none'")


def render_report(path: str, conversation_id: str, prices: Prices | PriceTable | None = None) -> str:
    """The report of ``conversation_id`` in the journal at ``path``, as HTML text.

    Raises ``ConversationNotFound`` for an unknown id; opens the journal read-only.
    """
    return "".join(iter_report(path, conversation_id, prices))
