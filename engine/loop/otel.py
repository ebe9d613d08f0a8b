"""``OTelObserver``: a run's GenAI spans, emitted live through ``opentelemetry-sdk``.

Install the extra (``pip install -e '.[otel]'``) and pass the observer to
the loop; it turns the events the loop records (the observers' ``recorded``
event) into spans as they become durable, built by the same
``engine.formats.genai.GenAISpans`` as ``turnlog export --format otlp``, so a
live span carries the same name and attributes as the exported one::

    from opentelemetry.sdk.trace import TracerProvider
    provider = TracerProvider()        # with the span processors/exporters you use
    Loop(journal, chosen, tools, observers=[OTelObserver(provider, journal=journal)])

Live, each run is one trace: an ``invoke_agent`` root span from the run's
first recorded event to the event that ends it (completed, failed, halted,
turn limit, interrupted), with a span per model call and per tool call under
it. Span and trace ids are the SDK's (the export derives its own from the
hash chain); times are the recorded times, as in the export.

``journal`` lets a run joined midway (``resume``, a chat's next message)
know the conversation so far: its tool specs and, with ``content=True``, its
messages. ``close()`` ends the root spans of runs that never finished (a
crash mid-run), marked ``error.type`` ``unfinished``.
"""

from __future__ import annotations

from typing import Any

from turnlog.journal import JournalProtocol, StoredEvent

from turnlog.engine.model.conversation import load_state
from turnlog.engine.model.events import ConversationStarted, decode_event
from turnlog.engine.formats.genai import DEFAULT_SEMCONV, GenAISpans, SpanRecord, ends_run, schema_url
from turnlog.engine.formats.otlp import unix_ns
from turnlog.engine.model.state import StateBuilder

__all__ = ["OTelObserver"]

_ROOT = "root"


class _Run:
    def __init__(self, spans: GenAISpans, root: Any, start_ns: int) -> None:
        self.spans = spans
        self.root = root
        self.start_ns = start_ns


class OTelObserver:
    """An observer (``observer(event, payload)``) emitting GenAI spans live (see the module doc).

    ``tracer_provider`` defaults to OpenTelemetry's global one; ``content``
    adds the opt-in message attributes; ``semconv`` picks the generation of
    the GenAI conventions (``engine.formats.genai.SEMCONVS``, default the
    newest), as ``export --semconv`` does, and the tracer's schema URL with it.
    """

    def __init__(self, tracer_provider: Any = None, *, journal: JournalProtocol | None = None,
                 content: bool = False, semconv: str = DEFAULT_SEMCONV) -> None:
        from opentelemetry import trace

        provider = tracer_provider or trace.get_tracer_provider()
        self._tracer = provider.get_tracer("turnlog", schema_url=schema_url(semconv))
        self.semconv = semconv
        self._trace = trace
        self.journal = journal
        self.content = content
        self._runs: dict[str, _Run] = {}

    def __call__(self, event: str, payload: dict[str, Any]) -> None:
        if event != "recorded":
            return
        cid = payload["conversation_id"]
        for row in payload["rows"]:
            self._row(cid, row)

    def _row(self, cid: str, row: StoredEvent) -> None:
        event = decode_event(row.type, row.version, row.payload,
                             where=f"stream {cid!r} seq {row.seq}")
        at = unix_ns(row.recorded_at)
        run = self._runs.get(cid)
        if run is None:
            run = self._runs[cid] = self._begin(cid, row, at)
        if isinstance(event, ConversationStarted) and event.fork is not None:
            return  # a fork's restart: the state it continues was seeded from the journal
        for span in run.spans.feed(event, at, row.hash, parent=_ROOT):
            self._emit(run, span)
        if ends_run(event):
            self._end(cid, run)

    def _begin(self, cid: str, row: StoredEvent, at: int) -> _Run:
        state = None
        if row.seq > 1 and self.journal is not None:
            state = StateBuilder(load_state(self.journal, cid, to_seq=row.seq - 1))
        content = self.content and (state is not None or row.seq == 1)
        spans = GenAISpans(cid, content=content, state=state, semconv=self.semconv)
        root = self._tracer.start_span("invoke_agent", kind=self._trace.SpanKind.INTERNAL,
                                       start_time=at)
        return _Run(spans, root, at)

    def _emit(self, run: _Run, record: SpanRecord) -> None:
        from opentelemetry.trace import Status, StatusCode

        kind = (self._trace.SpanKind.CLIENT if record.kind == "client"
                else self._trace.SpanKind.INTERNAL)
        span = self._tracer.start_span(record.name, context=self._trace.set_span_in_context(run.root),
                                       kind=kind, attributes=record.attributes,
                                       start_time=record.start_ns)
        if record.error is not None:
            span.set_status(Status(StatusCode.ERROR, record.error))
        span.end(end_time=record.end_ns)

    def _end(self, cid: str, run: _Run, unfinished: bool = False) -> None:
        from opentelemetry.trace import Status, StatusCode

        del self._runs[cid]
        for record in run.spans.finish(parent=_ROOT):
            self._emit(run, record)
        root = run.spans.root(_ROOT, start_ns=run.start_ns)
        attributes = dict(root.attributes)
        error = root.error
        if unfinished:
            attributes["error.type"], error = "unfinished", "the run never finished"
        run.root.set_attributes(attributes)
        if error is not None:
            run.root.set_status(Status(StatusCode.ERROR, error))
        run.root.end(end_time=max(root.end_ns, run.start_ns))

    def traceparent(self, conversation_id: str) -> str | None:
        """The W3C ``traceparent`` of the run's root span (``None``: no run of
        ``conversation_id`` is open), so a call to another system (an MCP server) joins the
        run's trace."""
        run = self._runs.get(conversation_id)
        if run is None:
            return None
        context = run.root.get_span_context()
        if not context.is_valid:
            return None
        return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"

    def close(self) -> None:
        """End the spans of runs still open (``error.type`` ``unfinished``)."""
        for cid, run in list(self._runs.items()):
            self._end(cid, run, unfinished=True)
