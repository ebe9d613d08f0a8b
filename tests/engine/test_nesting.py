"""``engine.nesting``: the one depth limit. Laws: ``check_depth`` refuses exactly the values that
nest deeper than the limit (against a plain recursive count), at any depth without recursion,
naming where; ``load_json`` is ``json.loads`` for everything within it."""

from __future__ import annotations

import doctest
import importlib
import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from turnlog.engine.errors import FormatError, MalformedResponseError, NestingError
from turnlog.engine.model.nesting import MAX_DEPTH, check_depth, load_json

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=3),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=2), inner, max_size=3), max_leaves=30)


def depth(value: object) -> int:
    """Containers inside one another, the outermost counting 1 (a scalar is 0)."""
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


@given(JSON, st.integers(0, 6))
@example([[[]]], 2)
@example([[[]]], 3)
@example({}, 0)
def test_check_depth_refuses_exactly_what_nests_deeper_than_the_limit(value, limit):
    if depth(value) > limit:
        with pytest.raises(NestingError, match=f"^data.* nests deeper than {limit} levels$"):
            check_depth(value, "data", limit=limit)
    else:
        check_depth(value, "data", limit=limit)


@given(JSON)
def test_load_json_is_json_loads_within_the_limit(value):
    text = json.dumps(value)
    assert load_json(text, "x") == json.loads(text)


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 1_000, 100_000])
def test_any_depth_is_refused_without_recursion_with_the_callers_error(levels):
    value: object = "leaf"
    for _ in range(levels):
        value = {"k": [value]}
    with pytest.raises(MalformedResponseError, match=r"^p: body\.k\[0\]\.k\[0\]… nests deeper"):
        check_depth(value, "body", error=lambda m: MalformedResponseError(m, provider="p"))
    # parsed, the branch is named; too deep even to parse, the text is
    named = r"^x(\[0\]\[0\]\[0\]\[0\]…)? nests deeper than 200 levels$"
    with pytest.raises(NestingError, match=named):
        load_json("[" * levels * 2 + "]" * levels * 2, "x")
    assert issubclass(NestingError, FormatError)


def test_the_modules_examples_hold():
    module = importlib.import_module("turnlog.engine.model.nesting")
    assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0


NAMED_JSON = st.recursive(st.none() | st.integers(),
                          lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
                          max_leaves=30)


@given(NAMED_JSON, st.integers(0, 6))
def test_the_branch_named_is_one_that_nests_too_deep(value, limit):
    """The message's path (up to its first keys and indexes) leads to a container that, with
    the levels above it, nests deeper than the limit."""
    if depth(value) <= limit:
        return
    with pytest.raises(NestingError) as raised:
        check_depth(value, "data", limit=limit)
    path = str(raised.value).removeprefix("data").split(" nests deeper")[0]
    steps = [s for s in path.removesuffix("…").replace("[", ".[").split(".") if s]
    node = value
    for step in steps:
        node = node[int(step[1:-1])] if step.startswith("[") else node[step]
    assert len(steps) + depth(node) > limit
    assert path.endswith("…") == (len(steps) == 4 and limit > 4)
