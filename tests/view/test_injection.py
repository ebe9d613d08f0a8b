"""A hostile transcript (markup in user text, tool arguments and results, the model name and the
conversation id) renders as text on every page and in the report, and its JSON cannot end a
script block. The browser test (test_browser.py) checks that nothing runs."""

from __future__ import annotations

import json
import re
from html import unescape

from markupsafe import escape

from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from turnlog.engine.audit.prices import Prices
from turnlog.replay.view import create_app, render_report
from turnlog.replay.view.render import environment, href

from .journal_data import HOSTILE, HOSTILE_ID

# Each would be live markup if its angle brackets or quotes were not escaped.
_RAW = ("<script>window.__pwned", "<img src=x", 'href="javascript:', "onerror=\"window",
        "\"' onmouseover")


def pages(db, ids) -> dict[str, str]:
    client = TestClient(create_app(str(db)), base_url="http://127.0.0.1")
    hostile = ids["hostile"]
    urls = {"list": "/", "search": href("/", q=HOSTILE[:20]),
            "conversation": href("/conversation", id=hostile),
            "diff": href("/diff", a=hostile, b="demo"), "audit": "/audit",
            "audit-filtered": href("/audit", model=HOSTILE), "filtered": href("/", model=HOSTILE),
            "not-found": href("/conversation", id=HOSTILE)}
    found = {name: client.get(url) for name, url in urls.items()}
    assert {n: r.status_code for n, r in found.items()} == {
        n: 404 if n == "not-found" else 200 for n in urls}
    return {n: r.text for n, r in found.items()} | {"report": render_report(str(db), hostile)}


def test_hostile_values_render_as_text_everywhere(db, ids):
    for name, html in pages(db, ids).items():
        for raw in _RAW:
            assert raw not in html, (name, raw)
        assert escape("<script>window.__pwned=1</script>") in html or name in (
            "not-found", "audit", "audit-filtered", "list", "filtered", "search") and (
            escape(HOSTILE_ID[:20]) in html or escape(HOSTILE[:20]) in html), name


def test_the_hostile_conversation_shows_every_untrusted_field_escaped(db, ids):
    html = pages(db, ids)["conversation"]
    assert html.count(escape(HOSTILE)) >= 4  # user text, assistant text, model name, argument
    # the tool's result (its data, indented: the success sentence is left out for people)
    assert escape('"echo": "<script>window.__pwned=1</script>') in html


def test_json_in_script_blocks_cannot_close_the_block(db, ids):
    html = pages(db, ids)["conversation"]
    block = re.search(r'<script type="application/json" id="live-config">(.*?)</script>', html,
                      re.S).group(1)
    assert json.loads(block)["conversation"] == HOSTILE_ID
    assert "<" not in block and ">" not in block
    report = pages(db, ids)["report"]
    block = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', report,
                      re.S).group(1)
    assert json.loads(block)["conversation_id"] == HOSTILE_ID


def test_links_to_hostile_ids_stay_relative_and_encoded(db, ids):
    html = pages(db, ids)["list"]
    links = [x for x in re.findall(r'href="([^"]*)"', html) if x != "data:,"]  # no favicon
    assert all(link.startswith(("/", "?")) for link in links), links
    assert any("x%22%3E%3Cscript%3E" in link for link in links)


_TEXT = st.text(alphabet=st.sampled_from(list("<>&\"'/=:; ascriptjvonerr()`")), max_size=40)


@settings(max_examples=60, deadline=None)
@given(text=_TEXT)
def test_any_text_in_any_timeline_field_comes_out_escaped(text):
    outcome = {"status": "ok", "content": text, "error": None, "ms": 1.0, "source": text}
    entry = {"kind": "assistant", "seq": 1, "at": "", "turn": 1, "who": text, "stop_reason": text,
             "source": text, "cost": None, "ms": 1.0,
             "usage": {"input_tokens": 1, "output_tokens": 1, "cached_input_tokens": 0,
                       "reasoning_tokens": 0},
             "parts": [{"type": "text", "text": text}, {"type": "thinking", "text": text},
                       {"type": "tool_call", "id": text, "name": text, "arguments": text,
                        "invalid": text, "outcome": outcome}]}
    refusal = {"kind": "refusal", "seq": 2, "at": "", "name": text, "call_id": text,
               "arguments": text, "outcome": {"status": "refused", "reason": text, "content": text}}
    template = environment().from_string(
        '{% from "_timeline.html" import timeline %}{{ timeline(t) }}')
    html = template.render(t={"entries": [entry, refusal], "max_ms": 1.0})
    stripped = re.sub(r"<[a-z/][^<>]*>", "", html)  # the page's own tags
    assert "<" not in stripped and ">" not in stripped.replace("->", "")
    if text:
        assert escape(text) in html


def test_the_report_of_the_hostile_conversation_allows_only_its_own_inline_code(db, ids):
    report = render_report(str(db), ids["hostile"], Prices.default())
    csp = unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"',
                             report).group(1))
    assert "default-src 'none'" in csp and "'unsafe-inline'" not in csp
    assert report.count("<script") == 2  # the JSON block and the report's own script
