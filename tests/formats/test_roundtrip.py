"""Round trips: import(export(c, F)) keeps everything format F can represent.

What each format cannot represent (so the comparison leaves it out):

- ``jsonl``: nothing is lost — the same events, the same ``recorded_at``.
- ``anthropic``: tool-result data beyond its text, the run's lifecycle events
  (requests, usage, stop reasons), provider/model of each answer.
- ``openai``: as anthropic, and: thinking; a failed result is marked by its
  text starting with ``Error`` (the export prefixes ``Error: ``).
- ``gemini``: as anthropic, and: tool call ids (Gemini has none; calls and
  results are paired by name and order and get fresh ids).
- ``datamachine``: as gemini, and: success is read from the ``TOOL FAILED``
  prefix; string arguments over 50 characters (truncated by the reference's
  rule, so the generator keeps them shorter).
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from turnlog.engine.model.conversation import Conversation
from turnlog.engine.model.events import (
    ConversationCompleted,
    ConversationStarted,
    ModelResponded,
    ToolCompleted,
    UserMessage,
)
from turnlog.engine.formats.exporter import export_conversation, lineage_events
from turnlog.engine.formats.importer import import_entries, read_transcript
from turnlog.engine.model.messages import Text, ToolCall, text_of
from turnlog.engine.loop.texts import result_content
from turnlog.journal import Journal
from turnlog import testing as shipped

names = shipped.identifiers()

texts = st.text(alphabet="abcdefghij klmnoé✓?.,:{}[]0123456789", min_size=1, max_size=30).filter(
    lambda t: t.strip() and not t.startswith(("AI ACTION", "TOOL RESPONSE", "You just called")))
values = shipped.json_values(max_leaves=6)
call = st.tuples(names, st.dictionaries(names, values, max_size=3), st.booleans(), values)
step = st.tuples(st.none() | texts, st.lists(call, min_size=1, max_size=3))
run = st.tuples(texts, st.lists(step, max_size=2), texts)
conversations = st.tuples(st.none() | texts, st.lists(run, min_size=1, max_size=3))


def build(spec):
    system, runs = spec
    events = []
    turn = ids = 0
    for user, steps, final in runs:
        events.append(UserMessage.of(user))
        for text, calls in steps:
            turn += 1
            parts, results = [Text(text=text)] if text else [], []
            for name, args, ok, data in calls:
                ids += 1
                parts.append(ToolCall(id=f"call_{ids}", name=name, arguments=args,
                                      raw_arguments=json.dumps(args)))
                content = result_content(name, success=ok, data=data, error="it broke")
                results.append(ToolCompleted(call_id=f"call_{ids}", name=name, success=ok,
                                             content=content, source="imported"))
            events.append(ModelResponded(turn=turn, parts=tuple(parts), stop_reason="tool_use",
                                         source="imported"))
            events.extend(results)
        turn += 1
        events.append(ModelResponded(turn=turn, parts=(Text(text=final),), source="imported"))
        events.append(ConversationCompleted(final_content=final))
    started = ConversationStarted(conversation_id="orig", provider="imported", model="",
                                  system=system or "")
    return started, events


def view(events, *, ids=True, error_prefix=False):
    """What every format keeps: the messages, calls, arguments and results, in order."""
    out = []
    for e in events:
        if type(e) is ConversationStarted:
            out.append(("system", e.system))
        elif type(e) is UserMessage:
            out.append(("user", text_of(e.parts)))
        elif type(e) is ModelResponded:
            calls = [((p.id if ids else None), p.name, p.arguments)
                     for p in e.parts if type(p) is ToolCall]
            out.append(("assistant", e.turn, text_of(e.parts), calls))
        elif type(e) is ToolCompleted:
            content = e.content
            if error_prefix and not e.success:
                content = "Error: " + content
            out.append(("result", e.call_id if ids else None, e.name, content, e.success))
        elif type(e) is ConversationCompleted:
            out.append(("completed", e.final_content))
    return out


def round_trip(spec, fmt):
    journal = Journal(":memory:")
    started, events = build(spec)
    Conversation.start(journal, started, rest=events)
    text = export_conversation(journal, "orig", fmt)
    entries, envelope = read_transcript(text.encode())
    import_entries(journal, entries, conversation_id="copy", envelope=envelope)
    before, after = lineage_events(journal, "orig"), lineage_events(journal, "copy")
    return journal, before, after


@settings(max_examples=40, deadline=None)
@given(conversations)
def test_jsonl_round_trip_keeps_every_event_and_timestamp(spec):
    journal, before, after = round_trip(spec, "jsonl")
    assert after[0].conversation_id == "copy"
    assert before[1:] == after[1:]
    assert [r.recorded_at for r in journal.read("orig")] == [r.recorded_at for r in journal.read("copy")]


@settings(max_examples=40, deadline=None)
@given(conversations)
def test_anthropic_round_trip_keeps_messages_calls_arguments_and_results(spec):
    _, before, after = round_trip(spec, "anthropic")
    assert view(after) == view(before)


@settings(max_examples=40, deadline=None)
@given(conversations)
def test_openai_round_trip_keeps_messages_calls_arguments_and_results(spec):
    _, before, after = round_trip(spec, "openai")
    assert view(after) == view(before, error_prefix=True)


@settings(max_examples=40, deadline=None)
@given(conversations)
def test_openai_responses_round_trip_keeps_messages_calls_arguments_and_results(spec):
    # the export is {"input": [...], "instructions"?} with no model: still a Responses body
    _, before, after = round_trip(spec, "openai-responses")
    assert view(after) == view(before, error_prefix=True)


@settings(max_examples=40, deadline=None)
@given(conversations)
def test_gemini_round_trip_keeps_everything_but_call_ids(spec):
    _, before, after = round_trip(spec, "gemini")
    assert view(after, ids=False) == view(before, ids=False)


@settings(max_examples=40, deadline=None)
@given(conversations)
def test_datamachine_round_trip_keeps_everything_but_call_ids(spec):
    _, before, after = round_trip(spec, "datamachine")
    assert view(after, ids=False) == view(before, ids=False)


def test_markdown_export_shows_every_message_call_and_result():
    spec = ("Be brief.", [("what is 2+3?", [("sum it", [("add", {"a": 2, "b": 3}, True, {"sum": 5})])],
                           "5")])
    journal = Journal(":memory:")
    started, events = build(spec)
    Conversation.start(journal, started, rest=events)
    text = export_conversation(journal, "orig", "markdown")
    for needle in ("# Conversation `orig`", "## System", "Be brief.", "## User", "what is 2+3?",
                   "## Assistant (turn 1)", "**Tool call** `add`", '"a": 2',
                   "**Tool result** `add` (ok)", '{"sum":5}', "## Assistant (turn 2)", "*completed*"):
        assert needle in text
