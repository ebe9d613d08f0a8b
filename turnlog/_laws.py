"""``DuplicateRuleLaws``: the laws every duplicate rule must satisfy, as a test class to subclass.

Imported by ``turnlog.testing`` on first use (it needs hypothesis and pytest).
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from turnlog.engine.tools.duplicates import DuplicatePredicate, check_duplicate
from turnlog.engine.model.events import (
    ConversationStarted,
    DuplicatePolicy,
    ModelRequested,
    ModelResponded,
    ToolCompleted,
    UserMessage,
)
from turnlog.engine.model.messages import ToolCall
from turnlog.engine.model.state import StateBuilder

from .testing import argument_dicts, changed_forms, equivalent_forms, same_arguments

__all__ = ["DuplicateRuleLaws"]

_NAMES = st.sampled_from(["search", "add", "caf\u00e9"])
# every subclass runs the same law functions: that is the point, not a flaky executor
_LAW = settings(suppress_health_check=[HealthCheck.differing_executors, HealthCheck.too_slow])
_HISTORY = st.lists(st.tuples(_NAMES, argument_dicts(max_size=3, max_leaves=4)), max_size=4)

#: Every distinction docs/property-testing.md promises, as ``(earlier call's arguments, next
#: call's arguments, the same call?)``: each is a fixed example of a law, so a rule that breaks
#: one fails whatever the seed and however few the examples.
DISTINCTIONS: tuple[tuple[dict[str, Any], dict[str, Any], bool], ...] = (
    ({"x": True}, {"x": 1}, False),                       # true is not 1
    ({"x": 1}, {"x": True}, False),
    ({"x": False}, {"x": 0}, False),                      # false is not 0
    ({"x": 0}, {"x": False}, False),
    ({"x": 1}, {"x": 1.0}, True),                         # 1 is 1.0
    ({"x": 2.0}, {"x": 2}, True),
    ({"x": 0}, {"x": -0.0}, True),                        # -0.0 is 0
    ({"x": "1"}, {"x": 1}, False),                        # text is not a number
    ({"x": None}, {}, False),                             # null is not a missing key
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}, True),           # key order never matters
    ({"x": [1, 2]}, {"x": [2, 1]}, False),                # list order does
    ({"x": "\u00e9"}, {"x": "e\u0301"}, True),             # NFC: composed or not
    ({"caf\u00e9": 1}, {"cafe\u0301": 1}, True),           # ... in keys too
    ({"x": "\u212b"}, {"x": "\u00c5"}, True),              # the Angstrom sign is A-ring
    ({"x": "\ufb01"}, {"x": "fi"}, False),                 # NFC, never NFKC
    ({"x": "\uff11"}, {"x": "1"}, False),                  # full-width digits stay apart
    ({"x": "\u00a0"}, {"x": " "}, False),                  # a no-break space is no space
    ({"a": [{"b": True}]}, {"a": [{"b": 1}]}, False),     # at every depth
    ({"a": [{"b": 1.0, "c": "e\u0301"}]}, {"a": [{"c": "\u00e9", "b": 1}]}, True),
)


def _distinctions(law: Any) -> Any:
    """``law`` with every ``DISTINCTIONS`` pair as a fixed ``@example``."""
    for earlier, probe, _ in reversed(DISTINCTIONS):
        law = example(earlier=earlier, probe=probe)(law)
    return law


class DuplicateRuleLaws:
    """Laws any duplicate rule must satisfy; subclass it (as ``Test...``) with your rule.

    Set ``policy`` (a ``DuplicatePolicy``) and, for ``rule="custom"``, the
    ``predicate`` the loop would be given (else ``policy.custom`` is resolved
    as the loop resolves it). Each law draws histories of calls that ran and
    asks the loop's own decision (``engine.duplicates.check_duplicate``) about
    the next call:

    - a call repeated at once is refused (set ``refuses_repeats = False`` for
      a rule that lets some repeats through, such as ``rule="off"``), in any
      equivalent form;
    - a call that differs from every earlier call in a non-volatile argument
      (or is the first call) is never refused;
    - key order, number form (``1``/``1.0``, ``0``/``-0.0``) and Unicode form
      (NFC-equal text) never change a verdict, in the history or in the call;
    - the policy's exempt tools, and any tool made exempt, are never refused;
    - a tool's volatile keys never change a verdict;
    - after one call, the next is refused exactly when it is the same call (only
      "not refused" for a rule that lets some repeats through), with every
      distinction the docs promise (``DISTINCTIONS``) among its fixed examples.
    """

    #: the rule under test
    policy: ClassVar[DuplicatePolicy] = DuplicatePolicy()
    #: the custom predicate (``rule="custom"``); ``None`` resolves ``policy.custom``
    predicate: ClassVar[DuplicatePredicate | None] = None
    #: whether an immediate repeat must be refused (``False`` for rules that allow some)
    refuses_repeats: ClassVar[bool] = True

    # --- the machinery the laws use -------------------------------------------------

    def new_state(self, policy: DuplicatePolicy | None = None) -> StateBuilder:
        """A live state under ``policy`` (default: the rule under test), after one user message."""
        b = StateBuilder()
        b.apply(ConversationStarted(conversation_id="laws", provider="laws", model="laws",
                                    max_turns=10**6, duplicate_policy=policy or self.policy))
        b.apply(UserMessage.of("go"))
        return b

    @staticmethod
    def record(b: StateBuilder, name: str, arguments: dict[str, Any]) -> None:
        """The model calls ``name(arguments)`` and the call runs."""
        turn = b.turn_count + 1
        b.apply(ModelRequested(turn=turn, digest="d", provider="laws", model="laws"))
        b.apply(ModelResponded(turn=turn, parts=(
            ToolCall(id=f"t{turn}", name=name, arguments=arguments),)))
        b.apply(ToolCompleted(call_id=f"t{turn}", name=name, success=True, content="ok"))

    def refuses(self, b: StateBuilder, name: str, arguments: dict[str, Any]) -> bool:
        """The loop's verdict on ``name(arguments)`` as the next call."""
        return check_duplicate(b.duplicate_policy, b, name, arguments, self.predicate)

    def _with(self, **changes: Any) -> DuplicatePolicy:
        return msgspec.structs.replace(self.policy, **changes)

    def _exempt(self, name: str) -> bool:
        return name in self.policy.exempt

    # --- the laws ------------------------------------------------------------------

    @_LAW
    @given(history=_HISTORY, name=_NAMES, args=argument_dicts(), data=st.data())
    def test_a_call_repeated_at_once_is_refused_in_any_form(self, history, name, args, data):
        b = self.new_state()
        for call in history:
            self.record(b, *call)
        self.record(b, name, args)
        same = data.draw(equivalent_forms(args), label="same call, written otherwise")
        if self.refuses_repeats and not self._exempt(name):
            assert self.refuses(b, name, args), f"a repeat of {name}({args!r}) was let through"
            assert self.refuses(b, name, same), f"{name}({same!r}) repeats {args!r}"

    @_LAW
    @given(history=_HISTORY, name=_NAMES, args=argument_dicts(), data=st.data())
    def test_a_call_unlike_every_earlier_one_is_never_refused(self, history, name, args, data):
        b = self.new_state()
        assert not self.refuses(b, name, args), "the first call was refused"
        volatile = self.policy.volatile.get(name, ())
        for call in history:
            self.record(b, *call)
        self.record(b, name, args)
        fresh = data.draw(changed_forms(args, keep=volatile), label="changed")
        seen = [a for n, a in history if n == name]
        if not any(same_arguments(fresh, a, ignore=volatile) for a in seen):
            assert not self.refuses(b, name, fresh), f"{name}({fresh!r}) was never called before"
        other_tool = "never_called_tool"
        assert not self.refuses(b, other_tool, args), "another tool's call was refused"

    @_LAW
    @given(history=_HISTORY, name=_NAMES, args=argument_dicts(), data=st.data())
    def test_key_order_number_form_and_unicode_form_never_change_a_verdict(
            self, history, name, args, data):
        plain, other = self.new_state(), self.new_state()
        calls = [*history, (name, args)] if data.draw(st.booleans(), label="probe ran") else history
        for call_name, call_args in calls:
            self.record(plain, call_name, call_args)
            self.record(other, call_name, data.draw(equivalent_forms(call_args)))
        same = data.draw(equivalent_forms(args), label="probe, written otherwise")
        verdict = self.refuses(plain, name, args)
        assert self.refuses(plain, name, same) == verdict
        assert self.refuses(other, name, args) == verdict
        assert self.refuses(other, name, same) == verdict

    @_LAW
    @given(earlier=argument_dicts(max_size=3, max_leaves=4),
           probe=argument_dicts(max_size=3, max_leaves=4))
    @_distinctions
    def test_after_one_call_the_next_is_refused_exactly_when_it_is_the_same(self, earlier, probe):
        names = [n for n in ("search", "add", "lookup") if not self._exempt(n)]
        if not names:  # every name is exempt: the exempt law covers it
            return
        name = names[0]
        b = self.new_state()
        self.record(b, name, earlier)
        same = same_arguments(probe, earlier, ignore=self.policy.volatile.get(name, ()))
        verdict = self.refuses(b, name, probe)
        if not same:
            assert not verdict, f"{name}({probe!r}) is another call than {name}({earlier!r})"
        elif self.refuses_repeats:
            assert verdict, f"{name}({probe!r}) repeats {name}({earlier!r})"

    @_LAW
    @given(history=_HISTORY, name=_NAMES, args=argument_dicts(), repeats=st.integers(1, 3))
    def test_exempt_tools_are_never_refused(self, history, name, args, repeats):
        b = self.new_state(self._with(exempt=(*self.policy.exempt, name)))
        for call in history:
            self.record(b, *call)
        for _ in range(repeats):
            self.record(b, name, args)
            assert not self.refuses(b, name, args), f"exempt tool {name!r} was refused"
        for exempt in self.policy.exempt:
            b = self.new_state()
            self.record(b, exempt, args)
            assert not self.refuses(b, exempt, args), f"exempt tool {exempt!r} was refused"

    @_LAW
    @given(history=_HISTORY, name=_NAMES, args=argument_dicts(), data=st.data())
    def test_volatile_keys_never_change_a_verdict(self, history, name, args, data):
        key = data.draw(st.sampled_from([*sorted(args), "\u2063volatile"]), label="volatile key")
        keys = (*self.policy.volatile.get(name, ()), key)
        b = self.new_state(self._with(volatile={**self.policy.volatile, name: keys}))
        for call in history:
            self.record(b, *call)
        self.record(b, name, args)
        verdict = self.refuses(b, name, args)
        noisy = {**args, key: data.draw(st.none() | st.integers() | st.text(), label="new value")}
        dropped = {k: v for k, v in args.items() if k != key}
        assert self.refuses(b, name, noisy) == verdict, f"volatile {key!r} changed the verdict"
        assert self.refuses(b, name, dropped) == verdict, f"volatile {key!r} changed the verdict"
        if self.refuses_repeats and not self._exempt(name):
            assert verdict
