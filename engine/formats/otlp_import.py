"""OTLP/JSON traces in: the conversation a trace's GenAI spans carry, as transcript entries.

``turnlog import trace.json`` reads an OTLP/JSON ``ExportTraceServiceRequest``
(``{"resourceSpans": [...]}``, as ``turnlog export --format otlp --content``,
Phoenix or Langfuse export it, or a collector's file exporter writes it) when
its spans carry messages. The conversation is the last model call's: its
input messages, then its output messages — the whole history as the model
last saw it. Read, in this order of preference, from:

- the GenAI conventions' ``gen_ai.input.messages`` / ``gen_ai.output.messages``
  (JSON text or structured values) and ``gen_ai.system_instructions``;
- the older flattened ``gen_ai.prompt.N.role``/``.content`` and
  ``gen_ai.completion.N.role``/``.content`` (OpenLLMetry, Langfuse);
- OpenInference's ``llm.input_messages.N.message.role``/``.content`` and
  ``llm.output_messages.N...`` (Phoenix), with their tool calls.

Either generation of the GenAI conventions (semantic-conventions v1.41.0,
semantic-conventions-genai v0.1.0: ``--semconv`` on export) reads the same:
they name the message attributes alike. The model is
``gen_ai.response.model``, else ``gen_ai.request.model``, else
OpenInference's ``llm.model_name``.

The messages become OpenAI Chat Completions entries, read by the importer
as usual. A document with no spans carrying messages, or several traces
that do, is refused with a ``FormatError`` saying so.

    >>> doc = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "t", "name": "chat m",
    ...     "startTimeUnixNano": "1", "attributes": [
    ...     {"key": "gen_ai.input.messages", "value": {"stringValue":
    ...      '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]'}},
    ...     {"key": "gen_ai.output.messages", "value": {"stringValue":
    ...      '[{"role": "assistant", "parts": [{"type": "text", "content": "hello"}]}]'}}]}]}]}]}
    >>> otlp_transcript(doc)
    ([{'role': 'user', 'content': 'hi'}, {'role': 'assistant', 'content': 'hello'}], {})
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..errors import FormatError

__all__ = ["is_otlp", "otlp_transcript"]

_FLAT = re.compile(r"^(gen_ai\.prompt|gen_ai\.completion|llm\.input_messages|llm\.output_messages)"
                   r"\.(\d+)\.(.+)$")


def is_otlp(doc: Any) -> bool:
    """Whether ``doc`` is an OTLP/JSON traces document."""
    return isinstance(doc, dict) and isinstance(doc.get("resourceSpans"), list)


def _value(value: Any) -> Any:
    if not isinstance(value, dict) or len(value) != 1:
        return value
    ((kind, inner),) = value.items()
    if kind == "arrayValue":
        return [_value(v) for v in (inner or {}).get("values", [])]
    if kind == "kvlistValue":
        return {kv.get("key"): _value(kv.get("value")) for kv in (inner or {}).get("values", [])}
    if kind == "intValue":
        return int(inner)
    return inner


def _spans(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for rs in doc["resourceSpans"]:
        for scope in (rs or {}).get("scopeSpans") or (rs or {}).get("instrumentationLibrarySpans") or []:
            for span in (scope or {}).get("spans") or []:
                if isinstance(span, dict):
                    out.append(span)
    return out


def _attributes(span: dict[str, Any]) -> dict[str, Any]:
    return {a.get("key"): _value(a.get("value")) for a in span.get("attributes") or []
            if isinstance(a, dict)}


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _flat_messages(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.N.…`` attributes as conventions-shaped messages (role, parts)."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        m = _FLAT.match(key)
        if m and m.group(1) == prefix:
            found.setdefault(int(m.group(2)), {})[m.group(3).removeprefix("message.")] = value
    messages = []
    for _, fields in sorted(found.items()):
        parts: list[dict[str, Any]] = []
        if fields.get("content"):
            parts.append({"type": "text", "content": str(fields["content"])})
        calls: dict[int, dict[str, Any]] = {}
        for key, value in fields.items():
            m = re.match(r"^tool_calls\.(\d+)\.(?:tool_call\.)?(.+)$", key)
            if m:
                calls.setdefault(int(m.group(1)), {})[m.group(2)] = value
        for _, call in sorted(calls.items()):
            arguments = _json(call.get("function.arguments", call.get("arguments", "{}")))
            parts.append({"type": "tool_call", "id": call.get("id"),
                          "name": call.get("function.name", call.get("name", "")),
                          "arguments": arguments if isinstance(arguments, dict) else {}})
        role = str(fields.get("role", "user"))
        if role == "tool":
            parts = [{"type": "tool_call_response", "id": fields.get("tool_call_id"),
                      "response": fields.get("content", "")}]
        messages.append({"role": role, "parts": parts})
    return messages


def _messages(attrs: dict[str, Any]) -> tuple[list[Any], list[Any], list[Any]] | None:
    """(system instructions, input, output) messages a span carries, or ``None``."""
    inputs, outputs = _json(attrs.get("gen_ai.input.messages")), _json(
        attrs.get("gen_ai.output.messages"))
    if isinstance(inputs, list) or isinstance(outputs, list):
        system = _json(attrs.get("gen_ai.system_instructions"))
        return (system if isinstance(system, list) else [], inputs if isinstance(inputs, list)
                else [], outputs if isinstance(outputs, list) else [])
    for into, out in (("gen_ai.prompt", "gen_ai.completion"),
                      ("llm.input_messages", "llm.output_messages")):
        inputs, outputs = _flat_messages(attrs, into), _flat_messages(attrs, out)
        if inputs or outputs:
            return [], inputs, outputs
    return None


def _text(parts: list[Any]) -> str:
    return "".join(str(p.get("content", "")) for p in parts
                   if isinstance(p, dict) and p.get("type") == "text")


def _openai(message: Any, where: str) -> dict[str, Any]:
    """A conventions message (role, parts) as an OpenAI Chat Completions message."""
    if not isinstance(message, dict) or not isinstance(message.get("parts", []), list):
        raise FormatError(f"{where}: not a message with role and parts: {str(message)[:120]}")
    role = message.get("role") or "user"
    parts = message.get("parts") or []
    if "parts" not in message and "content" in message:  # older shape: role + content
        parts = [{"type": "text", "content": message["content"]}]
    if role == "tool":
        (response,) = [p for p in parts if isinstance(p, dict)] or [{}]
        content = response.get("response", response.get("result", response.get("content", "")))
        return {"role": "tool", "tool_call_id": str(response.get("id") or ""),
                "content": content if isinstance(content, str) else json.dumps(content)}
    out: dict[str, Any] = {"role": role, "content": _text(parts)}
    calls = [p for p in parts if isinstance(p, dict) and p.get("type") == "tool_call"]
    if calls:
        out["tool_calls"] = [{"id": str(c.get("id") or f"call_{i}"), "type": "function",
                              "function": {"name": str(c.get("name", "")),
                                           "arguments": json.dumps(c.get("arguments") or {},
                                                             separators=(",", ":"))}}
                             for i, c in enumerate(calls, 1)]
        if not out["content"]:
            out["content"] = None
    return out


def otlp_transcript(doc: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """``(entries, envelope)`` of an OTLP/JSON traces document (see the module doc)."""
    carrying: dict[str, list[tuple[int, dict[str, Any], tuple[list, list, list]]]] = {}
    for span in _spans(doc):
        attrs = _attributes(span)
        found = _messages(attrs)
        if found is not None:
            start = int(span.get("startTimeUnixNano") or 0)
            carrying.setdefault(str(span.get("traceId", "")), []).append((start, attrs, found))
    if not carrying:
        raise FormatError("the OTLP trace has no spans carrying messages (export it with its "
                          "content: gen_ai.input.messages / gen_ai.output.messages)")
    if len(carrying) > 1:
        raise FormatError(f"the OTLP document holds {len(carrying)} traces with messages "
                          f"({', '.join(sorted(carrying))[:200]}); import one trace at a time")
    (spans,) = carrying.values()
    spans.sort(key=lambda s: s[0])
    _, attrs, (system, inputs, outputs) = spans[-1]
    entries: list[Any] = []
    text = _text(system)
    if text:
        entries.append({"role": "system", "content": text})
    where = "OTLP span"
    entries += [_openai(m, f"{where} gen_ai.input.messages[{i}]") for i, m in enumerate(inputs)]
    entries += [_openai(m, f"{where} gen_ai.output.messages[{i}]") for i, m in enumerate(outputs)]
    envelope: dict[str, Any] = {}
    model = (attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
             or attrs.get("llm.model_name"))  # the last: OpenInference's
    if isinstance(model, str) and model:
        envelope["model"] = model
    return entries, envelope
