"""turnlog.testing's kit: its strategies generate what they promise, and every built-in rule
(and a custom predicate) passes ``DuplicateRuleLaws``."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from turnlog.engine.model.canonical import canonical_json
from turnlog.engine.tools.duplicates import call_key
from turnlog.engine.model.events import DuplicatePolicy
from turnlog.testing import (
    CANONICAL_TWINS,
    COMPATIBILITY_TWINS,
    DuplicateRuleLaws,
    argument_dicts,
    changed_forms,
    equivalent_forms,
    same_arguments,
)


def window_of_two(name, arguments, state):
    """A user's rule: refuse a call seen in the last two calls, searches only once in a row."""
    last = state.call_index.get(call_key(name, arguments, state.duplicate_policy))
    if last is None:
        return False
    return state.call_count - last <= (1 if name == "search" else 2)


class TestPreviousRule(DuplicateRuleLaws):
    policy = DuplicatePolicy(volatile={"search": ("nonce",)})


class TestWindowRule(DuplicateRuleLaws):
    policy = DuplicatePolicy(rule="window", window=3, exempt=("add",))


class TestAnywhereRule(DuplicateRuleLaws):
    policy = DuplicatePolicy(rule="anywhere", volatile={"caf\u00e9": ("a", "b")})


class TestCustomPredicate(DuplicateRuleLaws):
    policy = DuplicatePolicy(rule="custom", custom="window_of_two", exempt=("add",),
                             volatile={"search": ("nonce", "a")})
    predicate = staticmethod(window_of_two)


class TestRuleOff(DuplicateRuleLaws):
    policy = DuplicatePolicy(rule="off")
    refuses_repeats = False


# --- the strategies keep their promises (and two implementations of the rule agree) ---------


@given(args=argument_dicts(), data=st.data())
def test_equivalent_forms_have_the_canonical_form_of_the_original(args, data):
    same = data.draw(equivalent_forms(args))
    assert canonical_json(same) == canonical_json(args)
    assert call_key("t", same) == call_key("t", args)
    assert same_arguments(same, args)


@given(args=argument_dicts(), data=st.data())
def test_changed_forms_differ_from_the_original(args, data):
    changed = data.draw(changed_forms(args))
    assert canonical_json(changed) != canonical_json(args)
    assert call_key("t", changed) != call_key("t", args)
    assert not same_arguments(changed, args)


@given(a=argument_dicts(max_size=2, max_leaves=3), b=argument_dicts(max_size=2, max_leaves=3))
def test_the_naive_walk_and_the_canonical_form_agree(a, b):
    assert same_arguments(a, b) == (canonical_json(a) == canonical_json(b))
    assert same_arguments(a, b) == (call_key("t", a) == call_key("t", b))


def test_the_twins_are_what_they_claim():
    for one, other in CANONICAL_TWINS:
        assert one != other and unicodedata.normalize("NFC", one) == unicodedata.normalize(
            "NFC", other)
    for one, other in COMPATIBILITY_TWINS:
        assert unicodedata.normalize("NFC", one) != other
        assert unicodedata.normalize("NFKC", one) == other


# --- the docs page's example runs as a user would run it ------------------------------------


def test_the_property_testing_page_example_passes_under_pytest(tmp_path):
    import re
    import subprocess
    import sys
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "property-testing.md").read_text(
        encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    example = next(b for b in blocks if b.startswith("# test_my_rule.py"))
    profile = next(b for b in blocks if "register_profile" in b)
    (tmp_path / "test_my_rule.py").write_text(example, encoding="utf-8")
    (tmp_path / "conftest.py").write_text(profile, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
         str(tmp_path), str(tmp_path / "test_my_rule.py")],
        capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "12 passed" in proc.stdout


class _KeyOrderMatters(DuplicateRuleLaws):
    """A rule that compares argument text as sent: the laws must catch it."""

    policy = DuplicatePolicy(rule="custom")

    @staticmethod
    def predicate(name, arguments, state):
        import json

        return any(json.dumps(a) == json.dumps(arguments) and c.name == name
                   for m in state.message_list for c in m.parts
                   if type(c).__name__ == "ToolCall" for a in [c.arguments])


def test_the_laws_catch_a_rule_that_compares_text_as_sent():
    import pytest

    law = _KeyOrderMatters.test_key_order_number_form_and_unicode_form_never_change_a_verdict
    with pytest.raises((AssertionError, ExceptionGroup)):  # one failure, or several
        law(_KeyOrderMatters())
