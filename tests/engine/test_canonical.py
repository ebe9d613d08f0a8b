"""Laws of canonical arguments: what compares equal and what never does."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st
from turnlog import testing as shipped

from turnlog.engine.model.canonical import canonical_json
from turnlog.engine.errors import InvalidEventError

arguments = shipped.arguments(max_size=5)
json_values = shipped.json_values(max_leaves=12)


@given(arguments, st.randoms())
def test_key_order_never_matters(args, rnd):
    items = list(args.items())
    rnd.shuffle(items)
    assert canonical_json(dict(items)) == canonical_json(args)


@given(st.integers(min_value=-(2**52), max_value=2**52))
def test_integral_floats_equal_ints(n):
    assert canonical_json({"a": float(n)}) == canonical_json({"a": n})


@given(json_values)
def test_canonical_form_is_idempotent(value):
    import json

    once = canonical_json(value)
    assert canonical_json(json.loads(once)) == once


def test_booleans_are_not_numbers():
    assert canonical_json({"a": True}) != canonical_json({"a": 1})


def test_unicode_is_nfc_normalised_in_keys_and_values():
    decomposed = unicodedata.normalize("NFD", "café")
    assert canonical_json({decomposed: decomposed}) == canonical_json({"café": "café"})


def test_list_order_and_null_matter():
    assert canonical_json([1, 2]) != canonical_json([2, 1])
    assert canonical_json({"a": None}) != canonical_json({})


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {1: "x"}, {"a": object()}])
def test_non_json_values_are_refused(bad):
    with pytest.raises(InvalidEventError):
        canonical_json(bad)


# Two encodings, two names: canonical JSON normalises, sorted JSON (the stored payload) does not.

@given(st.dictionaries(st.sampled_from(["a", "b", "\u00e9", "z"]),
                       st.sampled_from([1, 1.0, -0.0, 0, "e\u0301", "\u00e9", True, None]),
                       max_size=4))
def test_sorted_json_keeps_values_as_given_and_canonical_json_normalises_them(value):
    import json

    from turnlog.engine.model.canonical import canonical_value, sorted_json

    stored = sorted_json(value)
    assert list(json.loads(stored)) == sorted(value)  # keys sorted
    assert json.loads(stored) == value and all(type(json.loads(stored)[k]) is type(v) for k, v in value.items())
    assert canonical_json(value) == sorted_json(canonical_value(value))
    spelled = {k: v for k, v in value.items() if v in ("e\u0301",) or type(v) is float}
    assert (stored == canonical_json(value)) == (not spelled)


def test_an_event_payload_is_its_sorted_json_not_its_canonical_json():
    from turnlog.engine.model.canonical import sorted_json
    from turnlog.engine.model.events import ToolStarted, encode_event

    event = ToolStarted(call_id="c1", name="add", arguments={"b": 1.0, "a": "e\u0301"})
    payload = encode_event(event).payload
    assert payload == sorted_json(event)
    assert '"b":1.0' in payload and "e\u0301" in payload  # as recorded, not normalised
    assert canonical_json({"b": 1.0, "a": "e\u0301"}) == '{"a":"\u00e9","b":1}'
