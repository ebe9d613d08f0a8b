"""``engine.model.jsontext``: msgspec reads and writes JSON text as Python's ``json`` does."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnlog.engine.model.jsontext import ExactFloat, indented, loads

#: any JSON value, floats of every magnitude and sign (``1e-05``, ``1e+16``, ``-0.0``,
#: ``5e-324``), any text (control characters, U+2028, astral), integers past 64 bits
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=4),
    max_leaves=20)


def _same(a: object, b: object) -> bool:
    """Equal, NaN equal to NaN, and floats as floats (not ints)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and str(a) == str(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@given(_VALUES)
def test_text_read_and_written_again_is_json_s_text(value):
    text = json.dumps(value, ensure_ascii=False)
    assert _same(loads(text), json.loads(text))
    assert _same(loads(text, exact_floats=True), json.loads(text))
    assert indented(loads(text, exact_floats=True)) == json.dumps(value, ensure_ascii=False,
                                                                  indent=2)


@pytest.mark.parametrize("text", [
    '"\\ud800 lone"', '{"a": "\\udc00"}',  # lone surrogates' escapes: msgspec refuses them
    "1e400", "[-1e400, 2]", "NaN", '{"a": [Infinity, -Infinity, NaN]}',  # not JSON, json's
    "[-0.0, 1e-05, 1.5e-07, 1e+16, 5e-324, 1.7976931348623157e+308, 100.0]",
    "123456789012345678901234567890", '{"a": 1, "a": 2}', '"\\u2028\\u0000\\t é 😀"'])
def test_what_msgspec_does_not_read_is_read_and_written_as_json_does(text):
    assert _same(loads(text), json.loads(text))
    exact = loads(text, exact_floats=True)
    assert indented(exact) == json.dumps(json.loads(text), ensure_ascii=False, indent=2)


def test_floats_read_exactly_are_exact_floats_and_not_json_is_a_value_error():
    assert [type(x) for x in loads("[1.5, 2, 1e400]", exact_floats=True)] == [
        ExactFloat, int, ExactFloat]
    with pytest.raises(ValueError):
        loads('{"a": ')
    with pytest.raises(TypeError, match="object is not JSON data"):
        indented({"a": object()})
