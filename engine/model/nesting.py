"""One nesting limit for JSON from outside, checked at every boundary where it enters.

Python walks nested data by recursion (``json``, canonical JSON, Unicode
repair, rendering), so data nested a few hundred levels deep would end in a
``RecursionError`` somewhere inside turnlog. No real transcript, script,
response or tool result comes close to :data:`MAX_DEPTH`; deeper data is
refused where it enters, with a typed error naming where, before anything is
written:

- provider response bodies (``providers._redact.read_body``) and every
  adapter's ``map_response`` (``MalformedResponseError``), and tool-call
  arguments parsed from text (``parse_arguments``: the call is invalid);
- imported transcripts (``formats.importer``: ``NestingError``);
- the scripted provider's script (``NestingError``);
- tool results (the call fails: ``result nests deeper than …``) and
  ``turnlog approve --arguments``.

:func:`check_depth` walks iteratively (depth costs no stack) and
:func:`load_json` parses text under the same limit.

>>> check_depth({"a": [[1]]}, "x")
>>> check_depth([[["deep"]]], "script", limit=2)
Traceback (most recent call last):
...
turnlog.engine.errors.NestingError: script[0][0] nests deeper than 2 levels
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from turnlog.engine.errors import NestingError

__all__ = ["MAX_DEPTH", "check_depth", "load_json", "too_deep"]

#: How deep JSON from outside may nest: objects and arrays inside one another.
MAX_DEPTH = 200
#: how many keys and indexes of a too-deep branch its message shows
_SHOWN = 4
#: what nests: JSON objects and arrays (tuples too, as msgspec gives arrays)
_NESTED = (dict, list, tuple)


def too_deep(where: str, limit: int = MAX_DEPTH) -> str:
    """The one message for data nested past ``limit``: ``WHERE nests deeper than N levels``."""
    return f"{where} nests deeper than {limit} levels"


def check_depth(value: Any, where: str, *, limit: int = MAX_DEPTH,
                error: Callable[[str], Exception] = NestingError) -> None:
    """Raise ``error(message)`` if ``value`` nests objects/arrays deeper than ``limit``.

    The message names where the too-deep branch starts (``where`` and its
    first :data:`_SHOWN` keys and indexes, then ``…``). Iterative: any depth is
    checked without recursion.
    """
    if not isinstance(value, _NESTED):
        return
    stack: list[tuple[Any, int, str]] = [(value, 0, where)]
    push = stack.append
    while stack:  # only containers are pushed, and a branch is named only as deep as shown
        item, depth, at = stack.pop()
        if depth >= limit:
            raise error(too_deep(at + ("…" if depth > _SHOWN else ""), limit))
        named, depth = depth < _SHOWN, depth + 1
        if isinstance(item, dict):
            for key, child in item.items():
                if isinstance(child, _NESTED):
                    push((child, depth, f"{at}.{key}" if named else at))
        else:
            for index, child in enumerate(item):
                if isinstance(child, _NESTED):
                    push((child, depth, f"{at}[{index}]" if named else at))


def load_json(text: str | bytes, where: str, *, limit: int = MAX_DEPTH,
              error: Callable[[str], Exception] = NestingError, **options: Any) -> Any:
    """``json.loads(text, **options)`` refused past ``limit`` levels with ``error``.

    Text nested too deep even to parse is refused the same way (naming only
    ``where``); other ``ValueError``\\ s (not JSON) propagate for the caller.
    """
    try:
        value = json.loads(text, **options)
    except RecursionError:
        raise error(too_deep(where, limit)) from None
    check_depth(value, where, limit=limit, error=error)
    return value
