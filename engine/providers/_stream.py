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
from turnlog.engine.model.messages import ToolCall
from .base import ModelResponse

#: Why a tool call of a broken stream is invalid (it may lack the end of its arguments).
CUT_BY_STREAM = "cut off: the stream broke before the call was complete"

__all__ = ["CUT_BY_STREAM", "Assembler", "AsyncResponseStream", "ResponseStream", "StreamDelta",
           "event_object", "json_or_text", "recorded_events", "recorded_usage", "sse_data"]


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


def event_object(value: Any, kind: Any) -> dict[str, Any]:
    """``value`` when it is an object, else a ``MalformedResponseError`` naming event ``kind``."""
    if not isinstance(value, dict):
        raise MalformedResponseError(f"stream event {kind!r} lacks its object")
    return value


def json_or_text(text: str) -> Any:
    """Streamed tool arguments as JSON, or as the raw text when they do not parse."""
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        return text  # cut mid-arguments: kept raw, the mapping marks the call invalid


def recorded_events(body: Any) -> list[Any] | None:
    """The events of a recorded stream (a cassette's ``{"_sse_events": [...]}``), unwrapped
    of their ``{"event", "data"}`` envelope; ``None`` when ``body`` is no recorded stream."""
    if not isinstance(body, dict) or not isinstance(body.get("_sse_events"), list):
        return None
    return [item.get("data", item) if isinstance(item, dict) else item
            for item in body["_sse_events"]]


def recorded_usage(events: list[Any]) -> dict[str, Any] | None:
    """A recorded stream's usage as its wire wrote it: every event's usage merged in order
    (a ``message``'s or ``response``'s own, else the event's), nulls left out."""
    merged: dict[str, Any] = {}
    for data in events:
        if not isinstance(data, dict):
            continue
        holder = data.get("message") or data.get("response") or data
        usage = holder.get("usage") if isinstance(holder, dict) else None
        if not isinstance(usage, dict):
            usage = data.get("usage")
        if isinstance(usage, dict):
            merged.update({k: v for k, v in usage.items() if v is not None})
    return merged or None


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
