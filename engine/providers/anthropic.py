"""Anthropic Messages API adapter (official ``anthropic`` SDK).

The pure functions map in both directions and are reused by import/export:

>>> from turnlog.engine.model.messages import Message, Text
>>> body = map_request(ModelRequest(model="claude-x", system="Be brief.",
...     messages=(Message(role="user", parts=(Text(text="hi"),)),)))
>>> body["system"], body["messages"]
('Be brief.', [{'role': 'user', 'content': [{'type': 'text', 'text': 'hi'}]}])

Rules the mapping keeps (each one a 400 from the real API otherwise): the
results of one assistant turn go in ONE user message, ``tool_result`` blocks
first; every ``tool_use`` is answered; consecutive same-role messages are
merged; the system text is only the top-level ``system``; no empty text
blocks; tool ids match ``^[a-zA-Z0-9_-]+$`` (``wire_id``/``neutral_id``);
failed results carry ``is_error``; a history that starts with the model gets
a first user message ``OPENING``. Sampling parameters go through
``extra_body`` because current SDK releases no longer take them as arguments.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..errors import (
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
    parse_arguments,
    parse_data_url,
    plan_history,
    require,
    response_body,
    wire_list,
    wire_str,
)
from ._sdk import SDKProvider
from ._stream import (
    Assembler,
    StreamDelta,
    json_or_text,
    recorded_events,
    recorded_usage,
)
from .base import ModelRequest, ModelResponse

__all__ = [
    "ASSEMBLER",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_MODEL",
    "GENAI_NAME",
    "GENAI_OPERATION",
    "KEY_ENV",
    "NAME",
    "OPENING",
    "PRICE_KEY",
    "SERVER_BLOCKS",
    "SYSTEM_KEY",
    "AnthropicAssembler",
    "AnthropicProvider",
    "create_provider",
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

NAME = "anthropic"
#: The environment variable of the API key.
KEY_ENV = "ANTHROPIC_API_KEY"
#: The vendor its prices are listed under (genai-prices' provider id).
PRICE_KEY = NAME
#: ``gen_ai.provider.name`` and ``gen_ai.operation.name`` of its calls.
GENAI_NAME, GENAI_OPERATION = "anthropic", "chat"
#: The request body's key of the system text.
SYSTEM_KEY = "system"
DEFAULT_MODEL = "claude-sonnet-4-5"
DEFAULT_MAX_TOKENS = 4096

_FINISH_REASON_MAP: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
    "pause_turn": "other",
}
_SAMPLING = ("temperature", "top_p", "top_k")
OPENING = "(conversation continues)"
_ID_OK = re.compile(r"[a-zA-Z0-9_-]+")
_ID_MARK = "x_tl"  # prefix of an escaped foreign id; Anthropic's own ids start with "toolu_"

#: Block types kept verbatim as ``Opaque`` parts (server tools, documents, search results).
SERVER_BLOCKS = frozenset({
    "server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
    "code_execution_tool_result", "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result", "tool_search_tool_result", "mcp_tool_use",
    "mcp_tool_result", "mcp_tool_listing", "container_upload", "document", "search_result",
    "compaction", "advisor_tool_result", "fallback", "tool_addition", "tool_removal",
})
#: The keys of each block type turnlog reads into its own parts; others ride along as
#: attached ``Opaque`` parts (``citations``, ``cache_control``, ``caller`` ...).
_OWN_KEYS = {"text": {"type", "text"}, "thinking": {"type", "thinking", "signature"},
             "redacted_thinking": {"type", "data"}, "tool_use": {"type", "id", "name", "input"},
             "image": {"type", "source"}}


def wire_id(call_id: str) -> str:
    """A tool id Anthropic accepts, reversibly: valid ids pass unchanged.

    Any other id (or a valid one that happens to start with the escape mark)
    becomes ``x_tl`` + the id with every byte outside ``[A-Za-z0-9-]`` written
    as ``_hh``. The map is injective and ``neutral_id`` inverts it.

    >>> wire_id("call_1"), wire_id("functions.add:0")
    ('call_1', 'x_tlfunctions_2eadd_3a0')
    >>> neutral_id(wire_id("functions.add:0"))
    'functions.add:0'
    """
    if _ID_OK.fullmatch(call_id) and not call_id.startswith(_ID_MARK):
        return call_id
    out = [_ID_MARK]
    for ch in call_id:
        if ch.isascii() and (ch.isalnum() or ch == "-"):
            out.append(ch)
        else:
            out.extend(f"_{b:02x}" for b in ch.encode())
    return "".join(out)


def neutral_id(wire: str) -> str:
    """The neutral id a ``wire_id`` came from (ids Anthropic made pass unchanged)."""
    if not wire.startswith(_ID_MARK):
        return wire
    body = wire[len(_ID_MARK):]
    return re.sub(rb"_([0-9a-f]{2})", lambda m: bytes([int(m.group(1), 16)]),
                  body.encode()).decode(errors="replace")


def map_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as Anthropic ``tools`` entries."""
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in tools]


def unmap_tools(tools: Sequence[dict[str, Any]]) -> list[ToolSpec]:
    """Anthropic ``tools`` entries back to neutral specs."""
    return [ToolSpec(name=t["name"], description=t.get("description", ""),
                     parameters=t.get("input_schema") or {"type": "object", "properties": {}})
            for t in tools]


def _image_block(image: Image) -> dict[str, Any]:
    if image.data is not None:
        return {"type": "image", "source": {"type": "base64", "media_type": image.media_type,
                                            "data": image.data}}
    inline = parse_data_url(image.url or "")
    if inline:
        return {"type": "image", "source": {"type": "base64", "media_type": inline[0],
                                            "data": inline[1]}}
    return {"type": "image", "source": {"type": "url", "url": image.url or ""}}


def _block(part: Part) -> dict[str, Any]:
    match part:
        case Text():
            return {"type": "text", "text": part.text}
        case Thinking(redacted=True):
            return {"type": "redacted_thinking", "data": part.signature or part.text}
        case Thinking():
            block = {"type": "thinking", "thinking": part.text}
            return block | ({"signature": part.signature} if part.signature else {})
        case ToolCall():
            return {"type": "tool_use", "id": wire_id(part.id), "name": part.name,
                    "input": part.arguments}
        case ToolResult():
            block = {"type": "tool_result", "tool_use_id": wire_id(part.call_id)}
            block |= {"content": part.content} if part.content else {}
            return block | ({"is_error": True} if part.is_error else {})
        case Image():
            return _image_block(part)
        case Opaque():
            return dict(part.data) if isinstance(part.data, dict) else {"type": part.kind}
    raise TypeError(f"unknown part {part!r}")  # pragma: no cover


def _sendable(part: Part) -> bool:
    # a thinking block goes back only with its signature (the API refuses it without one)
    return type(part) is not Thinking or part.redacted or bool(part.signature)


def _blocks(parts: Sequence[Part], extra: dict[str, Any]) -> list[dict[str, Any]]:
    """The blocks of ``parts``; attached parts set their field on the block before them."""
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if type(part) is Opaque and part.kind == EXTRA:
            extra.update(part.data if isinstance(part.data, dict) else {})
        elif type(part) is Opaque and part.attach and blocks:
            blocks[-1][part.kind] = part.data
        elif type(part) is Text and not part.text.strip():
            blocks.append({"type": "text", "text": EMPTY_TEXT})  # blank text is refused
        elif (type(part) is not Opaque or not part.attach) and _sendable(part):
            blocks.append(_block(part))
    return blocks


def map_messages(system: str, messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """``(system, messages)`` in Anthropic's shape; see the module doc for the rules kept."""
    system_text, entries = plan_history(system, messages, NAME)
    wire: list[dict[str, Any]] = []
    for entry in entries:
        role = "assistant" if entry.role == "assistant" else "user"
        extra: dict[str, Any] = {}
        blocks = _blocks(entry.parts, extra)
        if not blocks and not extra:
            continue
        if extra:
            wire.append({"role": role, "content": blocks} | extra)
        elif wire and wire[-1]["role"] == role:
            # merged; tool_result blocks stay first because results follow their assistant
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    if wire and wire[0]["role"] == "assistant":
        # the API wants a user turn first; a history that starts with the model gets one
        wire.insert(0, {"role": "user", "content": [{"type": "text", "text": OPENING}]})
    return system_text, wire


def map_request(request: ModelRequest) -> dict[str, Any]:
    """The complete Messages API request body for ``request``.

    Parameters mapped: ``max_tokens`` (default ``DEFAULT_MAX_TOKENS``, the API
    requires one), ``temperature``, ``top_p``, ``top_k``, ``stop``; others are
    ignored.
    """
    system, messages = map_messages(request.system, request.messages)
    params = request.parameters
    body: dict[str, Any] = {"model": request.model, "messages": messages,
                            "max_tokens": int(params.get("max_tokens") or DEFAULT_MAX_TOKENS)}
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = map_tools(request.tools)
    stop = params.get("stop")
    if stop:
        body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    body.update({k: params[k] for k in _SAMPLING if params.get(k) is not None})
    return body


def map_usage(usage: Any) -> Usage:
    """Messages API ``usage`` in neutral form.

    Anthropic's cache reads and writes are *outside* its ``input_tokens``: the
    neutral input adds them. ``cache_creation.ephemeral_1h_input_tokens`` is
    the part of the writes kept for an hour.
    """
    read = count(usage, "cache_read_input_tokens")
    write = count(usage, "cache_creation_input_tokens")
    split = usage.get("cache_creation") if isinstance(usage, dict) else None
    hour = count(split, "ephemeral_1h_input_tokens")
    if isinstance(split, dict) and not write:  # only the split was sent
        write = hour + count(split, "ephemeral_5m_input_tokens")
    return Usage(input_tokens=count(usage, "input_tokens") + read + write,
                 output_tokens=count(usage, "output_tokens"),
                 cached_input_tokens=read, cache_write_tokens=write,
                 cache_write_1h_tokens=min(hour, write),
                 raw=usage if isinstance(usage, dict) else None)


def _own_part(block: Any, kind: str, where: str) -> Part:
    if kind == "text":
        return Text(text=require(block, "text", str, where, NAME))
    if kind == "thinking":
        return Thinking(text=require(block, "thinking", str, where, NAME),
                        signature=opt_str(block, "signature"), provider=NAME)
    if kind == "redacted_thinking":
        return Thinking(text="", signature=require(block, "data", str, where, NAME),
                        provider=NAME, redacted=True)
    call_id = neutral_id(require(block, "id", str, where, NAME))
    name = require(block, "name", str, where, NAME)
    args, raw, invalid = parse_arguments(block.get("input", {}))
    return ToolCall(id=call_id, name=name, arguments=args if invalid is None else {},
                    raw_arguments=raw, invalid=invalid)


def _with_attached(part: Part, block: dict[str, Any], kind: str) -> list[Part]:
    """``part`` and, after it, the block's other non-null fields as attached ``Opaque`` parts."""
    return [part] + [Opaque(provider=NAME, kind=key, data=value, attach=True)
                     for key, value in block.items()
                     if key not in _OWN_KEYS[kind] and value is not None]


def _parts(block: Any, where: str) -> list[Part]:
    kind = require(block, "type", str, where, NAME)
    if kind in ("text", "thinking", "redacted_thinking", "tool_use"):
        return _with_attached(_own_part(block, kind, where), block, kind)
    if kind in SERVER_BLOCKS:
        return [Opaque(provider=NAME, kind=kind, data=block)]
    raise MalformedResponseError(f"unknown content block type {kind!r} at {where}", provider=NAME)


def map_response(body: dict[str, Any]) -> ModelResponse:
    """A Messages API response body in neutral form (``raw`` is ``body``).

    Raises ``MalformedResponseError`` naming the missing or unknown piece.
    """
    body = response_body(body, NAME)
    content = require(body, "content", list, "body", NAME)
    parts = [p for i, block in enumerate(content) for p in _parts(block, f"content[{i}]")]
    stop = _FINISH_REASON_MAP.get(opt_str(body, "stop_reason") or "", "other")
    if stop == "end_turn" and any(type(p) is ToolCall for p in parts):
        stop = "tool_use"
    return ModelResponse(parts=tuple(mark_cut_off(parts, stop)), stop_reason=stop,
                         usage=map_usage(body.get("usage")), provider=NAME,
                         model=opt_str(body, "model") or "", response_id=opt_str(body, "id"),
                         raw=body)


def _result_text(content: Any, where: str) -> str:
    """A tool result's (or system's) text; other blocks as their marked text."""
    if isinstance(content, str):
        return content
    blocks = wire_list(content, where, NAME)
    return "".join(wire_str(b, "text", where, NAME) if b.get("type") == "text"
                   else render_opaque(Opaque(provider=NAME, kind=str(b.get("type")), data=b))
                   or "" for b in blocks)


def _unmap_image(block: dict[str, Any], where: str) -> Image:
    source = block.get("source")
    if not isinstance(source, dict):
        raise FormatError(f"anthropic {where}.source: expected an object")
    if source.get("type") == "base64":
        return Image(media_type=wire_str(source, "media_type", where, NAME) or "image/png",
                     data=wire_str(source, "data", where, NAME))
    return Image(url=wire_str(source, "url", where, NAME))


def _unmap_assistant(blocks: list[dict[str, Any]], where: str) -> Message:
    try:
        parts = [p for j, b in enumerate(blocks) for p in _parts(b, f"{where}[{j}]")]
    except MalformedResponseError as exc:
        raise FormatError(str(exc).replace("response ", "transcript ")) from None
    return Message(role="assistant", parts=tuple(parts), provider=NAME)


def _unmap_user(blocks: list[dict[str, Any]], where: str,
                names: dict[str, str]) -> list[Message]:
    out: list[Message] = []
    user: list[Part] = []
    for j, b in enumerate(blocks):
        kind, at = b.get("type"), f"{where}[{j}]"
        if kind == "tool_result":
            call_id = neutral_id(wire_str(b, "tool_use_id", at, NAME))
            out.append(Message(role="tool", parts=(ToolResult(
                call_id=call_id, name=names.get(call_id, ""),
                content=_result_text(b.get("content"), f"{at}.content"),
                is_error=b.get("is_error") is True),)))
        elif kind == "text":
            user.extend(_with_attached(Text(text=wire_str(b, "text", at, NAME)), b, "text"))
        elif kind == "image":
            user.extend(_with_attached(_unmap_image(b, at), b, "image"))
        elif isinstance(kind, str) and kind in SERVER_BLOCKS:
            user.append(Opaque(provider=NAME, kind=kind, data=b))
        else:
            raise FormatError(f"anthropic {at}: unknown block type {kind!r}")
    return out + ([Message(role="user", parts=tuple(user))] if user else [])


def export_body(system: str, messages: Sequence[Message]) -> dict[str, Any]:
    """``{"system"?, "messages"}``: a Messages API request's conversation."""
    system_text, wire = map_messages(system, messages)
    return {"system": system_text, "messages": wire} if system_text else {"messages": wire}


def read_request(doc: dict[str, Any]) -> None:
    """``None``: a Messages API body is read by the shared request reader (``messages``)."""
    return None


def read_response(body: Any) -> tuple[list[Any], str | None, Any] | None:
    """``([assistant message], model, usage)`` of a Messages API response, streamed or not."""
    events = recorded_events(body)
    if events is not None:
        if not (events and isinstance(events[0], dict)
                and events[0].get("type") == "message_start"):
            return None
        body, usage = _assemble_recorded(events), recorded_usage(events)
    elif isinstance(body, dict) and body.get("role") == "assistant" and isinstance(
            body.get("content"), list):
        usage = body.get("usage")
    else:
        return None
    if not isinstance(body.get("content"), list):
        return None
    return ([{"role": "assistant", "content": body["content"]}], body.get("model"),
            usage if isinstance(usage, dict) else None)


def _assemble_recorded(events: list[Any]) -> dict[str, Any]:
    """The message a recorded Messages API event stream built."""
    message: dict[str, Any] = {"role": "assistant", "content": []}
    partial: dict[int, str] = {}
    for data in events:
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


def unmap_messages(system: Any, messages: Any) -> tuple[str, list[Message]]:
    """Anthropic ``system`` + ``messages`` back to ``(system text, neutral messages)``.

    Each ``tool_result`` becomes its own ``tool`` message (the engine's
    shape); text and images beside it follow as a user message. Raises
    ``FormatError`` saying where for anything it cannot read.
    """
    names: dict[str, str] = {}
    out: list[Message] = []
    sys_text = (system if isinstance(system, str) else "" if system is None
                else _result_text(system, "system"))
    for i, msg in enumerate(wire_list(messages, "messages", NAME)):
        role, content, where = msg.get("role"), msg.get("content"), f"messages[{i}].content"
        blocks = ([{"type": "text", "text": content}] if isinstance(content, str)
                  else wire_list(content, where, NAME))
        if role == "assistant":
            out.append(_unmap_assistant(blocks, where))
            names.update((p.id, p.name) for p in out[-1].parts if type(p) is ToolCall)
        elif role == "user":
            out.extend(_unmap_user(blocks, where, names))
        else:
            raise FormatError(f"anthropic messages[{i}].role: unknown role {role!r}")
    return sys_text, out


def _sdk() -> Any:
    """The ``anthropic`` SDK, imported when a client is built (mapping never needs it)."""
    try:
        import anthropic
    except ImportError as exc:  # pragma: no cover - the SDK is a declared dependency
        raise ImportError("the Anthropic provider needs the `anthropic` package: "
                          "pip install 'anthropic>=0.70'") from exc
    return anthropic


class AnthropicAssembler(Assembler):
    """Messages API events (``message_start`` ... ``message_stop``) into a ``message`` body."""

    def __init__(self) -> None:
        super().__init__()
        self.message: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json: dict[int, str] = {}

    def _feed(self, event: dict[str, Any]) -> list[StreamDelta]:
        self.started = True
        kind = event.get("type")
        if kind == "message_start":
            self.message = dict(event.get("message") or {})
        elif kind == "content_block_start":
            self.blocks[event["index"]] = dict(event.get("content_block") or {})
        elif kind == "content_block_delta":
            return self._delta(event["index"], event.get("delta") or {})
        elif kind == "content_block_stop":
            self._close(event["index"])
        elif kind == "message_delta":
            self.message.update(event.get("delta") or {})
            usage = dict(self.message.get("usage") or {})
            usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
            self.message["usage"] = usage
        elif kind == "message_stop":
            self.done = True
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[StreamDelta]:
        block = self.blocks.setdefault(index, {})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta["text"]
            return [StreamDelta(kind="text", text=delta["text"], index=index)]
        if kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta["thinking"]
            return [StreamDelta(kind="thinking", text=delta["thinking"], index=index)]
        if kind == "signature_delta":
            block["signature"] = delta["signature"]
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))
        elif kind == "input_json_delta":
            self.json[index] = self.json.get(index, "") + delta["partial_json"]
            return [StreamDelta(kind="tool_arguments", text=delta["partial_json"], index=index,
                                name=block.get("name"), call_id=block.get("id"))]
        return []

    def _close(self, index: int) -> None:
        text = self.json.pop(index, None)
        if text is not None:  # the SDK does the same: the input is the whole JSON, parsed
            self.blocks[index]["input"] = json_or_text(text)

    def _body(self) -> dict[str, Any]:
        for index in list(self.json):  # an open tool call of a cut stream: its raw text
            self._close(index)
        return self.message | {"content": [self.blocks[i] for i in sorted(self.blocks)]}


#: The class folding this wire's stream events into its unstreamed body.
ASSEMBLER = AnthropicAssembler


@contextmanager
def _translate_errors() -> Iterator[None]:
    """Turn Anthropic SDK errors into turnlog ``ProviderError`` subclasses."""
    sdk = _sdk()
    try:
        yield
    except sdk.APIStatusError as exc:
        message = error_message(exc.body, exc.message)
        raise error_for_status(exc.status_code, message, NAME, exc.response.headers) from None
    except sdk.APITimeoutError:
        raise ProviderTimeout("no answer before the timeout", provider=NAME) from None
    except sdk.APIConnectionError as exc:
        raise ProviderConnectionError(
            f"cannot reach the API: {exc.message}",
            provider=NAME) from None
    except sdk.AnthropicError as exc:
        raise ProviderError(f"{type(exc).__name__}: {exc}",
                            provider=NAME) from None


class AnthropicProvider(SDKProvider):
    """The Anthropic Messages API behind the neutral ``Provider`` interface.

    The key comes from ``api_key`` or ``ANTHROPIC_API_KEY``, the endpoint from
    ``base_url`` or ``ANTHROPIC_BASE_URL`` (the SDK's own variable). See
    ``SDKProvider`` for retries, closing and ``acomplete``.
    """

    name = key_owner = NAME
    base_url_env = "ANTHROPIC_BASE_URL"
    default_model = DEFAULT_MODEL

    def _client_classes(self) -> tuple[type, type]:
        sdk = _sdk()
        return sdk.Anthropic, sdk.AsyncAnthropic

    def _kwargs(self, request: ModelRequest) -> dict[str, Any]:
        body = map_request(request)
        sampling = {k: body.pop(k) for k in _SAMPLING if k in body}
        return {**body, "extra_body": sampling or None}

    def _endpoint(self, client: Any) -> Any:
        return client.messages

    def _map_body(self, body: dict[str, Any]) -> ModelResponse:
        return map_response(body)

    def _errors(self) -> Any:
        return _translate_errors()

    def _assembler(self) -> Assembler:
        return AnthropicAssembler()


def create_provider(model: str | None = None, **kw: Any) -> AnthropicProvider:
    """An ``AnthropicProvider`` (``kw``: ``api_key``, ``base_url``, ``timeout`` ...)."""
    return AnthropicProvider(model, **kw)

