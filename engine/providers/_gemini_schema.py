"""JSON Schema → the OpenAPI subset Gemini's ``FunctionDeclaration.parameters`` accepts.

Gemini's ``Schema`` is "a select subset of an OpenAPI 3.0 schema object"
(generativelanguage v1beta). The real API answers HTTP 400 to:

- a key outside the subset (``$schema``, ``$ref``, ``$defs``,
  ``additionalProperties``, ``const``, ``oneOf``, ``allOf``,
  ``exclusiveMinimum``, ``propertyNames`` ...): "Unknown name ... Cannot find field";
- a ``type`` list (``["string", "null"]``): "Proto field is not repeating";
- an OBJECT without properties: "properties: should be non-empty for OBJECT type";
- an ARRAY without ``items``: "items: missing field";
- a ``required`` name that is not a property: "property is not defined";
- non-string ``enum`` values, and string formats other than ``enum`` and ``date-time``.

``gemini_schema`` rewrites a tool's JSON Schema so none of these happen,
keeping the meaning where the subset can say it: local ``$ref``s are inlined
(a recursive one becomes a string schema), ``const`` becomes a one-value
``enum``, ``oneOf`` becomes ``anyOf``, a one-schema ``allOf`` is inlined, a
type list with ``"null"`` becomes ``nullable`` (several types become
``anyOf``), non-string enums and unknown formats move into the description,
``required`` keeps only declared properties, an array without ``items``
gets string items, and a nested object without properties becomes a string
described as JSON object text. Keys are kept only from ``KEPT``. A tool
whose parameters are an object without properties gets no ``parameters`` at
all (``parameters_for``).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["KEPT", "gemini_schema", "parameters_for"]

#: the Schema fields turnlog sends (``default``, ``example`` and ``title`` are dropped:
#: older API versions refused them and they do not constrain the call)
KEPT = frozenset({"type", "format", "description", "nullable", "enum", "properties", "required",
                  "items", "minItems", "maxItems", "minimum", "maximum", "minLength",
                  "maxLength", "minProperties", "maxProperties", "pattern", "anyOf",
                  "propertyOrdering"})
_FORMATS = {"string": {"enum", "date-time"}, "number": {"float", "double"},
            "integer": {"int32", "int64"}}
_TYPES = {"string", "number", "integer", "boolean", "array", "object"}
_MAX_DEPTH = 32


def parameters_for(schema: Any) -> dict[str, Any] | None:
    """A tool's ``parameters`` for Gemini, or ``None`` when it takes no arguments.

    >>> parameters_for({"type": "object", "properties": {}}) is None
    True
    >>> parameters_for({"type": "object", "properties": {"a": {"type": "integer"}},
    ...                 "required": ["a", "ghost"], "additionalProperties": False})
    {'type': 'object', 'properties': {'a': {'type': 'integer'}}, 'required': ['a']}
    """
    if not isinstance(schema, dict):
        return None
    mapped = gemini_schema(schema)
    return mapped if mapped.get("type") == "object" and mapped.get("properties") else None


def gemini_schema(schema: Any, *, _root: Any = None, _seen: tuple[str, ...] = (),
                  _depth: int = 0) -> dict[str, Any]:
    """``schema`` in Gemini's subset (see the module doc for every rewrite).

    >>> gemini_schema({"type": ["string", "null"], "const": "a", "additionalProperties": False})
    {'type': 'string', 'nullable': True, 'enum': ['a']}
    """
    root = schema if _root is None else _root
    if not isinstance(schema, dict) or _depth > _MAX_DEPTH:
        return {"type": "string"}
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _resolve(root, ref)
        if target is None or ref in _seen:  # unknown or recursive: described, not expanded
            return _described({"type": "string"}, schema.get("description"), f"JSON for {ref}")
        merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return gemini_schema(merged, _root=root, _seen=(*_seen, ref), _depth=_depth + 1)
    sub = lambda s: gemini_schema(s, _root=root, _seen=_seen, _depth=_depth + 1)  # noqa: E731
    schema = _inline_all_of(schema)
    out: dict[str, Any] = {}
    notes: list[str] = []
    kind = schema.get("type")
    nullable = schema.get("nullable") is True
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        nullable = nullable or "null" in kind
        if len(kinds) > 1:
            out["anyOf"] = [sub({**schema, "type": k}) for k in kinds]
            if nullable:
                out["nullable"] = True
            return _described(out, schema.get("description"))
        kind = kinds[0] if kinds else "string"
    if kind == "null":
        kind, nullable = "string", True
    if kind is None and isinstance(schema.get("properties"), dict):
        kind = "object"
    if kind is None and isinstance(schema.get("const"), str):
        kind = "string"
    if isinstance(kind, str) and kind.lower() in _TYPES:
        out["type"] = kind = kind.lower()
    if nullable:
        out["nullable"] = True
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            out["properties"] = {str(name): sub(s) for name, s in value.items()}
        elif key == "items":
            out["items"] = sub(value if isinstance(value, dict) else {})
        elif key in ("anyOf", "oneOf") and isinstance(value, list):
            out["anyOf"] = [sub(s) for s in value]
        elif key == "const":
            out["enum"] = [value]
        elif key in KEPT and key not in ("type", "nullable") and key not in out:
            out[key] = value
    _fix_enum(out, notes)
    _fix_format(out, kind, notes)
    _fix_object(out, kind)
    if kind == "array" and "items" not in out:
        out["items"] = {"type": "string"}
    if kind == "object" and "properties" not in out and _depth > 0:
        # a free-form object has no Gemini schema: the model sends it as JSON text
        out = {"type": "string", **({"nullable": True} if nullable else {})}
        notes.append("(a JSON object, as text)")
    return _described(out, out.pop("description", schema.get("description")), *notes)


def _resolve(root: Any, ref: str) -> dict[str, Any] | None:
    if not ref.startswith("#"):
        return None
    node = root
    for part in ref.lstrip("#").strip("/").split("/") if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def _inline_all_of(schema: dict[str, Any]) -> dict[str, Any]:
    parts = schema.get("allOf")
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        return schema
    merged = {k: v for k, v in schema.items() if k != "allOf"}
    for part in parts:
        for key, value in part.items():
            if key == "properties" and isinstance(value, dict):
                merged["properties"] = {**merged.get("properties", {}), **value}
            elif key == "required" and isinstance(value, list):
                merged["required"] = [*merged.get("required", []), *value]
            else:
                merged.setdefault(key, value)
    return merged


def _fix_enum(out: dict[str, Any], notes: list[str]) -> None:
    values = out.get("enum")
    if values is None:
        return
    if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
        return
    del out["enum"]
    if isinstance(values, list) and values:
        notes.append("one of: " + ", ".join(json.dumps(v, ensure_ascii=False) for v in values))


def _fix_format(out: dict[str, Any], kind: Any, notes: list[str]) -> None:
    fmt = out.get("format")
    if fmt is not None and fmt not in _FORMATS.get(kind, set()):
        del out["format"]
        notes.append(f"format: {fmt}")


def _fix_object(out: dict[str, Any], kind: Any) -> None:
    props = out.get("properties") or {}
    if kind != "object" or not props:
        for key in ("properties", "required", "propertyOrdering"):
            out.pop(key, None)
        return
    required = out.get("required")
    if required is not None:
        kept = [r for r in required if isinstance(r, str) and r in props] \
            if isinstance(required, list) else []
        if kept:
            out["required"] = list(dict.fromkeys(kept))
        else:
            del out["required"]
    ordering = out.get("propertyOrdering")
    if ordering is not None and (not isinstance(ordering, list)
                                 or sorted(map(str, ordering)) != sorted(props)):
        del out["propertyOrdering"]


def _described(out: dict[str, Any], description: Any, *notes: str) -> dict[str, Any]:
    text = " ".join(t for t in (description if isinstance(description, str) else "", *notes) if t)
    if text:
        out["description"] = text
    return out
