"""Amazon Bedrock Converse API adapter (``converse`` and ``converse-stream``, SigV4 by botocore).

The pure functions map in both directions and are reused by import/export:

>>> from turnlog.engine.model.messages import Message, Text
>>> body = map_request(ModelRequest(model="amazon.nova-pro-v1:0", system="Be brief.",
...     messages=(Message(role="user", parts=(Text(text="hi"),)),)))
>>> body["system"], body["messages"]
([{'text': 'Be brief.'}], [{'role': 'user', 'content': [{'text': 'hi'}]}])

A content block is an object with one key naming its kind (``text``,
``toolUse``, ``toolResult``, ``reasoningContent``, ``image`` ...). Rules the
mapping keeps (each one a ``ValidationException`` from the real API
otherwise): roles alternate and the first message is the user's (same-role
messages are merged; a history that starts with the model gets ``OPENING``);
the results of one assistant turn are ``toolResult`` blocks of the next user
message, each call answered; no blank text; tool ids match
``[a-zA-Z0-9_.:-]{1,64}`` (``wire_id``/``neutral_id``); a request whose history
holds tool blocks declares tools (``toolConfig``), the history's own names
when the request offers none.

Requests are signed with SigV4 (``botocore``, the extra ``bedrock``);
credentials come from ``aws_access_key_id``/``aws_secret_access_key``
(``aws_session_token``) or botocore's usual chain (``AWS_ACCESS_KEY_ID``,
``AWS_PROFILE`` ...), the region from ``region``, ``AWS_REGION`` or the
profile, the endpoint from ``base_url`` or ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``.
A streamed answer arrives in AWS's binary event-stream framing, read by
botocore's parser.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import httpx
import msgspec

from ..errors import (
    AuthenticationError,
    FormatError,
    MalformedResponseError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
)
from turnlog.engine.model.events import StopReason, ToolSpec
from turnlog.engine.model.messages import (
    EXTRA,
    Image,
    Message,
    Opaque,
    Part,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    Usage,
    render_opaque,
)
from ._common import (
    EMPTY_TEXT,
    count,
    error_for_status,
    error_message,
    mark_cut_off,
    opt_str,
    response_body,
    parse_arguments,
    parse_data_url,
    plan_history,
    require,
    wire_list,
    wire_str,
    with_model,
)
from ._httpx import HTTPXProvider
from ._stream import (
    Assembler,
    AsyncResponseStream,
    ResponseStream,
    StreamDelta,
    json_or_text,
    recorded_events,
)
from .base import ModelRequest, ModelResponse

__all__ = [
    "ASSEMBLER",
    "BASE_URL_ENV",
    "BLOCK_KINDS",
    "DEFAULT_MODEL",
    "DEFAULT_REGION",
    "GENAI_NAME",
    "GENAI_OPERATION",
    "KEY_ENV",
    "NAME",
    "OPENING",
    "PRICE_KEY",
    "SYSTEM_KEY",
    "BedrockAssembler",
    "BedrockProvider",
    "create_provider",
    "detect_entry",
    "export_body",
    "map_messages",
    "map_request",
    "map_response",
    "map_tools",
    "map_usage",
    "neutral_id",
    "read_request",
    "read_response",
    "unmap_messages",
    "unmap_tools",
    "wire_id",
]

NAME = "bedrock"
#: The environment variable of the access key id (its secret is ``AWS_SECRET_ACCESS_KEY``).
KEY_ENV = "AWS_ACCESS_KEY_ID"
#: The vendor its prices are listed under (genai-prices' provider id for Bedrock's models).
PRICE_KEY = "aws"
#: ``gen_ai.provider.name`` and ``gen_ai.operation.name`` of its calls.
GENAI_NAME, GENAI_OPERATION = "aws.bedrock", "chat"
#: The request body's key of the system blocks.
SYSTEM_KEY = "system"
#: The endpoint variable botocore itself reads for this service.
BASE_URL_ENV = "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"
DEFAULT_MODEL = "amazon.nova-pro-v1:0"
DEFAULT_REGION = "us-east-1"
OPENING = "(conversation continues)"
_SIGNING_NAME = "bedrock"

#: The kinds of content block the Converse API defines (each block has one of these keys).
BLOCK_KINDS = frozenset({"text", "image", "document", "video", "audio", "toolUse", "toolResult",
                         "guardContent", "cachePoint", "reasoningContent", "citationsContent",
                         "searchResult", "toolAddition", "toolRemoval"})
_STOP: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "guardrail_intervened": "refusal",
    "content_filtered": "refusal",
}
_INFERENCE = {"max_tokens": "maxTokens", "temperature": "temperature", "top_p": "topP",
              "stop": "stopSequences"}
_ID_OK = re.compile(r"[a-zA-Z0-9_.:-]{1,64}")
_ID_MARK, _HASH_MARK = "x_tl", "x_th"  # an escaped foreign id; a hashed one (too long)
_IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg",
                  "image/gif": "gif", "image/webp": "webp"}
#: Stream exceptions (``:exception-type``) -> the HTTP status they stand for.
_EXCEPTIONS = {"throttlingException": 429, "validationException": 400,
               "serviceUnavailableException": 503, "internalServerException": 500,
               "modelStreamErrorException": 500}


# --- ids and tools ----------------------------------------------------------------


def wire_id(call_id: str) -> str:
    """A tool id Bedrock accepts: valid ids pass unchanged, others are escaped reversibly.

    >>> wire_id("tooluse_1"), wire_id("call 1")
    ('tooluse_1', 'x_tlcall_201')
    >>> neutral_id(wire_id("call 1"))
    'call 1'

    An escaped id longer than 64 characters becomes ``x_th`` + a hash (as
    OpenAI's long ids do): the same id always maps to the same wire id.
    """
    if _ID_OK.fullmatch(call_id) and not call_id.startswith((_ID_MARK, _HASH_MARK)):
        return call_id
    out = [_ID_MARK]
    for ch in call_id:
        if ch.isascii() and (ch.isalnum() or ch in "-.:"):
            out.append(ch)
        else:
            out.extend(f"_{b:02x}" for b in ch.encode())
    escaped = "".join(out)
    if len(escaped) <= 64:
        return escaped
    return _HASH_MARK + hashlib.sha256(call_id.encode()).hexdigest()[:40]


def neutral_id(wire: str) -> str:
    """The neutral id a ``wire_id`` came from (ids Bedrock made pass unchanged)."""
    if not wire.startswith(_ID_MARK):
        return wire
    body = wire[len(_ID_MARK):]
    return re.sub(rb"_([0-9a-f]{2})", lambda m: bytes([int(m.group(1), 16)]),
                  body.encode()).decode(errors="replace")


def map_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as Converse ``toolConfig.tools`` (``toolSpec`` with a JSON input schema)."""
    out = []
    for t in tools:
        spec: dict[str, Any] = {"name": t.name, "inputSchema": {"json": t.parameters}}
        if t.description:  # the API refuses an empty description
            spec["description"] = t.description
        out.append({"toolSpec": spec})
    return out


def unmap_tools(tools: Sequence[dict[str, Any]]) -> list[ToolSpec]:
    """Converse ``toolSpec`` tools back to neutral specs (other tool kinds are skipped)."""
    specs = []
    for i, tool in enumerate(tools):
        spec = tool.get("toolSpec") if isinstance(tool, dict) else None
        if not isinstance(spec, dict):
            continue
        if not isinstance(spec.get("name"), str):
            raise FormatError(f"bedrock tools[{i}].toolSpec.name: expected a string")
        schema = (spec.get("inputSchema") or {}).get("json")
        specs.append(ToolSpec(name=spec["name"], description=opt_str(spec, "description") or "",
                              parameters=schema if isinstance(schema, dict)
                              else {"type": "object", "properties": {}}))
    return specs


# --- neutral -> wire ------------------------------------------------------------------


def _image(image: Image) -> dict[str, Any]:
    inline = (image.media_type, image.data) if image.data is not None else parse_data_url(
        image.url or "")
    if inline is None or inline[0] not in _IMAGE_FORMATS:
        # only inline bytes (or S3) are accepted: a web URL goes as what it is
        return {"text": f"[image: {image.url or image.media_type}]"}
    return {"image": {"format": _IMAGE_FORMATS[inline[0]], "source": {"bytes": inline[1]}}}


def _block(part: Part) -> dict[str, Any]:
    match part:
        case Text():
            return {"text": part.text if part.text.strip() else EMPTY_TEXT}
        case Thinking(redacted=True):
            return {"reasoningContent": {"redactedContent": part.signature or part.text}}
        case Thinking():
            text = {"text": part.text} | ({"signature": part.signature} if part.signature else {})
            return {"reasoningContent": {"reasoningText": text}}
        case ToolCall():
            return {"toolUse": {"toolUseId": wire_id(part.id), "name": part.name,
                                "input": part.arguments}}
        case ToolResult():
            content = [{"text": part.content}] if part.content.strip() else []
            return {"toolResult": {"toolUseId": wire_id(part.call_id), "content": content,
                                   "status": "error" if part.is_error else "success"}}
        case Image():
            return _image(part)
        case Opaque():
            return dict(part.data) if isinstance(part.data, dict) else {"text": part.kind}
    raise TypeError(f"unknown part {part!r}")  # pragma: no cover


def _sendable(part: Part) -> bool:
    # reasoning goes back only with its signature (or redacted), as the models require
    return type(part) is not Thinking or part.redacted or bool(part.signature)


def _blocks(parts: Sequence[Part], extra: dict[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if type(part) is Opaque and part.kind == EXTRA:
            extra.update(part.data if isinstance(part.data, dict) else {})
        elif type(part) is Opaque and part.attach and blocks:
            blocks[-1][part.kind] = part.data
        elif (type(part) is not Opaque or not part.attach) and _sendable(part):
            blocks.append(_block(part))
    return blocks


def map_messages(system: str, messages: Sequence[Message]
                 ) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """``(system blocks or None, messages)`` in the Converse shape (see the module doc)."""
    system_text, entries = plan_history(system, messages, NAME)
    wire: list[dict[str, Any]] = []
    for entry in entries:
        role = "assistant" if entry.role == "assistant" else "user"
        extra: dict[str, Any] = {}
        blocks = _blocks(entry.parts, extra)
        if not blocks and not extra:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)  # toolResult blocks stay first
            wire[-1].update(extra)
        else:
            wire.append({"role": role, "content": blocks} | extra)
    if wire and wire[0]["role"] == "assistant":
        wire.insert(0, {"role": "user", "content": [{"text": OPENING}]})
    return ([{"text": system_text}] if system_text else None), wire


def _history_tools(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    names = dict.fromkeys(b["toolUse"]["name"] for m in messages for b in m["content"]
                          if isinstance(b.get("toolUse"), dict))
    return [{"toolSpec": {"name": n, "inputSchema": {"json": {"type": "object"}}}}
            for n in names]


def map_request(request: ModelRequest) -> dict[str, Any]:
    """The Converse request body for ``request`` (the model goes in the URL).

    Parameters mapped into ``inferenceConfig``: ``max_tokens``, ``temperature``,
    ``top_p``, ``stop``; others are ignored.
    """
    system, messages = map_messages(request.system, request.messages)
    body: dict[str, Any] = {"messages": messages}
    if system:
        body["system"] = system
    tools = map_tools(request.tools)
    if not tools and any("toolUse" in b or "toolResult" in b
                         for m in messages for b in m["content"]):
        tools = _history_tools(messages)  # the API wants tools declared beside tool blocks
    if tools:
        body["toolConfig"] = {"tools": tools}
    config = {wire: request.parameters[key] for key, wire in _INFERENCE.items()
              if request.parameters.get(key) is not None}
    if isinstance(config.get("stopSequences"), str):
        config["stopSequences"] = [config["stopSequences"]]
    if config:
        body["inferenceConfig"] = config
    return body


def export_body(system: str, messages: Sequence[Message]) -> dict[str, Any]:
    """``{"system"?, "messages"}``: a Converse request's conversation."""
    blocks, wire = map_messages(system, messages)
    return {"system": blocks, "messages": wire} if blocks else {"messages": wire}


# --- wire -> neutral ----------------------------------------------------------------------


def map_usage(usage: Any) -> Usage:
    """Converse ``usage`` in neutral form.

    Converse's cache reads and writes are outside its ``inputTokens`` (its
    ``totalTokens`` adds them): the neutral input adds them.
    """
    read = count(usage, "cacheReadInputTokens")
    write = count(usage, "cacheWriteInputTokens")
    return Usage(input_tokens=count(usage, "inputTokens") + read + write,
                 output_tokens=count(usage, "outputTokens"),
                 cached_input_tokens=read, cache_write_tokens=write,
                 raw=usage if isinstance(usage, dict) else None)


def _kind(block: Any, where: str) -> str:
    if not isinstance(block, dict):
        raise MalformedResponseError(f"response {where} is not an object", provider=NAME)
    kinds = [k for k in block if k in BLOCK_KINDS]
    if len(kinds) != 1:
        raise MalformedResponseError(f"unknown content block {sorted(map(str, block))[:4]} at "
                                     f"{where}", provider=NAME)
    return kinds[0]


def _assistant_part(block: dict[str, Any], kind: str, where: str) -> Part:
    if kind == "text":
        return Text(text=require(block, "text", str, where, NAME))
    if kind == "toolUse":
        use = require(block, "toolUse", dict, where, NAME)
        args, raw, invalid = parse_arguments(use.get("input", {}))
        return ToolCall(id=neutral_id(require(use, "toolUseId", str, f"{where}.toolUse", NAME)),
                        name=require(use, "name", str, f"{where}.toolUse", NAME),
                        arguments=args if invalid is None else {}, raw_arguments=raw,
                        invalid=invalid)
    if kind == "reasoningContent":
        reasoning = require(block, "reasoningContent", dict, where, NAME)
        if isinstance(reasoning.get("redactedContent"), str):
            return Thinking(text="", signature=reasoning["redactedContent"], provider=NAME,
                            redacted=True)
        text = require(reasoning, "reasoningText", dict, f"{where}.reasoningContent", NAME)
        return Thinking(text=require(text, "text", str, f"{where}.reasoningText", NAME),
                        signature=opt_str(text, "signature"), provider=NAME)
    return Opaque(provider=NAME, kind=kind, data=block)


def map_response(body: dict[str, Any]) -> ModelResponse:
    """A Converse response body in neutral form (``raw`` is ``body``).

    Raises ``MalformedResponseError`` naming the missing or unknown piece.
    """
    body = response_body(body, NAME)
    message = require(require(body, "output", dict, "body", NAME), "message", dict, "output",
                      NAME)
    content = require(message, "content", list, "output.message", NAME)
    parts = [_assistant_part(b, _kind(b, f"content[{i}]"), f"content[{i}]")
             for i, b in enumerate(content)]
    stop = _STOP.get(opt_str(body, "stopReason") or "", "other")
    if stop == "end_turn" and any(type(p) is ToolCall for p in parts):
        stop = "tool_use"
    return ModelResponse(parts=tuple(mark_cut_off(parts, stop)), stop_reason=stop,
                         usage=map_usage(body.get("usage")), provider=NAME, raw=body)


def _result_text(content: Any, where: str) -> str:
    out = []
    for block in wire_list(content, where, NAME):
        if isinstance(block.get("text"), str):
            out.append(block["text"])
        elif "json" in block:
            out.append(json.dumps(block["json"], ensure_ascii=False))
        else:
            kind = next(iter(block), "block")
            out.append(render_opaque(Opaque(provider=NAME, kind=str(kind), data=block)) or "")
    return "".join(out)


def _system_text(system: Any) -> str:
    if system is None or isinstance(system, str):
        return system or ""
    return "\n\n".join(wire_str(b, "text", "system", NAME)
                       for b in wire_list(system, "system", NAME) if "text" in b)


def _unmap_user(blocks: list[dict[str, Any]], where: str,
                names: dict[str, str]) -> list[Message]:
    out: list[Message] = []
    user: list[Part] = []
    for j, block in enumerate(blocks):
        at = f"{where}[{j}]"
        kinds = [k for k in block if k in BLOCK_KINDS]
        kind = kinds[0] if len(kinds) == 1 else None
        if kind == "toolResult":
            result = block["toolResult"] if isinstance(block["toolResult"], dict) else {}
            call_id = neutral_id(wire_str(result, "toolUseId", f"{at}.toolResult", NAME))
            out.append(Message(role="tool", parts=(ToolResult(
                call_id=call_id, name=names.get(call_id, ""),
                content=_result_text(result.get("content"), f"{at}.toolResult.content"),
                is_error=result.get("status") == "error"),)))
        elif kind == "text":
            user.append(Text(text=wire_str(block, "text", at, NAME)))
        elif kind == "image" and isinstance(block["image"], dict) and isinstance(
                (block["image"].get("source") or {}).get("bytes"), str):
            image = block["image"]
            user.append(Image(media_type=f"image/{wire_str(image, 'format', at, NAME) or 'png'}",
                              data=image["source"]["bytes"]))
        elif kind is not None:
            user.append(Opaque(provider=NAME, kind=kind, data=block))
        else:
            raise FormatError(f"bedrock {at}: unknown content block {sorted(map(str, block))[:4]}")
    return out + ([Message(role="user", parts=tuple(user))] if user else [])


def unmap_messages(system: Any, messages: Any) -> tuple[str, list[Message]]:
    """Converse ``system`` blocks + ``messages`` back to ``(system text, neutral messages)``.

    Each ``toolResult`` becomes its own ``tool`` message (the engine's shape);
    text and images beside it follow as a user message. Raises
    ``FormatError`` saying where for anything it cannot read.
    """
    names: dict[str, str] = {}
    out: list[Message] = []
    sys_text = _system_text(system)
    for i, msg in enumerate(wire_list(messages, "messages", NAME)):
        role, where = msg.get("role"), f"messages[{i}].content"
        blocks = wire_list(msg.get("content"), where, NAME)
        extra = [Opaque(provider=NAME, kind=EXTRA, data={k: v for k, v in msg.items()
                                                          if k not in ("role", "content")})]
        extra = extra if extra[0].data else []
        if role == "assistant":
            try:
                parts = [_assistant_part(b, _kind(b, f"{where}[{j}]"), f"{where}[{j}]")
                         for j, b in enumerate(blocks)]
            except MalformedResponseError as exc:
                raise FormatError(str(exc).replace("response ", "transcript ")) from None
            out.append(Message(role="assistant", parts=(*parts, *extra), provider=NAME))
            names.update((p.id, p.name) for p in parts if type(p) is ToolCall)
        elif role == "user":
            read = _unmap_user(blocks, where, names)
            if extra and read and read[-1].role == "user":
                read[-1] = Message(role="user", parts=(*read[-1].parts, *extra))
            out.extend(read)
        else:
            raise FormatError(f"bedrock messages[{i}].role: unknown role {role!r}")
    return sys_text, out


# --- import: entries, request bodies, responses ------------------------------------------


def _our_blocks(content: Any) -> bool:
    return isinstance(content, list) and bool(content) and all(
        isinstance(b, dict) and "type" not in b and len(b.keys() & BLOCK_KINDS) == 1
        for b in content)


def detect_entry(entry: Any) -> bool:
    """Whether ``entry`` is a Converse message: a role and content blocks keyed by kind.

    >>> detect_entry({"role": "user", "content": [{"text": "hi"}]})
    True
    >>> detect_entry({"role": "user", "content": [{"type": "text", "text": "hi"}]})
    False
    """
    return (isinstance(entry, dict) and entry.get("role") in ("user", "assistant")
            and _our_blocks(entry.get("content")))


def read_request(doc: dict[str, Any]) -> tuple[list[Any], dict[str, Any]] | None:
    """``(messages, envelope)`` of a Converse request body, else ``None``.

    It is one when it has ``inferenceConfig``/``toolConfig``, system blocks
    keyed by kind, or a message of content blocks keyed by kind. ``modelId``
    is the model, ``toolConfig``'s tool specs are read here, the rest are the
    request's parameters.
    """
    messages, system = doc.get("messages"), doc.get("system")
    if not isinstance(messages, list):
        return None
    if not ("inferenceConfig" in doc or "toolConfig" in doc or _our_blocks(system)
            or any(detect_entry(m) for m in messages)):
        return None
    envelope: dict[str, Any] = {"format": NAME}
    if system is not None:
        envelope["system"] = system
    if isinstance(doc.get("modelId"), str):
        envelope["model"] = doc["modelId"]
    config = doc.get("toolConfig") if isinstance(doc.get("toolConfig"), dict) else {}
    tools = config.get("tools") if isinstance(config.get("tools"), list) else []
    envelope["tool_specs"] = unmap_tools(tools)
    others = [t for t in tools if not (isinstance(t, dict) and isinstance(t.get("toolSpec"), dict))]
    if others:
        envelope["tools"] = others
    params = {k: v for k, v in doc.items() if k not in ("messages", "system", "modelId",
                                                         "toolConfig")}
    if {k: v for k, v in config.items() if k != "tools"}:
        params["toolConfig"] = {k: v for k, v in config.items() if k != "tools"}
    if params:
        envelope["parameters"] = params
    return messages, envelope


def read_response(body: Any) -> tuple[list[Any], str | None, Any] | None:
    """``([assistant message], None, usage)`` of a Converse response, or of a
    ConverseStream response recorded as its events (``{"stream": [...]}`` as boto3
    returns it, or ``{"_sse_events": [...]}``), each ``{event type: payload}``."""
    events = (body.get("stream") if isinstance(body, dict) and isinstance(body.get("stream"), list)
              else recorded_events(body))
    if events is not None:
        if not (events and isinstance(events[0], dict) and "messageStart" in events[0]):
            return None
        assembler = BedrockAssembler()
        for event in events:
            assembler.feed(event)
        body = assembler.body()
    elif not (isinstance(body, dict) and isinstance(body.get("output"), dict)):
        return None
    message = body["output"].get("message")
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        return None
    usage = body.get("usage")
    return ([{"role": "assistant", "content": message["content"]}], None,
            usage if isinstance(usage, dict) else None)


# --- streaming ----------------------------------------------------------------------


class BedrockAssembler(Assembler):
    """ConverseStream events (``{"messageStart": {...}}`` ... ``{"metadata": {...}}``) into
    a Converse response body."""

    def __init__(self) -> None:
        super().__init__()
        self.top: dict[str, Any] = {}
        self.role = "assistant"
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json: dict[int, str] = {}

    def _feed(self, event: dict[str, Any]) -> list[StreamDelta]:
        self.started = True
        (kind, data), = event.items()
        if kind == "messageStart":
            self.role = data.get("role") or self.role
        elif kind == "contentBlockStart":
            start = data.get("start") or {}
            if isinstance(start.get("toolUse"), dict):
                self.blocks[data["contentBlockIndex"]] = {"toolUse": dict(start["toolUse"])}
                self.json[data["contentBlockIndex"]] = ""
        elif kind == "contentBlockDelta":
            return self._delta(data["contentBlockIndex"], data["delta"])
        elif kind == "contentBlockStop":
            self._close(data["contentBlockIndex"])
        elif kind == "messageStop":
            self.top.update({k: v for k, v in data.items() if k != "p"})
            self.done = True
        elif kind == "metadata":
            self.top.update({k: v for k, v in data.items() if k != "p"})
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[StreamDelta]:
        if isinstance(delta.get("text"), str):
            block = self.blocks.setdefault(index, {"text": ""})
            block["text"] += delta["text"]
            return [StreamDelta(kind="text", text=delta["text"], index=index)]
        if isinstance(delta.get("toolUse"), dict):
            piece = delta["toolUse"]["input"]
            self.json[index] = self.json.get(index, "") + piece
            use = self.blocks.get(index, {}).get("toolUse", {})
            return [StreamDelta(kind="tool_arguments", text=piece, index=index,
                                name=use.get("name"), call_id=use.get("toolUseId"))]
        if isinstance(delta.get("reasoningContent"), dict):
            reasoning = self.blocks.setdefault(index, {"reasoningContent": {}})["reasoningContent"]
            piece = delta["reasoningContent"]
            if isinstance(piece.get("redactedContent"), str):
                reasoning["redactedContent"] = piece["redactedContent"]
                return []
            text = reasoning.setdefault("reasoningText", {"text": ""})
            if isinstance(piece.get("signature"), str):
                text["signature"] = piece["signature"]
            if isinstance(piece.get("text"), str):
                text["text"] += piece["text"]
                return [StreamDelta(kind="thinking", text=piece["text"], index=index)]
        return []

    def _close(self, index: int) -> None:
        text = self.json.pop(index, None)
        if text is not None:
            self.blocks[index]["toolUse"]["input"] = json_or_text(text)

    def _body(self) -> dict[str, Any]:
        for index in list(self.json):  # an open tool call of a cut stream: its raw text
            self._close(index)
        content = [self.blocks[i] for i in sorted(self.blocks)]
        return {"output": {"message": {"role": self.role, "content": content}}, **self.top}


#: The class folding this wire's stream events into its unstreamed body.
ASSEMBLER = BedrockAssembler


def _botocore() -> Any:
    """botocore (``pip install -e '.[bedrock]'``), imported when a client is built."""
    try:
        import botocore.auth
        import botocore.awsrequest
        import botocore.credentials
        import botocore.eventstream
        import botocore.exceptions
        import botocore.session
    except ImportError as exc:
        raise ImportError("the Bedrock provider needs botocore: "
                          "pip install -e '.[bedrock]'") from exc
    return botocore


def _stream_event(message: Any) -> dict[str, Any]:
    """One decoded event-stream message as ``{event type: payload}``; an exception raises."""
    headers = message.headers
    try:
        payload = json.loads(message.payload or b"{}")
    except ValueError:
        raise MalformedResponseError(f"stream event is not JSON: {message.payload[:80]!r}",
                                     provider=NAME) from None
    if headers.get(":message-type") == "exception":
        kind = str(headers.get(":exception-type"))
        text = error_message(payload, kind)
        raise error_for_status(_EXCEPTIONS.get(kind, 500), f"{kind}: {text}", NAME)
    if headers.get(":message-type") != "event" or not isinstance(payload, dict):
        raise MalformedResponseError(f"unexpected stream message {dict(headers)}", provider=NAME)
    return {str(headers.get(":event-type")): payload}


@contextmanager
def _translate_errors() -> Iterator[None]:
    """Turn httpx and event-stream errors into turnlog ``ProviderError`` subclasses."""
    try:
        yield
    except httpx.TimeoutException:
        raise ProviderTimeout("no answer before the timeout", provider=NAME) from None
    except httpx.HTTPError as exc:
        raise ProviderConnectionError(f"cannot reach the API: {type(exc).__name__}: {exc}",
                                      provider=NAME) from None
    except _botocore().eventstream.ParserError as exc:
        raise MalformedResponseError(f"broken event stream: {exc}", provider=NAME) from None


class BedrockProvider(HTTPXProvider):
    """The Bedrock Converse API behind the neutral ``Provider`` interface (see the module doc).

    ``client`` / ``async_client`` may be an ``httpx.Client`` /
    ``httpx.AsyncClient`` to reuse. ``max_retries`` retries failed connections
    only. Everything returned is masked of the secret key (``RemoteProvider``).
    """

    name = NAME

    def __init__(self, model: str | None = None, *, region: str | None = None,
                 base_url: str | None = None, aws_access_key_id: str | None = None,
                 aws_secret_access_key: str | None = None, aws_session_token: str | None = None,
                 timeout: float = 60.0, max_retries: int = 0,
                 client: httpx.Client | None = None,
                 async_client: httpx.AsyncClient | None = None) -> None:
        botocore = _botocore()
        if aws_access_key_id or aws_secret_access_key:
            if not (aws_access_key_id and aws_secret_access_key):
                raise AuthenticationError("pass both aws_access_key_id= and "
                                          "aws_secret_access_key=", provider=NAME)
            self._credentials = botocore.credentials.Credentials(
                aws_access_key_id, aws_secret_access_key, aws_session_token)
        try:  # botocore's chain: environment, profile, SSO, container, instance role
            session = botocore.session.Session()
            if not (aws_access_key_id and aws_secret_access_key):
                self._credentials = session.get_credentials()
            configured = region or os.environ.get("AWS_REGION") or session.get_config_variable(
                "region")
        except botocore.exceptions.BotoCoreError as exc:  # an unknown profile, a bad config
            raise AuthenticationError(f"AWS credentials: {exc}", provider=NAME) from None
        if self._credentials is None:
            raise AuthenticationError(
                f"no AWS credentials: set {KEY_ENV} and AWS_SECRET_ACCESS_KEY (or "
                "AWS_PROFILE), or pass aws_access_key_id= and aws_secret_access_key=",
                provider=NAME)
        self.model = model or DEFAULT_MODEL
        self.region = configured or DEFAULT_REGION
        self.base_url = (base_url or os.environ.get(BASE_URL_ENV)
                         or f"https://bedrock-runtime.{self.region}.amazonaws.com").rstrip("/")
        self._clients(client, async_client, timeout, max_retries)

    def _secret(self) -> str | None:
        return self._credentials.get_frozen_credentials().secret_key

    def _call(self, request: ModelRequest, operation: str
              ) -> tuple[str, bytes, dict[str, str], str]:
        """``(url, body bytes, signed headers, model)`` of one Converse call."""
        if self._closed:
            raise ProviderError("the provider was closed", provider=self.name)
        model = request.model or self.model
        url = f"{self.base_url}/model/{quote(model, safe='')}/{operation}"
        data = json.dumps(map_request(request), ensure_ascii=False).encode()
        botocore = _botocore()
        signed = botocore.awsrequest.AWSRequest(method="POST", url=url, data=data, headers={
            "content-type": "application/json",
            "accept": ("application/vnd.amazon.eventstream" if operation.endswith("stream")
                       else "application/json")})
        botocore.auth.SigV4Auth(self._credentials.get_frozen_credentials(), _SIGNING_NAME,
                                self.region).add_auth(signed)
        return url, data, dict(signed.headers.items()), model

    def _finish(self, response: httpx.Response, model: str) -> ModelResponse:
        text = response.text
        if response.status_code >= 400:
            try:
                data = self._body(text)
            except MalformedResponseError:
                data = None
            message = error_message(data, self.redactor.text(text)[:200]
                                    or response.reason_phrase)
            kind = response.headers.get("x-amzn-errortype", "").split(":")[0]
            raise error_for_status(response.status_code, f"{kind}: {message}" if kind else message,
                                   NAME, response.headers)
        mapped = with_model(map_response(self._body(text)), model)
        request_id = response.headers.get("x-amzn-requestid")
        return msgspec.structs.replace(mapped, response_id=request_id) if request_id else mapped

    def _complete(self, request: ModelRequest) -> ModelResponse:
        url, data, headers, model = self._call(request, "converse")
        with _translate_errors():
            response = self.client.post(url, content=data, headers=headers)
            response.read()
        return self._finish(response, model)

    async def _acomplete(self, request: ModelRequest) -> ModelResponse:
        url, data, headers, model = self._call(request, "converse")
        with _translate_errors():
            response = await self.async_client.post(url, content=data, headers=headers)
            await response.aread()
        return self._finish(response, model)

    def _finisher(self, model: str) -> Any:
        return lambda text: with_model(map_response(self._body(text)), model)

    def stream(self, request: ModelRequest) -> ResponseStream:
        """Send ``request`` to ``converse-stream``; iterate the handle for deltas.

        The handle's ``response`` is then what ``complete`` would have returned.
        """
        url, data, headers, model = self._call(request, "converse-stream")

        def events() -> Iterator[dict[str, Any]]:
            with self.client.stream("POST", url, content=data, headers=headers) as response:
                if response.status_code >= 400:
                    response.read()
                    self._finish(response, model)  # raises the error the status means
                buffer = _botocore().eventstream.EventStreamBuffer()
                for chunk in response.iter_bytes():
                    buffer.add_data(chunk)
                    for message in buffer:
                        yield _stream_event(message)

        return ResponseStream(self, events, BedrockAssembler(), self._finisher(model),
                              _translate_errors)

    def astream(self, request: ModelRequest) -> AsyncResponseStream:
        """``stream`` on the async client: ``async for`` the handle."""
        url, data, headers, model = self._call(request, "converse-stream")

        async def events() -> AsyncIterator[dict[str, Any]]:
            async with self.async_client.stream("POST", url, content=data,
                                                headers=headers) as response:
                if response.status_code >= 400:
                    await response.aread()
                    self._finish(response, model)
                buffer = _botocore().eventstream.EventStreamBuffer()
                async for chunk in response.aiter_bytes():
                    buffer.add_data(chunk)
                    for message in buffer:
                        yield _stream_event(message)

        return AsyncResponseStream(self, events, BedrockAssembler(), self._finisher(model),
                                   _translate_errors)


def create_provider(model: str | None = None, **kw: Any) -> BedrockProvider:
    """A ``BedrockProvider`` (``kw``: ``region``, ``base_url``, ``aws_access_key_id`` ...)."""
    return BedrockProvider(model, **kw)
