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
