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

from typing import Any

import msgspec

from .canonical import canonical_json
from .errors import InvalidEventError
from .events import DuplicatePolicy

__all__ = ["call_key", "is_duplicate"]

_sorted = msgspec.json.Encoder(order="sorted")
_PLAIN = (int, bool, type(None))


def _flat_and_plain(arguments: dict[str, Any]) -> bool:
    """Whether sorted JSON of ``arguments`` already is canonical (the common case, fast)."""
    for key, value in arguments.items():
        if not key.isascii():
            return False
        kind = type(value)
        if kind is str:
            if not value.isascii():
                return False
        elif kind not in _PLAIN:
            return False
    return True


def call_key(name: str, arguments: dict[str, Any], policy: DuplicatePolicy,
             raw_arguments: str | None = None) -> str:
    """The comparison key of a call: its name and canonical arguments minus volatile keys.

    A call whose arguments could not be parsed (``raw_arguments`` given) keys
    on its raw text, so it never matches a valid call.
    """
    if raw_arguments is not None:
        return f"{name}\x01{raw_arguments}"
    volatile = policy.volatile.get(name)
    if volatile:
        arguments = {k: v for k, v in arguments.items() if k not in volatile}
    if _flat_and_plain(arguments):
        return f"{name}\x00{_sorted.encode(arguments).decode()}"
    try:
        return f"{name}\x00{canonical_json(arguments)}"
    except InvalidEventError:
        return f"{name}\x01{arguments!r}"


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
