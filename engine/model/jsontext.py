"""JSON text as Python's ``json`` writes it (``ensure_ascii=False``), written by msgspec.

``json.dumps`` with ``indent`` runs in Python, one value at a time (``turnlog show
--json`` of a 100,000-event conversation spent most of its seconds there). msgspec
writes the same text for every JSON value but floats (``json`` writes ``1e-05`` and
``1e+16``, msgspec ``0.00001`` and ``1e16``). So data meant to be written again is
read by :func:`loads` with ``exact_floats``, which keeps its floats as
:class:`ExactFloat`, and :func:`indented` writes those with ``float.__repr__``,
as ``json`` does: the text is byte for byte ``json.dumps(data, ensure_ascii=False,
indent=2)``.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

__all__ = ["ExactFloat", "indented", "loads"]


class ExactFloat(float):
    """A float read by :func:`loads` with ``exact_floats``: :func:`indented` writes it as
    ``json`` writes a float."""

    __slots__ = ()


_plain = msgspec.json.Decoder()
_exact = msgspec.json.Decoder(float_hook=ExactFloat)
#: ``json.loads``' own hooks for what msgspec does not read (``NaN``, ``Infinity``)
_JSON_EXACT: dict[str, Any] = {"parse_float": ExactFloat, "parse_constant": ExactFloat}


def loads(text: str | bytes, *, exact_floats: bool = False) -> Any:
    """``json.loads(text)``: the same values, parsed by msgspec where it parses the text,
    by ``json`` otherwise (lone surrogates' escapes, ``NaN``); ``ValueError`` (as ``json``
    raises it) for text that is not JSON. With ``exact_floats`` every float is an
    :class:`ExactFloat`, for :func:`indented`.

    >>> loads('{"a": [1, 1e-05]}')
    {'a': [1, 1e-05]}
    """
    try:
        return (_exact if exact_floats else _plain).decode(text)
    except msgspec.DecodeError:
        return json.loads(text, **(_JSON_EXACT if exact_floats else {}))


def _float_text(value: Any) -> msgspec.Raw:
    if type(value) is ExactFloat:
        return msgspec.Raw(float.__repr__(value).encode())
    raise TypeError(f"{type(value).__name__} is not JSON data")


_encoder = msgspec.json.Encoder(enc_hook=_float_text)


def indented(data: Any) -> str:
    """``json.dumps(data, ensure_ascii=False, indent=2)``, byte for byte, for ``data`` of
    JSON values whose every float is an :class:`ExactFloat` (:func:`loads`); a plain float
    would be written as msgspec writes it. What msgspec cannot write as ``json`` does is
    written by ``json``: non-finite floats (``NaN``, ``Infinity``), lone surrogates.

    >>> print(indented(loads('{"a": [1e16, "é"], "b": {}}', exact_floats=True)))
    {
      "a": [
        1e+16,
        "é"
      ],
      "b": {}
    }
    """
    try:
        return msgspec.json.format(_encoder.encode(data), indent=2).decode()
    except (msgspec.DecodeError, UnicodeEncodeError):
        # "inf" and "nan" (json writes NaN and Infinity), lone surrogates (json keeps them)
        return json.dumps(data, ensure_ascii=False, indent=2)
