"""Each part of the call-key rule pinned on its own: NFC (never NFKC) at every depth and on
the fast path, numbers nested, unparsable calls, exemptions and volatile keys under every rule,
window boundaries and escalation counts."""

from __future__ import annotations

import json
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnlog.engine.model.canonical import canonical_bytes, canonical_json, canonical_value, digest
from turnlog.engine.tools.duplicates import call_key, check_duplicate, is_duplicate
from turnlog.engine.errors import InvalidEventError
from turnlog.engine.model.events import DuplicatePolicy
from turnlog.engine.loop import Loop
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.engine.tools import tool
from turnlog.journal import Journal
from turnlog.testing import (
    CANONICAL_TWINS,
    COMPATIBILITY_TWINS,
    DuplicateRuleLaws,
    argument_dicts,
    equivalent_forms,
)

RULES = [DuplicatePolicy(), DuplicatePolicy(rule="window", window=2),
         DuplicatePolicy(rule="anywhere")]
record, new_state = DuplicateRuleLaws.record, DuplicateRuleLaws().new_state


def nest(value, path):
    """``value`` wrapped by ``path``: "l" a list (as its second item), anything else a key."""
    for step in reversed(path):
        value = [0, value] if step == "l" else {step: value}
    return value


paths = st.lists(st.sampled_from(["l", "k", "\u00e9"]), max_size=4)


# --- NFC, not NFKC, at every depth and on the fast path --------------------------------


@given(twin=st.sampled_from(CANONICAL_TWINS), path=paths, as_key=st.booleans())
def test_canonical_twins_are_one_argument_at_every_depth(twin, path, as_key):
    one, other = ({t: 1} if as_key else t for t in twin)
    for a, b in ((nest(one, path), nest(other, path)), ({"x": nest(one, path)}, {"x": nest(other, path)})):
        assert canonical_json(a) == canonical_json(b)
    assert call_key("t", {"x": nest(one, path)}) == call_key("t", {"x": nest(other, path)})


@given(twin=st.sampled_from(COMPATIBILITY_TWINS), path=paths, as_key=st.booleans())
def test_compatibility_twins_stay_two_arguments_at_every_depth(twin, path, as_key):
    one, other = ({t: 1} if as_key else t for t in twin)
    assert canonical_json(nest(one, path)) != canonical_json(nest(other, path))
    assert call_key("t", {"x": nest(one, path)}) != call_key("t", {"x": nest(other, path)})


@pytest.mark.parametrize(("one", "other"), CANONICAL_TWINS)
def test_top_level_keys_and_values_are_normalised_on_the_fast_path(one, other):
    assert call_key("t", {one: 1, "n": 2}) == call_key("t", {other: 1, "n": 2})
    assert call_key("t", {one: 1}) == call_key("t", {other: 1})  # no ASCII key at all
    assert call_key("t", {one: one}) == call_key("t", {other: other})
    assert call_key("t", {"q": one, "n": None}) == call_key("t", {"q": other, "n": None})
    assert call_key("t", {"q": one}) == f"t\x00{canonical_json({'q': other})}"


@pytest.mark.parametrize(("one", "other"), COMPATIBILITY_TWINS)
def test_compatibility_characters_are_kept_on_the_fast_path(one, other):
    assert call_key("t", {"q": one}) != call_key("t", {"q": other})
    assert call_key("t", {one: 0}) != call_key("t", {other: 0})
    assert canonical_value(one) == unicodedata.normalize("NFC", one) != other


def test_ascii_arguments_take_the_fast_path_with_the_same_key():
    args = {"b": "x", "a": 1, "c": None, "d": True}
    assert call_key("t", args) == "t\x00" + canonical_json(args) == 't\x00{"a":1,"b":"x","c":null,"d":true}'


# --- numbers, nested -------------------------------------------------------------------


@given(path=paths, n=st.integers(-(2**53), 2**53))
def test_integral_floats_are_ints_at_every_depth(path, n):
    assert canonical_json(nest(float(n), path)) == canonical_json(nest(n, path))
    assert call_key("t", {"x": nest(float(n), path)}) == call_key("t", {"x": nest(n, path)})
    assert call_key("t", {"x": float(n)}) == call_key("t", {"x": n})


@given(path=paths)
def test_minus_zero_is_zero_and_booleans_are_not_numbers_at_every_depth(path):
    assert call_key("t", {"x": nest(-0.0, path)}) == call_key("t", {"x": nest(0, path)})
    assert canonical_json(nest(-0.0, path)) == canonical_json(nest(0, path))
    for flag, number in ((True, 1), (False, 0), (True, 1.0), (False, -0.0)):
        assert canonical_json(nest(flag, path)) != canonical_json(nest(number, path))
        assert call_key("t", {"x": nest(flag, path)}) != call_key("t", {"x": nest(number, path)})
        assert call_key("t", {"x": flag}) != call_key("t", {"x": number})


def test_fractions_and_large_numbers_keep_their_value():
    assert canonical_json({"a": 2.5}) == '{"a":2.5}'
    assert canonical_json([0.1, 2**60, -3]) == "[0.1,1152921504606846976,-3]"
    assert canonical_json(None) == "null" and canonical_json((1, "a")) == '[1,"a"]'


@pytest.mark.parametrize("bad", [float("nan"), [float("inf")], {"a": {"b": float("-inf")}},
                                 {"a": [{1: 2}]}, [object()], {"a": b"x"}])
def test_values_without_json_form_are_refused_at_every_depth(bad):
    with pytest.raises(InvalidEventError):
        canonical_json(bad)
    assert call_key("t", {"x": bad}).startswith("t\x02")


def test_keys_merging_under_nfc_are_refused_naming_both_and_key_apart():
    odd = {"a": {"e\u0301": 1, "\u00e9": 2}}
    with pytest.raises(InvalidEventError, match=r"object keys 'e\\u0301' and '\\xe9'"):
        canonical_json(odd)
    with pytest.raises(InvalidEventError, match=r"object keys '\\xe9' and 'e\\u0301'"):
        canonical_json({"z": 0, "y": 1, "\u00e9": 1, "b": 2, "e\u0301": 2})
    assert call_key("t", odd) == f"t\x02{odd!r}"
    with pytest.raises(InvalidEventError, match="lone surrogate"):
        canonical_bytes({"a": "\udd20"})


def test_digest_is_the_sha256_of_the_canonical_bytes():
    import hashlib

    assert digest({"b": 1.0, "a": "\u00e9"}) == hashlib.sha256(
        '{"a":"\u00e9","b":1}'.encode()).hexdigest()


# --- unparsable arguments ------------------------------------------------------------------


@given(args=argument_dicts(), raw=st.text(max_size=20), name=st.sampled_from(["t", "u"]))
def test_an_unparsable_call_never_keys_like_a_parsed_one(args, raw, name):
    policy = DuplicatePolicy(volatile={name: ("q",)})
    for text in (raw, canonical_json(args), json.dumps(args), repr(args)):
        assert call_key(name, args, None, text) == call_key(name, {}, policy, text)
        for p in (None, policy):
            assert call_key(name, {}, p, text) != call_key(name, args, p)
    assert call_key(name, {}, None, raw) != call_key(name, {}, None, raw + "x")
    assert call_key(name, {}, None, raw) != call_key("other", {}, None, raw)


def test_an_unparsable_call_keys_on_its_raw_text_example():
    assert call_key("add", {}, None, "{bad") == "add\x01{bad" != call_key("add", {})
    assert call_key("add", {}, None, "{}") != call_key("add", {})


# --- exemptions and volatile keys under every rule, custom predicates included -------------


def seen_by(seen):
    def predicate(name, arguments, state):
        seen.append(arguments)
        return True
    return predicate


@pytest.mark.parametrize("policy", [*RULES, DuplicatePolicy(rule="custom")])
def test_exempt_tools_are_never_refused_under_any_rule(policy):
    import msgspec

    exempt = msgspec.structs.replace(policy, exempt=("poll",))
    b = new_state(exempt)
    record(b, "poll", {"a": 1})
    seen: list = []
    assert not check_duplicate(exempt, b, "poll", {"a": 1}, seen_by(seen))
    assert not seen  # the predicate is not even asked
    assert not is_duplicate(exempt, b.call_index, b.call_count, "poll", {"a": 1})
    assert check_duplicate(exempt, b, "other", {}, seen_by(seen)) == (policy.rule == "custom")


@pytest.mark.parametrize("policy", [*RULES, DuplicatePolicy(rule="custom")])
def test_volatile_keys_are_left_out_under_any_rule(policy):
    import msgspec

    volatile = msgspec.structs.replace(policy, volatile={"search": ("nonce", "at")})
    b = new_state(volatile)
    record(b, "search", {"q": "x", "nonce": 1, "at": "now"})
    seen: list = []
    verdict = check_duplicate(volatile, b, "search", {"q": "x", "nonce": 2}, seen_by(seen))
    assert verdict
    assert seen == ([{"q": "x"}] if policy.rule == "custom" else [])
    assert not check_duplicate(volatile, b, "search", {"q": "y", "nonce": 1}, lambda *a: False)
    # volatile keys belong to their tool only
    record(b, "fetch", {"q": "x", "nonce": 1})
    if policy.rule != "custom":
        assert not check_duplicate(volatile, b, "fetch", {"q": "x", "nonce": 2})
        assert call_key("fetch", {"nonce": 1}, volatile) != call_key("fetch", {"nonce": 2}, volatile)


def test_a_custom_rule_needs_its_predicate_and_off_refuses_nothing():
    from turnlog.engine.tools.duplicates import register_predicate, resolve_predicate

    register_predicate("always", lambda n, a, s: 1)
    nameless = new_state(DuplicatePolicy(rule="custom"))
    with pytest.raises(InvalidEventError, match="duplicate predicate '' is neither"):
        check_duplicate(nameless.duplicate_policy, nameless, "t", {})
    b = new_state(DuplicatePolicy(rule="custom", custom="always"))
    assert check_duplicate(b.duplicate_policy, b, "t", {}) is True
    assert resolve_predicate("turnlog.engine.tools.duplicates:call_key") is call_key
    for ref in ("nowhere", "turnlog.engine.tools.duplicates:nothing", "no.such.module:x", "turnlog.engine.tools.duplicates"):
        with pytest.raises(InvalidEventError, match="neither registered"):
            resolve_predicate(ref)
    off = new_state(DuplicatePolicy(rule="off"))
    record(off, "t", {})
    assert not off.is_duplicate("t", {})
    custom = new_state(DuplicatePolicy(rule="custom", custom="always"))
    record(custom, "t", {})
    assert not is_duplicate(custom.duplicate_policy, custom.call_index, custom.call_count, "t", {})


# --- window boundaries ------------------------------------------------------------------------


@given(window=st.integers(1, 6), data=st.data())
def test_a_window_of_n_refuses_a_call_exactly_n_back_and_not_n_plus_1(window, data):
    for gap, refused in ((window - 1, True), (window, False)):
        b = new_state(DuplicatePolicy(rule="window", window=window))
        record(b, "probe", {"x": 1})
        for i in range(gap):
            record(b, "other", {"i": i})
        same = data.draw(equivalent_forms({"x": 1}))
        assert b.is_duplicate("probe", same) is refused, (window, gap)
        assert is_duplicate(b.duplicate_policy, b.call_index, b.call_count, "probe", {"x": 1}) is refused


def test_the_last_occurrence_counts_and_previous_means_exactly_one_back():
    b = new_state(DuplicatePolicy(rule="window", window=2))
    for name in ("probe", "a", "b", "probe", "c"):
        record(b, name, {})
    assert b.is_duplicate("probe", {})  # two back: its latest occurrence
    p = new_state(DuplicatePolicy())
    record(p, "probe", {})
    record(p, "a", {})
    assert not p.is_duplicate("probe", {}) and p.is_duplicate("a", {})
    first = new_state(DuplicatePolicy(rule="anywhere"))
    assert not first.is_duplicate("probe", {})


# --- escalation: refusals counted per run, the run halts at max_refusals ----------------------


@tool
def probe(x: int = 0) -> dict:
    """Probe."""
    return {"x": x}


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_the_run_halts_after_exactly_max_refusals_duplicate_refusals(limit):
    same = {"name": "probe", "arguments": {"x": 1}}
    script = [{"tool_calls": [same]}] + [{"tool_calls": [same, same]}] * 4 + [{"text": "done"}]
    j = Journal(":memory:")
    policy = DuplicatePolicy(max_refusals=limit)
    result = Loop(j, ScriptedProvider(script), [probe]).start("go", conversation_id="c",
                                                               duplicate_policy=policy)
    rows = [(e.type, json.loads(e.payload)) for e in j.read("c")]
    reasons = [p["reason"] for t, p in rows if t == "tool_call_rejected"]
    assert reasons.count("duplicate") == limit
    assert set(reasons[limit:]) <= {"halted"}
    halted = [p for t, p in rows if t == "conversation_halted"]
    assert result.status == "halted" and len(halted) == 1 and halted[0]["refusals"] == limit
    # a new run counts from zero: its one refusal halts it only when the limit is 1
    result = Loop(j, ScriptedProvider([{"tool_calls": [same]}, {"text": "ok"}]), [probe]).send(
        "c", "again")
    assert result.status == ("halted" if limit == 1 else "completed")
    halted = [json.loads(e.payload) for e in j.read("c") if e.type == "conversation_halted"]
    assert [h["refusals"] for h in halted] == [limit] + ([1] if limit == 1 else [])
    j.close()


def test_observe_only_runs_the_duplicate_and_marks_it():
    same = {"name": "probe", "arguments": {"x": 1}}
    j = Journal(":memory:")
    Loop(j, ScriptedProvider([{"tool_calls": [same]}, {"tool_calls": [same]}, {"text": "ok"}]),
         [probe]).start("go", conversation_id="c",
                        duplicate_policy=DuplicatePolicy(observe_only=True, max_refusals=1))
    started = [json.loads(e.payload) for e in j.read("c") if e.type == "tool_started"]
    assert [s.get("duplicate", False) for s in started] == [False, True]
    assert not [e for e in j.read("c") if e.type == "tool_call_rejected"]
    j.close()
