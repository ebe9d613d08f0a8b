"""A conversation's events as OpenTelemetry GenAI spans: a pure view of the journal.

``GenAISpans`` is fed a conversation's events one at a time, with the moment
each was recorded and a key naming it (the journal hash of its row); it
returns the spans each event closes, as plain ``SpanRecord`` values. The
OTLP/JSON export (``engine.formats.otlp``) and the live ``OTelObserver``
(``engine.otel``) both build their spans here, so they carry the same names
and attributes.

Conventions followed: the OpenTelemetry **GenAI semantic conventions**, in
either generation (``semconv``): ``genai-0.1``, the first release of the
semantic-conventions-genai repository (the default), or ``1.41``,
semantic-conventions v1.41.0 (the last core release carrying them). Attribute
names are those of ``opentelemetry-semantic-conventions``' ``gen_ai_attributes``
in both; ``gen_ai.request.top_k`` is an int in ``genai-0.1``, a double in ``1.41``:

- a model call (``model_requested`` → ``model_responded``/``model_failed``)
  is a CLIENT span named ``"{gen_ai.operation.name} {gen_ai.request.model}"``
  (``chat``; ``generate_content`` for Gemini) with ``gen_ai.operation.name``,
  ``gen_ai.provider.name``, ``gen_ai.conversation.id``,
  ``gen_ai.request.model`` and the request settings (``max_tokens``,
  ``temperature``, ``top_p``, ``top_k``, ``stop_sequences``, ``seed``,
  ``frequency_penalty``, ``presence_penalty``), ``gen_ai.response.model``,
  ``gen_ai.response.id``, ``gen_ai.response.finish_reasons``,
  ``gen_ai.usage.input_tokens`` (all prompt tokens, cached ones included),
  ``gen_ai.usage.output_tokens``, ``gen_ai.usage.cache_read.input_tokens``,
  ``gen_ai.usage.cache_creation.input_tokens``,
  ``gen_ai.usage.reasoning.output_tokens``, and ``error.type`` (the error
  class) when it failed;
- a tool call (``tool_started`` → ``tool_completed``, or a
  ``tool_call_rejected``) is an INTERNAL span named
  ``"execute_tool {gen_ai.tool.name}"`` with ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``gen_ai.tool.type`` (``function``; ``extension``
  for an MCP server's tool), ``gen_ai.tool.description``, and ``error.type``
  when it failed (``tool_error``), was interrupted (``interrupted``) or was
  refused (the refusal's reason code, e.g. ``duplicate``);
- the parent of both is an INTERNAL ``invoke_agent`` span over the whole
  conversation (or, live, over one run).

Message content only on request (``content=True``): ``gen_ai.input.messages``,
``gen_ai.output.messages``, ``gen_ai.system_instructions`` and
``gen_ai.tool.definitions`` on model spans, ``gen_ai.tool.call.arguments``
and ``gen_ai.tool.call.result`` on tool spans, each a JSON string in the
conventions' JSON shapes (span attributes hold no nested maps). An imported
conversation recorded no requests and no tool starts: its model spans carry
the history before each answer, its tool spans the pending call's arguments.

    >>> from turnlog.engine.model.events import ConversationStarted, UserMessage, ModelRequested, ModelResponded
    >>> from turnlog.engine.model.messages import Text
    >>> spans = GenAISpans("c1")
    >>> for at, e in enumerate([ConversationStarted(conversation_id="c1", provider="openai", model="m"),
    ...                         UserMessage.of("hi"),
    ...                         ModelRequested(turn=1, digest="d", provider="openai", model="m"),
    ...                         ModelResponded(turn=1, parts=(Text(text="hello"),))]):
    ...     closed = spans.feed(e, at_ns=at, key=str(at))
    >>> closed[0].name, closed[0].attributes["gen_ai.response.finish_reasons"]
    ('chat m', ['stop'])
"""

from __future__ import annotations

import json
from typing import Any, Literal

import msgspec

from turnlog.engine.model.events import (
    ConversationCompleted,
    ConversationFailed,
    ConversationHalted,
    ConversationStarted,
    Event,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    RunInterrupted,
    ToolCallRejected,
    ToolCompleted,
    ToolSpec,
    ToolStarted,
    TurnLimitReached,
)
from turnlog.engine.model.messages import Image, Message, Opaque, Part, Text, Thinking, ToolCall, ToolResult
from ..providers.registry import WIRES, by_key, genai_name, wire
from turnlog.engine.model.state import StateBuilder

__all__ = ["DEFAULT_SEMCONV", "FINISH_REASONS", "PROVIDER_NAMES", "SCHEMA_URLS", "SEMCONVS",
           "SEMCONV_VERSION", "GenAISpans", "SpanRecord", "ends_run", "message_json", "schema_url"]

#: The semantic-conventions release whose GenAI conventions the ``1.41`` generation follows.
SEMCONV_VERSION = "1.41.0"

#: The generations of the GenAI conventions spoken, oldest first (``--semconv``):
#: ``1.41`` is semantic-conventions v1.41.0, the last core release carrying them;
#: ``genai-0.1`` is semantic-conventions-genai v0.1.0, their first standalone release
#: (on core v1.45.0). For the spans turnlog writes they differ in
#: ``gen_ai.request.top_k`` (a double in 1.41, an int in genai-0.1) and the schema URL.
SEMCONVS = ("1.41", "genai-0.1")

#: The generation written unless another is asked for: the newest.
DEFAULT_SEMCONV = SEMCONVS[-1]

#: Each generation's schema URL (the genai repository's ``schemas/gen-ai/X.Y.Z``).
SCHEMA_URLS = {"1.41": f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}",
               "genai-0.1": "https://opentelemetry.io/schemas/gen-ai/0.1.0"}


def schema_url(semconv: str = DEFAULT_SEMCONV) -> str:
    """The schema URL pinned for a generation of the conventions (``SEMCONVS``).

    >>> schema_url("1.41")
    'https://opentelemetry.io/schemas/1.41.0'
    """
    try:
        return SCHEMA_URLS[semconv]
    except KeyError:
        from ..errors import FormatError

        raise FormatError(f"unknown GenAI conventions {semconv!r}; expected one of "
                          f"{', '.join(SEMCONVS)}") from None


#: turnlog's neutral stop reasons as the conventions' finish reasons.
FINISH_REASONS = {"end_turn": "stop", "tool_use": "tool_call", "max_tokens": "length",
                  "refusal": "content_filter", "other": "other"}

#: request parameter names (any provider's) -> (attribute, type)
_SETTINGS: dict[str, tuple[str, type]] = {
    "max_tokens": ("gen_ai.request.max_tokens", int),
    "max_output_tokens": ("gen_ai.request.max_tokens", int),
    "max_completion_tokens": ("gen_ai.request.max_tokens", int),
    "maxOutputTokens": ("gen_ai.request.max_tokens", int),
    "temperature": ("gen_ai.request.temperature", float),
    "top_p": ("gen_ai.request.top_p", float),
    "topP": ("gen_ai.request.top_p", float),
    "top_k": ("gen_ai.request.top_k", float),
    "topK": ("gen_ai.request.top_k", float),
    "seed": ("gen_ai.request.seed", int),
    "frequency_penalty": ("gen_ai.request.frequency_penalty", float),
    "presence_penalty": ("gen_ai.request.presence_penalty", float),
    "stop": ("gen_ai.request.stop_sequences", list),
    "stop_sequences": ("gen_ai.request.stop_sequences", list),
    "stopSequences": ("gen_ai.request.stop_sequences", list),
}

_RUN_END = (ConversationCompleted, ConversationFailed, ConversationHalted, TurnLimitReached,
            RunInterrupted)


class SpanRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One span, independent of any OpenTelemetry library.

    ``key`` names the event that opened it (its span id is derived from it);
    ``parent`` is the parent's key (``None``: the root). ``error`` is the
    status message of a span that ended in an error (``error.type`` is in
    ``attributes``). Times are Unix nanoseconds.
    """

    name: str
    key: str
    kind: Literal["internal", "client"]
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    parent: str | None = None
    error: str | None = None


def ends_run(event: Event) -> bool:
    """Whether ``event`` ends a run (the live root span ends with it)."""
    return isinstance(event, _RUN_END)


def _dumps(value: Any) -> str:
    return json.dumps(msgspec.to_builtins(value), ensure_ascii=False, separators=(",", ":"))


def _part_json(part: Part) -> dict[str, Any] | None:
    if isinstance(part, Text):
        return {"type": "text", "content": part.text}
    if isinstance(part, Thinking):
        return {"type": "reasoning", "content": part.text}
    if isinstance(part, ToolCall):
        return {"type": "tool_call", "id": part.id, "name": part.name,
                "arguments": part.arguments}
    if isinstance(part, ToolResult):
        return {"type": "tool_call_response", "id": part.call_id, "response": part.content}
    if isinstance(part, Image):
        if part.url is not None:
            return {"type": "uri", "modality": "image", "mime_type": part.media_type,
                    "uri": part.url}
        return {"type": "blob", "modality": "image", "mime_type": part.media_type,
                "content": part.data or ""}
    if isinstance(part, Opaque):
        return None if part.attach else {"type": part.kind, "provider": part.provider,
                                         "data": part.data}
    return None  # pragma: no cover - every Part kind is handled above


def message_json(message: Message) -> dict[str, Any]:
    """A turnlog message in the conventions' ``ChatMessage`` shape (``role``, ``parts``).

    >>> message_json(Message(role="user", parts=(Text(text="hi"),)))
    {'role': 'user', 'parts': [{'type': 'text', 'content': 'hi'}]}
    """
    parts = [p for p in (_part_json(part) for part in message.parts) if p is not None]
    return {"role": message.role, "parts": parts}


def _settings(parameters: dict[str, Any], semconv: str = DEFAULT_SEMCONV) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in parameters.items():
        if name not in _SETTINGS or value is None or isinstance(value, bool):
            continue
        attribute, kind = _SETTINGS[name]
        if attribute == "gen_ai.request.top_k" and semconv != "1.41":
            kind = int  # genai-0.1: top_k is the top-K sampling count, an int
        if kind is list:
            values = [value] if isinstance(value, str) else value
            if isinstance(values, list) and all(isinstance(v, str) for v in values):
                out[attribute] = list(values)
        elif isinstance(value, (int, float)):
            out[attribute] = kind(value)
    return out


class _Open(msgspec.Struct):
    event: Event
    at_ns: int
    key: str
    extra: dict[str, Any]


class GenAISpans:
    """Builds GenAI ``SpanRecord``s from a conversation's events (see the module doc).

    ``content`` adds the message attributes; they need the conversation's
    state, folded from the events fed (``state`` seeds it for a stream
    joined midway: a resumed run observed live). ``semconv`` picks the
    generation of the conventions (``SEMCONVS``; default the newest).
    """

    def __init__(self, conversation_id: str, *, content: bool = False,
                 state: StateBuilder | None = None, semconv: str = DEFAULT_SEMCONV) -> None:
        schema_url(semconv)  # an unknown generation is refused here
        self.semconv = semconv
        self.conversation_id = conversation_id
        self.content = content
        self._state = state if state is not None else (StateBuilder() if content else None)
        self._specs: dict[str, ToolSpec] = {}
        if state is not None:
            self._specs = {s.name: s for s in state.tools}
        self.provider = state.provider if state is not None else ""
        self.model = state.model if state is not None else ""
        self._model: _Open | None = None
        self._tools: dict[str, _Open] = {}
        self.first_ns: int | None = None
        self.last_ns: int | None = None
        self.failure: tuple[str, str] | None = None

    # --- feeding ----------------------------------------------------------------

    def feed(self, event: Event, at_ns: int, key: str, parent: str | None = None) -> list[SpanRecord]:
        """Take the next event (recorded at ``at_ns``, named ``key``); return the spans it closes.

        ``parent`` is the key of the span the closed spans belong under (the root).
        """
        if self.first_ns is None:
            self.first_ns = at_ns
        self.last_ns = max(at_ns, self.last_ns or at_ns)
        unopened = self._unopened_content(event)
        if self._state is not None:
            self._state.apply(event)
        if isinstance(event, ConversationStarted):
            self.provider, self.model = event.provider, event.model
            self._specs.update({s.name: s for s in event.tools})
            return []
        if isinstance(event, ModelRequested):
            extra = {}
            if self.content and self._state is not None:
                extra = self._request_content()
            closed = self._abandon_model(at_ns, parent)
            self._model = _Open(event=event, at_ns=at_ns, key=key, extra=extra)
            return closed
        if isinstance(event, (ModelResponded, ModelFailed)):
            return [self._model_span(event, at_ns, key, parent, unopened)]
        if isinstance(event, ToolStarted):
            self._tools[event.call_id] = _Open(event=event, at_ns=at_ns, key=key, extra={})
            return []
        if isinstance(event, (ToolCompleted, ToolCallRejected)):
            return [self._tool_span(event, at_ns, key, parent, unopened)]
        if isinstance(event, ConversationFailed):
            self.failure = (event.error_type or "conversation_failed", event.error)
        elif isinstance(event, _RUN_END):
            self.failure = None
        return []

    def finish(self, parent: str | None = None) -> list[SpanRecord]:
        """Close what is still open (a run that stopped midway): ``error.type`` ``unfinished``."""
        end = self.last_ns or 0
        closed = self._abandon_model(end, parent)
        for call_id in list(self._tools):
            opened = self._tools.pop(call_id)
            started = opened.event
            assert isinstance(started, ToolStarted)
            attrs = self._tool_attributes(started.name, call_id)
            attrs["error.type"] = "unfinished"
            closed.append(SpanRecord(name=f"execute_tool {started.name}", key=opened.key,
                                     kind="internal", start_ns=opened.at_ns, end_ns=end,
                                     attributes=attrs, parent=parent,
                                     error="the tool's outcome was never recorded"))
        return closed

    def root(self, key: str, start_ns: int | None = None) -> SpanRecord:
        """The ``invoke_agent`` span over everything fed so far (from ``start_ns``, if given)."""
        attrs: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent",
                                 "gen_ai.conversation.id": self.conversation_id}
        if self.provider:
            attrs["gen_ai.provider.name"] = genai_name(self.provider)
        if self.model:
            attrs["gen_ai.request.model"] = self.model
        error = None
        if self.failure is not None:
            attrs["error.type"], error = self.failure
        start = self.first_ns if start_ns is None else start_ns
        return SpanRecord(name="invoke_agent", key=key, kind="internal", start_ns=start or 0,
                          end_ns=max(self.last_ns or 0, start or 0), attributes=attrs,
                          error=error)

    def _unopened_content(self, event: Event) -> dict[str, Any]:
        """The content a span opened by no recorded event still has (before ``event`` is folded).

        An imported answer has no ``model_requested``: its input is the history before it.
        An imported result has no ``tool_started``: its arguments are the pending call's.
        """
        state = self._state
        if not self.content or state is None:
            return {}
        if isinstance(event, (ModelResponded, ModelFailed)) and self._model is None:
            return self._request_content()
        if isinstance(event, ToolCompleted) and event.call_id not in self._tools:
            call = state.pending.get(event.call_id)
            if call is not None:
                return {"gen_ai.tool.call.arguments": _dumps(call.arguments)}
        return {}

    # --- model calls ------------------------------------------------------------

    def _request_content(self) -> dict[str, Any]:
        state = self._state
        assert state is not None
        extra = {"gen_ai.input.messages": _dumps([message_json(m) for m in state.message_list])}
        if state.system:
            extra["gen_ai.system_instructions"] = _dumps([{"type": "text",
                                                           "content": state.system}])
        if state.tools:
            extra["gen_ai.tool.definitions"] = _dumps(
                [{"type": "function", "name": s.name, "description": s.description,
                  "parameters": s.parameters} for s in state.tools])
        return extra

    def _abandon_model(self, end_ns: int, parent: str | None) -> list[SpanRecord]:
        opened, self._model = self._model, None
        if opened is None:
            return []
        requested = opened.event
        assert isinstance(requested, ModelRequested)
        attrs = self._model_attributes(requested.provider, requested.model, requested.parameters)
        attrs.update(opened.extra)
        attrs["error.type"] = "unfinished"
        return [SpanRecord(name=_model_name(attrs), key=opened.key, kind="client",
                           start_ns=opened.at_ns, end_ns=max(end_ns, opened.at_ns),
                           attributes=attrs, parent=parent,
                           error="the model's answer was never recorded")]

    def _model_attributes(self, provider: str, model: str,
                          parameters: dict[str, Any]) -> dict[str, Any]:
        provider = provider or self.provider
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": (wire(provider).GENAI_OPERATION if provider in WIRES
                                      else "chat"),
            "gen_ai.provider.name": genai_name(provider or "unknown"),
            "gen_ai.conversation.id": self.conversation_id,
        }
        if model or self.model:
            attrs["gen_ai.request.model"] = model or self.model
        attrs.update(_settings(parameters, self.semconv))
        return attrs

    def _model_span(self, event: ModelResponded | ModelFailed, at_ns: int, key: str,
                    parent: str | None, unopened: dict[str, Any]) -> SpanRecord:
        opened, self._model = self._model, None
        requested = opened.event if opened is not None else None
        if isinstance(requested, ModelRequested):
            attrs = self._model_attributes(requested.provider, requested.model,
                                           requested.parameters)
            attrs.update(opened.extra)
            start, span_key = opened.at_ns, opened.key
        else:  # an imported or runner answer: no request was recorded
            attrs = self._model_attributes(event.provider, event.model, {})
            attrs.update(unopened)
            start, span_key = at_ns, key
        end = at_ns
        if event.latency_ms is not None and requested is not None:
            end = start + int(event.latency_ms * 1_000_000)
        error = None
        if isinstance(event, ModelFailed):
            attrs["error.type"] = event.error_type or "model_failed"
            error = event.message
        else:
            if event.model:
                attrs["gen_ai.response.model"] = event.model
            if event.response_id:
                attrs["gen_ai.response.id"] = event.response_id
            finish = FINISH_REASONS.get(event.stop_reason, event.stop_reason)
            attrs["gen_ai.response.finish_reasons"] = [finish]
            usage = event.usage
            attrs["gen_ai.usage.input_tokens"] = usage.input_tokens
            attrs["gen_ai.usage.output_tokens"] = usage.output_tokens
            attrs["gen_ai.usage.cache_read.input_tokens"] = usage.cached_input_tokens
            attrs["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
            if usage.reasoning_tokens:
                attrs["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
            if self.content:
                message = message_json(Message(role="assistant", parts=event.parts))
                message["finish_reason"] = finish
                attrs["gen_ai.output.messages"] = _dumps([message])
        return SpanRecord(name=_model_name(attrs), key=span_key, kind="client", start_ns=start,
                          end_ns=max(end, start), attributes=attrs, parent=parent, error=error)

    # --- tool calls -------------------------------------------------------------

    def _tool_attributes(self, name: str, call_id: str) -> dict[str, Any]:
        spec = self._specs.get(name)
        attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                                 "gen_ai.tool.call.id": call_id,
                                 "gen_ai.tool.type": ("extension" if spec is not None
                                                      and spec.server else "function")}
        if spec is not None and spec.description:
            attrs["gen_ai.tool.description"] = spec.description
        return attrs

    def _tool_span(self, event: ToolCompleted | ToolCallRejected, at_ns: int, key: str,
                   parent: str | None, unopened: dict[str, Any]) -> SpanRecord:
        attrs = self._tool_attributes(event.name, event.call_id)
        opened = self._tools.pop(event.call_id, None)
        start, span_key = (opened.at_ns, opened.key) if opened is not None else (at_ns, key)
        end = at_ns
        arguments = event.arguments if isinstance(event, ToolCallRejected) else (
            opened.event.arguments if opened is not None and isinstance(opened.event, ToolStarted)
            else None)
        error = None
        if isinstance(event, ToolCallRejected):
            attrs["error.type"] = str(event.reason)
            error = event.content
        else:
            if event.duration_ms is not None and opened is not None:
                end = start + int(event.duration_ms * 1_000_000)
            if not event.success:
                attrs["error.type"] = ("interrupted" if event.source == "interrupted"
                                       else "tool_error")
                error = event.error or event.content
        if self.content:
            if arguments is not None:
                attrs["gen_ai.tool.call.arguments"] = _dumps(arguments)
            attrs.update(unopened)  # an imported result's call arguments
            attrs["gen_ai.tool.call.result"] = event.content
        return SpanRecord(name=f"execute_tool {event.name}", key=span_key, kind="internal",
                          start_ns=start, end_ns=max(end, start), attributes=attrs,
                          parent=parent, error=error)


def _model_name(attrs: dict[str, Any]) -> str:
    model = attrs.get("gen_ai.request.model")
    operation = attrs["gen_ai.operation.name"]
    return f"{operation} {model}" if model else operation


def __getattr__(name: str) -> Any:
    if name == "PROVIDER_NAMES":  # turnlog's provider names as gen_ai.provider.name values
        return by_key("GENAI_NAME")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
