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

from .errors import InvalidEventError

__all__ = ["canonical_bytes", "canonical_json", "canonical_value", "digest"]

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
            out[canonical_value(key)] = canonical_value(item)
        return out
    if isinstance(value, (list, tuple)):
        return [canonical_value(item) for item in value]
    raise InvalidEventError(f"{type(value).__name__} is not a JSON value")


def canonical_bytes(value: Any) -> bytes:
    """Canonical JSON of ``value`` as UTF-8 bytes (sorted keys, no spaces)."""
    return _encoder.encode(canonical_value(value))


def canonical_json(value: Any) -> str:
    """Canonical JSON of ``value`` as text."""
    return canonical_bytes(value).decode()


def digest(value: Any) -> str:
    """SHA-256 hex digest of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()
