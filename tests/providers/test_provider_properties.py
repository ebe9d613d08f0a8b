"""Laws of the mapping, checked with hypothesis.

- neutral -> wire -> neutral keeps texts, tool names, arguments, result contents
  (and ids where the wire has them) for every provider;
- any neutral history, however messy, renders into a request the provider's
  rules accept (the fake API's checkers);
- generated id mappings are stable, valid and collision-free.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnlog.engine.model.messages import Image, Message, Text, Thinking, ToolCall, ToolResult, text_of
from turnlog.engine.providers import ModelRequest, anthropic, gemini, openai, openai_responses
from turnlog.engine.providers.registry import wire
from tests.fakerules import check_anthropic, check_gemini, check_openai, check_responses
from turnlog.testing import json_values

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAMES = st.sampled_from(["add", "get_weather", "search-web", "x"])
JSON = json_values(max_leaves=6)
ARGS = st.dictionaries(st.text(min_size=1, max_size=8), JSON, max_size=4)
WORDS = st.text(min_size=1, max_size=30).filter(lambda s: s.strip() != "")


@st.composite
def conversations(draw):
    """Well-formed conversations: every call answered in order, non-blank texts."""
    messages = [Message(role="user", parts=(Text(text=draw(WORDS)),))]
    serial = 0
    for _ in range(draw(st.integers(0, 3))):
        parts = [Text(text=draw(WORDS))] if draw(st.booleans()) else []
        calls = []
        for _ in range(draw(st.integers(1, 3))):
            serial += 1
            call_id = draw(st.sampled_from(["call_", "toolu_", "fn.", "id "])) + str(serial)
            args = draw(ARGS)
            calls.append(ToolCall(id=call_id, name=draw(NAMES), arguments=args,
                                  raw_arguments=openai_json(args)))
        messages.append(Message(role="assistant", parts=(*parts, *calls)))
        for call in calls:
            messages.append(Message(role="tool", parts=(ToolResult(
                call_id=call.id, name=call.name, content=draw(st.text(max_size=20)),
                is_error=draw(st.booleans())),)))
    messages.append(Message(role="assistant", parts=(Text(text=draw(WORDS)),)))
    return messages


def openai_json(args):
    import json

    return json.dumps(args)


def _roundtrip(name, messages):
    module = wire(name)  # one signature for every wire
    return module.unmap_messages(*module.map_messages("sys", messages))


def _calls(messages):
    return [p for m in messages for p in m.parts if type(p) is ToolCall]


def _results(messages):
    return [p for m in messages for p in m.parts if type(p) is ToolResult]


def _check_roundtrip(name, messages):
    system, back = _roundtrip(name, messages)
    assert system == "sys"
    assert [(m.role, text_of(m.parts)) for m in back if m.role != "tool"] == \
        [(m.role, text_of(m.parts)) for m in messages if m.role != "tool"]
    calls, back_calls = _calls(messages), _calls(back)
    assert [(c.name, c.arguments) for c in back_calls] == [(c.name, c.arguments) for c in calls]
    results, back_results = _results(messages), _results(back)
    if name.startswith("openai"):  # no error flag on this wire: the content says it
        assert [r.content for r in back_results] == [openai._result_content(r) for r in results]
    else:
        assert [(r.content, r.is_error) for r in back_results] == \
            [(r.content, r.is_error) for r in results]
    # every result still answers the call at the same position
    position = {c.id: i for i, c in enumerate(back_calls)}
    original = {c.id: i for i, c in enumerate(calls)}
    assert [position[r.call_id] for r in back_results] == [original[r.call_id] for r in results]
    if name == "anthropic":
        assert [c.id for c in back_calls] == [c.id for c in calls], "ids map back exactly"


@SETTINGS
@given(conversations())
def test_anthropic_roundtrip_keeps_texts_calls_arguments_results_and_ids(messages):
    _check_roundtrip("anthropic", messages)


@SETTINGS
@given(conversations())
def test_openai_roundtrip_keeps_texts_calls_arguments_and_results(messages):
    _check_roundtrip("openai", messages)


@SETTINGS
@given(conversations())
def test_openai_responses_roundtrip_keeps_texts_calls_arguments_and_results(messages):
    _check_roundtrip("openai-responses", messages)


@SETTINGS
@given(conversations())
def test_gemini_roundtrip_keeps_texts_calls_arguments_and_results(messages):
    _check_roundtrip("gemini", messages)


# --- any history renders into an acceptable request -------------------------------------

IDS = st.sampled_from(["call_1", "call_2", "functions.add:0", "", "toolu_9", "a b", "x_tl1",
                       "é", "z" * 60])
PROVIDERS = st.sampled_from([None, "anthropic", "openai", "gemini"])
TEXTS = st.sampled_from(["", " ", "\n\t", "hello", "x"]) | st.text(max_size=8)


def _part(kind_role):
    return st.one_of(
        st.builds(lambda t: Text(text=t), TEXTS),
        st.builds(lambda t, p, s: Thinking(text=t, provider=p, signature=s),
                  TEXTS, PROVIDERS, st.none() | st.just("sig")),
        st.builds(lambda i: Image(media_type="image/png", data="iVBORw0KGgo="), st.none()),
        st.builds(lambda i, n, a, bad: ToolCall(id=i, name=n, arguments={} if bad else a,
                                                raw_arguments="{" if bad else "{}",
                                                invalid="bad" if bad else None),
                  IDS, NAMES, ARGS, st.booleans()) if kind_role == "assistant" else st.nothing(),
        st.builds(lambda i, n, c, e: ToolResult(call_id=i, name=n, content=c, is_error=e),
                  IDS, NAMES, TEXTS, st.booleans()) if kind_role != "assistant" else st.nothing(),
    )


@st.composite
def messy_histories(draw):
    messages = []
    for _ in range(draw(st.integers(0, 6))):
        role = draw(st.sampled_from(["user", "assistant", "tool", "system"]))
        parts = draw(st.lists(_part(role), max_size=4))
        messages.append(Message(role=role, parts=tuple(parts)))
    # a request needs something to answer: one real user message, anywhere
    at = draw(st.integers(0, len(messages)))
    messages.insert(at, Message(role="user", parts=(Text(text=draw(WORDS)),)))
    return messages


@SETTINGS
@given(messy_histories(), st.text(max_size=5))
def test_any_history_renders_into_a_request_every_provider_accepts(messages, system):
    request = ModelRequest(model="m", system=system, messages=tuple(messages),
                           parameters={"max_tokens": 10, "temperature": 0.5})
    assert check_anthropic(anthropic.map_request(request)) is None
    assert check_openai(openai.map_request(request)) is None
    assert check_gemini(gemini.map_request(request)) is None
    assert check_responses(openai_responses.map_request(request)) is None


# --- id mappings --------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=20), st.text(max_size=20))
def test_anthropic_ids_are_valid_reversible_and_collision_free(a, b):
    for x in (a, b):
        assert re.fullmatch(r"[a-zA-Z0-9_-]+", anthropic.wire_id(x))
        assert anthropic.neutral_id(anthropic.wire_id(x)) == x
        assert anthropic.wire_id(x) == anthropic.wire_id(x)
    assert (anthropic.wire_id(a) == anthropic.wire_id(b)) == (a == b)


@settings(max_examples=300, deadline=None)
@given(st.from_regex(r"[a-zA-Z0-9_-]{1,40}", fullmatch=True))
def test_valid_ids_pass_through_both_id_maps_unchanged(call_id):
    if not call_id.startswith("x_tl"):
        assert anthropic.wire_id(call_id) == call_id
        assert openai.wire_id(call_id) == call_id


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80), st.text(max_size=80))
def test_openai_ids_fit_and_do_not_collide(a, b):
    for x in (a, b):
        assert 0 < len(openai.wire_id(x)) <= 40
    assert (openai.wire_id(a) == openai.wire_id(b)) == (a == b)
