"""How tool calls are compared for duplicate detection.

Two calls are the same when their tool names are equal and their arguments
are equal in canonical form (``engine.canonical``: key order ignored, 1 == 1.0,
NFC-normalised strings, lists ordered), after dropping the tool's volatile
keys from the policy. The conversation state keeps an index from that key to
the ordinal of the last call that had it, so every check is O(1)::

    >>> p = DuplicatePolicy()
    >>> call_key("add", {"a": 1, "b": 2.0}, p) == call_key("add", {"b": 2, "a": 1.0}, p)
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from turnlog.engine._imports import import_object
from turnlog.engine.model.canonical import canonical_json
from turnlog.engine.errors import InvalidEventError
from turnlog.engine.model.events import DuplicatePolicy

__all__ = ["call_key", "check_duplicate", "is_duplicate", "register_predicate", "resolve_predicate"]

_sorted = msgspec.json.Encoder(order="sorted")
#: the value types whose sorted JSON is canonical as it is (strings: when ASCII)
_PLAIN = frozenset({str, int, bool, type(None)})


def _flat_and_plain(arguments: dict[str, Any]) -> bool:
    """Whether sorted JSON of ``arguments`` already is canonical (the common case, fast):
    every value a string, int, bool or null, every key a string, all of it ASCII (nothing
    to NFC-normalise; msgspec writes other characters as UTF-8, so one check of the JSON in
    C covers keys and values)."""
    if not _PLAIN.issuperset(map(type, arguments.values())):
        return False
    try:
        return _sorted.encode(arguments).isascii()
    except (TypeError, UnicodeEncodeError):  # a key that is no string; a lone surrogate
        return False


def call_key(name: str, arguments: dict[str, Any], policy: DuplicatePolicy | None = None,
             raw_arguments: str | None = None) -> str:
    """The comparison key of a call: "same tool, same canonical arguments", the one rule.

    Everything that asks whether two calls are the same asks this function:
    the duplicate policy, the idempotency key, deterministic replay's
    recorded tools and refusal verdicts, provider-swap matching and ``diff``.

    - ``policy`` given: its ``volatile`` keys for ``name`` are left out
      (``None``: every key counts);
    - a call whose arguments could not be parsed (``raw_arguments`` given, as
      for a ``ToolCall`` with ``invalid`` set) keys on its raw text, so it
      never matches a valid call, nor an unparsable call with other text;
    - arguments without a canonical form (not JSON, or two keys equal after
      Unicode normalisation) key on their ``repr``: never equal to a valid call.
    """
    if raw_arguments is not None:
        return f"{name}\x01{raw_arguments}"
    volatile = policy.volatile.get(name) if policy is not None else None
    if volatile:
        arguments = {k: v for k, v in arguments.items() if k not in volatile}
    if _flat_and_plain(arguments):
        return f"{name}\x00{_sorted.encode(arguments).decode()}"
    try:
        return f"{name}\x00{canonical_json(arguments)}"
    except InvalidEventError:
        return f"{name}\x02{arguments!r}"


def is_duplicate(policy: DuplicatePolicy, index: dict[str, int], call_count: int,
                 name: str, arguments: dict[str, Any]) -> bool:
    """Whether the built-in ``policy`` refuses this call, given the state's call index.

    ``index`` maps call keys to the ordinal (0-based) of the last call with
    that key; ``call_count`` is how many calls came before this one. The
    ``custom`` and ``off`` rules answer ``False`` here (the loop runs custom
    predicates itself).
    """
    if policy.rule in ("off", "custom") or name in policy.exempt:
        return False
    last = index.get(call_key(name, arguments, policy))
    if last is None:
        return False
    if policy.rule == "previous":
        return last == call_count - 1
    if policy.rule == "window":
        return call_count - last <= policy.window
    return True  # anywhere


#: ``predicate(name, arguments, state) -> bool``: ``True`` refuses the call. ``state`` is the
#: live ``StateBuilder`` (its ``call_index``/``call_count``/``message_list``); read it, never write.
DuplicatePredicate = Callable[[str, dict[str, Any], Any], bool]
_PREDICATES: dict[str, DuplicatePredicate] = {}


def register_predicate(name: str, predicate: DuplicatePredicate) -> None:
    """Make ``predicate`` available to ``DuplicatePolicy(rule="custom", custom=name)``."""
    _PREDICATES[name] = predicate


def resolve_predicate(ref: str) -> DuplicatePredicate:
    """The predicate registered as ``ref``, or imported from ``module:attr``.

    Raises ``InvalidEventError`` naming ``ref`` when neither finds a callable.
    """
    if ref in _PREDICATES:
        return _PREDICATES[ref]
    module, _, attr = ref.partition(":")
    try:
        fn = import_object(module, attr) if attr else None
    except (ImportError, AttributeError):
        fn = None
    if not callable(fn):
        raise InvalidEventError(f"duplicate predicate {ref!r} is neither registered nor an "
                                "importable module:attr callable")
    return fn


def check_duplicate(policy: DuplicatePolicy, state: Any, name: str, arguments: dict[str, Any],
                    predicate: DuplicatePredicate | None = None) -> bool:
    """Whether ``policy`` refuses this call as the next one: built-in rules or the custom predicate.

    Exempt tools are never refused. For ``rule="custom"`` the predicate
    (``predicate``, else ``policy.custom`` resolved) decides.
    """
    if name in policy.exempt:
        return False
    if policy.rule == "custom":
        fn = predicate or resolve_predicate(policy.custom or "")
        volatile = policy.volatile.get(name)
        if volatile:
            arguments = {k: v for k, v in arguments.items() if k not in volatile}
        return bool(fn(name, arguments, state))
    return is_duplicate(policy, state.call_index, state.call_count, name, arguments)
