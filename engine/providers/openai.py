"""OpenAI Chat Completions adapter (official ``openai`` SDK).

>>> from turnlog.engine.model.messages import Message, ToolCall
>>> _, messages = map_messages("", [Message(role="assistant", parts=(
...     ToolCall(id="c1", name="add", arguments={"a": 1}, raw_arguments='{"a": 1}'),))])
>>> msg = messages[0]
>>> msg["content"], msg["tool_calls"][0]["function"]
(None, {'name': 'add', 'arguments': '{"a": 1}'})

Rules the mapping keeps: one ``tool`` message per result, right after the
assistant message that made the calls (an unanswered call gets an error
result); ``content`` is ``null``, not ``""``, when an assistant message only
calls tools; ``function.arguments`` is the JSON text the model produced
(``raw_arguments``), so invalid arguments are shown back as they were. A
failed result's content starts with ``Error:`` (added when it does not say so
already), since the wire has no error flag. Text and tool calls of one
assistant message cannot interleave on this wire: the text comes first.
In responses, arguments that are invalid JSON, ``""`` or not an object are
kept raw and the call is marked ``invalid``; ``reasoning_content`` (sent by
some compatible servers) becomes ``Thinking`` and is never sent back.
"""

from __future__ import annotations

import hashlib
import json
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
    text_of,
)
from ._common import (
    Entry,
    count,
    data_url,
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
from ._stream import Assembler, StreamDelta, recorded_events, recorded_usage
from .base import ModelRequest, ModelResponse

__all__ = [
    "ASSEMBLER",
    "DEFAULT_MODEL",
    "GENAI_NAME",
    "GENAI_OPERATION",
    "KEY_ENV",
    "MESSAGE_KEYS",
    "NAME",
    "PRICE_KEY",
    "REASONING_KEYS",
    "SYSTEM_KEY",
    "HistoryReader",
    "OpenAIAssembler",
    "OpenAIProvider",
    "create_provider",
    "export_body",
    "legacy_call_id",
    "map_messages",
    "map_request",
    "map_response",
    "map_tools",
    "map_usage",
    "read_request",
    "read_response",
    "unmap_messages",
    "unmap_tools",
    "wire_id",
]

NAME = "openai"
#: The environment variable of the API key.
KEY_ENV = "OPENAI_API_KEY"
#: The vendor its prices are listed under (genai-prices' provider id).
PRICE_KEY = NAME
#: ``gen_ai.provider.name`` and ``gen_ai.operation.name`` of its calls.
GENAI_NAME, GENAI_OPERATION = "openai", "chat"
#: The system text travels as the first message, not under a key of the body.
SYSTEM_KEY = None
DEFAULT_MODEL = "gpt-4o-mini"

_FINISH_REASON_MAP: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
#: Vendor fields of an assistant message that carry reasoning or its signature; each
#: becomes a ``Thinking`` part whose ``source`` names the field.
REASONING_KEYS = ("reasoning_content", "reasoning", "reasoning_details", "thought_signature",
                  "extra_content")
#: Message keys of the Chat Completions wire (any other key is a vendor extension,
#: kept in an ``EXTRA`` part and reported on import).
MESSAGE_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id", "refusal",
                          "function_call", "audio", "annotations", *REASONING_KEYS})
_CARRIED = ("audio", "annotations")  # kept verbatim, attached to the message
_CALL_KEYS = {"id", "type", "function"}
_PARAMS = {"max_tokens": "max_completion_tokens", "temperature": "temperature",
           "top_p": "top_p", "seed": "seed", "stop": "stop"}


def wire_id(call_id: str) -> str:
    """A tool call id OpenAI accepts (1 to 40 characters); fitting ids pass unchanged.

    Others become ``x_tl`` + 32 hex digits of their SHA-256: deterministic and,
    in practice, collision-free (not reversible; ids OpenAI made always fit).

    >>> wire_id("call_abc"), len(wire_id("x" * 64))
    ('call_abc', 36)
    """
    if 0 < len(call_id) <= 40 and not call_id.startswith("x_tl"):
        return call_id
    return "x_tl" + hashlib.sha256(call_id.encode()).hexdigest()[:32]


def map_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as Chat Completions ``tools`` entries."""
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": t.parameters}} for t in tools]


def unmap_tools(tools: Sequence[dict[str, Any]]) -> list[ToolSpec]:
    """Chat Completions ``tools`` entries back to neutral specs."""
    specs = []
    for t in tools:
        fn = t.get("function", t)
        specs.append(ToolSpec(name=fn["name"], description=fn.get("description", ""),
                              parameters=fn.get("parameters") or {"type": "object",
                                                                  "properties": {}}))
    return specs


def _result_content(result: ToolResult) -> str:
    if result.is_error and not result.content.lower().startswith("error"):
        return f"Error: {result.content}" if result.content else "Error"
    return result.content


def _user(parts: list[Part]) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    for p in parts:
        if type(p) is Opaque and p.kind == EXTRA and isinstance(p.data, dict):
            extra |= p.data
    parts = [p for p in parts if type(p) is not Opaque or p.kind != EXTRA]
    if all(type(p) is Text for p in parts):
        return {"role": "user", "content": "".join(p.text for p in parts)} | extra
    content: list[dict[str, Any]] = []
    for p in parts:
        if type(p) is Text:
            content.append({"type": "text", "text": p.text})
        elif type(p) is Image:
            content.append({"type": "image_url", "image_url": {"url": data_url(p)}})
        elif type(p) is Opaque and p.attach and content and "image_url" in content[-1]:
            content[-1]["image_url"][p.kind] = p.data  # detail
        elif type(p) is Opaque and not p.attach and isinstance(p.data, dict):
            content.append(dict(p.data))  # file, input_audio
    return {"role": "user", "content": content} | extra


def _vendor_value(part: Thinking) -> Any:
    if part.wire is not None:
        return part.wire
    return part.signature if part.source == "thought_signature" else part.text


def _assistant(parts: list[Part]) -> dict[str, Any] | None:
    text = "".join(p.text for p in parts if type(p) is Text)
    calls: list[dict[str, Any]] = []
    fields: dict[str, Any] = {}
    for p in parts:
        if type(p) is ToolCall:
            calls.append({"id": wire_id(p.id), "type": "function",
                          "function": {"name": p.name, "arguments": p.raw_arguments}})
        elif type(p) is Thinking and p.source:
            fields[p.source] = _vendor_value(p)
        elif type(p) is Opaque and p.kind == EXTRA and isinstance(p.data, dict):
            fields |= p.data
        elif type(p) is Opaque and p.attach and p.kind not in _CARRIED and calls:
            calls[-1][p.kind] = p.data  # a call's vendor field (extra_content ...)
        elif type(p) is Opaque and p.attach:
            fields[p.kind] = p.data
    if not text and not calls and not fields:
        return None  # only thinking or images, which this wire cannot carry
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return message | fields


def _render(entry: Entry) -> list[dict[str, Any]]:
    if entry.role == "results":
        return [{"role": "tool", "tool_call_id": wire_id(r.call_id), "content": _result_content(r)}
                for r in entry.parts if type(r) is ToolResult]
    if entry.role == "assistant":
        message = _assistant(entry.parts)
        return [message] if message else []
    return [_user(entry.parts)]


def map_messages(system: str, messages: Sequence[Message]) -> tuple[None, list[dict[str, Any]]]:
    """``(None, messages)``: the Chat Completions ``messages`` list, the system text first
    as a ``system`` message (the wire has no system outside its messages)."""
    system_text, entries = plan_history(system, messages, NAME)
    wire: list[dict[str, Any]] = [{"role": "system", "content": system_text}] if system_text else []
    for entry in entries:
        wire.extend(_render(entry))
    return None, wire


def export_body(system: str, messages: Sequence[Message]) -> dict[str, Any]:
    """``{"messages"}``: a Chat Completions request's conversation."""
    return {"messages": map_messages(system, messages)[1]}


def read_request(doc: dict[str, Any]) -> None:
    """``None``: a Chat Completions body is read by the shared request reader (``messages``)."""
    return None


def read_response(body: Any) -> tuple[list[Any], str | None, Any] | None:
    """``([assistant message], model, usage)`` of a Chat Completions response (first choice),
    streamed (its chunks) or not."""
    events = recorded_events(body)
    if events is not None:
        if not any(isinstance(e, dict) and (isinstance(e.get("choices"), list)
                   or str(e.get("object", "")).startswith("chat.completion")) for e in events):
            return None
        body, usage = _assemble_recorded(events), recorded_usage(events)
    elif isinstance(body, dict) and isinstance(body.get("choices"), list):
        usage = body.get("usage")
    else:
        return None
    message = body["choices"][0].get("message") if body["choices"] else None
    if not isinstance(message, dict):
        return None
    return [message], body.get("model"), usage if isinstance(usage, dict) else None


def _assemble_recorded(chunks: list[Any]) -> dict[str, Any]:
    """The message a recorded Chat Completions chunk stream built (first choice)."""
    message: dict[str, Any] = {"role": "assistant", "content": None}
    calls: dict[int, dict[str, Any]] = {}
    model = None
    for chunk in chunks:
        chunk = chunk if isinstance(chunk, dict) else {}
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


def map_request(request: ModelRequest) -> dict[str, Any]:
    """The complete Chat Completions request body for ``request``.

    Parameters mapped: ``max_tokens`` (as ``max_completion_tokens``),
    ``temperature``, ``top_p``, ``seed``, ``stop``; others are ignored.
    """
    body: dict[str, Any] = {"model": request.model,
                            "messages": map_messages(request.system, request.messages)[1]}
    if request.tools:
        body["tools"] = map_tools(request.tools)
    for key, wire_key in _PARAMS.items():
        if request.parameters.get(key) is not None:
            body[wire_key] = request.parameters[key]
    return body


def map_usage(usage: Any) -> Usage:
    """Chat Completions ``usage`` in neutral form.

    ``prompt_tokens`` counts the cached (``prompt_tokens_details.cached_tokens``;
    DeepSeek's ``prompt_cache_hit_tokens``) and audio ones too;
    ``completion_tokens`` counts the reasoning and audio ones: they are parts,
    never added on top.
    """
    if not isinstance(usage, dict):
        return Usage()
    prompt, completion = usage.get("prompt_tokens_details"), usage.get("completion_tokens_details")
    return Usage(input_tokens=count(usage, "prompt_tokens"),
                 output_tokens=count(usage, "completion_tokens"),
                 cached_input_tokens=count(prompt, "cached_tokens")
                 or count(usage, "prompt_cache_hit_tokens"),
                 reasoning_tokens=count(completion, "reasoning_tokens"),
                 input_audio_tokens=count(prompt, "audio_tokens"),
                 input_image_tokens=count(prompt, "image_tokens"),
                 output_audio_tokens=count(completion, "audio_tokens"),
                 raw=usage)


def _tool_call_parts(call: Any, where: str) -> list[Part]:
    """The call and, attached after it, its vendor fields (``extra_content`` ...)."""
    extras = [Opaque(provider=NAME, kind=k, data=v, attach=True)
              for k, v in call.items() if k not in _CALL_KEYS and k != "index" and v is not None
              ] if isinstance(call, dict) and call.get("type", "function") == "function" else []
    return [_tool_call(call, where), *extras]


def _tool_call(call: Any, where: str) -> ToolCall:
    call_id = require(call, "id", str, where, NAME)
    fn = call.get("function")
    if call.get("type", "function") != "function" or not isinstance(fn, dict):
        # an unsupported kind of call is kept and marked, never dropped
        inner = call.get(str(call.get("type")))
        name = (inner if isinstance(inner, dict) else fn if isinstance(fn, dict) else {}).get("name")
        return ToolCall(id=call_id, name=str(name or call.get("type", "unknown")),
                        raw_arguments=json.dumps(call, ensure_ascii=False),
                        invalid=f"unsupported tool call type {call.get('type')!r}")
    name = require(fn, "name", str, f"{where}.function", NAME)
    args, raw, invalid = parse_arguments(fn.get("arguments", ""))
    return ToolCall(id=call_id, name=name, arguments=args, raw_arguments=raw, invalid=invalid)


def _empty(value: Any) -> bool:
    """Null, ``""``, ``{}``, ``[]``, or an object of such: what servers send for "none"."""
    if isinstance(value, dict):
        return all(_empty(v) or k == "expires_at" and v == 0 for k, v in value.items())
    return value is None or value == "" or value == []


def _reasoning_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # reasoning_details: text / summary items; encrypted has none
        return "\n\n".join(t for d in value if isinstance(d, dict)
                            for t in (opt_str(d, "text"), opt_str(d, "summary")) if t)
    return ""


def _vendor_parts(message: dict[str, Any]) -> list[Part]:
    """Reasoning and signatures in vendor fields as ``Thinking`` with the field as ``source``."""
    parts: list[Part] = []
    for key in REASONING_KEYS:
        value = message.get(key)
        if _empty(value):
            continue
        if key == "thought_signature" and isinstance(value, str):
            parts.append(Thinking(text="", signature=value, provider=NAME, source=key))
        else:
            parts.append(Thinking(text=_reasoning_text(value), provider=NAME, source=key,
                                  wire=None if isinstance(value, str) else value))
    return parts


def legacy_call_id(name: str) -> str:
    """The id of a pre-tools ``function_call`` (the wire has none): ``legacy_`` + its name.

    Every call of one function has this id on the wire; ``engine.calls.assign_call_ids``,
    where calls enter the engine, makes the repeats ``legacy_<name>_2``, ``_3`` ... in
    order and keeps ``legacy_<name>`` as their ``provider_id``, which a ``role: function``
    answer (by name) then matches, first unanswered first. The ids depend only on the
    transcript's order, so a re-import assigns the same ones.
    """
    return f"legacy_{name}"


def _legacy_call(message: dict[str, Any], where: str) -> list[Part]:
    """The pre-tools ``function_call`` as a call (id: ``legacy_call_id``)."""
    fn = message.get("function_call")
    if _empty(fn):
        return []
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise MalformedResponseError(f"{where}.function_call needs a name", provider=NAME)
    args, raw, invalid = parse_arguments(fn.get("arguments", ""))
    return [ToolCall(id=legacy_call_id(fn["name"]), name=fn["name"], arguments=args,
                     raw_arguments=raw, invalid=invalid)]


def _message_parts(message: dict[str, Any], where: str) -> list[Part]:
    parts: list[Part] = _vendor_parts(message)
    content = message.get("content")
    if isinstance(content, list):  # content parts: text, or a refusal's text
        content = "".join(t for c in content if isinstance(t := opt_str(c, (
            "refusal" if isinstance(c, dict) and c.get("type") == "refusal" else "text")), str))
    if isinstance(content, str) and content:
        parts.append(Text(text=content))
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        parts.append(Text(text=refusal))
    parts.extend(Opaque(provider=NAME, kind=key, data=message[key], attach=True)
                 for key in _CARRIED if not _empty(message.get(key)))
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise MalformedResponseError(f"{where}.tool_calls is not a list", provider=NAME)
    for i, c in enumerate(calls):
        parts.extend(_tool_call_parts(c, f"{where}.tool_calls[{i}]"))
    return parts + _legacy_call(message, where)


def _extra(message: dict[str, Any], known: frozenset[str] | set[str]) -> list[Part]:
    """The message's unknown non-null keys (and ``name``) as one ``EXTRA`` part.

    ``timestamp`` is no vendor key: a transcript entry of any format may carry it, and the
    importer records it on the entry's event.
    """
    extra = {k: v for k, v in message.items()
             if (k not in known or k == "name") and k != "timestamp" and v is not None}
    return [Opaque(provider=NAME, kind=EXTRA, data=extra)] if extra else []


def map_response(body: dict[str, Any]) -> ModelResponse:
    """A Chat Completions response body in neutral form (``raw`` is ``body``).

    Raises ``MalformedResponseError`` for a body without choices or message.
    """
    body = response_body(body, NAME)
    choices = require(body, "choices", list, "body", NAME)
    if not choices:
        raise MalformedResponseError("response has no choices (empty list)", provider=NAME)
    message = require(choices[0], "message", dict, "choices[0]", NAME)
    parts = _message_parts(message, "choices[0].message")
    stop = _FINISH_REASON_MAP.get(opt_str(choices[0], "finish_reason") or "", "other")
    if opt_str(message, "refusal"):
        stop = "refusal"
    if stop == "end_turn" and any(type(p) is ToolCall for p in parts):
        stop = "tool_use"
    return ModelResponse(parts=tuple(mark_cut_off(parts, stop)), stop_reason=stop,
                         usage=map_usage(body.get("usage")), provider=NAME,
                         model=opt_str(body, "model") or "", response_id=opt_str(body, "id"),
                         raw=body)


#: Content part types kept verbatim as ``Opaque`` parts.
OPAQUE_PARTS = frozenset({"file", "input_audio", "refusal"})


def _unmap_user(content: Any, where: str) -> list[Part]:
    if isinstance(content, str):
        return [Text(text=content)]
    parts: list[Part] = []
    for j, item in enumerate(wire_list(content, f"{where}.content", NAME)):
        kind, at = item.get("type"), f"{where}.content[{j}]"
        if kind == "text":
            parts.append(Text(text=wire_str(item, "text", at, NAME)))
        elif kind == "image_url" and isinstance(item.get("image_url"), dict):
            url = wire_str(item["image_url"], "url", f"{at}.image_url", NAME)
            inline = parse_data_url(url)
            parts.append(Image(media_type=inline[0], data=inline[1]) if inline else Image(url=url))
            parts.extend(Opaque(provider=NAME, kind=k, data=v, attach=True)
                         for k, v in item["image_url"].items() if k != "url" and v is not None)
        elif isinstance(kind, str) and kind in OPAQUE_PARTS:
            parts.append(Opaque(provider=NAME, kind=kind, data=item))
        else:
            raise FormatError(f"openai {at}: unknown content part type {kind!r}")
    return parts


def _unmap_assistant(msg: dict[str, Any], where: str) -> Message:
    try:
        parts = _message_parts(msg, where) + _extra(msg, MESSAGE_KEYS)
    except MalformedResponseError as exc:
        raise FormatError(str(exc).replace("response ", "transcript ")) from None
    return Message(role="assistant", parts=tuple(parts), provider=NAME)


def _unmap_tool(msg: dict[str, Any], where: str, names: dict[str, str]) -> Message:
    if msg.get("role") == "function":  # the pre-tools answer to a function_call, by name
        name = wire_str(msg, "name", where, NAME)
        call_id = legacy_call_id(name)
    elif not isinstance(msg.get("tool_call_id"), str):
        found = sorted(set(map(str, msg)) - {"role", "content"})
        raise FormatError(f"a `tool` message needs `tool_call_id` (found "
                          f"{', '.join(f'`{k}`' for k in found) or 'no other key'})")
    else:
        call_id = msg["tool_call_id"]
    content = msg.get("content")
    text = content if isinstance(content, str) else "".join(
        p.text for p in _unmap_user(content, where) if type(p) is Text)
    return Message(role="tool", parts=(ToolResult(
        call_id=call_id, name=names.get(call_id, "") or opt_str(msg, "name") or "",
        content=text, is_error=text.startswith("Error")),))


class HistoryReader:
    """``unmap_messages`` as a fold that can stop and go on: a history read so far.

    ``feed`` reads more messages of the same list (``start``: the index of the first,
    as errors name it); ``result`` is what ``unmap_messages`` returns for every message
    fed. ``copy`` keeps a reader to go on from later (the proxy reads only the messages
    a request adds to a history it read before).
    """

    __slots__ = ("names", "out", "systems")

    def __init__(self, system: Any) -> None:
        if system is not None and not isinstance(system, str):
            raise FormatError(f"openai system: expected a string, got {type(system).__name__}")
        self.systems: list[str] = [system] if system else []
        self.names: dict[str, str] = {}
        self.out: list[Message] = []

    def copy(self) -> HistoryReader:
        """An independent reader at the same point."""
        other = HistoryReader.__new__(HistoryReader)
        other.systems, other.names, other.out = list(self.systems), dict(self.names), list(self.out)
        return other

    def feed(self, messages: Sequence[Any], start: int = 0) -> None:
        """Read ``messages``, the list's items from index ``start`` on."""
        systems, names, out = self.systems, self.names, self.out
        for i, msg in enumerate(messages, start):
            role, where = msg.get("role"), f"messages[{i}]"
            if role in ("system", "developer"):
                systems.append(text_of(_unmap_user(msg.get("content"), where)))
            elif role == "user":
                out.append(Message(role="user", parts=(*_unmap_user(msg.get("content"), where),
                                                        *_extra(msg, {"role", "content"}))))
            elif role == "assistant":
                out.append(_unmap_assistant(msg, where))
                names.update((p.id, p.name) for p in out[-1].parts if type(p) is ToolCall)
            elif role in ("tool", "function"):
                out.append(_unmap_tool(msg, where, names))
            else:
                raise FormatError(f"openai {where}: unknown role {role!r}")

    def result(self) -> tuple[str, list[Message]]:
        """``(system text, neutral messages)`` of what was fed."""
        return "\n\n".join(self.systems), list(self.out)


def unmap_messages(system: Any, messages: Any) -> tuple[str, list[Message]]:
    """A Chat Completions ``messages`` list back to ``(system text, neutral messages)``.

    ``system`` and ``developer`` messages become the system text (after
    ``system``, a text given beside the list; ``None`` on this wire). A ``tool``
    message whose content starts with ``Error`` is read as a failed result.
    Raises ``FormatError`` saying where for anything it cannot read.
    """
    reader = HistoryReader(system)
    reader.feed(wire_list(messages, "messages", NAME))
    return reader.result()


def _sdk() -> Any:
    """The ``openai`` SDK, imported when a client is built (mapping never needs it)."""
    try:
        import openai
    except ImportError as exc:  # pragma: no cover - the SDK is a declared dependency
        raise ImportError("the OpenAI provider needs the `openai` package: "
                          "pip install 'openai>=1.100'") from exc
    return openai


class OpenAIAssembler(Assembler):
    """Chat Completions chunks (``stream_options.include_usage``) into a ``chat.completion``."""

    def __init__(self) -> None:
        super().__init__()
        self.top: dict[str, Any] = {}
        self.message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
        self.calls: dict[int, dict[str, Any]] = {}
        self.choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": None}
        self.finished = False

    def _feed(self, event: dict[str, Any]) -> list[StreamDelta]:
        self.started = True
        for key, value in event.items():
            if key not in ("choices", "object", "usage"):
                self.top.setdefault(key, value)
        if event.get("usage") is not None:
            self.top["usage"] = event["usage"]
            self.done = self.finished  # the usage chunk comes last
        out: list[StreamDelta] = []
        for choice in event.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            out += self._delta(choice.get("delta") or {})
            if choice.get("logprobs") is not None:
                self.choice["logprobs"] = choice["logprobs"]
            if choice.get("finish_reason") is not None:
                self.choice["finish_reason"] = choice["finish_reason"]
                self.finished = True
        return out

    def _delta(self, delta: dict[str, Any]) -> list[StreamDelta]:
        out: list[StreamDelta] = []
        for key, value in delta.items():
            if key in ("content", "refusal", "reasoning_content", "reasoning") and isinstance(
                    value, str):
                if value:  # empty pieces leave a null field null, as unstreamed
                    self.message[key] = (self.message.get(key) or "") + value
                if value and key != "refusal":
                    out.append(StreamDelta(kind="text" if key == "content" else "thinking",
                                           text=value))
            elif key == "tool_calls":
                out += [d for c in value or [] if (d := self._call(c)) is not None]
            elif key != "role" and value is not None:
                self.message[key] = value
        return out

    def _call(self, piece: dict[str, Any]) -> StreamDelta | None:
        call = self.calls.setdefault(piece.get("index", len(self.calls)), {
            "id": None, "type": "function", "function": {"name": "", "arguments": ""}})
        for key, value in piece.items():
            if key == "function":
                fn = call["function"]
                fn["name"] += value.get("name") or ""
                fn["arguments"] += value.get("arguments") or ""
            elif key != "index" and value is not None:
                call[key] = value
        args = (piece.get("function") or {}).get("arguments")
        if not args:
            return None
        return StreamDelta(kind="tool_arguments", text=args, index=piece.get("index", 0),
                           name=call["function"]["name"] or None, call_id=call["id"])

    def _body(self) -> dict[str, Any]:
        message = dict(self.message)
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        choice = {"index": 0, "message": message, "logprobs": self.choice["logprobs"],
                  "finish_reason": self.choice["finish_reason"]}
        return {**self.top, "object": "chat.completion", "choices": [choice]}


#: The class folding this wire's stream events into its unstreamed body.
ASSEMBLER = OpenAIAssembler


@contextmanager
def _translate_errors(provider: str = NAME) -> Iterator[None]:
    """Turn OpenAI SDK errors into turnlog ``ProviderError`` subclasses."""
    sdk = _sdk()
    try:
        yield
    except sdk.APIStatusError as exc:
        message = error_message(exc.body, exc.message)
        raise error_for_status(exc.status_code, message, provider,
                               exc.response.headers) from None
    except sdk.APITimeoutError:
        raise ProviderTimeout("no answer before the timeout", provider=provider) from None
    except sdk.APIConnectionError as exc:
        raise ProviderConnectionError(
            f"cannot reach the API: {exc.message}",
            provider=provider) from None
    except sdk.OpenAIError as exc:
        raise ProviderError(f"{type(exc).__name__}: {exc}",
                            provider=provider) from None


class OpenAIProvider(SDKProvider):
    """OpenAI Chat Completions behind the neutral ``Provider`` interface.

    The key comes from ``api_key`` or ``OPENAI_API_KEY``, the endpoint from
    ``base_url`` or ``OPENAI_BASE_URL``. See ``SDKProvider`` for retries,
    closing and ``acomplete``.
    """

    name = key_owner = NAME
    base_url_env = "OPENAI_BASE_URL"
    default_model = DEFAULT_MODEL

    def _client_classes(self) -> tuple[type, type]:
        sdk = _sdk()
        return sdk.OpenAI, sdk.AsyncOpenAI

    def _kwargs(self, request: ModelRequest) -> dict[str, Any]:
        return map_request(request)

    def _endpoint(self, client: Any) -> Any:
        return client.chat.completions

    def _map_body(self, body: dict[str, Any]) -> ModelResponse:
        return map_response(body)

    def _errors(self) -> Any:
        return _translate_errors(NAME)

    def _assembler(self) -> Assembler:
        return OpenAIAssembler()

    def _stream_kwargs(self) -> dict[str, Any]:
        return {"stream": True, "stream_options": {"include_usage": True}}


def create_provider(model: str | None = None, **kw: Any) -> OpenAIProvider:
    """An ``OpenAIProvider`` (``kw``: ``api_key``, ``base_url``, ``timeout`` ...)."""
    return OpenAIProvider(model, **kw)
