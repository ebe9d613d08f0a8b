"""A conversation as an OTLP/JSON trace, and sending it to a collector.

``otlp_request(journal, conversation_id)`` is the conversation as one
``ExportTraceServiceRequest`` in OTLP's JSON encoding (ids as hex, enums as
numbers, 64-bit integers as strings): one trace, an ``invoke_agent`` root
span and a span per model call and per tool call, named and attributed as
``engine.formats.genai`` says (GenAI semantic conventions of
``--semconv``: semantic-conventions-genai v0.1.0 by default, or
semantic-conventions v1.41.0; the schema URL says which). It is a pure
function of the journal:

- span times are the recorded times (``recorded_at``; a model or tool span
  ends its recorded latency or duration after it started);
- ids are derived from the hash chain: the trace id from the conversation id
  and the hash of its first event, each span id from the hash of the event
  that opened the span. Exporting twice gives the same trace, byte for byte.

``send_otlp(request, target)`` posts it to a collector over OTLP/HTTP:
protobuf (``application/x-protobuf``, the specification's default, built with
``opentelemetry-proto``'s ``ExportTraceServiceRequest``) or JSON
(``http/json``), optionally gzipped. ``otlp_target`` resolves where and how
from the arguments and the ``OTEL_EXPORTER_OTLP_*`` environment variables, as
the OpenTelemetry exporter specification reads them.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import msgspec

from turnlog.journal import JournalProtocol, StoredEvent, shown_url

from ..errors import EngineError
from turnlog.engine.model.events import Event
from .genai import DEFAULT_SEMCONV, GenAISpans, SpanRecord, schema_url

if TYPE_CHECKING:
    import httpx

__all__ = ["COMPRESSIONS", "PROTOCOLS", "SCHEMA_URL", "OTLPError", "OTLPTarget", "encode_spans",
           "otlp_request", "otlp_target", "parse_headers", "protobuf_request", "send_otlp",
           "span_id", "spans_of", "trace_id", "traces_url", "unix_ns"]

#: The schema URL of the semantic conventions followed by default (the newest generation).
SCHEMA_URL = schema_url(DEFAULT_SEMCONV)

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
             content: bool = False, semconv: str = DEFAULT_SEMCONV) -> tuple[str, list[SpanRecord]]:
    """The trace id and spans (root first) of a conversation's ``(row, event)`` lineage."""
    rows = list(rows)
    trace = trace_id(conversation_id, rows[0][0].hash if rows else "")
    root_key = f"root\0{trace}"
    builder = GenAISpans(conversation_id, content=content, semconv=semconv)
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


def encode_spans(trace: str, spans: Iterable[SpanRecord], *, service: str = "turnlog",
                 semconv: str = DEFAULT_SEMCONV) -> dict[str, Any]:
    """``SpanRecord``s of one trace as an OTLP/JSON ``ExportTraceServiceRequest``.

    The schema URL is ``semconv``'s (``engine.formats.genai.SCHEMA_URLS``).
    """
    url = schema_url(semconv)
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
                        "spans": out, "schemaUrl": url}],
        "schemaUrl": url,
    }]}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("turnlog")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0"


def otlp_request(journal: JournalProtocol, conversation_id: str, *, content: bool = False,
                 semconv: str = DEFAULT_SEMCONV) -> dict[str, Any]:
    """The conversation as an OTLP/JSON ``ExportTraceServiceRequest`` (see the module doc).

    ``content`` adds the messages, system instructions, tool definitions,
    arguments and results (opt-in attributes: they may hold personal data).
    """
    from .exporter import lineage_rows

    trace, spans = spans_of(conversation_id, lineage_rows(journal, conversation_id),
                            content=content, semconv=semconv)
    return encode_spans(trace, spans, semconv=semconv)


def traces_url(endpoint: str) -> str:
    """The URL traces are posted to: ``endpoint``, with ``/v1/traces`` unless it ends so.

    >>> traces_url("http://localhost:4318"), traces_url("http://c:4318/v1/traces")
    ('http://localhost:4318/v1/traces', 'http://c:4318/v1/traces')
    """
    return endpoint if endpoint.rstrip("/").endswith("/v1/traces") else (
        endpoint.rstrip("/") + "/v1/traces")


# --- where and how a trace is sent: the OTLP exporter's settings ---------------------------------

#: The OTLP/HTTP encodings spoken (``grpc``, the third the specification names, is not).
PROTOCOLS = ("http/protobuf", "http/json")
#: The body compressions spoken.
COMPRESSIONS = ("gzip", "none")

_ENV = "OTEL_EXPORTER_OTLP_"
_TRACES = "OTEL_EXPORTER_OTLP_TRACES_"


class OTLPTarget(msgspec.Struct, frozen=True, kw_only=True):
    """Where and how a trace is sent: the exporter's settings, resolved.

    ``url`` is the full traces URL; ``headers`` go with every request (their
    values are credentials: never print them); ``protocol`` is one of
    ``PROTOCOLS``, ``compression`` one of ``COMPRESSIONS``; ``timeout`` in seconds.
    """

    url: str
    headers: dict[str, str] = {}
    protocol: str = "http/protobuf"
    compression: str = "none"
    timeout: float = 30.0

    def shown(self) -> str:
        """The URL as messages show it: a password in it replaced by ``***``."""
        return shown_url(self.url)


def parse_headers(text: str, where: str) -> dict[str, str]:
    """W3C-baggage-style ``k=v,k2=v2`` headers (``OTEL_EXPORTER_OTLP_HEADERS``), values URL-decoded.

    An entry that is not ``key=value`` is an ``OTLPError`` naming ``where`` and the
    entry's position, never its text (it may hold a credential).

    >>> parse_headers("api-key=s%20ecret, x-team = ml", "env")
    {'api-key': 's ecret', 'x-team': 'ml'}
    """
    from urllib.parse import unquote

    headers: dict[str, str] = {}
    for number, entry in enumerate(text.split(","), 1):
        if not entry.strip():
            continue
        key, sep, value = entry.partition("=")
        key = unquote(key.strip())
        if not sep or not key:
            raise OTLPError(f"{where}: entry {number} is not key=value (headers are "
                            "comma-separated key=value pairs, values URL-encoded)")
        headers[key] = unquote(value.strip())
    return headers


def _choice(value: str, choices: tuple[str, ...], where: str) -> str:
    value = value.strip().lower()
    if value not in choices:
        hint = " (gRPC is not spoken: use http/protobuf)" if value == "grpc" else ""
        raise OTLPError(f"{where} {value!r}: expected one of {', '.join(choices)}{hint}")
    return value


def otlp_target(endpoint: str | None = None, *, headers: Iterable[str] = (),
                protocol: str | None = None, compression: str | None = None,
                environ: dict[str, str] | None = None) -> OTLPTarget:
    """The exporter's settings: the arguments given, else the ``OTEL_EXPORTER_OTLP_*`` variables.

    As the OpenTelemetry specification reads them, the traces variant of each
    variable before the general one:

    - the URL: ``endpoint`` (``/v1/traces`` appended unless it ends so), else
      ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` as it is, else
      ``OTEL_EXPORTER_OTLP_ENDPOINT`` with ``/v1/traces`` appended;
    - headers: ``OTEL_EXPORTER_OTLP_HEADERS``, then the traces variant, then
      ``headers`` (``K=V`` each, as ``--header`` gives them), a later one
      replacing an earlier one of the same name;
    - ``OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL`` (default ``http/protobuf``),
      ``_COMPRESSION`` (default ``none``), ``_TIMEOUT`` (milliseconds; default 30 s).

    ``environ`` defaults to ``os.environ``. No URL anywhere, or a value that
    is not understood, is an ``OTLPError`` saying which.
    """
    import os

    env = os.environ if environ is None else environ

    def setting(name: str) -> tuple[str, str] | None:
        for var in (_TRACES + name, _ENV + name):
            if env.get(var, "").strip():
                return var, env[var]
        return None

    if endpoint:
        url = traces_url(endpoint)
    elif env.get(_TRACES + "ENDPOINT", "").strip():
        url = env[_TRACES + "ENDPOINT"].strip()
    elif env.get(_ENV + "ENDPOINT", "").strip():
        url = env[_ENV + "ENDPOINT"].strip().rstrip("/") + "/v1/traces"
    else:
        raise OTLPError("no OTLP endpoint: give --endpoint URL or set "
                        "OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)")
    if not url.startswith(("http://", "https://")):
        raise OTLPError(f"OTLP endpoint {shown_url(url)!r}: an OTLP/HTTP endpoint is an "
                        "http:// or https:// URL (e.g. http://localhost:4318)")
    sent: dict[str, str] = {}
    for var in (_ENV + "HEADERS", _TRACES + "HEADERS"):
        sent.update(parse_headers(env.get(var, ""), var))
    for number, given in enumerate(headers, 1):
        key, sep, value = given.partition("=")
        if not sep or not key.strip():
            raise OTLPError(f"--header number {number} is not K=V")
        sent[key.strip()] = value.strip()
    for key, value in sent.items():
        if any(c in key for c in " \t\r\n:\0") or any(c in value for c in "\r\n\0"):
            raise OTLPError(f"header {key!r}: a header name is one token and its value one "
                            "line (the value is not shown)")
    if protocol is None:
        found = setting("PROTOCOL")
        protocol = _choice(found[1], PROTOCOLS, found[0]) if found else "http/protobuf"
    if compression is None:
        found = setting("COMPRESSION")
        compression = _choice(found[1], COMPRESSIONS, found[0]) if found else "none"
    timeout = 30.0
    found = setting("TIMEOUT")
    if found is not None:
        try:
            timeout = float(found[1]) / 1000
        except ValueError:
            raise OTLPError(f"{found[0]} {found[1]!r}: expected milliseconds") from None
    return OTLPTarget(url=url, headers=sent, protocol=_choice(protocol, PROTOCOLS, "--protocol"),
                      compression=_choice(compression, COMPRESSIONS, "--compression"),
                      timeout=timeout)


def protobuf_request(request: dict[str, Any]) -> bytes:
    """An OTLP/JSON ``ExportTraceServiceRequest`` as the protobuf message, serialized.

    Built with ``opentelemetry-proto``'s ``ExportTraceServiceRequest`` (the
    ``otel`` extra); without it an ``OTLPError`` names the extra.
    """
    try:
        from google.protobuf import json_format
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )
    except ImportError:
        raise OTLPError("OTLP/HTTP protobuf needs the opentelemetry-proto package: "
                        "pip install -e '.[otel]' (or send OTLP/JSON with --protocol "
                        "http/json)") from None
    import base64
    import copy

    data = copy.deepcopy(request)
    for rs in data["resourceSpans"]:
        for scope in rs["scopeSpans"]:
            for span in scope["spans"]:
                # OTLP/JSON writes ids as hex; protobuf's JSON mapping reads bytes as base64
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    message = json_format.ParseDict(data, ExportTraceServiceRequest())
    return message.SerializeToString(deterministic=True)


def send_otlp(request: dict[str, Any], target: OTLPTarget | str, *,
              timeout: float | None = None, headers: dict[str, str] | None = None) -> int:
    """Post ``request`` to ``target`` as OTLP/HTTP; the number of spans sent.

    ``target`` is an ``OTLPTarget`` (see ``otlp_target``) or an endpoint URL
    (sent as protobuf, uncompressed; ``/v1/traces`` appended unless it ends
    so). The body is protobuf (``application/x-protobuf``) or JSON
    (``application/json``) as ``target.protocol`` says, gzipped
    (``Content-Encoding: gzip``) when ``target.compression`` says so. A
    collector answering 429, 502, 503 or 504 is tried again (three tries in
    all, after its ``Retry-After`` or a short backoff). A collector that
    cannot be reached, answers anything but 2xx, or reports
    spans it rejected (a ``partial_success``), raises ``OTLPError`` naming the
    URL (password masked) and what it said; header values never appear in a
    message.
    """
    if isinstance(target, str):
        if not target.startswith(("http://", "https://")):
            raise OTLPError(f"--endpoint {target!r}: an OTLP/HTTP endpoint is an http:// or "
                            "https:// URL (e.g. http://localhost:4318)")
        target = OTLPTarget(url=traces_url(target))
    if headers:
        target = msgspec.structs.replace(target, headers={**target.headers, **headers})
    if target.protocol == "http/protobuf":
        body, ctype = protobuf_request(request), "application/x-protobuf"
    else:
        body = msgspec.json.encode(request)
        ctype = "application/json"
    sent = {**target.headers, "Content-Type": ctype}
    if target.compression == "gzip":
        import gzip

        body = gzip.compress(body, mtime=0)
        sent["Content-Encoding"] = "gzip"
    import httpx  # only a send needs it: `turnlog --help` and exports to files never load it

    for attempt in range(_ATTEMPTS):
        try:
            response = httpx.post(target.url, content=body, headers=sent,
                                  timeout=target.timeout if timeout is None else timeout)
        except httpx.HTTPError as exc:
            said = str(exc).replace(target.url, target.shown())
            raise OTLPError(f"could not send the trace to {target.shown()}: "
                            f"{type(exc).__name__}: {said}") from None
        if response.status_code not in _RETRYABLE or attempt == _ATTEMPTS - 1:
            break
        time.sleep(_backoff(response, attempt))
    if not 200 <= response.status_code < 300:
        said = response.content[:300].decode("utf-8", "replace")
        said = "".join(c if c.isprintable() else " " for c in said).strip()
        raise OTLPError(f"the collector at {target.shown()} refused the trace: HTTP "
                        f"{response.status_code} {said}")
    count = sum(len(scope["spans"]) for rs in request["resourceSpans"]
                for scope in rs["scopeSpans"])
    rejected, message = _partial_success(response)
    if rejected:
        raise OTLPError(f"the collector at {target.shown()} rejected {rejected} of {count} "
                        f"span(s): {message or 'no reason given'}")
    return count


#: OTLP/HTTP answers worth a retry (the specification's list), and how many tries in all.
_RETRYABLE = frozenset({429, 502, 503, 504})
_ATTEMPTS = 3


def _backoff(response: httpx.Response, attempt: int) -> float:
    """Seconds to wait before the next try: the collector's ``Retry-After`` (at most 5 s),
    else 0.5 s doubling."""
    try:
        return min(5.0, max(0.0, float(response.headers.get("Retry-After", ""))))
    except ValueError:
        return 0.5 * 2 ** attempt


def _partial_success(response: httpx.Response) -> tuple[int, str]:
    """``(rejected spans, message)`` of an ``ExportTraceServiceResponse``'s partial success."""
    body = response.content
    if not body:
        return 0, ""
    if "protobuf" in response.headers.get("Content-Type", ""):
        try:
            from google.protobuf.message import DecodeError
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
                ExportTraceServiceResponse,
            )
        except ImportError:
            return 0, ""
        answer = ExportTraceServiceResponse()
        try:
            answer.ParseFromString(body)
        except DecodeError:
            return 0, ""
        return answer.partial_success.rejected_spans, answer.partial_success.error_message
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return 0, ""
    partial = data.get("partialSuccess") if isinstance(data, dict) else None
    if not isinstance(partial, dict):
        return 0, ""
    try:
        rejected = int(partial.get("rejectedSpans") or 0)
    except (TypeError, ValueError):
        return 0, ""
    return rejected, str(partial.get("errorMessage") or "")
