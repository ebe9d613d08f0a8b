"""Property-test kit for turnlog users: adversarial strategies, duplicate-rule laws, replay plugin.

Strategies (need ``hypothesis``; without it they raise an ``ImportError``
saying how to install it):

- ``argument_dicts()``: tool arguments in the forms that trip comparisons up:
  non-ASCII keys and values at every depth (composed and decomposed accents,
  compatibility characters such as ``"ﬁ"`` and full-width digits), integral
  floats, ``-0.0``, booleans beside ``0``/``1``, nested lists and objects;
- ``equivalent_forms(value)``: the same arguments written another way (keys
  reordered at every depth, strings in another Unicode normal form, ``1`` as
  ``1.0``, ``0`` as ``-0.0``): a rule must treat them as the same call;
- ``changed_forms(value)``: arguments that differ in one place (a value
  replaced, NFKC applied where it changes the text, ``true`` for ``1`` ...):
  a rule must treat them as another call;
- ``tool_calls``, ``tool_call_lists``, ``arguments``, ``json_values``,
  ``identifiers``, ``events`` and ``conversations`` (valid event histories),
  as ``replay.testing`` has them.

``DuplicateRuleLaws`` is a test class to subclass with your own
``DuplicatePolicy`` (and ``predicate`` for ``rule="custom"``); pytest then runs
the laws every duplicate rule must satisfy against it (see
``docs/property-testing.md``)::

    class TestMyRule(DuplicateRuleLaws):
        policy = DuplicatePolicy(rule="window", window=3, volatile={"search": ("nonce",)})

``JournalContract`` is the journal's contract as a test class: subclass it with an
``open_journal(folder, clock)`` that opens a fresh journal of your backend and pytest
runs every clause of ``JournalProtocol`` on it (see ``docs/journal-backends.md``).

The replay plugin (``pytest_plugins = ["turnlog.testing"]``) turns each
conversation of the journals given with ``--turnlog-journal`` into a test; the
``turnlog_conversation`` fixture's ``assert_replays()`` re-runs it.
"""

from __future__ import annotations

from typing import Any

from turnlog.replay.testing import (
    RecordedConversation,
    arguments,
    conversations,
    events,
    identifiers,
    json_values,
    pytest_addoption,
    pytest_generate_tests,
    replay_cases,
    tool_call_lists,
    tool_calls,
)

from ._arguments import (
    CANONICAL_TWINS,
    COMPATIBILITY_TWINS,
    argument_dicts,
    changed_forms,
    equivalent_forms,
    same_arguments,
    texts,
)

__all__ = [
    "CANONICAL_TWINS",
    "COMPATIBILITY_TWINS",
    "DuplicateRuleLaws",
    "JournalContract",
    "RecordedConversation",
    "argument_dicts",
    "arguments",
    "changed_forms",
    "conversations",
    "equivalent_forms",
    "events",
    "identifiers",
    "json_values",
    "pytest_addoption",
    "pytest_generate_tests",
    "replay_cases",
    "same_arguments",
    "texts",
    "tool_call_lists",
    "tool_calls",
]

def __getattr__(name: str) -> Any:
    if name == "DuplicateRuleLaws":  # needs hypothesis and pytest: imported on first use
        from ._laws import DuplicateRuleLaws

        return DuplicateRuleLaws
    if name == "JournalContract":  # needs pytest: imported on first use
        from ._contract import JournalContract

        return JournalContract
    raise AttributeError(f"module 'turnlog.testing' has no attribute {name!r}")
