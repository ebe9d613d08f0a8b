"""Gemini adapter: ``httpx`` against the REST ``generateContent`` endpoint.

``POST {GEMINI_BASE_URL}/v1beta/models/{model}:generateContent`` with the key
in the ``x-goog-api-key`` header (never in the URL, so it cannot leak into
logs or error messages).

>>> from turnlog.engine.model.messages import Message, Text
>>> map_messages("Be brief.", [Message(role="user", parts=(Text(text="hi"),))])
({'parts': [{'text': 'Be brief.'}]}, [{'role': 'user', 'parts': [{'text': 'hi'}]}])

Rules the mapping keeps: roles are ``user`` and ``model``; the system text is
``systemInstruction``; tools are ``[{"functionDeclarations": [...]}]``; the
``functionResponse`` parts answering a model turn come first in the next user
content, one per ``functionCall``, in call order and with the call's name
(a successful result that is a JSON object is sent as that object, as a
structured ``response`` came; other text as ``{"output": ...}``; a failure as
``{"error": ...}``). A call's own ``id`` (newer models send one) goes back with
it and with its response; snake_case parts (the SDKs' dumps) are read as
camelCase; code execution and non-image files are kept verbatim (``Opaque``).

Call ids: Gemini sends none (or, in newer models, sometimes an ``id``, which is
kept). The missing ones are ``gemini_t{turn}_{n}``: ``turn`` is the response's
turn (1 + the assistant messages in the request) and ``n`` the call's 1-based
index in the response, so the same response maps to the same ids every time
and ids never repeat within a conversation. Without a turn (``map_response``
called alone) ``turn`` is replaced by the first 12 hex digits of the body's
SHA-256. ``unmap_messages`` numbers model turns the same way.

Thought signatures: a ``thoughtSignature`` on a part becomes a
``Thinking(text="", signature=..., provider="gemini")`` just before that part
and is attached to it again when sent back to Gemini (newer models refuse a
function call turn without it); other providers drop it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import httpx
import msgspec

from turnlog.engine.model.canonical import valid_unicode
from ..errors import (
    FormatError,
    MalformedResponseError,
    NestingError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
)
from turnlog.engine.model.events import StopReason, ToolSpec
from turnlog.engine.model.messages import Image, Message, Opaque, Part, Text, Thinking, ToolCall, ToolResult, Usage
from turnlog.engine.model.nesting import load_json
from ._common import (
    count,
    error_for_status,
    error_message,
    mark_cut_off,
    opt_str,
    parse_arguments,
    parse_data_url,
    plan_history,
    require,
    require_key,
    response_body,
    wire_list,
    wire_str,
    with_model,
)
from ._gemini_schema import gemini_schema, parameters_for
from ._httpx import HTTPXProvider
from ._stream import Assembler, AsyncResponseStream, ResponseStream, StreamDelta, sse_data
from .base import ModelRequest, ModelResponse

__all__ = [
    "ASSEMBLER",
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "GENAI_NAME",
    "GENAI_OPERATION",
    "KEY_ENV",
    "NAME",
    "OPAQUE_PARTS",
    "PRICE_KEY",
    "SYSTEM_KEY",
    "GeminiAssembler",
    "GeminiProvider",
    "create_provider",
    "export_body",
    "gemini_schema",
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

NAME = "gemini"
#: The environment variable of the API key.
KEY_ENV = "GEMINI_API_KEY"
#: The vendor its prices are listed under (genai-prices' provider id).
PRICE_KEY = "google"
#: ``gen_ai.provider.name`` and ``gen_ai.operation.name`` of its calls.
GENAI_NAME, GENAI_OPERATION = "gcp.gemini", "generate_content"
#: The request body's key of the system text.
SYSTEM_KEY = "systemInstruction"
DEFAULT_MODEL = "gemini-2.5-flash"
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"

_FINISH_REASON_MAP: dict[str, StopReason] = {
    "STOP": "end_turn",
    "MAX_TOKENS": "max_tokens",
    "SAFETY": "refusal",
    "RECITATION": "refusal",
    "BLOCKLIST": "refusal",
    "PROHIBITED_CONTENT": "refusal",
    "SPII": "refusal",
    "IMAGE_SAFETY": "refusal",
    "LANGUAGE": "other",
    "MALFORMED_FUNCTION_CALL": "other",
    "OTHER": "other",
}
_CONFIG = {"max_tokens": "maxOutputTokens", "temperature": "temperature", "top_p": "topP",
           "top_k": "topK", "seed": "seed", "stop": "stopSequences"}


#: Part kinds kept verbatim as ``Opaque`` parts (Gemini-side tools and files).
OPAQUE_PARTS = frozenset({"executableCode", "codeExecutionResult", "fileData", "videoMetadata",
                          "toolCall", "toolResponse"})


def map_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as Gemini ``tools`` (one entry holding every declaration).

    ``parameters`` go through ``gemini_schema`` (Gemini refuses JSON Schema
    outside its OpenAPI subset); a tool without parameters declares none,
    since Gemini refuses an OBJECT without properties.
    """
    if not tools:
        return []
    declarations = []
    for t in tools:
        declaration: dict[str, Any] = {"name": t.name, "description": t.description}
        parameters = parameters_for(t.parameters)
        if parameters is not None:
            declaration["parameters"] = parameters
        declarations.append(declaration)
    return [{"functionDeclarations": declarations}]


def unmap_tools(tools: Sequence[dict[str, Any]]) -> list[ToolSpec]:
    """Gemini ``tools`` back to neutral specs."""
    return [ToolSpec(name=d["name"], description=d.get("description", ""),
                     parameters=d.get("parameters") or d.get("parametersJsonSchema")
                     or {"type": "object", "properties": {}})
            for tool in tools for d in tool.get("functionDeclarations", [])]


def _image(image: Image) -> dict[str, Any]:
    if image.data is not None:
        return {"inlineData": {"mimeType": image.media_type, "data": image.data}}
    inline = parse_data_url(image.url or "")
    if inline:
        return {"inlineData": {"mimeType": inline[0], "data": inline[1]}}
    return {"fileData": {"mimeType": image.media_type, "fileUri": image.url or ""}}


def _generated(call_id: str) -> bool:
    """Whether ``call_id`` is one turnlog made up for a call Gemini sent without an id."""
    head, _, n = call_id.rpartition("_")
    return head.startswith("gemini_") and n.isdigit()


def _response(part: ToolResult) -> dict[str, Any]:
    """A result as ``functionResponse.response``: a structured one as it was, else wrapped."""
    if not part.is_error and part.content.startswith("{"):
        try:
            value = load_json(part.content, "tool result")
        except (ValueError, NestingError):  # not JSON, or too deep to send as structure
            value = None
        if isinstance(value, dict) and not _wrapped(value):
            return value
    return {"error" if part.is_error else "output": part.content}


def _render_parts(parts: Sequence[Part], calls: list[ToolCall]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    signature: str | None = None
    for part in parts:
        if type(part) is Thinking:
            if part.text:
                out.append({"text": part.text, "thought": True}
                           | ({"thoughtSignature": part.signature} if part.signature else {}))
            else:
                signature = part.signature  # belongs to the next part
            continue
        if type(part) is Opaque:
            if part.attach and out:
                out[-1][part.kind] = part.data
            elif not part.attach and isinstance(part.data, dict):
                out.append(dict(part.data))
            continue
        if type(part) is Text:
            wire: dict[str, Any] = {"text": part.text}
        elif type(part) is ToolCall:
            wire = {"functionCall": {"name": part.name, "args": part.arguments}
                    | ({} if _generated(part.id) else {"id": part.id})}
        elif type(part) is ToolResult:
            call = next((c for c in calls if c.id == part.call_id), None)
            wire = {"functionResponse": {"name": call.name if call else part.name,
                                         "response": _response(part)}
                    | ({"id": part.call_id} if call and not _generated(call.id) else {})}
        elif type(part) is Image:
            wire = _image(part)
        else:  # pragma: no cover
            raise TypeError(f"unknown part {part!r}")
        if signature:
            wire["thoughtSignature"], signature = signature, None
        out.append(wire)
    return out


def map_messages(system: str, messages: Sequence[Message]
                 ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """``(systemInstruction or None, contents)`` in Gemini's shape."""
    system_text, entries = plan_history(system, messages, NAME)
    contents: list[dict[str, Any]] = []
    calls: list[ToolCall] = []
    for entry in entries:
        role = "model" if entry.role == "assistant" else "user"
        if entry.role == "assistant":
            calls = [p for p in entry.parts if type(p) is ToolCall]
        parts = _render_parts(entry.parts, calls)
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(p for p in parts if p != {"text": ""})
        else:
            contents.append({"role": role, "parts": parts})
    instruction = {"parts": [{"text": system_text}]} if system_text else None
    return instruction, contents


def map_request(request: ModelRequest) -> dict[str, Any]:
    """The complete ``generateContent`` request body (the model goes in the URL).

    Parameters mapped into ``generationConfig``: ``max_tokens``,
    ``temperature``, ``top_p``, ``top_k``, ``seed``, ``stop``; others are ignored.
    """
    instruction, contents = map_messages(request.system, request.messages)
    body: dict[str, Any] = {"contents": contents}
    if instruction:
        body["systemInstruction"] = instruction
    if request.tools:
        body["tools"] = map_tools(request.tools)
    config = {wire: request.parameters[key] for key, wire in _CONFIG.items()
              if request.parameters.get(key) is not None}
    if isinstance(config.get("stopSequences"), str):
        config["stopSequences"] = [config["stopSequences"]]
    if config:
        body["generationConfig"] = config
    return body


def map_usage(usage: Any) -> Usage:
    """Gemini ``usageMetadata`` in neutral form.

    ``promptTokenCount`` counts the cached ones (``cachedContentTokenCount``);
    the tool-use prompt is added to the input; thoughts (``thoughtsTokenCount``,
    outside ``candidatesTokenCount``) are added to the output and are its
    reasoning part. Audio and image prompt tokens come from
    ``promptTokensDetails`` (by modality).
    """
    if not isinstance(usage, dict):
        return Usage()
    thoughts = count(usage, "thoughtsTokenCount")
    modality: dict[str, int] = {}
    for detail in usage.get("promptTokensDetails") or ():
        if isinstance(detail, dict) and isinstance(detail.get("modality"), str):
            modality[detail["modality"]] = (modality.get(detail["modality"], 0)
                                            + count(detail, "tokenCount"))
    return Usage(input_tokens=count(usage, "promptTokenCount")
                 + count(usage, "toolUsePromptTokenCount"),
                 output_tokens=count(usage, "candidatesTokenCount") + thoughts,
                 cached_input_tokens=count(usage, "cachedContentTokenCount"),
                 reasoning_tokens=thoughts,
                 input_audio_tokens=modality.get("AUDIO", 0),
                 input_image_tokens=modality.get("IMAGE", 0),
                 raw=usage)


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def camel_part(wp: Any) -> Any:
    """A part written in the SDKs' snake_case (``function_call``) in the REST API's camelCase.

    The API reads both; the names inside ``args`` and ``response`` (the
    caller's data) are left as they are.
    """
    if not isinstance(wp, dict):
        return wp
    out: dict[str, Any] = {}
    for key, value in wp.items():
        if isinstance(value, dict) and key not in ("args", "response"):
            value = {(k if k in ("args", "response") else _camel(k)): v for k, v in value.items()}
        out[_camel(key) if isinstance(key, str) else key] = value
    return out


def _media(wp: dict[str, Any], at: str) -> Part:
    """``inlineData``/``fileData``: an ``Image`` for an image, else kept verbatim."""
    key = "inlineData" if "inlineData" in wp else "fileData"
    data = require(wp, key, dict, at, NAME)
    media = opt_str(data, "mimeType") or "image/png"
    if not media.startswith("image/") or set(wp) - {key}:
        return Opaque(provider=NAME, kind=key, data=wp)
    if key == "inlineData":
        return Image(media_type=media, data=require(data, "data", str, f"{at}.{key}", NAME))
    return Image(media_type=media, url=require(data, "fileUri", str, f"{at}.{key}", NAME))


def _attached(wp: dict[str, Any], own: set[str]) -> list[Part]:
    """A part's other fields (``partMetadata``, ``mediaResolution`` ...) kept, attached to it."""
    return [Opaque(provider=NAME, kind=k, data=v, attach=True) for k, v in wp.items()
            if k not in own and v is not None]


def _read_parts(wire_parts: list[Any], where: str, id_prefix: str) -> list[Part]:
    parts: list[Part] = []
    n = 0
    for i, wp in enumerate(wire_parts):
        at = f"{where}[{i}]"
        if not isinstance(wp, dict):
            raise MalformedResponseError(f"{at} is not an object", provider=NAME)
        wp = camel_part(wp)
        if isinstance(wp, dict) and wp.keys() & OPAQUE_PARTS:
            parts.append(Opaque(provider=NAME, kind=min(wp.keys() & OPAQUE_PARTS), data=wp))
            continue
        signature = opt_str(wp, "thoughtSignature")
        if wp.get("thought") is True:
            text = require(wp, "text", str, at, NAME) if "text" in wp else ""
            parts.append(Thinking(text=text, signature=signature, provider=NAME))
            continue
        if signature:
            parts.append(Thinking(text="", signature=signature, provider=NAME))
        if "text" in wp:
            parts.append(Text(text=require(wp, "text", str, at, NAME)))
            parts.extend(_attached(wp, {"text", "thought", "thoughtSignature"}))
        elif "functionCall" in wp:
            call = require(wp, "functionCall", dict, at, NAME)
            n += 1
            args, raw, invalid = parse_arguments(call.get("args", {}))
            parts.append(ToolCall(id=opt_str(call, "id") or f"{id_prefix}_{n}",
                                  name=require(call, "name", str, f"{at}.functionCall", NAME),
                                  arguments=args, raw_arguments=raw, invalid=invalid))
            parts.extend(_attached(wp, {"functionCall", "thoughtSignature"}))
        elif "inlineData" in wp or "fileData" in wp:
            parts.append(_media(wp, at))
        else:
            kinds = sorted(str(k) for k in wp if k != "thoughtSignature")
            raise MalformedResponseError(f"unknown part kind {kinds} at {at}", provider=NAME)
    return parts


def _body_digest(body: Any) -> str:
    # a lone surrogate in the body is not UTF-8: hash it as U+FFFD (the loop records it so)
    return hashlib.sha256(msgspec.json.encode(valid_unicode(body)[0], order="sorted")).hexdigest()[:12]


def map_response(body: dict[str, Any], *, turn: int | None = None) -> ModelResponse:
    """A ``generateContent`` response body in neutral form (``raw`` is ``body``).

    ``turn`` numbers the generated call ids (see the module doc). A prompt
    blocked before any candidate is a ``refusal`` with no parts.
    """
    body = response_body(body, NAME)
    usage = map_usage(body.get("usageMetadata"))
    common = {"usage": usage, "provider": NAME, "model": opt_str(body, "modelVersion") or "",
              "response_id": opt_str(body, "responseId"), "raw": body}
    candidates = body.get("candidates")
    if not candidates:
        if opt_str(body.get("promptFeedback"), "blockReason"):
            return ModelResponse(parts=(), stop_reason="refusal", **common)
        raise MalformedResponseError("response has no candidates", provider=NAME)
    candidate = require({"c": candidates}, "c", list, "body", NAME)[0]
    if not isinstance(candidate, dict):
        raise MalformedResponseError("candidates[0] is not an object", provider=NAME)
    reason = opt_str(candidate, "finishReason")
    content = candidate.get("content")
    if reason is not None and (content is None or
                               (isinstance(content, dict) and "parts" not in content)):
        # blocked, or the token limit spent on thinking before any part: an empty answer
        wire_parts: list[Any] = []
    else:
        content = require(candidate, "content", dict, "candidates[0]", NAME)
        wire_parts = require(content, "parts", list, "candidates[0].content", NAME)
    prefix = f"gemini_t{turn}" if turn is not None else f"gemini_{_body_digest(body)}"
    parts = _read_parts(wire_parts, "candidates[0].content.parts", prefix)
    stop = _FINISH_REASON_MAP.get(reason or "STOP", "other")
    if stop == "end_turn" and any(type(p) is ToolCall for p in parts):
        stop = "tool_use"
    return ModelResponse(parts=tuple(mark_cut_off(parts, stop)), stop_reason=stop, **common)


def _wrapped(response: Any) -> bool:
    """Whether ``response`` is turnlog's own ``{"output": text}`` / ``{"error": text}``."""
    return (isinstance(response, dict) and set(response) in ({"output"}, {"error"})
            and isinstance(next(iter(response.values())), str))


def _result(response: Any) -> tuple[str, bool]:
    if _wrapped(response):
        value, is_error = next(iter(response.values())), "error" in response
    else:
        value, is_error = response, False
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text, is_error


def _unmap_response(wp: dict[str, Any], at: str, open_calls: list[ToolCall]) -> Message:
    fr = wp["functionResponse"]
    if not isinstance(fr, dict):
        raise FormatError(f"gemini {at}.functionResponse: expected an object")
    name = wire_str(fr, "name", f"{at}.functionResponse", NAME)
    call = next((c for c in open_calls if c.id == fr.get("id")), None) or next(
        (c for c in open_calls if c.name == name), None)
    if call is not None:
        open_calls.remove(call)
    text, is_error = _result(fr.get("response"))
    call_id = call.id if call else opt_str(fr, "id") or f"gemini_{at}"
    return Message(role="tool", parts=(ToolResult(call_id=call_id, name=name, content=text,
                                                  is_error=is_error),))


def _unmap_media(wp: dict[str, Any], key: str, at: str) -> Image:
    data = wp[key]
    if not isinstance(data, dict):
        raise FormatError(f"gemini {at}.{key}: expected an object")
    media = wire_str(data, "mimeType", f"{at}.{key}", NAME) or "image/png"
    if key == "inlineData":
        return Image(media_type=media, data=wire_str(data, "data", f"{at}.{key}", NAME))
    return Image(media_type=media, url=wire_str(data, "fileUri", f"{at}.{key}", NAME))


def _unmap_user(wire_parts: list[dict[str, Any]], where: str,
                open_calls: list[ToolCall]) -> list[Message]:
    out: list[Message] = []
    user: list[Part] = []
    for j, wp in enumerate(wire_parts):
        at = f"{where}[{j}]"
        wp = camel_part(wp)
        if "functionResponse" in wp:
            out.append(_unmap_response(wp, at, open_calls))
        elif "text" in wp:
            user.append(Text(text=wire_str(wp, "text", at, NAME)))
            user.extend(_attached(wp, {"text"}))
        elif ("inlineData" in wp or "fileData" in wp) and str(
                (wp.get("inlineData") or wp.get("fileData") or {}).get("mimeType", "image/")
                ).startswith("image/"):
            key = "inlineData" if "inlineData" in wp else "fileData"
            user.append(_unmap_media(wp, key, at))
            user.extend(_attached(wp, {key}))
        elif wp.keys() & (OPAQUE_PARTS | {"inlineData"}):
            user.append(Opaque(provider=NAME, kind=min(wp.keys() & (OPAQUE_PARTS | {"inlineData"})),
                               data=wp))
        else:
            raise FormatError(f"gemini {at}: unknown part {sorted(map(str, wp))}")
    return out + ([Message(role="user", parts=tuple(user))] if user else [])


def export_body(system: str, messages: Sequence[Message]) -> dict[str, Any]:
    """``{"systemInstruction"?, "contents"}``: a ``generateContent`` request's conversation."""
    instruction, contents = map_messages(system, messages)
    return ({"systemInstruction": instruction, "contents": contents} if instruction
            else {"contents": contents})


def read_request(doc: dict[str, Any]) -> None:
    """``None``: a ``generateContent`` body is read by the shared request reader
    (``contents``)."""
    return None


def read_response(body: Any) -> tuple[list[Any], str | None, Any] | None:
    """``([model content], model version, usage)`` of a ``generateContent`` response, or of
    its stream recorded as the list of its chunks (adjacent plain texts joined)."""
    usage: Any = None
    if isinstance(body, list):
        found = [c["usageMetadata"] for c in body
                 if isinstance(c, dict) and isinstance(c.get("usageMetadata"), dict)]
        usage = found[-1] if found else None  # the last chunk carries the totals
        body = _assemble_recorded(body)
    elif isinstance(body, dict) and isinstance(body.get("candidates"), list):
        usage = body.get("usageMetadata")
    else:
        return None
    content = body["candidates"][0].get("content") if body["candidates"] else None
    if not isinstance(content, dict):
        return None
    return ([{"role": "model", "parts": content.get("parts") or []}], body.get("modelVersion"),
            usage if isinstance(usage, dict) else None)


def _assemble_recorded(chunks: list[Any]) -> dict[str, Any]:
    """The content a recorded chunk stream built (adjacent plain texts joined)."""
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


def unmap_messages(system_instruction: Any, contents: Any) -> tuple[str, list[Message]]:
    """Gemini ``systemInstruction`` + ``contents`` back to ``(system text, neutral messages)``.

    ``functionResponse`` parts are matched to the previous model turn's calls
    by name and order; each becomes its own ``tool`` message. Raises
    ``FormatError`` saying where for anything it cannot read.
    """
    if system_instruction is not None and not isinstance(system_instruction, dict):
        raise FormatError("gemini systemInstruction: expected an object")
    system = "".join(wire_str(camel_part(p), "text", "systemInstruction.parts", NAME) for p in
                     wire_list((system_instruction or {}).get("parts"),
                               "systemInstruction.parts", NAME))
    out: list[Message] = []
    turn = 0
    open_calls: list[ToolCall] = []
    for i, content in enumerate(wire_list(contents, "contents", NAME)):
        where = f"contents[{i}].parts"
        wire_parts = wire_list(content.get("parts"), where, NAME)
        if content.get("role") == "model":
            turn += 1
            try:
                parts = _read_parts(wire_parts, where, f"gemini_t{turn}")
            except MalformedResponseError as exc:
                raise FormatError(str(exc)) from None
            open_calls = [p for p in parts if type(p) is ToolCall]
            out.append(Message(role="assistant", parts=tuple(parts), provider=NAME))
        else:
            out.extend(_unmap_user(wire_parts, where, open_calls))
    return system, out


class GeminiAssembler(Assembler):
    """``streamGenerateContent`` chunks into one ``GenerateContentResponse``.

    Consecutive text pieces of the same kind (thought or not) are joined into
    one part, as the unstreamed answer has them; a piece's
    ``thoughtSignature`` stays on the part it arrived with.
    """

    def __init__(self) -> None:
        super().__init__()
        self.top: dict[str, Any] = {}
        self.candidate: dict[str, Any] = {}
        self.parts: list[dict[str, Any]] = []

    def _feed(self, event: dict[str, Any]) -> list[StreamDelta]:
        self.started = True
        self.top.update({k: v for k, v in event.items() if k != "candidates"})
        out: list[StreamDelta] = []
        for candidate in event.get("candidates") or []:
            if candidate.get("index", 0) != 0:
                continue
            self.candidate.update({k: v for k, v in candidate.items() if k != "content"})
            content = candidate.get("content") or {}
            self.candidate.setdefault("content", {"role": content.get("role", "model")})
            for part in content.get("parts") or []:
                out += self._part(dict(part))
            if candidate.get("finishReason"):
                self.done = True
        return out

    def _part(self, part: dict[str, Any]) -> list[StreamDelta]:
        last = self.parts[-1] if self.parts else None
        text = part.get("text")
        if isinstance(text, str) and last is not None and set(last) - {"thought"} == {"text"} \
                and last.get("thought") == part.get("thought") \
                and set(part) - {"thought", "thoughtSignature"} == {"text"}:
            last["text"] += text
            if "thoughtSignature" in part:
                last["thoughtSignature"] = part["thoughtSignature"]
        else:
            self.parts.append(part)
        index = len(self.parts) - 1
        if isinstance(text, str) and text:
            return [StreamDelta(kind="thinking" if part.get("thought") else "text", text=text,
                                index=index)]
        call = part.get("functionCall")
        if isinstance(call, dict):
            return [StreamDelta(kind="tool_arguments", index=index, name=call.get("name"),
                                call_id=call.get("id"),
                                text=json.dumps(call.get("args") or {}, ensure_ascii=False))]
        return []

    def _body(self) -> dict[str, Any]:
        candidate = dict(self.candidate)
        candidate["content"] = dict(candidate.get("content") or {"role": "model"})
        candidate["content"]["parts"] = self.parts
        return {"candidates": [candidate], **self.top}


#: The class folding this wire's stream events into its unstreamed body.
ASSEMBLER = GeminiAssembler


@contextmanager
def _translate_errors() -> Iterator[None]:
    """Turn httpx errors into turnlog ``ProviderError`` subclasses."""
    try:
        yield
    except httpx.TimeoutException:
        raise ProviderTimeout("no answer before the timeout", provider=NAME) from None
    except httpx.HTTPError as exc:
        raise ProviderConnectionError(f"cannot reach the API: {type(exc).__name__}: {exc}",
                                      provider=NAME) from None


class GeminiProvider(HTTPXProvider):
    """Gemini ``generateContent`` behind the neutral ``Provider`` interface.

    The key comes from ``api_key`` or ``GEMINI_API_KEY``, the endpoint from
    ``base_url`` or ``GEMINI_BASE_URL`` (default Google's public endpoint).
    ``client`` / ``async_client`` may be an ``httpx.Client`` /
    ``httpx.AsyncClient`` to reuse. ``max_retries`` retries failed
    connections only (httpx's transport retries), never a request that got an
    answer. Everything returned is masked of the key (``RemoteProvider``).
    """

    name = NAME

    def __init__(self, model: str | None = None, *, api_key: str | None = None,
                 base_url: str | None = None, timeout: float = 60.0, max_retries: int = 0,
                 client: httpx.Client | None = None,
                 async_client: httpx.AsyncClient | None = None) -> None:
        self.model = model or DEFAULT_MODEL
        self._key = require_key(NAME, api_key)
        self.base_url = (base_url or os.environ.get("GEMINI_BASE_URL")
                         or DEFAULT_BASE_URL).rstrip("/")
        self._clients(client, async_client, timeout, max_retries)

    def _call(self, request: ModelRequest) -> tuple[str, dict[str, Any], str, int]:
        model = (request.model or self.model).removeprefix("models/")
        url = f"{self.base_url}/v1beta/models/{model}:generateContent"
        turn = 1 + sum(1 for m in request.messages if m.role == "assistant")
        return url, map_request(request), model, turn

    def _secret(self) -> str | None:
        return self._key

    def _finish(self, response: httpx.Response, model: str, turn: int) -> ModelResponse:
        text = response.text
        if response.status_code >= 400:
            try:
                data = self._body(text)
            except MalformedResponseError:
                data = None
            message = error_message(data, self.redactor.text(text)[:200]
                                    or response.reason_phrase)
            raise error_for_status(response.status_code, message, NAME, response.headers)
        return with_model(map_response(self._body(text), turn=turn), model)

    def _complete(self, request: ModelRequest) -> ModelResponse:
        if self._closed:
            raise ProviderError("the provider was closed", provider=self.name)
        url, body, model, turn = self._call(request)
        with _translate_errors():
            response = self.client.post(url, json=body, headers={"x-goog-api-key": self._key})
            response.read()
        return self._finish(response, model, turn)

    async def _acomplete(self, request: ModelRequest) -> ModelResponse:
        url, body, model, turn = self._call(request)
        with _translate_errors():
            response = await self.async_client.post(url, json=body,
                                                    headers={"x-goog-api-key": self._key})
            await response.aread()
        return self._finish(response, model, turn)

    def _stream_call(self, request: ModelRequest) -> tuple[str, dict[str, Any], Any]:
        if self._closed:
            raise ProviderError("the provider was closed", provider=self.name)
        url, body, model, turn = self._call(request)
        url = url.removesuffix(":generateContent") + ":streamGenerateContent?alt=sse"
        return url, body, lambda text: with_model(map_response(self._body(text), turn=turn), model)

    def stream(self, request: ModelRequest) -> ResponseStream:
        """Send ``request`` to ``streamGenerateContent`` (server-sent events); iterate for deltas.

        The handle's ``response`` is then what ``complete`` would have returned.
        """
        url, body, finish = self._stream_call(request)

        def events() -> Iterator[dict[str, Any]]:
            with self.client.stream("POST", url, json=body,
                                    headers={"x-goog-api-key": self._key}) as response:
                if response.status_code >= 400:
                    response.read()
                    self._finish(response, "", 0)  # raises the error the status means
                yield from sse_data(response.iter_lines())

        return ResponseStream(self, events, GeminiAssembler(), finish, _translate_errors)

    def astream(self, request: ModelRequest) -> AsyncResponseStream:
        """``stream`` on the async client: ``async for`` the handle."""
        url, body, finish = self._stream_call(request)

        async def events() -> AsyncIterator[dict[str, Any]]:
            async with self.async_client.stream("POST", url, json=body,
                                                headers={"x-goog-api-key": self._key}) as response:
                if response.status_code >= 400:
                    await response.aread()
                    self._finish(response, "", 0)
                buffer: list[str] = []
                async for line in response.aiter_lines():
                    buffer.append(line)
                    if not line.strip():
                        for event in sse_data(iter(buffer)):
                            yield event
                        buffer = []
                for event in sse_data(iter(buffer)):
                    yield event

        return AsyncResponseStream(self, events, GeminiAssembler(), finish, _translate_errors)


def create_provider(model: str | None = None, **kw: Any) -> GeminiProvider:
    """A ``GeminiProvider`` (``kw``: ``api_key``, ``base_url``, ``timeout`` ...)."""
    return GeminiProvider(model, **kw)
