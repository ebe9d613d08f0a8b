"""A loopback fake of the Anthropic, OpenAI, Gemini and Amazon Bedrock HTTP APIs, for tests.

It listens on 127.0.0.1 on a free port in a background thread, speaks the
three wire formats (and OpenAI's Responses API as ``openai-responses``),
answers each request with the next scripted reply for that provider,
records every request (headers and body), and refuses with HTTP 400 — in
the real API's error shape — any request that breaks the
rules in ``fakerules`` (unanswered tool calls, split tool results, empty
text blocks, bad ids, unmatched function responses ...) or that the SDK's own
request types refuse (``sdktypes``: a second opinion on the same bodies).

Usage (the ``fake_api`` fixture starts and stops one per test)::

    from tests.fakeapi import FakeAPI, reply, error_reply

    fake = FakeAPI().start()
    fake.script("openai", [reply("openai", tool_calls=[("add", {"a": 1, "b": 2})]),
                           reply("openai", text="3")])
    provider = OpenAIProvider("gpt-x", api_key="sk-test", base_url=fake.base_url("openai"))
    ...
    assert fake.refusals() == []            # every request was valid
    fake.requests[0].body["messages"]        # what was sent
    fake.stop()

``with FakeAPI() as fake:`` starts and stops it too. To drive the CLI or any
code that reads the environment, set ``OPENAI_BASE_URL`` /
``ANTHROPIC_BASE_URL`` / ``GEMINI_BASE_URL`` to ``fake.base_url(provider)``
and any non-empty key (``fake.env(provider, key)`` returns that mapping).

Replies: ``reply(provider, text=..., tool_calls=[(name, args), ...],
thinking=..., stop_reason=..., usage=...)`` builds a success body (``args``
may be a str: sent as raw argument text); ``error_reply(provider, status,
message, retry_after=None)`` an API error; ``Reply(raw=b"...")`` any bytes;
``Reply(hang=2.0)`` answers nothing for that long (for timeouts). A streamed
request (``"stream": true``, or Gemini's ``:streamGenerateContent``) gets the
same reply as server-sent events (``sse_events``), chunked;
Bedrock's ``/model/{id}/converse-stream`` gets it in AWS's binary event-stream
framing (``event_frames``). Bedrock requests must carry a SigV4 signature that
checks out for a key of ``AWS_KEYS`` (verified with botocore's signer), and
their bodies are validated against botocore's service model;
``Reply(body=..., cut=N)`` closes the connection after N events. A plain
dict in a script is sent as a 200 JSON body. When a provider's script runs
out the fake answers 500 saying so. A request without the provider's key
header gets 401.
"""

from __future__ import annotations

import itertools
import json
import re
import struct
import threading
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import pytest

from tests.fakerules import check_anthropic, check_bedrock, check_gemini, check_openai, check_responses
from tests.sdktypes import sdk_problem

__all__ = ["AWS_KEYS", "PROVIDERS", "WIRES", "FakeAPI", "Recorded", "Reply", "bedrock_post",
           "error_body", "error_reply", "event_frames", "fake_api", "reply", "sse_events"]

PROVIDERS = ("anthropic", "openai", "gemini", "openai-responses")
#: Every wire the fake speaks: ``PROVIDERS`` (keyed by an API key) and Bedrock (SigV4).
WIRES = (*PROVIDERS, "bedrock")
#: Access key id -> secret key of the AWS credentials the fake accepts.
AWS_KEYS = {"AKIDTURNLOGTEST": "test-SECRET-b3dr0ck-5ac7e1"}
_CHECKS = {"anthropic": check_anthropic, "openai": check_openai, "gemini": check_gemini,
           "openai-responses": check_responses, "bedrock": check_bedrock}
_GEMINI_PATH = re.compile(r"/v1beta/models/([^/:]+):(stream)?[gG]enerateContent")
_BEDROCK_PATH = re.compile(r"/model/([^/]+)/converse(-stream)?")
_ids = itertools.count(1)


@dataclass
class Reply:
    """One scripted answer: a JSON ``body`` or ``raw`` bytes, a status, headers, or a hang."""

    body: Any = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    hang: float | None = None
    #: for a streamed request: close the connection after this many events (a cut stream)
    cut: int | None = None


@dataclass
class Recorded:
    """A request the fake received. ``refused`` is the broken rule when it answered 400."""

    provider: str
    path: str
    headers: dict[str, str]
    body: Any
    refused: str | None = None


def _anthropic(text, tool_calls, thinking, stop_reason, usage, model):
    content: list[dict[str, Any]] = []
    if thinking:
        content.append({"type": "thinking", "thinking": thinking, "signature": "sig-" + thinking[:8]})
    if text:
        content.append({"type": "text", "text": text})
    for name, args in tool_calls:
        content.append({"type": "tool_use", "id": f"toolu_{next(_ids):04d}", "name": name,
                        "input": args})
    return {"id": f"msg_{next(_ids):04d}", "type": "message", "role": "assistant",
            "model": model, "content": content,
            "stop_reason": stop_reason or ("tool_use" if tool_calls else "end_turn"),
            "stop_sequence": None,
            "usage": usage or {"input_tokens": 10, "output_tokens": 5,
                               "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}}


def _openai(text, tool_calls, thinking, stop_reason, usage, model):
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
    if tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{next(_ids):04d}", "type": "function",
             "function": {"name": name, "arguments": args if isinstance(args, str)
                          else json.dumps(args)}}
            for name, args in tool_calls]
    return {"id": f"chatcmpl-{next(_ids):04d}", "object": "chat.completion", "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": stop_reason or ("tool_calls" if tool_calls else "stop")}],
            "usage": usage or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def _gemini(text, tool_calls, thinking, stop_reason, usage, model):
    parts: list[dict[str, Any]] = []
    if thinking:
        parts.append({"text": thinking, "thought": True})
    if text:
        parts.append({"text": text})
    parts.extend({"functionCall": {"name": name, "args": args}} for name, args in tool_calls)
    return {"candidates": [{"content": {"role": "model", "parts": parts},
                            "finishReason": stop_reason or "STOP", "index": 0}],
            "usageMetadata": usage or {"promptTokenCount": 10, "candidatesTokenCount": 5,
                                       "totalTokenCount": 15},
            "modelVersion": model, "responseId": f"resp-{next(_ids):04d}"}


def _responses(text, tool_calls, thinking, stop_reason, usage, model):
    output: list[dict[str, Any]] = []
    if thinking:
        output.append({"type": "reasoning", "id": f"rs_{next(_ids):04d}",
                       "summary": [{"type": "summary_text", "text": thinking}]})
    if text:
        output.append({"type": "message", "id": f"msg_{next(_ids):04d}", "role": "assistant",
                       "status": "completed",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})
    for name, args in tool_calls:
        output.append({"type": "function_call", "id": f"fc_{next(_ids):04d}",
                       "call_id": f"call_{next(_ids):04d}", "name": name, "status": "completed",
                       "arguments": args if isinstance(args, str) else json.dumps(args)})
    body = {"id": f"resp_{next(_ids):04d}", "object": "response", "created_at": 0,
            "model": model, "status": "completed", "output": output,
            "usage": usage or {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}}
    if stop_reason:  # e.g. "max_output_tokens": an incomplete response
        body["status"] = "incomplete"
        body["incomplete_details"] = {"reason": stop_reason}
    return body


def _bedrock(text, tool_calls, thinking, stop_reason, usage, model):
    content: list[dict[str, Any]] = []
    if thinking:
        content.append({"reasoningContent": {"reasoningText": {
            "text": thinking, "signature": "sig-" + thinking[:8]}}})
    if text:
        content.append({"text": text})
    for name, args in tool_calls:
        content.append({"toolUse": {"toolUseId": f"tooluse_{next(_ids):04d}", "name": name,
                                    "input": args}})
    return {"output": {"message": {"role": "assistant", "content": content}},
            "stopReason": stop_reason or ("tool_use" if tool_calls else "end_turn"),
            "usage": usage or {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
            "metrics": {"latencyMs": 12}}


def _pieces(text: str, size: int = 4) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def _anthropic_events(body: dict[str, Any]) -> list[bytes]:
    usage = dict(body.get("usage") or {})
    start = {k: v for k, v in body.items() if k != "content"} | {
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": usage | {"output_tokens": 1}}
    out = [_sse({"type": "message_start", "message": start}, "message_start"),
           _sse({"type": "ping"}, "ping")]
    for i, block in enumerate(body.get("content") or []):
        kind = block.get("type")
        if kind == "text":
            opening, deltas = {"type": "text", "text": ""}, [
                {"type": "text_delta", "text": t} for t in _pieces(block["text"])]
        elif kind == "thinking":
            opening, deltas = {"type": "thinking", "thinking": "", "signature": ""}, [
                {"type": "thinking_delta", "thinking": t} for t in _pieces(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
        elif kind == "tool_use":
            args = block["input"] if isinstance(block["input"], str) else json.dumps(block["input"])
            opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": t} for t in _pieces(args, 7)]
        else:
            opening, deltas = block, []
        out.append(_sse({"type": "content_block_start", "index": i, "content_block": opening},
                        "content_block_start"))
        out += [_sse({"type": "content_block_delta", "index": i, "delta": d},
                     "content_block_delta") for d in deltas]
        out.append(_sse({"type": "content_block_stop", "index": i}, "content_block_stop"))
    out.append(_sse({"type": "message_delta", "delta": {
        "stop_reason": body.get("stop_reason"), "stop_sequence": body.get("stop_sequence")},
        "usage": {"output_tokens": usage.get("output_tokens", 0)}}, "message_delta"))
    return out + [_sse({"type": "message_stop"}, "message_stop")]


def _openai_events(body: dict[str, Any]) -> list[bytes]:
    top = {k: v for k, v in body.items() if k not in ("choices", "usage", "object")}
    top["object"] = "chat.completion.chunk"
    choice = body["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(top | {"choices": [{"index": 0, "delta": delta, "logprobs": None,
                                         "finish_reason": finish}]})

    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    out += [chunk({"content": t}) for t in _pieces(message.get("content") or "") if t]
    for i, call in enumerate(message.get("tool_calls") or []):
        out.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                          "function": {"name": call["function"]["name"],
                                                       "arguments": ""}}]}))
        out += [chunk({"tool_calls": [{"index": i, "function": {"arguments": t}}]})
                for t in _pieces(call["function"]["arguments"], 7)]
    out.append(chunk({}, choice["finish_reason"]))
    out.append(_sse(top | {"choices": [], "usage": body.get("usage")}))
    return out + [b"data: [DONE]\n\n"]


def _gemini_events(body: dict[str, Any]) -> list[bytes]:
    candidate = body["candidates"][0]
    rest = {k: v for k, v in body.items() if k != "candidates"}
    out: list[bytes] = []
    for part in candidate["content"]["parts"]:
        pieces = ([dict(part, text=t) for t in _pieces(part["text"])] if "text" in part
                  else [part])
        out += [_sse({"candidates": [{"content": {"role": "model", "parts": [p]}, "index": 0}],
                      "modelVersion": body.get("modelVersion"),
                      "responseId": body.get("responseId")}) for p in pieces]
    last = {k: v for k, v in candidate.items() if k != "content"}
    out.append(_sse({"candidates": [last | {"content": {"role": "model", "parts": []}}]} | rest))
    return out


def _responses_events(body: dict[str, Any]) -> list[bytes]:
    seq = itertools.count()

    def event(kind: str, **fields: Any) -> bytes:
        return _sse({"type": kind, "sequence_number": next(seq), **fields}, kind)

    opening = {**body, "status": "in_progress", "output": [], "usage": None}
    out = [event("response.created", response=opening),
           event("response.in_progress", response=opening)]
    for i, item in enumerate(body.get("output") or []):
        kind = item.get("type")
        if kind == "message":
            out.append(event("response.output_item.added", output_index=i,
                             item={**item, "status": "in_progress", "content": []}))
            for j, part in enumerate(item.get("content") or []):
                empty = {**part, "text": ""} if part.get("type") == "output_text" else part
                out.append(event("response.content_part.added", item_id=item.get("id"),
                                 output_index=i, content_index=j, part=empty))
                if part.get("type") == "output_text":
                    out += [event("response.output_text.delta", item_id=item.get("id"),
                                  output_index=i, content_index=j, delta=t, logprobs=[])
                            for t in _pieces(part["text"]) if t]
                    out.append(event("response.output_text.done", item_id=item.get("id"),
                                     output_index=i, content_index=j, text=part["text"],
                                     logprobs=[]))
                out.append(event("response.content_part.done", item_id=item.get("id"),
                                 output_index=i, content_index=j, part=part))
        elif kind == "function_call":
            out.append(event("response.output_item.added", output_index=i,
                             item={**item, "status": "in_progress", "arguments": ""}))
            out += [event("response.function_call_arguments.delta", item_id=item.get("id"),
                          output_index=i, delta=t) for t in _pieces(item["arguments"], 7)]
            out.append(event("response.function_call_arguments.done", item_id=item.get("id"),
                             output_index=i, arguments=item["arguments"],
                             name=item.get("name")))
        elif kind == "reasoning":
            out.append(event("response.output_item.added", output_index=i,
                             item={**item, "summary": []}))
            for j, piece in enumerate(item.get("summary") or []):
                out.append(event("response.reasoning_summary_part.added", item_id=item.get("id"),
                                 output_index=i, summary_index=j,
                                 part={"type": "summary_text", "text": ""}))
                out += [event("response.reasoning_summary_text.delta", item_id=item.get("id"),
                              output_index=i, summary_index=j, delta=t)
                        for t in _pieces(piece["text"]) if t]
        else:
            out.append(event("response.output_item.added", output_index=i, item=item))
        out.append(event("response.output_item.done", output_index=i, item=item))
    last = "response.incomplete" if body.get("status") == "incomplete" else "response.completed"
    return out + [event(last, response=body)]


def _frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One message of AWS's event-stream framing: prelude (lengths, CRC32), string headers,
    payload, message CRC32."""
    head = b"".join(bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v)) + v.encode()
                    for k, v in headers.items())
    prelude = struct.pack(">II", 12 + len(head) + len(payload) + 4, len(head))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + head + payload
    return message + struct.pack(">I", zlib.crc32(message))


def _event(kind: str, payload: dict[str, Any]) -> bytes:
    return _frame({":event-type": kind, ":content-type": "application/json",
                   ":message-type": "event"}, json.dumps(payload | {"p": "abcdef"}).encode())


def event_frames(body: dict[str, Any]) -> list[bytes]:
    """A Converse success ``body`` as the ConverseStream events that build it, framed.

    Text and reasoning go in 4-character pieces, tool input (JSON text) in 7-character ones.
    """
    out = [_event("messageStart", {"role": "assistant"})]
    for i, block in enumerate(body["output"]["message"]["content"]):
        if "text" in block:
            out += [_event("contentBlockDelta", {"contentBlockIndex": i, "delta": {"text": t}})
                    for t in _pieces(block["text"])]
        elif "reasoningContent" in block:
            reasoning = block["reasoningContent"]["reasoningText"]
            out += [_event("contentBlockDelta", {"contentBlockIndex": i, "delta": {
                "reasoningContent": {"text": t}}}) for t in _pieces(reasoning["text"])]
            out.append(_event("contentBlockDelta", {"contentBlockIndex": i, "delta": {
                "reasoningContent": {"signature": reasoning.get("signature", "")}}}))
        elif "toolUse" in block:
            use = block["toolUse"]
            args = use["input"] if isinstance(use["input"], str) else json.dumps(use["input"])
            out.append(_event("contentBlockStart", {"contentBlockIndex": i, "start": {
                "toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}}))
            out += [_event("contentBlockDelta", {"contentBlockIndex": i, "delta": {
                "toolUse": {"input": t}}}) for t in _pieces(args, 7)]
        out.append(_event("contentBlockStop", {"contentBlockIndex": i}))
    out.append(_event("messageStop", {"stopReason": body["stopReason"]}))
    return out + [_event("metadata", {"usage": body["usage"], "metrics": body["metrics"]})]


def sse_events(provider: str, body: dict[str, Any]) -> list[bytes]:
    """``body`` (a success body of ``provider``) as the server-sent events of its stream.

    Text is sent in 4-character pieces, tool arguments in 7-character ones;
    the events assemble back into exactly ``body``.
    """
    return {"anthropic": _anthropic_events, "openai": _openai_events,
            "gemini": _gemini_events, "openai-responses": _responses_events}[provider](body)


_BUILDERS = {"anthropic": _anthropic, "openai": _openai, "gemini": _gemini,
             "openai-responses": _responses, "bedrock": _bedrock}


def reply(provider: str, text: str | None = None,
          tool_calls: Iterable[tuple[str, Any]] = (), *, thinking: str | None = None,
          stop_reason: str | None = None, usage: dict[str, Any] | None = None,
          model: str = "fake-model") -> dict[str, Any]:
    """A success response body in ``provider``'s wire format.

    >>> reply("openai", text="hi")["choices"][0]["message"]["content"]
    'hi'
    """
    return _BUILDERS[provider](text, list(tool_calls), thinking, stop_reason, usage, model)


_ERROR_TYPES = {
    "anthropic": {400: "invalid_request_error", 401: "authentication_error",
                  429: "rate_limit_error", 500: "api_error"},
    "openai": {400: "invalid_request_error", 401: "invalid_request_error",
               429: "rate_limit_exceeded", 500: "server_error"},
    "gemini": {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED",
               500: "INTERNAL"},
}
_ERROR_TYPES["openai-responses"] = _ERROR_TYPES["openai"]
_ERROR_TYPES["bedrock"] = {400: "ValidationException", 403: "AccessDeniedException",
                           429: "ThrottlingException", 500: "InternalServerException",
                           503: "ServiceUnavailableException"}


def error_body(provider: str, status: int, message: str) -> dict[str, Any]:
    """An error body in ``provider``'s real shape."""
    kind = _ERROR_TYPES[provider].get(status, _ERROR_TYPES[provider][500 if status >= 500 else 400])
    if provider == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    if provider in ("openai", "openai-responses"):
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}
    if provider == "bedrock":
        return {"message": message}
    return {"error": {"code": status, "message": message, "status": kind}}


def error_reply(provider: str, status: int, message: str = "fake failure",
                retry_after: float | None = None) -> Reply:
    """An API error answer, with a ``retry-after`` header when given."""
    headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
    if provider == "bedrock":
        kind = _ERROR_TYPES[provider].get(status, "InternalServerException")
        headers["x-amzn-errortype"] = f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"
    return Reply(body=error_body(provider, status, message), status=status, headers=headers)


def _sigv4_valid(method: str, path: str, headers: Any, raw: bytes) -> bool:
    """Whether the request's SigV4 signature is the one botocore computes for it with the
    secret of its access key (``AWS_KEYS``), for service ``bedrock``."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    found = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/bedrock/aws4_request, "
                         r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})",
                         headers.get("authorization") or "")
    if found is None or found.group(1) not in AWS_KEYS:
        return False
    key, _, region, signed, signature = found.groups()
    request = AWSRequest(method=method, url=f"http://{headers.get('host')}{path}", data=raw,
                         headers={h: headers.get(h) for h in signed.split(";") if h != "host"})
    request.context["timestamp"] = headers.get("x-amz-date") or ""
    auth = SigV4Auth(Credentials(key, AWS_KEYS[key], headers.get("x-amz-security-token")),
                     "bedrock", region)
    expected = auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request)
    return expected == signature


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver listens with a backlog of 5: twenty async clients connecting at once on
    # a busy machine overflowed it and saw connection errors
    request_queue_size = 128
    fake: FakeAPI


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        fake = self.server.fake
        path = self.path.split("?")[0]
        provider = ("anthropic" if path == "/v1/messages" else
                    "openai" if path == "/v1/chat/completions" else
                    "openai-responses" if path == "/v1/responses" else
                    "gemini" if _GEMINI_PATH.fullmatch(path) else
                    "bedrock" if _BEDROCK_PATH.fullmatch(path) else None)
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        if provider is None:
            self._send(404, {"error": {"message": f"no such endpoint {path}"}})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode(errors="replace")
        record = Recorded(provider, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        with fake.lock:
            fake.requests.append(record)
        if not self._authorised(provider, raw):
            status = 403 if provider == "bedrock" else 401
            self._answer(error_reply(provider, status, "invalid credentials"))
            return
        checked = body
        if provider == "bedrock":  # the model is in the path; botocore's shape has it as modelId
            match = _BEDROCK_PATH.fullmatch(path)
            checked = {"modelId": unquote(match.group(1)), **body} if isinstance(body, dict) else body
            record.refused = check_bedrock(body) or sdk_problem(
                "bedrock:stream" if match.group(2) else "bedrock", checked)
        else:
            record.refused = _CHECKS[provider](body) or sdk_problem(provider, body)
        if record.refused:
            self._send(400, error_body(provider, 400, record.refused))
            return
        answer = fake.next_reply(provider, body)
        streamed = (path.endswith(":streamGenerateContent") if provider == "gemini"
                    else path.endswith("/converse-stream") if provider == "bedrock"
                    else isinstance(body, dict) and body.get("stream") is True)
        if streamed and answer.status == 200 and answer.raw is None and answer.hang is None:
            if provider == "bedrock":
                self._stream(event_frames(answer.body), answer.cut,
                             "application/vnd.amazon.eventstream")
            else:
                self._stream(sse_events(provider, answer.body), answer.cut)
            return
        self._answer(answer)

    def _authorised(self, provider: str, raw: bytes) -> bool:
        if provider == "bedrock":
            return _sigv4_valid(self.command, self.path, self.headers, raw)
        bearer = (self.headers.get("authorization") or "").removeprefix("Bearer ").strip()
        if provider == "anthropic":  # SDK 2.x sends a bearer token, older ones x-api-key
            return bool(self.headers.get("x-api-key") or bearer)
        if provider in ("openai", "openai-responses"):
            return bool(bearer)
        return bool(self.headers.get("x-goog-api-key"))

    def _answer(self, answer: Reply) -> None:
        if answer.hang is not None:
            self.server.fake.stopping.wait(answer.hang)
            return
        data = answer.raw if answer.raw is not None else json.dumps(answer.body).encode()
        self._send(answer.status, data, answer.headers)

    def _stream(self, events: list[bytes], cut: int | None,
                content_type: str = "text/event-stream") -> None:
        """Answer with server-sent events, chunked; ``cut`` closes the connection mid-way."""
        self.protocol_version = "HTTP/1.1"
        self.close_connection = True
        try:
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("transfer-encoding", "chunked")
            self.send_header("connection", "close")
            self.end_headers()
            for event in events[:cut]:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
            if cut is None:
                self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client gave up
            pass

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (a timeout test)
            pass


class FakeAPI:
    """The fake server. ``start()`` it, ``script()`` replies, read ``requests``, ``stop()``."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._scripts: dict[str, list[Reply]] = {p: [] for p in WIRES}
        self._answerers: dict[str, Callable[[Any], Reply | dict[str, Any]]] = {}
        self._server: _Server | None = None

    def __enter__(self) -> FakeAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def env(self, provider: str, key: str = "test-key") -> dict[str, str]:
        """Environment variables that point ``provider``'s client at this fake (for
        ``bedrock``: its endpoint, a region and credentials of ``AWS_KEYS``; ``key`` unused)."""
        if provider == "bedrock":
            key_id, secret = next(iter(AWS_KEYS.items()))
            return {"AWS_ENDPOINT_URL_BEDROCK_RUNTIME": self.base_url(provider),
                    "AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret,
                    "AWS_REGION": "us-east-1"}
        name = "OPENAI" if provider.startswith("openai") else provider.upper()
        return {f"{name}_BASE_URL": self.base_url(provider), f"{name}_API_KEY": key}

    def start(self) -> FakeAPI:
        """Listen on 127.0.0.1 on a free port, in a daemon thread."""
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()
        return self

    def stop(self) -> None:
        """Release hanging requests and shut the server down."""
        self.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def port(self) -> int:
        assert self._server is not None, "call start() first"
        return self._server.server_address[1]

    def base_url(self, provider: str) -> str:
        """The base URL to give ``provider``'s client (OpenAI's includes ``/v1``)."""
        root = f"http://127.0.0.1:{self.port}"
        return f"{root}/v1" if provider.startswith("openai") else root

    def script(self, provider: str, replies: Sequence[Reply | dict[str, Any]]) -> None:
        """Queue ``replies`` (bodies or ``Reply``) for ``provider``'s next requests."""
        with self.lock:
            self._scripts[provider].extend(r if isinstance(r, Reply) else Reply(body=r)
                                           for r in replies)

    def answer_with(self, provider: str,
                    answer: Callable[[Any], Reply | dict[str, Any]] | None) -> None:
        """Answer ``provider``'s requests by ``answer(request_body)`` instead of the script.

        For concurrent clients, whose requests arrive in any order, the reply can
        depend on the request (its history) rather than on its place in line.
        ``None`` goes back to the script.
        """
        with self.lock:
            if answer is None:
                self._answerers.pop(provider, None)
            else:
                self._answerers[provider] = answer

    def next_reply(self, provider: str, body: Any = None) -> Reply:
        with self.lock:
            answer = self._answerers.get(provider)
            if answer is None and self._scripts[provider]:
                return self._scripts[provider].pop(0)
        if answer is not None:
            reply = answer(body)
            return reply if isinstance(reply, Reply) else Reply(body=reply)
        return Reply(body=error_body(provider, 500, f"fake API: no scripted {provider} reply left"),
                     status=500)

    def requests_for(self, provider: str) -> list[Recorded]:
        """The requests ``provider``'s endpoint received, in order."""
        return [r for r in self.requests if r.provider == provider]

    def refusals(self) -> list[str]:
        """The rules broken by refused requests (empty when every request was valid)."""
        return [f"{r.provider}: {r.refused}" for r in self.requests if r.refused]


def bedrock_post(fake: FakeAPI, body: dict[str, Any], model: str = "fake-model") -> Any:
    """POST ``body`` to the fake's Converse endpoint, SigV4-signed as boto3 would sign it.

    A body whose messages hold tool blocks but declares no tools gets a ``toolConfig``
    naming the tools its calls use (as a caller merging its tools into an export would).
    """
    import httpx
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    names = [b["toolUse"]["name"] for m in body.get("messages", []) for b in m["content"]
             if "toolUse" in b]
    if names and "toolConfig" not in body:
        body = {**body, "toolConfig": {"tools": [
            {"toolSpec": {"name": n, "inputSchema": {"json": {"type": "object"}}}}
            for n in dict.fromkeys(names)]}}
    url = f"{fake.base_url('bedrock')}/model/{model}/converse"
    data = json.dumps(body).encode()
    request = AWSRequest(method="POST", url=url, data=data,
                         headers={"content-type": "application/json"})
    key_id, secret = next(iter(AWS_KEYS.items()))
    SigV4Auth(Credentials(key_id, secret), "bedrock", "us-east-1").add_auth(request)
    return httpx.post(url, content=data, headers=dict(request.headers.items()), timeout=60)


@pytest.fixture
def fake_api():
    """A started ``FakeAPI``, stopped after the test. Import it into a conftest to use it."""
    fake = FakeAPI().start()
    yield fake
    fake.stop()
