"""Request bodies, responses and cassettes (request + response) as transcript entries.

A file holding one API exchange is read as one conversation:

- a request body (``{model, system?, messages, tools?, ...}`` for OpenAI or
  Anthropic, ``{contents, systemInstruction?, tools?}`` for Gemini): its
  messages are the entries; ``model``, ``system`` and ``tools`` go to the
  envelope (``conversation_started`` records them) and so do its other
  parameters (``max_tokens``, ``thinking`` ...);
- a response body alone (an Anthropic message, a Chat Completions
  ``choices`` object, a Gemini ``candidates`` object) is refused: a model
  answer with nothing before it is not a conversation turnlog can hold;
- a cassette ``{"request": body, "response": body}``: the request's entries
  and then the response's, one conversation. A streamed response recorded as
  its events (``{"_sse_events": [...]}``, or a list of Gemini chunks) is
  assembled into the message it streamed.

>>> entries, envelope = split_document({"request": {"model": "m", "messages": [
...     {"role": "user", "content": "hi"}]}, "response": {"choices": [{"message": {
...     "role": "assistant", "content": "hello"}}]}})
>>> entries[-1], envelope["model"]
({'role': 'assistant', 'content': 'hello'}, 'm')
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import FormatError

__all__ = ["RESPONSES", "split_document"]

_BODY_LISTS = ("messages", "contents", "events")
#: The entry format of an OpenAI Responses API body's items.
RESPONSES = "openai-responses"
_RESPONSES_ENVELOPE = ("instructions", "model", "tools")
_ENVELOPE = ("system", "systemInstruction", "system_instruction", "model", "tools", "functions")


def _responses_body(doc: dict[str, Any]) -> bool:
    """An OpenAI Responses API body: a list of ``input`` items (turnlog's own export has no
    ``model``), or an ``input`` string beside a key of that wire (an orchestrator entry is
    ``{input, context?, timestamp?}`` with a string)."""
    items = doc.get("input")
    return isinstance(items, list) or (
        isinstance(items, str) and any(k in doc for k in _RESPONSES_ENVELOPE))


def _body(doc: dict[str, Any]) -> tuple[list[Any], dict[str, Any]] | None:
    for key in _BODY_LISTS:
        if isinstance(doc.get(key), list):
            envelope = {k: v for k, v in doc.items() if k in _ENVELOPE}
            if "system_instruction" in envelope:
                envelope["systemInstruction"] = envelope.pop("system_instruction")
            params = {k: v for k, v in doc.items() if k not in _ENVELOPE and k != key}
            if params and key != "events":
                envelope["parameters"] = params
            return doc[key], envelope
    if _responses_body(doc):
        # an OpenAI Responses API body: its items are read with that wire's reader
        items = doc["input"]
        entries = [{"role": "user", "content": items}] if isinstance(items, str) else items
        envelope = {k: v for k, v in doc.items() if k in _RESPONSES_ENVELOPE}
        params = {k: v for k, v in doc.items() if k not in _RESPONSES_ENVELOPE and k != "input"}
        if params:
            envelope["parameters"] = params
        return entries, {**envelope, "format": RESPONSES}
    return None


def _anthropic_stream(events: list[Any]) -> dict[str, Any]:
    """The message an Anthropic event stream built."""
    message: dict[str, Any] = {"role": "assistant", "content": []}
    partial: dict[int, str] = {}
    for item in events:
        data = item.get("data", item) if isinstance(item, dict) else {}
        kind = data.get("type") if isinstance(data, dict) else None
        if kind == "message_start":
            message.update({k: v for k, v in data["message"].items() if k != "content"})
        elif kind == "content_block_start":
            message["content"].append(dict(data["content_block"]))
        elif kind == "content_block_delta":
            block, delta = message["content"][data["index"]], data["delta"]
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif dtype == "signature_delta":
                block["signature"] = delta["signature"]
            elif dtype == "input_json_delta":
                partial[data["index"]] = partial.get(data["index"], "") + delta["partial_json"]
            elif dtype == "citations_delta":
                block.setdefault("citations", []).append(delta["citation"])
        elif kind == "message_delta":
            message.update(data.get("delta") or {})
    for index, text in partial.items():
        message["content"][index]["input"] = json.loads(text) if text.strip() else {}
    return message


def _openai_stream(chunks: list[Any]) -> dict[str, Any]:
    """The message a Chat Completions chunk stream built (first choice)."""
    message: dict[str, Any] = {"role": "assistant", "content": None}
    calls: dict[int, dict[str, Any]] = {}
    model = None
    for chunk in chunks:
        chunk = chunk.get("data", chunk) if isinstance(chunk, dict) else {}
        model = chunk.get("model") or model
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            for key, value in (choice.get("delta") or {}).items():
                if key == "tool_calls":
                    for call in value or []:
                        slot = calls.setdefault(call.get("index", len(calls)), {
                            "id": "", "type": "function",
                            "function": {"name": "", "arguments": ""}})
                        slot["id"] = call.get("id") or slot["id"]
                        fn = call.get("function") or {}
                        slot["function"]["name"] += fn.get("name") or ""
                        slot["function"]["arguments"] += fn.get("arguments") or ""
                elif isinstance(value, str) and key != "role":
                    message[key] = (message.get(key) or "") + value
                elif value is not None and key != "role":
                    message[key] = value
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {"choices": [{"message": message}], "model": model}


def _gemini_stream(chunks: list[Any]) -> dict[str, Any]:
    """The content a Gemini chunk stream built (adjacent plain texts joined)."""
    parts: list[dict[str, Any]] = []
    model = None
    for chunk in chunks:
        model = chunk.get("modelVersion") or model if isinstance(chunk, dict) else model
        for candidate in (chunk.get("candidates") or [])[:1] if isinstance(chunk, dict) else []:
            for part in (candidate.get("content") or {}).get("parts") or []:
                if set(part) == {"text"} and parts and set(parts[-1]) == {"text"}:
                    parts[-1] = {"text": parts[-1]["text"] + part["text"]}
                elif part != {"text": ""}:
                    parts.append(dict(part))
    return {"candidates": [{"content": {"role": "model", "parts": parts}}], "modelVersion": model}


def _responses_stream(events: list[Any]) -> dict[str, Any] | None:
    """The response a Responses API event stream ended with (its ``response.completed``,
    ``response.incomplete`` or ``response.failed`` event), or ``None``."""
    for item in reversed(events):
        data = item.get("data", item) if isinstance(item, dict) else None
        if isinstance(data, dict) and str(data.get("type", "")).startswith("response.") \
                and isinstance(data.get("response"), dict):
            return data["response"]
    return None


def _response(body: Any) -> tuple[list[Any], str | None]:
    """``(assistant entries, model)`` of a response body, streamed or not."""
    if isinstance(body, dict) and isinstance(body.get("_sse_events"), list):
        streamed = _responses_stream(body["_sse_events"])
        body = streamed if streamed is not None else body
    if isinstance(body, dict) and isinstance(body.get("output"), list):
        return body["output"], body.get("model")  # a Responses API body: its output items
    entry, model = _one_response(body)
    return [entry], model


def _one_response(body: Any) -> tuple[dict[str, Any], str | None]:
    """``(assistant entry, model)`` of a Chat Completions, Anthropic or Gemini response."""
    if isinstance(body, list):
        body = _gemini_stream(body)
    elif isinstance(body, dict) and isinstance(body.get("_sse_events"), list):
        events = body["_sse_events"]
        first = events[0].get("data", events[0]) if events and isinstance(events[0], dict) else {}
        body = (_anthropic_stream(events) if isinstance(first, dict)
                and first.get("type") == "message_start" else _openai_stream(events))
    if not isinstance(body, dict):
        raise FormatError(f"response: expected a response body, got {type(body).__name__}")
    if isinstance(body.get("choices"), list) and body["choices"]:
        message = body["choices"][0].get("message")
        if isinstance(message, dict):
            return message, body.get("model")
    if isinstance(body.get("candidates"), list) and body["candidates"]:
        content = body["candidates"][0].get("content")
        if isinstance(content, dict):
            return {"role": "model", "parts": content.get("parts") or []}, body.get("modelVersion")
    if body.get("role") == "assistant" and isinstance(body.get("content"), list):
        return {"role": "assistant", "content": body["content"]}, body.get("model")
    raise FormatError(f"response: not a response body turnlog reads (keys {sorted(body)[:8]})")


def _wire(body: Any) -> str | None:
    """The provider whose API answered with ``body`` (a response, streamed or not)."""
    if isinstance(body, list):
        return "gemini"  # a Gemini chunk stream
    if not isinstance(body, dict):
        return None
    if isinstance(body.get("_sse_events"), list):
        datas = [e.get("data", e) for e in body["_sse_events"] if isinstance(e, dict)]
        kinds = {str(d.get("type", "")) for d in datas if isinstance(d, dict)}
        return ("anthropic" if "message_start" in kinds else
                "openai-responses" if any(k.startswith("response.") for k in kinds) else "openai")
    return ("openai-responses" if "output" in body else "openai" if "choices" in body else
            "gemini" if "candidates" in body else
            "anthropic" if body.get("role") == "assistant" else None)


def _usage(body: Any) -> dict[str, Any] | None:
    """The response's usage as its wire wrote it (a stream's last, merged with its first)."""
    if isinstance(body, list):  # Gemini chunks: the last one carries the totals
        found = [c["usageMetadata"] for c in body
                 if isinstance(c, dict) and isinstance(c.get("usageMetadata"), dict)]
        return found[-1] if found else None
    if not isinstance(body, dict):
        return None
    events = body.get("_sse_events")
    if not isinstance(events, list):
        usage = body.get("usage", body.get("usageMetadata"))
        return usage if isinstance(usage, dict) else None
    merged: dict[str, Any] = {}
    for item in events:
        data = item.get("data", item) if isinstance(item, dict) else None
        if not isinstance(data, dict):
            continue
        holder = data.get("message") or data.get("response") or data
        usage = holder.get("usage") if isinstance(holder, dict) else None
        if not isinstance(usage, dict):
            usage = data.get("usage")
        if isinstance(usage, dict):
            merged.update({k: v for k, v in usage.items() if v is not None})
    return merged or None


def split_document(doc: dict[str, Any]) -> tuple[list[Any], dict[str, Any]] | None:
    """``(entries, envelope)`` of a body, response or cassette; ``None`` for anything else."""
    if "request" in doc and "response" in doc and isinstance(doc["request"], dict):
        read = _body(doc["request"])
        if read is None:
            raise FormatError(f"request: not a request body (keys {sorted(doc['request'])[:8]})")
        entries, envelope = read
        try:
            answer, model = _response(doc["response"])
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            # a streamed response's events of the wrong shape: the file's fault, said so
            raise FormatError(f"response: not a readable response ({type(exc).__name__}: "
                              f"{exc})") from None
        envelope.setdefault("model", model)
        if _wire(doc["response"]) is not None:
            envelope["wire"] = _wire(doc["response"])
            usage = _usage(doc["response"])
            if usage:
                envelope["usage"] = usage
        return [*entries, *answer], envelope
    read = _body(doc)
    if read is not None:
        return read
    if "choices" in doc or "candidates" in doc or (
            doc.get("type") == "message" and doc.get("role") == "assistant") or (
            doc.get("object") == "response" and isinstance(doc.get("output"), list)):
        raise FormatError("a response body alone is not a conversation (nothing asked for it); "
                          'import it with its request: {"request": ..., "response": ...}')
    return None
