"""OpenAI Responses API adapter (official ``openai`` SDK), provider name ``openai-responses``.

The history is sent in full every time (``store: false``), as a list of input
items: user and assistant ``message`` items, ``function_call`` items and
``function_call_output`` items. Unlike Chat Completions, this wire keeps the
order of an assistant's text and calls.

>>> from turnlog.engine.model.messages import Message, Text, ToolCall
>>> [i.get("type", i.get("role")) for i in map_messages("", [
...     Message(role="user", parts=(Text(text="hi"),)),
...     Message(role="assistant", parts=(Text(text="Let me add."),
...         ToolCall(id="c1", name="add", arguments={}, raw_arguments="{}")))])[1]]
['user', 'assistant', 'function_call', 'function_call_output']

(The last item answers the unanswered call with an error result; see
``plan_history``.) Reasoning items come back as ``Thinking`` parts but are not
sent again: replaying them needs their server-side item ids, which a
stateless request does not have. Failed results' output starts with
``Error`` (no error flag on this wire either). Ids go through
``openai.wire_id``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import FormatError, MalformedResponseError, ServerError
from turnlog.engine.model.events import StopReason, ToolSpec
from turnlog.engine.model.messages import Image, Message, Opaque, Part, Text, Thinking, ToolCall, ToolResult, Usage
from ._common import (
    EMPTY_TEXT,
    Entry,
    count,
    data_url,
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
from ._responses_items import ASSISTANT_ITEMS, ITEM_TYPES, USER_ITEMS
from ._stream import (
    Assembler,
    StreamDelta,
    event_object,
    recorded_events,
    recorded_usage,
)
from .base import ModelRequest, ModelResponse
from .openai import KEY_ENV, OpenAIProvider, _result_content, _translate_errors, wire_id

__all__ = [
    "ASSEMBLER",
    "ASSISTANT_ITEMS",
    "GENAI_NAME",
    "GENAI_OPERATION",
    "ITEM_TYPES",
    "KEY_ENV",
    "NAME",
    "PRICE_KEY",
    "SYSTEM_KEY",
    "USER_ITEMS",
    "OpenAIResponsesProvider",
    "ResponsesAssembler",
    "create_provider",
    "export_body",
    "map_messages",
    "map_request",
    "map_response",
    "map_tools",
    "map_usage",
    "read_request",
    "read_response",
    "unmap_messages",
    "unmap_tools",
]

NAME = "openai-responses"
#: Priced as OpenAI (genai-prices' provider id): the same vendor's models (its key is
#: OpenAI's too: ``KEY_ENV``).
PRICE_KEY = "openai"
#: ``gen_ai.provider.name`` and ``gen_ai.operation.name`` of its calls.
GENAI_NAME, GENAI_OPERATION = "openai", "chat"
#: The request body's key of the system text.
SYSTEM_KEY = "instructions"
_ENVELOPE = ("instructions", "model", "tools")

_INCOMPLETE_MAP: dict[str, StopReason] = {"max_output_tokens": "max_tokens",
                                          "content_filter": "refusal"}
_PARAMS = {"max_tokens": "max_output_tokens", "temperature": "temperature", "top_p": "top_p"}


def map_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as Responses ``tools`` (flat function tools).

    ``strict`` is always sent, as ``False``: the API requires the field and,
    strict, refuses any schema that is not closed (``additionalProperties:
    false``, every property required), which ordinary tool schemas are not.
    """
    return [{"type": "function", "name": t.name, "description": t.description,
             "parameters": t.parameters, "strict": False} for t in tools]


def unmap_tools(tools: Sequence[dict[str, Any]]) -> list[ToolSpec]:
    """Responses function tools back to neutral specs (other tool types are skipped)."""
    return [ToolSpec(name=t["name"], description=t.get("description") or "",
                     parameters=t.get("parameters") or {"type": "object", "properties": {}})
            for t in tools if t.get("type") == "function"]


def _user(parts: list[Part]) -> list[dict[str, Any]]:
    items = [p.data for p in parts if type(p) is Opaque and p.kind in USER_ITEMS]
    content = [p for p in parts if type(p) is not Opaque or p.kind not in USER_ITEMS]
    if not content and items:
        return items
    if all(type(p) is Text for p in content):
        # this wire refuses an empty content: an empty message is EMPTY_TEXT
        return [*items, {"role": "user",
                         "content": "".join(p.text for p in content) or EMPTY_TEXT}]
    return [*items, {"role": "user", "content": [
        {"type": "input_text", "text": p.text} if type(p) is Text
        else p.data if type(p) is Opaque
        else {"type": "input_image", "image_url": data_url(p), "detail": "auto"}  # required
        for p in content if type(p) in (Text, Image)
        or (type(p) is Opaque and p.provider == NAME and isinstance(p.data, dict))]}]


def _assistant(parts: list[Part]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for part in parts:
        if type(part) is Text:
            if items and items[-1].get("role") == "assistant":
                items[-1]["content"] += part.text  # adjacent texts are one message
            else:
                items.append({"role": "assistant", "content": part.text})
        elif type(part) is ToolCall:
            items.append({"type": "function_call", "call_id": wire_id(part.id),
                          "name": part.name, "arguments": part.raw_arguments})
        elif type(part) is Opaque and part.kind in ASSISTANT_ITEMS and part.provider == NAME:
            items.append(part.data)  # verbatim, as the model produced it
    return items


def _render(entry: Entry) -> list[dict[str, Any]]:
    if entry.role == "results":
        return [{"type": "function_call_output", "call_id": wire_id(r.call_id),
                 "output": _result_content(r)} for r in entry.parts if type(r) is ToolResult]
    if entry.role == "assistant":
        return _assistant(entry.parts)
    return _user(entry.parts)


def map_messages(system: str, messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """``(instructions, input items)`` for the Responses API."""
    instructions, entries = plan_history(system, messages, NAME)
    return instructions, [item for entry in entries for item in _render(entry)]


def map_request(request: ModelRequest) -> dict[str, Any]:
    """The complete Responses API request body (stateless: ``store`` is false).

    Parameters mapped: ``max_tokens`` (as ``max_output_tokens``), ``temperature``,
    ``top_p``; others are ignored.
    """
    instructions, items = map_messages(request.system, request.messages)
    body: dict[str, Any] = {"model": request.model, "input": items, "store": False}
    if instructions:
        body["instructions"] = instructions
    if request.tools:
        body["tools"] = map_tools(request.tools)
    for key, wire_key in _PARAMS.items():
        if request.parameters.get(key) is not None:
            body[wire_key] = request.parameters[key]
    return body


def map_usage(usage: Any) -> Usage:
    """Responses API ``usage`` in neutral form (``input_tokens`` counts the cached
    ones, ``output_tokens`` the reasoning ones: parts, never added on top)."""
    if not isinstance(usage, dict):
        return Usage()
    return Usage(input_tokens=count(usage, "input_tokens"),
                 output_tokens=count(usage, "output_tokens"),
                 cached_input_tokens=count(usage.get("input_tokens_details"), "cached_tokens"),
                 reasoning_tokens=count(usage.get("output_tokens_details"), "reasoning_tokens"),
                 raw=usage)


def _message(item: dict[str, Any], at: str) -> tuple[list[Part], bool]:
    parts: list[Part] = []
    refused = False
    for j, c in enumerate(require(item, "content", list, at, NAME)):
        kind = opt_str(c, "type")
        if kind in ("output_text", "input_text", "text"):
            parts.append(Text(text=require(c, "text", str, f"{at}.content[{j}]", NAME)))
            if c.get("annotations"):  # citations: kept with the text
                parts.append(Opaque(provider=NAME, kind="annotations", data=c["annotations"],
                                    attach=True))
        elif kind == "refusal":
            parts.append(Text(text=require(c, "refusal", str, f"{at}.content[{j}]", NAME)))
            refused = True
        else:
            raise MalformedResponseError(f"unknown content type {kind!r} at {at}.content[{j}]",
                                         provider=NAME)
    return parts, refused


def _item(item: Any, at: str) -> tuple[list[Part], bool]:
    kind = require(item, "type", str, at, NAME)
    if kind == "message":
        return _message(item, at)
    if kind == "function_call":
        args, raw, invalid = parse_arguments(item.get("arguments", ""))
        return [ToolCall(id=require(item, "call_id", str, at, NAME),
                         name=require(item, "name", str, at, NAME),
                         arguments=args, raw_arguments=raw, invalid=invalid)], False
    if kind in ASSISTANT_ITEMS:  # a server tool's call and result, kept as they came
        return [Opaque(provider=NAME, kind=kind, data=item)], False
    if kind == "reasoning":
        # OpenAI sends a summary; DeepSeek's Responses API the reasoning text as content
        texts = [t for key in ("summary", "content")
                 for s in (item.get(key) if isinstance(item.get(key), list) else [])
                 if isinstance(t := opt_str(s, "text"), str)]
        return [Thinking(text="\n\n".join(texts), signature=opt_str(item, "encrypted_content"),
                         provider=NAME)], False
    raise MalformedResponseError(f"unknown output item type {kind!r} at {at}", provider=NAME)


def map_response(body: dict[str, Any]) -> ModelResponse:
    """A Responses API body in neutral form (``raw`` is ``body``).

    A ``failed`` response is a ``ServerError``; unknown output items are a
    ``MalformedResponseError`` naming them.
    """
    body = response_body(body, NAME)
    if body.get("status") == "failed":
        error = body.get("error") if isinstance(body.get("error"), dict) else {}
        raise ServerError(f"response failed: {opt_str(error, 'message') or 'no reason given'}",
                          provider=NAME)
    parts: list[Part] = []
    refused = False
    for i, item in enumerate(require(body, "output", list, "body", NAME)):
        item_parts, item_refused = _item(item, f"output[{i}]")
        parts.extend(item_parts)
        refused = refused or item_refused
    stop: StopReason = "end_turn"
    if body.get("status") == "incomplete":
        reason = opt_str(body.get("incomplete_details"), "reason") or ""
        stop = _INCOMPLETE_MAP.get(reason, "other")
    if refused:
        stop = "refusal"
    if stop == "end_turn" and any(type(p) is ToolCall for p in parts):
        stop = "tool_use"
    return ModelResponse(parts=tuple(mark_cut_off(parts, stop)), stop_reason=stop,
                         usage=map_usage(body.get("usage")), provider=NAME,
                         model=opt_str(body, "model") or "", response_id=opt_str(body, "id"),
                         raw=body)


def _content_parts(content: Any, at: str) -> list[Part]:
    if isinstance(content, str):
        return [Text(text=content)] if content else []
    parts: list[Part] = []
    for j, c in enumerate(wire_list(content, at, NAME)):
        kind = c.get("type")
        if kind in ("input_text", "output_text", "text"):
            parts.append(Text(text=wire_str(c, "text", f"{at}[{j}]", NAME)))
        elif kind == "input_image" and isinstance(c.get("image_url"), str):
            url = wire_str(c, "image_url", f"{at}[{j}]", NAME)
            inline = parse_data_url(url)
            parts.append(Image(media_type=inline[0], data=inline[1]) if inline else Image(url=url))
        elif kind == "refusal":
            parts.append(Text(text=wire_str(c, "refusal", f"{at}[{j}]", NAME)))
        elif kind in ("input_image", "input_file", "input_audio"):
            parts.append(Opaque(provider=NAME, kind=kind, data=c))  # a file id, a file's data
        else:
            raise FormatError(f"{NAME} {at}[{j}]: unknown content type {kind!r}")
        if c.get("annotations"):  # citations of an output text: kept with it
            parts.append(Opaque(provider=NAME, kind="annotations", data=c["annotations"],
                                attach=True))
    return parts


def export_body(system: str, messages: Sequence[Message]) -> dict[str, Any]:
    """``{"instructions"?, "input"}``: a Responses API request's conversation."""
    instructions, items = map_messages(system, messages)
    return {"instructions": instructions, "input": items} if instructions else {"input": items}


def read_request(doc: dict[str, Any]) -> tuple[list[Any], dict[str, Any]] | None:
    """``(input items, envelope)`` of a Responses API request body: a list of ``input`` items
    (turnlog's own export has no ``model``), or an ``input`` string beside a key of this
    wire (an orchestrator entry is ``{input, context?, timestamp?}`` with a string). A
    body with a ``messages`` list is Chat Completions'."""
    items = doc.get("input")
    if isinstance(doc.get("messages"), list) or not (isinstance(items, list) or (
            isinstance(items, str) and any(k in doc for k in _ENVELOPE))):
        return None
    items = doc["input"]
    entries = [{"role": "user", "content": items}] if isinstance(items, str) else items
    envelope = {k: v for k, v in doc.items() if k in _ENVELOPE}
    params = {k: v for k, v in doc.items() if k not in _ENVELOPE and k != "input"}
    if params:
        envelope["parameters"] = params
    return entries, {**envelope, "format": NAME}


def read_response(body: Any) -> tuple[list[Any], str | None, Any] | None:
    """``(output items, model, usage)`` of a Responses API response, streamed (the response
    its closing event carries) or not."""
    events = recorded_events(body)
    if events is not None:
        closing = next((e["response"] for e in reversed(events) if isinstance(e, dict)
                        and str(e.get("type", "")).startswith("response.")
                        and isinstance(e.get("response"), dict)), None)
        if closing is None:
            return None
        usage = recorded_usage(events)
        body = closing
    elif isinstance(body, dict) and isinstance(body.get("output"), list):
        usage = body.get("usage")
    else:
        return None
    if not isinstance(body.get("output"), list):
        return None
    return body["output"], body.get("model"), usage if isinstance(usage, dict) else None


def unmap_messages(instructions: Any, items: Any) -> tuple[str, list[Message]]:
    """Responses ``instructions`` + ``input`` items back to ``(system text, neutral messages)``.

    Consecutive assistant messages and function calls form one assistant
    message; each ``function_call_output`` becomes a ``tool`` message.
    """
    systems = [instructions] if isinstance(instructions, str) and instructions else []
    out: list[Message] = []
    names: dict[str, str] = {}
    turn: list[Part] = []
    context: list[Part] = []  # client-sent items (USER_ITEMS) waiting for their user message

    def close() -> None:
        if turn:
            out.append(Message(role="assistant", parts=tuple(turn), provider=NAME))
            turn.clear()

    def flush() -> None:
        if context:
            out.append(Message(role="user", parts=tuple(context)))
            context.clear()

    for i, item in enumerate(wire_list(items, "input", NAME)):
        at, kind, role = f"input[{i}]", item.get("type", "message"), item.get("role")
        if not isinstance(kind, str):
            raise FormatError(f"{NAME} {at}.type: expected a string, got {type(kind).__name__}")
        if kind in USER_ITEMS:
            close()
            context.append(Opaque(provider=NAME, kind=kind, data=item))
            continue
        if kind in ASSISTANT_ITEMS or kind in ("function_call", "reasoning") or (
                kind == "message" and role == "assistant"):
            flush()
        if kind in ASSISTANT_ITEMS:
            turn.append(Opaque(provider=NAME, kind=kind, data=item))
            continue
        if kind == "function_call" or (kind == "message" and role == "assistant") \
                or kind == "reasoning":
            if kind == "message":
                turn.extend(_content_parts(item.get("content"), f"{at}.content"))
                continue
            try:
                parts, _ = _item(item, at)
            except MalformedResponseError as exc:
                raise FormatError(str(exc).replace("response ", "transcript ")) from None
            names.update((p.id, p.name) for p in parts if type(p) is ToolCall)
            turn.extend(parts)
            continue
        close()
        if kind != "message" or role != "user":
            flush()
        if kind == "function_call_output":
            call_id = wire_str(item, "call_id", at, NAME)
            output = item.get("output")
            text = output if isinstance(output, str) else "".join(
                p.text for p in _content_parts(output, f"{at}.output") if type(p) is Text)
            out.append(Message(role="tool", parts=(ToolResult(
                call_id=call_id, name=names.get(call_id, ""), content=text,
                is_error=text.startswith("Error")),)))
        elif kind == "message" and role in ("system", "developer"):
            systems.append("".join(p.text for p in _content_parts(item.get("content"), at)
                                   if type(p) is Text))
        elif kind == "message" and role == "user":
            out.append(Message(role="user", parts=(
                *context, *_content_parts(item.get("content"), at))))
            context.clear()
        else:
            raise FormatError(f"{NAME} {at}: unknown item type {kind!r} (role {role!r})")
    close()
    flush()
    return "\n\n".join(systems), out


class ResponsesAssembler(Assembler):
    """OpenAI Responses API events (``response.created`` ... ``response.completed``) into a
    ``response`` body.

    The closing event (``response.completed``, ``.incomplete`` or ``.failed``) carries
    the whole response: it is the body. Until then the items are built from
    ``response.output_item.added``/``.done`` and the text, reasoning and argument
    deltas, so a stream cut mid-way still has its partial response.
    """

    _CLOSING = ("response.completed", "response.incomplete", "response.failed")

    def __init__(self) -> None:
        super().__init__()
        self.response: dict[str, Any] = {}
        self.items: dict[int, dict[str, Any]] = {}

    def _feed(self, event: dict[str, Any]) -> list[StreamDelta]:
        self.started = True
        kind = event.get("type")
        if kind in ("response.created", "response.in_progress") or kind in self._CLOSING:
            self.response = event_object(event.get("response"), kind)
            self.done = kind in self._CLOSING
            return []
        index = event.get("output_index", 0)
        if not isinstance(index, int):
            raise MalformedResponseError(f"stream event {kind!r}: output_index is not a number")
        if kind in ("response.output_item.added", "response.output_item.done"):
            self.items[index] = dict(event_object(event.get("item"), kind))
            return []
        item = self.items.get(index)
        delta = event.get("delta")
        if item is None or not isinstance(delta, str):
            return []  # a piece of an item never announced: nothing to add it to
        if kind == "response.output_text.delta":
            content = item.setdefault("content", [])
            j = event.get("content_index", 0)
            while isinstance(j, int) and len(content) <= j:
                content.append({"type": "output_text", "text": "", "annotations": []})
            if isinstance(j, int):
                content[j]["text"] = content[j].get("text", "") + delta
            return [StreamDelta(kind="text", text=delta, index=index)]
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            field = "summary" if "summary" in kind else "content"
            pieces = item.setdefault(field, [])
            j = event.get("summary_index", event.get("content_index", 0))
            while isinstance(j, int) and len(pieces) <= j:
                pieces.append({"type": "summary_text" if field == "summary" else
                               "reasoning_text", "text": ""})
            if isinstance(j, int):
                pieces[j]["text"] = pieces[j].get("text", "") + delta
            return [StreamDelta(kind="thinking", text=delta, index=index)]
        if kind == "response.function_call_arguments.delta":
            item["arguments"] = item.get("arguments", "") + delta
            return [StreamDelta(kind="tool_arguments", text=delta, index=index,
                                name=item.get("name"), call_id=item.get("call_id"))]
        return []

    def _body(self) -> dict[str, Any]:
        if self.done:
            return self.response
        return {**self.response, "status": "in_progress",
                "output": [self.items[i] for i in sorted(self.items)]}


#: The class folding this wire's stream events into its unstreamed body.
ASSEMBLER = ResponsesAssembler


class OpenAIResponsesProvider(OpenAIProvider):
    """The OpenAI Responses API behind the neutral ``Provider`` interface.

    Same keys and endpoint as ``OpenAIProvider`` (``OPENAI_API_KEY``,
    ``OPENAI_BASE_URL``); ``name`` is ``openai-responses``.
    """

    name = NAME

    def _kwargs(self, request: ModelRequest) -> dict[str, Any]:
        return map_request(request)

    def _endpoint(self, client: Any) -> Any:
        return client.responses

    def _map_body(self, body: dict[str, Any]) -> ModelResponse:
        return map_response(body)

    def _errors(self) -> Any:
        return _translate_errors(NAME)

    def _assembler(self) -> Assembler:
        return ResponsesAssembler()

    def _stream_kwargs(self) -> dict[str, Any]:
        return {"stream": True}


def create_provider(model: str | None = None, **kw: Any) -> OpenAIResponsesProvider:
    """An ``OpenAIResponsesProvider`` (``kw``: ``api_key``, ``base_url``, ``timeout`` ...)."""
    return OpenAIResponsesProvider(model, **kw)
