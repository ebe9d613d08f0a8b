"""``engine.audit.queries``: the viewer's figures agree with ``turnlog audit`` and with each other."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnlog.engine.audit import AuditQuery, audit
from turnlog.engine.errors import BadFilterError, ConversationNotFound
from turnlog.engine.audit.prices import PriceTable
from turnlog.engine.audit.queries import ListQuery, Reader, RecentOrder
from turnlog.engine.model.events import ConversationStarted, UserMessage, encode_event
from turnlog.engine.model.messages import Text
from turnlog.journal import Journal
from turnlog.engine.audit.views import connect_readonly

PRICES = PriceTable.parse('[[prices]]\nprovider="scripted"\nmodel="*"\nsince=2020-01-01\n'
                          'input=3\noutput=15\ncached_input=0.3', "test prices")


def test_costs_in_the_list_the_timeline_and_the_dashboard_agree_with_the_audit(db):
    conn = connect_readonly(str(db))
    try:
        expected = {c["conversation_id"]: c["cost"] for c in
                    audit(conn, AuditQuery(top=0), PRICES)["cost"]["conversations"]}
        total = audit(conn, AuditQuery(), PRICES)["cost"]["total"]
    finally:
        conn.close()
    with Reader(str(db), PRICES) as reader:
        rows = reader.conversations(ListQuery())["rows"]
        listed = {r["conversation_id"]: r["cost"] for r in rows}
        assert {cid: listed[cid] for cid in expected} == pytest.approx(expected)
        # a conversation without a model call spent nothing
        assert all(cost == 0 for cid, cost in listed.items() if cid not in expected)
        for cid, cost in expected.items():
            turns = reader.timeline(cid)["entries"]
            assert sum(e["cost"] for e in turns if e["kind"] == "assistant") == pytest.approx(cost)
        by_day = reader.dashboard()["by_day"]
        assert sum(d["cost"] for d in by_day) == pytest.approx(total)


def test_tokens_and_turns_in_the_list_agree_with_the_audit(db):
    conn = connect_readonly(str(db))
    try:
        figures = audit(conn, AuditQuery(), PRICES)
    finally:
        conn.close()
    with Reader(str(db), PRICES) as reader:
        rows = reader.conversations(ListQuery())["rows"]
    tokens = figures["tokens"]
    assert sum(r["tokens"] for r in rows) == tokens["input"] + tokens["output"]
    own = {r["conversation_id"]: r["turns"] for r in rows}
    assert own["demo-fork"] == 1  # a fork counts the turns it inherits, as `turnlog ls` does


def test_sorting_by_tokens_orders_by_the_same_figure_the_column_shows(db):
    with Reader(str(db)) as reader:
        for descending in (True, False):
            rows = reader.conversations(ListQuery(sort="tokens", descending=descending))["rows"]
            figures = [r["tokens"] for r in rows]
            assert figures == sorted(figures, reverse=descending)


def test_the_fork_tree_is_the_same_seen_from_any_of_its_conversations(db):
    with Reader(str(db)) as reader:
        trees = [reader.conversation(c)["tree"] for c in ("demo", "demo-fork")]
    strip = lambda n: (n["conversation_id"], n["fork_seq"],  # noqa: E731
                       [strip(c) for c in n["children"]])
    assert strip(trees[0]) == strip(trees[1]) == ("demo", None, [("demo-fork", 6, [])])
    assert trees[0]["current"] and trees[1]["children"][0]["current"]


def test_bad_requests_are_typed_errors(db):
    with Reader(str(db)) as reader:
        with pytest.raises(ConversationNotFound, match="no conversation 'nope'"):
            reader.conversation("nope")
        with pytest.raises(ConversationNotFound):
            reader.timeline("nope")
        with pytest.raises(BadFilterError, match="sort 'x'"):
            reader.conversations(ListQuery(sort="x"))
        with pytest.raises(BadFilterError, match="until 'soon'"):
            reader.conversations(ListQuery(until="soon"))



@settings(max_examples=30, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(0, 6), st.integers(1, 3)), min_size=1, max_size=14),
       count=st.sampled_from([1, 3, 50]))
def test_the_recent_order_caught_up_is_the_order_read_afresh(tmp_path_factory, steps, count):
    """``RecentOrder`` brought up to date from the appended events orders the conversations
    as a fresh read from the journal's end does, whatever was appended where; a stream that is
    not a conversation (here ``s6``: no start event) is never listed."""
    path = tmp_path_factory.mktemp("recent") / "recent.db"
    recent, started = RecentOrder(), set()
    with Journal(path) as journal:
        for stream, events in steps:
            sid, last = f"s{stream}", journal.last_seq(f"s{stream}")
            new = [UserMessage(parts=(Text(text="hi"),))] * events
            if not last and stream != 6:
                new.insert(0, ConversationStarted(conversation_id=sid, provider="p", model="m"))
                started.add(sid)
            journal.append(sid, [encode_event(e, "2025-01-01T00:00:00.000000Z") for e in new],
                           last)
            with Reader(str(path), recent=recent) as reader:
                kept, fresh = recent.ids(reader, count), reader._recent_ids(count)
            assert kept == fresh and len(kept) == min(count, len(started))
            assert stream == 6 or kept[0] == sid


def test_the_filters_values_caught_up_are_the_values_read_afresh(db):
    """``choices_after`` adds the providers, models and tools of the events appended since
    (a new conversation on another provider and model, calling a tool no one called), as
    ``choices`` reads them over the whole journal; past ``most`` events it says read afresh."""
    from turnlog.engine.audit.views import EXTENSIONS
    from turnlog.engine.loop import Loop
    from turnlog.engine.providers.scripted import ScriptedProvider
    from turnlog.engine.tools import tool

    @tool(effect="read_only")
    def shout(text: str) -> str:
        """Shout the text.

        Args:
            text: anything
        """
        return text.upper()

    with Reader(str(db)) as reader:
        before, position = reader.choices(), reader.last_position()
    with Journal(db, extensions=EXTENSIONS) as journal:
        Loop(journal, ScriptedProvider({"turns": [
            {"tool_calls": [{"name": "shout", "arguments": {"text": "hi"}}]}, {"text": "HI"}]},
            model="loud-model"), [shout]).start("shout hi", conversation_id="loud",
                                                model="loud-model")
    with Reader(str(db)) as reader:
        caught_up, fresh = reader.choices_after(position, before), reader.choices()
        assert reader.choices_after(position, before, most=2) is None
    assert caught_up == fresh and "shout" in fresh["tools"] and "loud-model" in fresh["models"]
    assert "shout" not in before["tools"] and "loud-model" not in before["models"]
