"""Adversarial tool arguments and the equality rule they are judged by, for ``turnlog.testing``.

Apart from ``turnlog.testing`` so the duplicate-rule laws (``_laws``) can use them without
importing the kit that imports the laws. The strategies need ``hypothesis`` (imported on first
use, through ``replay.testing``).
"""

from __future__ import annotations

import unicodedata
from typing import Any

__all__ = [
    "CANONICAL_TWINS",
    "COMPATIBILITY_TWINS",
    "argument_dicts",
    "changed_forms",
    "equivalent_forms",
    "same_arguments",
    "texts",
]

#: Pairs written differently that NFC makes equal: a rule must treat them as the same text.
CANONICAL_TWINS = (
    ("\u00e9", "e\u0301"),              # é composed / e + combining acute
    ("\u00c5", "A\u030a"),              # Å composed / A + combining ring
    ("\u212b", "\u00c5"),               # ANGSTROM SIGN / Å (a singleton decomposition)
    ("\ud55c", "\u1112\u1161\u11ab"),   # Hangul syllable / its jamo
    ("\u1e69", "s\u0323\u0307"),        # ṩ / s + dot below + dot above (reordered marks)
)
#: Pairs only NFKC would merge: a rule must keep them apart (NFC, never NFKC).
COMPATIBILITY_TWINS = (
    ("\ufb01", "fi"),                   # ﬁ ligature / f i
    ("\uff11\uff12", "12"),             # full-width digits / 12
    ("\u00b2", "2"),                    # superscript two / 2
    ("\u2163", "IV"),                   # ROMAN NUMERAL FOUR / I V
    ("\u00a0", " "),                    # no-break space / space
    ("\uff41", "a"),                    # full-width a / a
)


def _st():
    from turnlog.replay.testing import _st as load

    return load()


def texts():
    """Text mixing ASCII, canonical twins (either form) and compatibility characters."""
    st = _st()
    pieces = [t for pair in CANONICAL_TWINS + COMPATIBILITY_TWINS for t in pair]
    return st.lists(st.sampled_from(pieces) | st.text(max_size=3), max_size=3).map("".join)


def _scalars():
    st = _st()
    return (st.none() | st.booleans() | st.sampled_from([0, 1, -1, 0.0, -0.0, 1.0, 2.5])
            | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False)
            | texts())


def _nfc_distinct(mapping: dict[str, Any]) -> bool:
    return len({unicodedata.normalize("NFC", k) for k in mapping}) == len(mapping)


def _json_values(max_leaves: int):
    st = _st()
    keys = st.sampled_from(["a", "b", "\u00e9", "e\u0301", "\ufb01", "fi"]) | texts()
    return st.recursive(
        _scalars(), lambda inner: st.lists(inner, max_size=3)
        | st.dictionaries(keys, inner, max_size=3).filter(_nfc_distinct),
        max_leaves=max_leaves)


def argument_dicts(max_size: int = 4, max_leaves: int = 8):
    """Tool arguments in adversarial forms (see the module docstring); always canonicalisable."""
    st = _st()
    keys = (st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True)
            | st.sampled_from(["caf\u00e9", "cafe\u0301", "\ufb01le", "file", "\uff11"]))
    return st.dictionaries(keys, _json_values(max_leaves), max_size=max_size).filter(_nfc_distinct)


def _retext(value: str, draw: Any) -> str:
    st = _st()
    form = draw(st.sampled_from(["NFC", "NFD", "as is"]))
    text = value if form == "as is" else unicodedata.normalize(form, value)
    for one, other in CANONICAL_TWINS:  # a singleton twin has no NFD spelling of its own
        if one in text and draw(st.booleans()):
            text = text.replace(one, other)
    return text


def _equivalent(value: Any, draw: Any) -> Any:
    st = _st()
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        if value == 0:
            return draw(st.sampled_from([0, 0.0, -0.0]))
        if float(value).is_integer() and abs(value) <= 2**53:
            return draw(st.sampled_from([int(value), float(value)]))
        return value
    if isinstance(value, str):
        return _retext(value, draw)
    if isinstance(value, list):
        return [_equivalent(item, draw) for item in value]
    items = [(_retext(k, draw), _equivalent(v, draw)) for k, v in value.items()]
    return dict(draw(st.permutations(items)))


def equivalent_forms(value: Any):
    """``value`` written another way that means the same: key order, number form, Unicode form."""
    st = _st()
    return st.composite(lambda draw: _equivalent(value, draw))()


def _leaf_change(value: Any, draw: Any) -> Any:
    """A value that differs from ``value`` under canonical comparison."""
    st = _st()
    options: list[Any] = [[value], {"v": value}]
    if isinstance(value, bool):
        options += [int(value), not value]
    elif isinstance(value, (int, float)):
        options.append(str(value))
        if value + 1 != value:
            options.append(value + 1)
        if value in (0, 1):
            options += [bool(value)] * 2  # true is not 1, false is not 0
    elif isinstance(value, str):
        options.append(value + "x")
        nfkc = unicodedata.normalize("NFKC", value)
        if nfkc != unicodedata.normalize("NFC", value):
            options += [nfkc] * 3  # only NFKC would call them equal
    elif value is None:
        options += [0, False, "", []]
    elif isinstance(value, list) and value != value[::-1]:
        options.append(value[::-1])  # list order matters
    return draw(st.sampled_from(options))


def _changed(value: Any, draw: Any) -> Any:
    st = _st()
    if isinstance(value, dict) and value:
        key = draw(st.sampled_from(sorted(value)))
        if draw(st.integers(0, 4)) == 0:  # drop the key
            return {k: v for k, v in value.items() if k != key}
        return {**value, key: _changed(value[key], draw)}
    if isinstance(value, list) and value and draw(st.booleans()):
        i = draw(st.integers(0, len(value) - 1))
        return [*value[:i], _changed(value[i], draw), *value[i + 1:]]
    return _leaf_change(value, draw)


def changed_forms(value: dict[str, Any], *, keep: tuple[str, ...] = ()):
    """``value`` with one change somewhere inside that makes it another call's arguments.

    Keys in ``keep`` (say, a tool's volatile keys) are never the ones changed;
    if nothing else is left to change, a new key is added.
    """
    st = _st()

    def build(draw: Any) -> dict[str, Any]:
        rest = {k: v for k, v in value.items() if k not in keep}
        if not rest or draw(st.integers(0, 5)) == 0:
            return {**value, "\u2063added": draw(st.sampled_from([None, 0, "x", []]))}
        out = {k: v for k, v in value.items() if k in keep}
        out.update(_changed(rest, draw))
        return out

    return st.composite(build)()


def same_arguments(a: Any, b: Any, *, ignore: tuple[str, ...] = ()) -> bool:
    """Whether two argument values are the same under turnlog's rule, by a naive walk.

    Written apart from ``engine.canonical`` (for naive models in tests): keys
    and text compare after NFC, numbers by value (``1 == 1.0``, ``-0.0 == 0``)
    but booleans only with booleans, lists item by item in order. Top-level
    keys in ``ignore`` are left out.
    """
    if ignore and isinstance(a, dict) and isinstance(b, dict):
        a = {k: v for k, v in a.items() if k not in ignore}
        b = {k: v for k, v in b.items() if k not in ignore}
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, str) and isinstance(b, str):
        return unicodedata.normalize("NFC", a) == unicodedata.normalize("NFC", b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_arguments(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        na = {unicodedata.normalize("NFC", k): v for k, v in a.items()}
        nb = {unicodedata.normalize("NFC", k): v for k, v in b.items()}
        return na.keys() == nb.keys() and all(same_arguments(na[k], nb[k]) for k in na)
    return a is None and b is None
