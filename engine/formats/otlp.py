"""A conversation as an OTLP/JSON trace, and sending it to a collector.

``otlp_request(journal, conversation_id)`` is the conversation as one
``ExportTraceServiceRequest`` in OTLP's JSON encoding (ids as hex, enums as
numbers, 64-bit integers as strings): one trace, an ``invoke_agent`` root
span and a span per model call and per tool call, named and attributed as
``engine.formats.genai`` says (GenAI semantic conventions of
semantic-conventions v1.41.0). It is a pure function of the journal:

- span times are the recorded times (``recorded_at``; a model or tool span
  ends its recorded latency or duration after it started);
- ids are derived from the hash chain: the trace id from the conversation id
  and the hash of its first event, each span id from the hash of the event
  that opened the span. Exporting twice gives the same trace, byte for byte.

``send_otlp(request, endpoint)`` posts it as OTLP/HTTP JSON
(``Content-Type: application/json``) to ``endpoint`` — a URL ending in
``/v1/traces`` is used as given, any other has ``/v1/traces`` appended (as
``OTEL_EXPORTER_OTLP_ENDPOINT`` is read).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import httpx
import msgspec

from turnlog.journal import JournalProtocol, StoredEvent

from ..errors import EngineError
from ..events import Event
from .genai import SEMCONV_VERSION, GenAISpans, SpanRecord

__all__ = ["SCHEMA_URL", "OTLPError", "encode_spans", "otlp_request", "send_otlp", "span_id",
           "spans_of", "trace_id", "traces_url", "unix_ns"]

#: The schema URL of the semantic conventions followed.
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

_KINDS = {"internal": 1, "client": 3}
_STATUS_ERROR = 2


class OTLPError(EngineError):
    """A trace could not be delivered to a collector (what, where and why in the message)."""


def trace_id(conversation_id: str, first_hash: str) -> str:
    """The conversation's trace id: 32 hex digits from its id and its first event's hash."""
    return hashlib.sha256(f"trace\0{conversation_id}\0{first_hash}".encode()).hexdigest()[:32]


def span_id(key: str) -> str:
    """A span's id: 16 hex digits from its key (the hash of the event that opened it).

    >>> span_id("abc") == span_id("abc"), len(span_id("abc"))
    (True, 16)
    """
    digest = hashlib.sha256(f"span\0{key}".encode()).hexdigest()[:16]
    return digest if digest != "0" * 16 else "0" * 15 + "1"  # an all-zero id is invalid


def unix_ns(recorded_at: str) -> int:
    """A journal ``recorded_at`` as Unix nanoseconds.

    >>> unix_ns("1970-01-01T00:00:01.000002Z")
    1000002000
    """
    moment = datetime.fromisoformat(recorded_at.replace("Z", "+00:00"))
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000


def spans_of(conversation_id: str, rows: Iterable[tuple[StoredEvent, Event]], *,
             content: bool = False) -> tuple[str, list[SpanRecord]]:
    """The trace id and spans (root first) of a conversation's ``(row, event)`` lineage."""
    rows = list(rows)
    trace = trace_id(conversation_id, rows[0][0].hash if rows else "")
    root_key = f"root\0{trace}"
    builder = GenAISpans(conversation_id, content=content)
    children: list[SpanRecord] = []
    for row, event in rows:
        children += builder.feed(event, unix_ns(row.recorded_at), row.hash, parent=root_key)
    children += builder.finish(parent=root_key)
    root = builder.root(root_key)
    if children:  # the root covers its children, whatever their recorded durations say
        root = _cover(root, children)
    return trace, [root, *children]


def _cover(root: SpanRecord, children: list[SpanRecord]) -> SpanRecord:
    start = min([root.start_ns, *(c.start_ns for c in children)])
    end = max([root.end_ns, *(c.end_ns for c in children)])
    return msgspec.structs.replace(root, start_ns=start, end_ns=end)


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": str(value)}


def _attributes(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in attrs.items()]


def encode_spans(trace: str, spans: Iterable[SpanRecord], *,
                 service: str = "turnlog") -> dict[str, Any]:
    """``SpanRecord``s of one trace as an OTLP/JSON ``ExportTraceServiceRequest``."""
    out = []
    for span in spans:
        item: dict[str, Any] = {"traceId": trace, "spanId": span_id(span.key)}
        if span.parent is not None:
            item["parentSpanId"] = span_id(span.parent)
        item.update({"name": span.name, "kind": _KINDS[span.kind],
                     "startTimeUnixNano": str(span.start_ns),
                     "endTimeUnixNano": str(span.end_ns),
                     "attributes": _attributes(span.attributes)})
        if span.error is not None:
            item["status"] = {"code": _STATUS_ERROR, "message": span.error}
        out.append(item)
    return {"resourceSpans": [{
        "resource": {"attributes": _attributes({"service.name": service})},
        "scopeSpans": [{"scope": {"name": "turnlog", "version": _version()},
                        "spans": out, "schemaUrl": SCHEMA_URL}],
        "schemaUrl": SCHEMA_URL,
    }]}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("turnlog")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0"


def otlp_request(journal: JournalProtocol, conversation_id: str, *, content: bool = False) -> dict[str, Any]:
    """The conversation as an OTLP/JSON ``ExportTraceServiceRequest`` (see the module doc).

    ``content`` adds the messages, system instructions, tool definitions,
    arguments and results (opt-in attributes: they may hold personal data).
    """
    from .exporter import lineage_rows

    trace, spans = spans_of(conversation_id, lineage_rows(journal, conversation_id),
                            content=content)
    return encode_spans(trace, spans)


def traces_url(endpoint: str) -> str:
    """The URL traces are posted to: ``endpoint``, with ``/v1/traces`` unless it ends so.

    >>> traces_url("http://localhost:4318"), traces_url("http://c:4318/v1/traces")
    ('http://localhost:4318/v1/traces', 'http://c:4318/v1/traces')
    """
    return endpoint if endpoint.rstrip("/").endswith("/v1/traces") else (
        endpoint.rstrip("/") + "/v1/traces")


def send_otlp(request: dict[str, Any], endpoint: str, *, timeout: float = 30.0,
              headers: dict[str, str] | None = None) -> int:
    """Post ``request`` as OTLP/HTTP JSON to ``endpoint``; the number of spans sent.

    A collector that cannot be reached, or answers anything but 2xx, raises
    ``OTLPError`` naming the URL and what it said.
    """
    url = traces_url(endpoint)
    if not url.startswith(("http://", "https://")):
        raise OTLPError(f"--endpoint {endpoint!r}: an OTLP/HTTP endpoint is an http:// or "
                        "https:// URL (e.g. http://localhost:4318)")
    try:
        response = httpx.post(url, json=request, timeout=timeout,
                              headers={"Content-Type": "application/json", **(headers or {})})
    except httpx.HTTPError as exc:
        raise OTLPError(f"could not send the trace to {url}: {exc}") from None
    if not 200 <= response.status_code < 300:
        raise OTLPError(f"the collector at {url} refused the trace: HTTP "
                        f"{response.status_code} {response.text[:300]}")
    return sum(len(scope["spans"]) for rs in request["resourceSpans"]
               for scope in rs["scopeSpans"])
