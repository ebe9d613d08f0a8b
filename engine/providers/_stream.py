"""Streamed responses: deltas as they arrive, then the very body an unstreamed call returns.

Each wire format's stream events are folded by an assembler into the
response body the same request would have got unstreamed; that body then
goes through the provider's one mapping (``map_response``), so a streamed
and an unstreamed answer of the same content are the same ``ModelResponse``.
While it folds, the assembler hands out ``StreamDelta``s (text, thinking,
tool-argument pieces) for observers.

A stream that breaks after its first event (the connection is cut, an
``error`` event, or it ends before its last event) raises
``StreamInterrupted`` carrying the partial response, mapped the same way.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Literal

import httpx
import msgspec

from ..errors import MalformedResponseError, ProviderConnectionError, ProviderError, StreamInterrupted
from ..messages import ToolCall
from .base import ModelResponse

#: Why a tool call of a broken stream is invalid (it may lack the end of its arguments).
CUT_BY_STREAM = "cut off: the stream broke before the call was complete"

__all__ = ["CUT_BY_STREAM", "AnthropicAssembler", "Assembler", "AsyncResponseStream", "GeminiAssembler",
           "OpenAIAssembler", "ResponseStream", "ResponsesAssembler", "StreamDelta", "sse_data"]


class StreamDelta(msgspec.Struct, frozen=True, kw_only=True):
    """One piece of a streamed response: ``kind`` text, thinking or tool_arguments.

    ``index`` is the piece's block (Anthropic content block, OpenAI tool call
    index, Gemini part); a tool-argument piece names its ``call_id`` and tool
    ``name`` when the wire has said them.
    """

    kind: Literal["text", "thinking", "tool_arguments"]
    text: str
    index: int = 0
    name: str | None = None
    call_id: str | None = None


class Assembler:
    """Folds one wire's stream events into its unstreamed body (``body()``)."""

    def __init__(self) -> None:
        self.started = False  #: an event arrived
        self.done = False  #: the last event arrived

    def feed(self, event: dict[str, Any]) -> list[StreamDelta]:
        """Fold ``event`` in; the deltas it carries.

        An event of the wrong shape (a missing index, a list where an object
        belongs ...) is a ``MalformedResponseError`` naming it, never a crash.
        """
        try:
            return self._feed(event)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            kind = event.get("type") if isinstance(event, dict) else None
            raise MalformedResponseError(f"stream event {str(kind)[:40]!r} is malformed "
                                         f"({type(exc).__name__}: {exc})") from None

    def body(self) -> dict[str, Any]:
        """The body assembled so far (the whole one once ``done``)."""
        try:
            return self._body()
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            raise MalformedResponseError(f"the stream's events do not make a response "
                                         f"({type(exc).__name__}: {exc})") from None

    def _feed(self, event: dict[str, Any]) -> list[StreamDelta]:
        raise NotImplementedError

    def _body(self) -> dict[str, Any]:
        raise NotImplementedError


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
            self.blocks[index]["input"] = _json_or_text(text)

    def _body(self) -> dict[str, Any]:
        for index in list(self.json):  # an open tool call of a cut stream: its raw text
            self._close(index)
        return self.message | {"content": [self.blocks[i] for i in sorted(self.blocks)]}


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
            self.response = _object(event.get("response"), kind)
            self.done = kind in self._CLOSING
            return []
        index = event.get("output_index", 0)
        if not isinstance(index, int):
            raise MalformedResponseError(f"stream event {kind!r}: output_index is not a number")
        if kind in ("response.output_item.added", "response.output_item.done"):
            self.items[index] = dict(_object(event.get("item"), kind))
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


def _object(value: Any, kind: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MalformedResponseError(f"stream event {kind!r} lacks its object")
    return value


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        return text  # cut mid-arguments: kept raw, the mapping marks the call invalid


def sse_data(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """The JSON ``data:`` payloads of a server-sent event stream (Gemini's ``alt=sse``)."""
    data: list[str] = []
    for line in lines:
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line.strip() and data:
            yield _event("\n".join(data))
            data = []
    if data:
        yield _event("\n".join(data))


def _event(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        raise MalformedResponseError(f"stream event is not JSON: {text[:80]!r}") from None
    if not isinstance(value, dict):
        raise MalformedResponseError("stream event is not an object")
    return value


Finish = Callable[[str], ModelResponse]


class _Stream:
    """What the sync and async handles share: errors, the end, the partial response."""

    def __init__(self, provider: Any, assembler: Assembler, finish: Finish,
                 errors: Callable[[], AbstractContextManager[None]],
                 transport: tuple[type[Exception], ...]) -> None:
        self.provider, self.assembler, self._finish, self._errors = (
            provider, assembler, finish, errors)
        self._transport = transport
        self._response: ModelResponse | None = None

    @property
    def response(self) -> ModelResponse:
        """The whole response, once the stream was read to its end."""
        if self._response is None:
            raise ProviderError("the stream was not read to its end", provider=self.provider.name)
        return self._response

    def partial(self) -> ModelResponse | None:
        """What arrived so far, mapped as a response would be (``None`` before any event)."""
        if not self.assembler.started:
            return None
        try:
            response = self._finish(json.dumps(self.assembler.body()))
        except MalformedResponseError:
            return ModelResponse(parts=(), provider=self.provider.name, stop_reason="other")
        # a call of a broken stream may lack its end: it is kept, and never runs
        parts = tuple(ToolCall(id=p.id, name=p.name, raw_arguments=p.raw_arguments,
                               invalid=CUT_BY_STREAM) if type(p) is ToolCall else p
                      for p in response.parts)
        return msgspec.structs.replace(response, parts=parts, stop_reason="other")

    def _broken(self, exc: ProviderError) -> ProviderError:
        if not self.assembler.started:
            return exc
        partial = self.partial()
        return StreamInterrupted(f"the stream broke mid-way ({exc})", provider=self.provider.name,
                                 partial=partial.parts if partial else ())

    def _end(self) -> None:
        if not self.assembler.done:
            raise self._broken(ProviderConnectionError("it ended before its last event"))
        self._response = self._finish(json.dumps(self.assembler.body()))


class ResponseStream(_Stream):
    """A streamed call: iterate it for ``StreamDelta``s, then read ``response``.

    Raises ``ProviderError`` as ``complete`` would, and ``StreamInterrupted``
    (with the partial parts) when it breaks after its first event.
    ``transport`` are the HTTP library's errors of a broken connection.
    """

    def __init__(self, provider: Any, events: Callable[[], Iterator[dict[str, Any]]],
                 assembler: Assembler, finish: Finish,
                 errors: Callable[[], AbstractContextManager[None]],
                 transport: tuple[type[Exception], ...] = (httpx.TransportError,)) -> None:
        super().__init__(provider, assembler, finish, errors, transport)
        self._events = events

    def __iter__(self) -> Iterator[StreamDelta]:
        with self.provider._shield():
            try:
                with self._errors():
                    try:
                        for event in self._events():
                            yield from self.assembler.feed(event)
                    except self._transport as exc:
                        raise ProviderConnectionError(f"connection lost: {exc}",
                                                      provider=self.provider.name) from None
            except ProviderError as exc:
                raise self._broken(exc) from None
            self._end()


class AsyncResponseStream(_Stream):
    """``ResponseStream`` on the async client: ``async for`` it, then read ``response``."""

    def __init__(self, provider: Any, events: Callable[[], AsyncIterator[dict[str, Any]]],
                 assembler: Assembler, finish: Finish,
                 errors: Callable[[], AbstractContextManager[None]],
                 transport: tuple[type[Exception], ...] = (httpx.TransportError,)) -> None:
        super().__init__(provider, assembler, finish, errors, transport)
        self._events = events

    async def __aiter__(self) -> AsyncIterator[StreamDelta]:
        with self.provider._shield():
            try:
                with self._errors():
                    try:
                        async for event in self._events():
                            for delta in self.assembler.feed(event):
                                yield delta
                    except self._transport as exc:
                        raise ProviderConnectionError(f"connection lost: {exc}",
                                                      provider=self.provider.name) from None
            except ProviderError as exc:
                raise self._broken(exc) from None
            self._end()
