"""A whole response body as its wire's stream of server-sent events.

The inverse of the providers' stream assemblers: each wire's ``sse_events``
folds back, through that wire's assembler (and its official SDK), into the
body it was made from. Replay uses it to stream a recorded answer, swap to
stream a translated one. Each text and argument goes in one delta.

>>> from turnlog.engine.providers import registry
>>> from turnlog.replay.proxy.sse import SSEParser
>>> body = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
...         "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
...         "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
>>> asm, parser = registry.wire("anthropic").ASSEMBLER(), SSEParser()
>>> for event in parser.feed(b"".join(sse_events("anthropic", body))):
...     _ = asm.feed(event)
>>> asm.body()["content"]
[{'type': 'text', 'text': 'hi'}]
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["sse_events"]


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def _anthropic(body: dict[str, Any]) -> list[bytes]:
    usage = dict(body.get("usage") or {})
    start = {k: v for k, v in body.items() if k != "content"} | {
        "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}
    out = [_sse({"type": "message_start", "message": start}, "message_start")]
    for i, block in enumerate(body.get("content") or []):
        kind = block.get("type")
        deltas: list[dict[str, Any]] = []
        if kind == "text":
            opening = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": block.get("text", "")}]
        elif kind == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": block.get("thinking", "")},
                      {"type": "signature_delta", "signature": block.get("signature", "")}]
        elif kind == "tool_use":
            args = block.get("input")
            opening = {"type": "tool_use", "id": block.get("id"), "name": block.get("name"),
                       "input": {}}
            deltas = [{"type": "input_json_delta",
                       "partial_json": args if isinstance(args, str) else json.dumps(args)}]
        else:
            opening = block
        out.append(_sse({"type": "content_block_start", "index": i, "content_block": opening},
                        "content_block_start"))
        out += [_sse({"type": "content_block_delta", "index": i, "delta": d},
                     "content_block_delta") for d in deltas]
        out.append(_sse({"type": "content_block_stop", "index": i}, "content_block_stop"))
    out.append(_sse({"type": "message_delta", "delta": {
        "stop_reason": body.get("stop_reason"), "stop_sequence": body.get("stop_sequence")},
        "usage": {"output_tokens": usage.get("output_tokens", 0)}}, "message_delta"))
    return out + [_sse({"type": "message_stop"}, "message_stop")]


def _openai(body: dict[str, Any]) -> list[bytes]:
    top = {k: v for k, v in body.items() if k not in ("choices", "usage", "object")}
    top["object"] = "chat.completion.chunk"
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(top | {"choices": [{"index": 0, "delta": delta, "logprobs": None,
                                         "finish_reason": finish}]})

    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    if message.get("content"):
        out.append(chunk({"content": message["content"]}))
    for i, call in enumerate(message.get("tool_calls") or []):
        out.append(chunk({"tool_calls": [{"index": i, "id": call.get("id"), "type": "function",
                                          "function": {"name": call["function"]["name"],
                                                       "arguments": ""}}]}))
        out.append(chunk({"tool_calls": [{"index": i, "function": {
            "arguments": call["function"].get("arguments", "")}}]}))
    out.append(chunk({}, choice.get("finish_reason") or "stop"))
    if body.get("usage") is not None:
        out.append(_sse(top | {"choices": [], "usage": body["usage"]}))
    return out + [b"data: [DONE]\n\n"]


def _gemini(body: dict[str, Any]) -> list[bytes]:
    candidate = (body.get("candidates") or [{}])[0]
    rest = {k: v for k, v in body.items() if k != "candidates"}
    parts = (candidate.get("content") or {}).get("parts") or []
    last = {k: v for k, v in candidate.items() if k != "content"}
    return [_sse({"candidates": [last | {"content": {"role": "model", "parts": parts}}]} | rest)]


def _responses(body: dict[str, Any]) -> list[bytes]:
    seq = iter(range(1_000_000))

    def event(kind: str, **fields: Any) -> bytes:
        return _sse({"type": kind, "sequence_number": next(seq), **fields}, kind)

    opening = {**body, "status": "in_progress", "output": [], "usage": None}
    out = [event("response.created", response=opening)]
    for i, item in enumerate(body.get("output") or []):
        out.append(event("response.output_item.added", output_index=i, item=item))
        out.append(event("response.output_item.done", output_index=i, item=item))
    last = "response.incomplete" if body.get("status") == "incomplete" else "response.completed"
    return out + [event(last, response=body)]


_WIRES = {"anthropic": _anthropic, "openai": _openai, "gemini": _gemini,
          "openai-responses": _responses}


def sse_events(wire: str, body: dict[str, Any]) -> list[bytes]:
    """``body`` (a whole success body of ``wire``) as the server-sent events of its stream."""
    return _WIRES[wire](body)
