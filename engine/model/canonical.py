"""Canonical JSON: one byte string per meaning, so hashes and comparisons are stable.

How values compare (the rule duplicate detection and replay matching use):

- **Key order never matters**: object keys are sorted (by code point, after
  normalisation).
- **Numbers compare by value**: ``1`` and ``1.0`` are the same argument (an
  integral float becomes an int; ``-0.0`` becomes ``0``). Booleans are not
  numbers: ``true`` differs from ``1``. NaN and infinities are not JSON and
  are refused.
- **Unicode is NFC-normalised** in keys and string values, so ``"é"`` typed as
  one code point or as ``e`` + combining accent is the same argument. No case
  folding and no whitespace trimming: ``"Paris"`` and ``"paris "`` differ.
  Two keys of one object that normalise to the same key (``"e\\u0301"`` and
  ``"é"``) are refused with ``InvalidEventError`` naming both: merging them
  would silently drop one value.
- **Nesting** is canonicalised recursively; list order matters (``[1, 2]`` is
  not ``[2, 1]``); ``null`` is a value (``{"a": null}`` differs from ``{}``).

>>> canonical_json({"b": 1.0, "a": "x"})
'{"a":"x","b":1}'
>>> canonical_json({"a": 1}) == canonical_json({"a": 1.0})
True
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from typing import Any

import msgspec

from turnlog.engine.errors import InvalidEventError
from .nesting import too_deep

__all__ = ["REPLACEMENT", "canonical_bytes", "canonical_json", "canonical_value", "digest",
           "valid_unicode"]

_encoder = msgspec.json.Encoder(order="sorted")


def canonical_value(value: Any) -> Any:
    """``value`` rewritten into its canonical form (see the module docstring)."""
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value) if not value.isascii() else value
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidEventError(f"{value!r} is not a JSON number")
        return int(value) if value.is_integer() else value
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidEventError(f"object key {key!r} is not a string")
            norm = canonical_value(key)
            if norm in out:
                other = next(k for k in value if k != key and canonical_value(k) == norm)
                raise InvalidEventError(
                    f"object keys {ascii(other)} and {ascii(key)} are the same key after Unicode "
                    "normalisation (NFC); rename one of them")
            out[norm] = canonical_value(item)
        return out
    if isinstance(value, (list, tuple)):
        return [canonical_value(item) for item in value]
    raise InvalidEventError(f"{type(value).__name__} is not a JSON value")


def canonical_bytes(value: Any) -> bytes:
    """Canonical JSON of ``value`` as UTF-8 bytes (sorted keys, no spaces).

    Text that is not valid Unicode (a lone surrogate) raises ``InvalidEventError``.
    """
    try:
        return _encoder.encode(canonical_value(value))
    except UnicodeEncodeError:
        raise InvalidEventError("text holds invalid Unicode (a lone surrogate)") from None
    except RecursionError:  # data that skipped the boundaries' check (engine.nesting)
        raise InvalidEventError(too_deep("the value")) from None


def canonical_json(value: Any) -> str:
    """Canonical JSON of ``value`` as text."""
    return canonical_bytes(value).decode()


def digest(value: Any) -> str:
    """SHA-256 hex digest of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


#: What invalid Unicode (a lone surrogate) is replaced with: U+FFFD REPLACEMENT CHARACTER.
REPLACEMENT = "\ufffd"


def valid_unicode(value: Any) -> tuple[Any, bool]:
    """``(value, replaced)``: ``value`` with every lone surrogate replaced by U+FFFD.

    turnlog's one policy for invalid Unicode. A string holding a lone
    surrogate (``"\\udd20"``: legal in a Python ``str`` and in JSON escapes,
    but not encodable as UTF-8) cannot be stored, hashed or sent to a
    provider. Refusing it would fail a whole model turn or tool result for
    one unreadable character that the sender, not the user, produced, and
    would leave nothing to inspect; so at every boundary where outside text
    enters (imported transcripts, provider responses, tool results, user
    prompts) each such code point is replaced with U+FFFD and the event
    records that it was (``Event.replaced``), so the record stays honest
    about what arrived. Valid text, including valid surrogate *pairs* decoded
    by JSON, is returned as it is (the same object), and the walk covers
    nested lists, tuples, dicts (keys too) and msgspec structs::

        >>> valid_unicode({"a": "x\\udd20"})
        ({'a': 'x\ufffd'}, True)
        >>> valid_unicode(["fine"])
        (['fine'], False)
    """
    if isinstance(value, str):
        if value.isascii():
            return value, False
        try:
            value.encode()
        except UnicodeEncodeError:
            # UTF-16 joins a pair split into two code points and marks each lone one once
            fixed = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
            return fixed, True
        return value, False
    if isinstance(value, dict):
        out, changed = {}, False
        for key, item in value.items():
            k, ck = valid_unicode(key)
            v, cv = valid_unicode(item)
            out[k] = v
            changed = changed or ck or cv
        return (out, True) if changed else (value, False)
    if isinstance(value, (list, tuple)):
        items, changed = [], False
        for item in value:
            v, c = valid_unicode(item)
            items.append(v)
            changed = changed or c
        if not changed:
            return value, False
        return (tuple(items) if isinstance(value, tuple) else items), True
    if isinstance(value, msgspec.Struct):
        updates = {}
        for name in value.__struct_fields__:
            v, c = valid_unicode(getattr(value, name))
            if c:
                updates[name] = v
        return (msgspec.structs.replace(value, **updates), True) if updates else (value, False)
    return value, False
