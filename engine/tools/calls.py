"""Where tool calls enter the engine: one neutral id per call, arguments that can be compared.

Providers repeat call ids: within one response (two calls both ``"x"``) and
across turns (servers that number calls from 0 every turn). The journal, the
reducer and replay answer calls by id, so a repeated id would collapse two
calls into one and leave one unanswered. ``assign_call_ids`` is the one rule,
used wherever calls enter (the loop, for every provider's response; the
transcript importers; external runners):

- a call whose id is not yet taken in the conversation keeps it;
- a repeated id becomes ``<id>_2``, ``<id>_3`` ... (the first free one), and
  the provider's id is kept as ``ToolCall.provider_id``: it is what the
  provider is sent back on the wire (``engine.providers._common.plan_history``);
- a call whose arguments cannot be compared (two keys that are the same key
  after Unicode normalisation, see ``engine.canonical``) is marked
  ``invalid``, so the loop refuses it as invalid arguments and tells the
  model, instead of one value being dropped::

    >>> from turnlog.engine.model.messages import ToolCall
    >>> parts = assign_call_ids((ToolCall(id="x", name="add"), ToolCall(id="x", name="add")))
    >>> [(p.id, p.provider_id) for p in parts]
    [('x', None), ('x_2', 'x')]
"""

from __future__ import annotations

from collections.abc import Container, Iterable

import msgspec

from turnlog.engine.model.canonical import canonical_value
from turnlog.engine.tools.duplicates import _flat_and_plain
from turnlog.engine.errors import InvalidEventError
from turnlog.engine.model.messages import Part, ToolCall

__all__ = ["assign_call_ids", "comparable_call"]


def comparable_call(call: ToolCall) -> ToolCall:
    """``call``, or ``call`` marked invalid (arguments empty) if its arguments have no canonical form."""
    if call.invalid is not None or not call.arguments or _flat_and_plain(call.arguments):
        return call  # flat ASCII keys and plain values: canonical as they are, nothing to check
    try:
        canonical_value(call.arguments)
    except InvalidEventError as exc:
        return msgspec.structs.replace(call, arguments={}, invalid=f"arguments are ambiguous: {exc}")
    return call


def assign_call_ids(parts: Iterable[Part], taken: Container[str] = ()) -> tuple[Part, ...]:
    """``parts`` with every tool call's id unique: not in ``taken``, nor repeated among them.

    ``taken`` holds the ids the conversation already used (the state's
    ``call_ids``); it is not modified. Other parts pass unchanged; see the
    module docstring for the rule.
    """
    out: list[Part] = []
    fresh: set[str] = set()
    for part in parts:
        if type(part) is ToolCall:
            part = comparable_call(part)
            if part.id in taken or part.id in fresh:
                n = 2
                while f"{part.id}_{n}" in taken or f"{part.id}_{n}" in fresh:
                    n += 1
                original = part.id if part.provider_id is None else part.provider_id
                part = msgspec.structs.replace(part, id=f"{part.id}_{n}", provider_id=original)
            fresh.add(part.id)
        out.append(part)
    return tuple(out)
