"""``export --endpoint`` against a receiver turnlog's authors did not write: oteltest's sink.

``oteltest`` (PyPI, from the OpenTelemetry Python maintainers' circle) ships ``HttpSink``,
an OTLP/HTTP receiver that decodes ``/v1/traces`` bodies into ``ExportTraceServiceRequest``
(protobuf unless the Content-Type says JSON) and hands them, with the request's headers,
to a handler; its ``AccumulatingHandler`` keeps them. It runs here in a thread of the test
process, on a port the system picks (``port=0``), so a busy 4318 never matters; it binds
every interface (its own choice), and turnlog is pointed at 127.0.0.1.

What it cannot check, and the in-suite receiver of test_otlp.py does: gzip (oteltest 0.49
parses the body without undoing ``Content-Encoding`` and drops the connection), retries,
refusals and ``partial_success`` answers. oteltest answers every trace with ``200 OK``
and no ``partial_success``; ``turnlog export --endpoint`` exits 0 only on a 2xx answer
that rejected no span (``send_otlp``), so exit 0 and "sent N span(s)" are the acceptance.
"""

from __future__ import annotations

import base64
import copy
import json
import logging
import os
import subprocess
import sys
import time
from http.server import HTTPServer
from pathlib import Path

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from oteltest.sink import HttpSink
from oteltest.sink.handler import AccumulatingHandler

from turnlog.engine.demo import DEMO_PROMPT, DEMO_SCRIPT, demo_tools
from turnlog.engine.loop import run
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.journal import Journal

_SCRIPT = Path(sys.executable).parent / "turnlog"
#: The installed console script, as a user runs it (else ``python -m``).
TURNLOG = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "turnlog.engine.cli"]

#: What OTEL_EXPORTER_OTLP_HEADERS says (URL-encoded, as the specification writes it).
HEADERS = "Authorization=Bearer%20s3cr3t-token,x-team=ml%2Cobs"


@pytest.fixture
def demo_db(tmp_path):
    path = tmp_path / "turnlog.db"
    journal = Journal(str(path))
    run(journal, DEMO_PROMPT, provider=ScriptedProvider(DEMO_SCRIPT), tools=demo_tools(),
        conversation_id="demo", parameters={"max_tokens": 300, "temperature": 0.5})
    journal.close()
    return path


@pytest.fixture
def sink():
    """oteltest's HttpSink on a free port: ``(handler, base URL)``."""
    reuse = HTTPServer.allow_reuse_address  # HttpSink sets it on the stdlib class: put it back
    handler = AccumulatingHandler()
    server = HttpSink(handler, logging.getLogger("oteltest.sink"), port=0)
    server.start()
    deadline = time.monotonic() + 10
    while server.httpd is None:  # set by the sink's thread once it has bound its socket
        assert server.svr_thread.is_alive() and time.monotonic() < deadline, \
            "oteltest's HttpSink did not start"
        time.sleep(0.01)
    yield handler, f"http://127.0.0.1:{server.httpd.server_address[1]}"
    server.stop()
    HTTPServer.allow_reuse_address = reuse


def turnlog(*args, **env):
    """``turnlog ARGS`` with no OTEL_*/TURNLOG_* variable of the test's own, plus ``env``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TURNLOG_"))}
    return subprocess.run([*TURNLOG, *map(str, args)], capture_output=True, text=True,
                          env={**base, **env}, timeout=120)


def printed(db):
    """``export --format otlp`` to stdout, parsed as the protobuf message it stands for."""
    done = turnlog("export", "demo", "--format", "otlp", "--db", db)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    for span in spans_of(data):
        for key in ("traceId", "spanId", "parentSpanId"):  # OTLP/JSON hex -> protobuf base64
            if key in span:
                span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return json_format.ParseDict(data, ExportTraceServiceRequest())


def spans_of(data):
    return [span for rs in data["resourceSpans"] for scope in rs["scopeSpans"]
            for span in scope["spans"]]


def pb_spans(message):
    return [span for rs in message.resource_spans for scope in rs.scope_spans
            for span in scope.spans]


def attribute(span, key):
    (value,) = [a.value for a in span.attributes if a.key == key]
    return getattr(value, value.WhichOneof("value"))


def header(request, name):
    found = [v for k, v in request.headers.items() if k.lower() == name.lower()]
    assert len(found) == 1, f"the sink got no single {name} header: {sorted(request.headers)}"
    return found[0]


def check_decoded(received, expected):
    """What the sink decoded is the printed trace: spans, names, ids, a gen_ai attribute."""
    got, want = pb_spans(received), pb_spans(expected)
    assert len(got) == len(want) == 11
    assert [s.name for s in got] == [s.name for s in want]
    assert {s.name.split()[0] for s in got} == {"invoke_agent", "chat", "execute_tool"}
    assert {s.trace_id for s in got} == {want[0].trace_id} and len(want[0].trace_id) == 16
    assert [s.span_id for s in got] == [s.span_id for s in want]
    chats = [s for s in got if s.name.startswith("chat ")]
    assert chats and all(attribute(s, "gen_ai.conversation.id") == "demo"
                         for s in [got[0], *chats])
    tools = [s for s in got if s.name.startswith("execute_tool ")]
    assert tools and [attribute(s, "gen_ai.tool.name") for s in tools] == \
        [s.name.removeprefix("execute_tool ") for s in want if s.name.startswith("execute_tool ")]
    assert [attribute(s, "gen_ai.request.model") for s in chats] == \
        [attribute(s, "gen_ai.request.model") for s in want if s.name.startswith("chat ")]
    assert all(f"chat {attribute(s, 'gen_ai.request.model')}" == s.name for s in chats)
    assert received == expected  # and everything else, field for field


def test_oteltest_accepts_the_protobuf_export_and_gets_the_environments_headers(demo_db, sink):
    handler, url = sink

    done = turnlog("export", "demo", "--format", "otlp", "--endpoint", url, "--db", demo_db,
                   OTEL_EXPORTER_OTLP_HEADERS=HEADERS)

    assert done.returncode == 0, done.stderr
    assert done.stdout == f"sent 11 span(s) of demo to {url}/v1/traces (http/protobuf)\n"
    assert "s3cr3t" not in done.stdout + done.stderr
    (request,) = handler.telemetry.get_trace_requests()
    assert header(request, "Content-Type") == "application/x-protobuf"
    assert header(request, "Authorization") == "Bearer s3cr3t-token"
    assert header(request, "x-team") == "ml,obs"
    check_decoded(request.pbreq, printed(demo_db))


def test_oteltest_accepts_otlp_json_from_the_environments_endpoint(demo_db, sink):
    handler, url = sink

    done = turnlog("export", "demo", "--format", "otlp", "--endpoint", "--protocol", "http/json",
                   "--db", demo_db, OTEL_EXPORTER_OTLP_ENDPOINT=url,
                   OTEL_EXPORTER_OTLP_TRACES_HEADERS=HEADERS)

    assert done.returncode == 0, done.stderr
    assert done.stdout == f"sent 11 span(s) of demo to {url}/v1/traces (http/json)\n"
    (request,) = handler.telemetry.get_trace_requests()
    assert header(request, "Content-Type") == "application/json"
    assert (header(request, "Authorization"), header(request, "x-team")) == (
        "Bearer s3cr3t-token", "ml,obs")
    check_decoded(as_sent(request.pbreq), printed(demo_db))


def as_sent(message):
    """The ids as they were on the wire.

    OTLP/JSON writes trace and span ids as hex; oteltest 0.49 reads JSON with protobuf's own
    JSON mapping, which takes bytes as base64, so a 32-digit hex trace id arrives as the 24
    bytes base64 makes of it. Re-encoding gives back the hex that was sent (an id already of
    OTLP's width, from a receiver that reads hex, is kept as it is).
    """
    message = copy.deepcopy(message)
    for span in pb_spans(message):
        for field, width in (("trace_id", 16), ("span_id", 8), ("parent_span_id", 8)):
            raw = getattr(span, field)
            if raw and len(raw) != width:
                setattr(span, field, bytes.fromhex(base64.b64encode(raw).decode()))
    return message
