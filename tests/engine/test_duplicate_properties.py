"""Laws of duplicate detection, checked on the live state's O(1) index and through the loop."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from turnlog.engine.model.canonical import canonical_json
from turnlog.engine.demo import demo_tools
from turnlog.engine.model.events import (
    ConversationStarted,
    DuplicatePolicy,
    ModelRequested,
    ModelResponded,
    ToolCompleted,
    UserMessage,
)
from turnlog.engine.loop import run
from turnlog.engine.model.messages import ToolCall
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.engine.model.state import StateBuilder
from turnlog.journal import Journal
from turnlog import testing as shipped

arguments = shipped.arguments(max_size=5)
names = shipped.identifiers()

FAST = settings(max_examples=60, deadline=None)


def builder(policy: DuplicatePolicy) -> StateBuilder:
    b = StateBuilder()
    b.apply(ConversationStarted(conversation_id="c", provider="p", model="m", max_turns=10**6,
                                duplicate_policy=policy))
    b.apply(UserMessage.of("go"))
    return b


def record(b: StateBuilder, name: str, args: dict) -> None:
    """The model calls ``name(args)`` and the call completes."""
    turn = b.turn_count + 1
    b.apply(ModelRequested(turn=turn, digest="d", provider="p", model="m"))
    b.apply(ModelResponded(turn=turn, parts=(ToolCall(id=f"t{turn}", name=name, arguments=args),)))
    b.apply(ToolCompleted(call_id=f"t{turn}", name=name, success=True, content="ok"))


def different_value(value):
    """A value whose canonical form differs from ``value``'s."""
    return [value] if not isinstance(value, list) else value + [None]


rules = st.sampled_from([DuplicatePolicy(), DuplicatePolicy(rule="window", window=3),
                         DuplicatePolicy(rule="anywhere")])


@FAST
@given(policy=rules, name=names, args=arguments, before=st.lists(st.tuples(names, arguments), max_size=3))
def test_the_same_call_twice_in_a_row_is_always_refused(policy, name, args, before):
    b = builder(policy)
    for other in before:
        record(b, *other)
    record(b, name, args)
    assert b.is_duplicate(name, args)


@FAST
@given(policy=st.just(DuplicatePolicy()), name=names, args=arguments.filter(bool), data=st.data())
def test_any_change_to_a_value_is_never_refused_by_the_previous_call_rule(policy, name, args, data):
    b = builder(policy)
    record(b, name, args)
    key = data.draw(st.sampled_from(sorted(args)))
    changed = {**args, key: different_value(args[key])}
    assert canonical_json(changed) != canonical_json(args)
    assert not b.is_duplicate(name, changed)
    extra = {**args, key + "_x": 1} if key + "_x" not in args else {k: v for k, v in args.items() if k != key}
    assert not b.is_duplicate(name, extra)


@FAST
@given(name=names, other=names, args=arguments)
def test_a_change_of_tool_name_is_never_refused(name, other, args):
    b = builder(DuplicatePolicy())
    record(b, name, args)
    assert b.is_duplicate(other, args) == (other == name)


@FAST
@given(policy=rules, name=names, args=arguments, seed=st.randoms(use_true_random=False))
def test_reordering_keys_changes_nothing(policy, name, args, seed):
    b = builder(policy)
    record(b, name, args)
    items = list(args.items())
    seed.shuffle(items)
    assert b.is_duplicate(name, dict(items)) == b.is_duplicate(name, args) is True


@FAST
@given(window=st.integers(min_value=1, max_value=5), gap=st.integers(min_value=0, max_value=7))
def test_window_rule_refuses_exactly_within_the_last_n_calls(window, gap):
    b = builder(DuplicatePolicy(rule="window", window=window))
    record(b, "probe", {"x": 1})
    for i in range(gap):
        record(b, "other", {"i": i})
    assert b.is_duplicate("probe", {"x": 1}) == (gap + 1 <= window)


@FAST
@given(gap=st.integers(min_value=0, max_value=10))
def test_anywhere_rule_refuses_a_call_seen_at_any_distance_and_previous_only_at_distance_one(gap):
    anywhere, previous = builder(DuplicatePolicy(rule="anywhere")), builder(DuplicatePolicy())
    for b in (anywhere, previous):
        record(b, "probe", {"x": 1})
        for i in range(gap):
            record(b, "other", {"i": i})
    assert anywhere.is_duplicate("probe", {"x": 1})
    assert previous.is_duplicate("probe", {"x": 1}) == (gap == 0)


@FAST
@given(name=names, args=arguments.filter(bool), data=st.data())
def test_volatile_keys_are_left_out_and_exempt_tools_never_refused(name, args, data):
    key = data.draw(st.sampled_from(sorted(args)))
    b = builder(DuplicatePolicy(volatile={name: (key,)}))
    record(b, name, args)
    assert b.is_duplicate(name, {**args, key: different_value(args[key])})
    e = builder(DuplicatePolicy(exempt=(name,)))
    record(e, name, args)
    assert not e.is_duplicate(name, args)


@settings(max_examples=15, deadline=None)
@given(args=st.dictionaries(st.sampled_from(["city", "x", "y"]), st.integers(0, 3), min_size=1),
       data=st.data())
def test_through_the_loop_a_repeat_is_refused_and_a_changed_call_runs(args, data):
    """The loop's decision equals the rule's, and every call still gets one answer."""
    @__import__("turnlog.engine.tools", fromlist=["tool"]).tool
    def probe(city: int = 0, x: int = 0, y: int = 0) -> dict:
        """Probe."""
        return {"ok": True}

    repeat = data.draw(st.booleans())
    second = dict(reversed(list(args.items()))) if repeat else {**args, "y": args.get("y", 0) + 1}
    script = [{"tool_calls": [{"name": "probe", "arguments": args}]},
              {"tool_calls": [{"name": "probe", "arguments": second}]}, {"text": "done"}]
    j = Journal(":memory:")
    run(j, "go", provider=ScriptedProvider(script), tools=[probe], conversation_id="c")
    rejected = [json.loads(e.payload) for e in j.read("c") if e.type == "tool_call_rejected"]
    started = [e for e in j.read("c") if e.type == "tool_started"]
    assert len(rejected) == (1 if repeat else 0)
    assert len(started) + len(rejected) == 2
    j.close()


def test_demo_tools_are_all_registered():
    assert set(demo_tools().names()) == {"get_weather", "add", "get_current_time", "append_note",
                                         "wait"}


def _naive(policy: DuplicatePolicy, history: list, name: str, args: dict) -> bool:
    """The rule as the issue states it, by scanning back through every earlier call."""
    key = (name, canonical_json(args))
    keys = [(n, canonical_json(a)) for n, a in history]
    if policy.rule == "previous":
        return bool(keys) and keys[-1] == key
    if policy.rule == "window":
        return key in keys[-policy.window:]
    return key in keys


small_calls = st.lists(st.tuples(st.sampled_from(["a", "b"]),
                                 st.dictionaries(st.sampled_from(["x", "y"]),
                                                 st.sampled_from([0, 1, 1.0, "1"]), max_size=2)),
                       min_size=1, max_size=12)


@FAST
@given(policy=rules, calls=small_calls)
def test_the_o1_index_agrees_with_a_backward_scan_on_every_call(policy, calls):
    b = builder(policy)
    history: list = []
    for name, args in calls:
        assert b.is_duplicate(name, args) == _naive(policy, history, name, args)
        record(b, name, args)
        history.append((name, args))
