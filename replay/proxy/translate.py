"""``turnlog proxy --to PROVIDER --model M``: serve one wire, answer from another provider.

A request read on the client's wire (``wires.parse_request``) is already the
neutral ``ModelRequest``; the target provider's own ``map_request`` turns it
into the target's body, and the target's ``map_response`` reads the answer
back to neutral form. ``response_body`` then writes the neutral answer as
the client's wire would have sent it, through that wire's own
``map_messages`` (so tool call ids, arguments and text go back exactly as
the client's SDK expects). The target's key comes from the proxy's
environment (``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY``, ``OPENAI_API_KEY``).

>>> from turnlog.engine.model.messages import Text
>>> body = response_body("anthropic", ModelResponse(parts=(Text(text="hi"),), model="m"), "m")
>>> body["content"], body["stop_reason"]
([{'type': 'text', 'text': 'hi'}], 'end_turn')
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from turnlog.engine.errors import FormatError
from turnlog.engine.model.messages import Message
from turnlog.engine.providers import ModelRequest, ModelResponse, registry

from .wires import ParsedRequest

__all__ = ["TARGETS", "neutral_parameters", "response_body", "target_request"]

#: The providers ``--to`` takes.
TARGETS = ("anthropic", "gemini", "openai", "openai-responses")
#: each wire's parameter names -> the neutral names ``map_request`` takes
_PARAMS = {
    "openai": {"max_completion_tokens": "max_tokens", "max_tokens": "max_tokens",
               "temperature": "temperature", "top_p": "top_p", "stop": "stop", "seed": "seed"},
    "openai-responses": {"max_output_tokens": "max_tokens", "temperature": "temperature",
                         "top_p": "top_p"},
    "anthropic": {"max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p",
                  "top_k": "top_k", "stop_sequences": "stop"},
    "gemini": {"maxOutputTokens": "max_tokens", "temperature": "temperature", "topP": "top_p",
               "topK": "top_k", "stopSequences": "stop", "seed": "seed"},
}


def neutral_parameters(wire: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """The sampling and limit settings of a ``wire`` request, in neutral names."""
    source = parameters.get("generationConfig") or {} if wire == "gemini" else parameters
    names = _PARAMS[wire]
    return {names[k]: v for k, v in source.items() if k in names and v is not None}


def target_request(target: str, model: str, parsed: ParsedRequest, base_url: str,
                   wire: str) -> tuple[str, dict[str, str], dict[str, Any], ModelRequest]:
    """``(url, headers, body, neutral request)`` of ``parsed`` sent to ``target`` as ``model``."""
    request = ModelRequest(model=model, system=parsed.system, messages=tuple(parsed.messages),
                           tools=parsed.tools,
                           parameters=neutral_parameters(wire, parsed.parameters))
    module = registry.wire(target)
    body = module.map_request(request)
    base = base_url.rstrip("/")
    key = os.environ.get(module.KEY_ENV, "")
    if target == "anthropic":
        url, headers = f"{base}/v1/messages", {"x-api-key": key,
                                               "anthropic-version": "2023-06-01"}
    elif target == "gemini":
        url, headers = f"{base}/v1beta/models/{model}:generateContent", {"x-goog-api-key": key}
    else:
        path = "/responses" if target == "openai-responses" else "/chat/completions"
        url, headers = f"{base}{path}", {"authorization": f"Bearer {key}"}
    return url, headers, body, request


_OPENAI_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length",
                  "refusal": "content_filter", "other": "stop"}
_GEMINI_FINISH = {"end_turn": "STOP", "tool_use": "STOP", "max_tokens": "MAX_TOKENS",
                  "refusal": "SAFETY", "other": "OTHER"}


def response_body(wire: str, response: ModelResponse, model: str) -> dict[str, Any]:
    """``response`` (neutral) as a success body of ``wire``, as its SDK parses it."""
    message = Message(role="assistant", parts=response.parts)
    if wire not in TARGETS:
        raise FormatError(f"no response shape for wire {wire!r}")
    # the client's own wire renders the parts: ids, arguments and text as its SDK reads them
    _, rendered = registry.wire(wire).map_messages("", [message])
    usage, stop = response.usage, response.stop_reason
    rid = response.response_id or uuid.uuid4().hex[:24]
    if wire == "openai":
        # the planner answers the calls of a history's last message: keep only the message
        assistants = [m for m in rendered if m["role"] == "assistant"]
        assistant = dict(assistants[0]) if assistants else {"role": "assistant", "content": ""}
        assistant.setdefault("content", None)
        assistant.setdefault("refusal", None)
        return {"id": f"chatcmpl-{rid}", "object": "chat.completion", "created": 0,
                "model": model, "choices": [{"index": 0, "message": assistant, "logprobs": None,
                                             "finish_reason": _OPENAI_FINISH[stop]}],
                "usage": {"prompt_tokens": usage.input_tokens,
                          "completion_tokens": usage.output_tokens,
                          "total_tokens": usage.input_tokens + usage.output_tokens}}
    if wire == "anthropic":
        content = next((m["content"] for m in rendered if m["role"] == "assistant"), [])
        return {"id": f"msg_{rid}", "type": "message", "role": "assistant", "model": model,
                "content": content,
                "stop_reason": stop if stop in ("end_turn", "tool_use", "max_tokens", "refusal")
                else "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": usage.input_tokens,
                          "output_tokens": usage.output_tokens}}
    if wire == "gemini":
        parts = next((c["parts"] for c in rendered if c.get("role") == "model"), [])
        return {"candidates": [{"content": {"role": "model", "parts": parts},
                                "finishReason": _GEMINI_FINISH[stop], "index": 0}],
                "usageMetadata": {"promptTokenCount": usage.input_tokens,
                                  "candidatesTokenCount": usage.output_tokens,
                                  "totalTokenCount": usage.input_tokens + usage.output_tokens},
                "modelVersion": model, "responseId": rid}
    # openai-responses
    output = []
    for i, item in enumerate(i for i in rendered if i.get("type") != "function_call_output"):
        item = dict(item)
        if item.get("type") == "function_call":
            item.setdefault("id", f"fc_{rid}_{i}")
            item.setdefault("status", "completed")
        elif item.get("role") == "assistant":
            item = {"type": "message", "id": f"msg_{rid}_{i}", "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": c.get("text", ""),
                                 "annotations": []} for c in _contents(item)]}
        output.append(item)
    body = {"id": f"resp_{rid}", "object": "response", "created_at": 0, "model": model,
            "status": "completed", "output": output,
            "usage": {"input_tokens": usage.input_tokens,
                      "output_tokens": usage.output_tokens,
                      "total_tokens": usage.input_tokens + usage.output_tokens}}
    if stop == "max_tokens":
        body["status"], body["incomplete_details"] = "incomplete", {
            "reason": "max_output_tokens"}
    return body


def _contents(item: dict[str, Any]) -> list[dict[str, Any]]:
    content = item.get("content")
    if isinstance(content, str):
        return [{"text": content}]
    return [c for c in content or [] if isinstance(c, dict)]

