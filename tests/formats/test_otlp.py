"""``export --format otlp``: a conversation as an OTLP/JSON trace with GenAI spans."""

from __future__ import annotations

import base64
import gzip
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from click.testing import CliRunner
from google.protobuf import json_format
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.semconv._incubating.attributes import error_attributes, gen_ai_attributes

from turnlog.engine.cli import cli
from turnlog.engine.demo import DEMO_PROMPT, DEMO_SCRIPT, demo_tools
from turnlog.engine.errors import FormatError
from turnlog.engine.formats.exporter import export_conversation, export_data
from turnlog.engine.formats.otlp import OTLPError, otlp_target, protobuf_request, send_otlp
from turnlog.engine.loop import Loop, run
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.journal import Journal

#: Every attribute the conventions define, by name (the semconv package's constants).
KNOWN = {v for k, v in vars(gen_ai_attributes).items() if k.startswith("GEN_AI_")} | {
    error_attributes.ERROR_TYPE}

#: Attribute types as the conventions declare them (genai-0.1, the default generation; 1.41
#: differs only in gen_ai.request.top_k, a double there: see the --semconv tests).
TYPES = {
    "gen_ai.operation.name": "stringValue", "gen_ai.provider.name": "stringValue",
    "gen_ai.request.model": "stringValue", "gen_ai.response.model": "stringValue",
    "gen_ai.response.id": "stringValue", "gen_ai.conversation.id": "stringValue",
    "gen_ai.response.finish_reasons": "arrayValue", "gen_ai.usage.input_tokens": "intValue",
    "gen_ai.usage.output_tokens": "intValue", "gen_ai.usage.cache_read.input_tokens": "intValue",
    "gen_ai.usage.cache_creation.input_tokens": "intValue",
    "gen_ai.usage.reasoning.output_tokens": "intValue",
    "gen_ai.request.max_tokens": "intValue", "gen_ai.request.temperature": "doubleValue",
    "gen_ai.request.top_p": "doubleValue", "gen_ai.request.top_k": "intValue",
    "gen_ai.request.seed": "intValue", "gen_ai.request.stop_sequences": "arrayValue",
    "gen_ai.tool.name": "stringValue", "gen_ai.tool.call.id": "stringValue",
    "gen_ai.tool.type": "stringValue", "gen_ai.tool.description": "stringValue",
    "error.type": "stringValue", "gen_ai.input.messages": "stringValue",
    "gen_ai.output.messages": "stringValue", "gen_ai.system_instructions": "stringValue",
    "gen_ai.tool.definitions": "stringValue", "gen_ai.tool.call.arguments": "stringValue",
    "gen_ai.tool.call.result": "stringValue",
}
MODEL_REQUIRED = {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model",
                  "gen_ai.conversation.id"}
MODEL_RESPONSE = {"gen_ai.response.model", "gen_ai.response.id", "gen_ai.response.finish_reasons",
                  "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
                  "gen_ai.usage.cache_read.input_tokens",
                  "gen_ai.usage.cache_creation.input_tokens"}


def spans(request):
    (rs,) = request["resourceSpans"]
    (scope,) = rs["scopeSpans"]
    return scope["spans"]


def attrs(span):
    out = {}
    for a in span["attributes"]:
        ((kind, value),) = a["value"].items()
        out[a["key"]] = (kind, value)
    return out


def values(span):
    def plain(kind, value):
        if kind == "arrayValue":
            return [plain(*next(iter(v.items()))) for v in value["values"]]
        return int(value) if kind == "intValue" else value
    return {k: plain(*v) for k, v in attrs(span).items()}


def as_protobuf(request):
    """Parse through opentelemetry-proto: OTLP/JSON ids are hex where protobuf JSON wants base64."""
    data = json.loads(json.dumps(request))
    for span in spans(data):
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in span:
                span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return json_format.Parse(json.dumps(data), ExportTraceServiceRequest())


@pytest.fixture
def demo(journal):
    run(journal, DEMO_PROMPT, provider=ScriptedProvider(DEMO_SCRIPT), tools=demo_tools(),
        conversation_id="demo", parameters={"max_tokens": 300, "temperature": 0.5,
                                            "stop": ["END"]})
    return journal


def test_the_demo_exports_one_trace_a_root_a_span_per_model_call_and_per_tool_call(demo):
    request = export_data(demo, "demo", "otlp")
    got = spans(request)
    root, children = got[0], got[1:]
    assert root["name"] == "invoke_agent" and "parentSpanId" not in root
    assert {s["traceId"] for s in got} == {root["traceId"]} and len(root["traceId"]) == 32
    assert all(s["parentSpanId"] == root["spanId"] for s in children)
    assert len({s["spanId"] for s in got}) == len(got)
    models = [s for s in children if s["name"] == "chat scripted"]
    tools = [s for s in children if s["name"].startswith("execute_tool ")]
    assert len(models) == 5 and len(tools) == 5 and len(children) == 10
    for span in children:
        assert int(root["startTimeUnixNano"]) <= int(span["startTimeUnixNano"]) \
            <= int(span["endTimeUnixNano"]) <= int(root["endTimeUnixNano"])
    assert {s["kind"] for s in models} == {3} and {s["kind"] for s in tools} == {1}


def test_attributes_are_named_and_typed_as_the_conventions_say(demo):
    for span in spans(export_data(demo, "demo", "otlp", content=True)):
        got = attrs(span)
        assert set(got) <= KNOWN, set(got) - KNOWN
        for key, (kind, _) in got.items():
            assert kind == TYPES[key], (span["name"], key, kind)
    models = [s for s in spans(export_data(demo, "demo", "otlp")) if s["kind"] == 3]
    for span in models:
        got = values(span)
        assert MODEL_REQUIRED | MODEL_RESPONSE <= set(got)
        assert got["gen_ai.operation.name"] == "chat" and got["gen_ai.provider.name"] == "scripted"
        assert got["gen_ai.request.max_tokens"] == 300
        assert got["gen_ai.request.temperature"] == 0.5
        assert got["gen_ai.request.stop_sequences"] == ["END"]
        assert got["gen_ai.conversation.id"] == "demo"
    assert [values(s)["gen_ai.response.finish_reasons"] for s in models] == \
        [["tool_call"]] * 4 + [["stop"]]


def test_failed_and_refused_tool_calls_carry_error_type_and_an_error_status(demo):
    tools = {values(s)["gen_ai.tool.call.id"]: s for s in spans(export_data(demo, "demo", "otlp"))
             if s["name"].startswith("execute_tool")}
    failed = [s for s in tools.values() if "status" in s]
    assert sorted(values(s)["error.type"] for s in failed) == ["duplicate", "tool_error"]
    assert all(s["status"]["code"] == 2 and s["status"]["message"] for s in failed)
    ok = [s for s in tools.values() if "status" not in s]
    assert all("error.type" not in values(s) for s in ok)
    assert {values(s)["gen_ai.tool.type"] for s in tools.values()} == {"function"}


def test_a_failed_model_call_has_error_type_and_the_root_says_the_run_failed(journal):
    script = [{"error": {"type": "auth", "message": "bad key"}}]
    run(journal, "hi", provider=ScriptedProvider(script), conversation_id="f")
    got = spans(export_data(journal, "f", "otlp"))
    root, (model,) = got[0], got[1:]
    assert values(model)["error.type"] == "AuthenticationError"
    assert model["status"] == {"code": 2, "message": "scripted: bad key"}
    assert "gen_ai.response.id" not in values(model)
    assert values(root)["error.type"] == "model_failed" and root["status"]["code"] == 2


def test_exporting_twice_gives_the_same_trace_byte_for_byte(demo):
    assert export_conversation(demo, "demo", "otlp") == export_conversation(demo, "demo", "otlp")


def test_the_trace_parses_as_an_export_trace_service_request(demo):
    parsed = as_protobuf(export_data(demo, "demo", "otlp", content=True))
    (rs,) = parsed.resource_spans
    assert rs.resource.attributes[0].value.string_value == "turnlog"
    (scope,) = rs.scope_spans
    assert len(scope.spans) == 11
    for span in scope.spans:
        assert len(span.trace_id) == 16 and len(span.span_id) == 8
        assert span.end_time_unix_nano >= span.start_time_unix_nano > 0


def test_content_is_only_there_when_asked_for_in_the_conventions_shapes(demo):
    plain = spans(export_data(demo, "demo", "otlp"))
    assert not any(k in values(s) for s in plain for k in (
        "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments"))
    rich = spans(export_data(demo, "demo", "otlp", content=True))
    first = values(rich[1])
    (user,) = json.loads(first["gen_ai.input.messages"])
    assert user == {"role": "user", "parts": [{"type": "text", "content": DEMO_PROMPT}]}
    (out,) = json.loads(first["gen_ai.output.messages"])
    assert out["role"] == "assistant" and out["finish_reason"] == "tool_call"
    assert {p["type"] for p in out["parts"]} >= {"tool_call"}
    defs = json.loads(first["gen_ai.tool.definitions"])
    assert {d["type"] for d in defs} == {"function"} and "get_weather" in {d["name"] for d in defs}
    second_model = [s for s in rich if s["kind"] == 3][1]
    second = json.loads(values(second_model)["gen_ai.input.messages"])
    assert any(p["type"] == "tool_call_response" and "response" in p
               for m in second for p in m["parts"])
    tool = values(rich[2])
    assert json.loads(tool["gen_ai.tool.call.arguments"]) == {"city": "Paris"}


def test_content_is_refused_for_formats_that_are_already_content(demo):
    with pytest.raises(FormatError, match="otlp"):
        export_data(demo, "demo", "jsonl", content=True)


def test_a_fork_is_its_own_trace_and_shares_no_span_ids_with_its_parent(demo):
    from turnlog.replay.fork import fork

    fork(demo, "demo", 4, new_id="demo-fork")
    parent = spans(export_data(demo, "demo", "otlp"))
    child = spans(export_data(demo, "demo-fork", "otlp"))
    assert parent[0]["traceId"] != child[0]["traceId"]
    assert child[0]["startTimeUnixNano"] == parent[0]["startTimeUnixNano"]


@given(st.lists(st.sampled_from(["add", "get_weather", "text", "bad"]), max_size=4))
def test_any_run_exports_a_well_formed_deterministic_trace(tmp_path_factory, steps):
    """Law: every span is under the root, inside its time, ids unique, re-export identical."""
    j = Journal(str(tmp_path_factory.mktemp("p") / "j.db"))
    turns = []
    for i, step in enumerate(steps):
        if step == "add":
            turns.append({"tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}}]})
        elif step == "get_weather":
            turns.append({"tool_calls": [{"name": "get_weather", "arguments": {"city": "x"}}]})
        elif step == "bad":
            turns.append({"tool_calls": [{"name": "nope", "arguments": {}}]})
        else:
            turns.append({"text": "thinking aloud", "tool_calls": [
                {"name": "add", "arguments": {"a": 1, "b": i}}]})
    turns.append({"text": "done"})
    Loop(j, ScriptedProvider(turns), demo_tools()).start("go", conversation_id="p")
    request = export_data(j, "p", "otlp")
    got = spans(request)
    root = got[0]
    assert len(got) == 1 + len(turns) + len(steps)
    assert len({s["spanId"] for s in got}) == len(got)
    for span in got[1:]:
        assert span["parentSpanId"] == root["spanId"] and span["traceId"] == root["traceId"]
        assert int(root["startTimeUnixNano"]) <= int(span["startTimeUnixNano"]) \
            <= int(span["endTimeUnixNano"]) <= int(root["endTimeUnixNano"])
    assert export_data(j, "p", "otlp") == request
    j.close()


# --- the command line and --endpoint ------------------------------------------------------------

class _Collector(BaseHTTPRequestHandler):
    """A real OTLP/HTTP receiver: it decodes what arrives as a collector does.

    protobuf bodies are parsed with opentelemetry-proto's ExportTraceServiceRequest and
    JSON ones read as OTLP/JSON, after undoing ``Content-Encoding: gzip``; both are kept
    in OTLP/JSON form (ids as hex) so they compare with ``export --format otlp``.
    """

    received: list = []
    status = 200
    answer = (b"{}", "application/json")
    busy = 0

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if type(self).busy:  # answer 503 this many times first
            type(self).busy -= 1
            self.send_response(503)
            self.send_header("Retry-After", "0")
            self.end_headers()
            return
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        ctype = self.headers["Content-Type"]
        if ctype == "application/x-protobuf":
            message = ExportTraceServiceRequest()
            message.ParseFromString(body)
            data = from_protobuf(message)
        else:
            data = json.loads(body)
        type(self).received.append((self.path, ctype, data, dict(self.headers.items())))
        self.send_response(type(self).status)
        body, answer_type = type(self).answer
        self.send_header("Content-Type", answer_type)
        self.end_headers()
        self.wfile.write(body if type(self).status == 200 else b'{"message":"no thanks"}')

    def log_message(self, *args):
        pass


def from_protobuf(message):
    """A received ExportTraceServiceRequest as OTLP/JSON (ids hex, int64 as strings)."""
    data = json_format.MessageToDict(message, preserving_proto_field_name=False,
                                     use_integers_for_enums=True)
    for span in spans(data):
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in span:
                span[key] = base64.b64decode(span[key]).hex()
    return data


@pytest.fixture
def collector():
    handler = type("Collector", (_Collector,), {"received": [], "status": 200, "busy": 0,
                                                "answer": (b"{}", "application/json")})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield handler, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def invoke(*args, env=None):
    return CliRunner().invoke(cli, [str(a) for a in args], env=env)


#: No OTEL_EXPORTER_OTLP_* variable from the environment the tests run in.
NO_OTEL = {k: None for k in os.environ if k.startswith("OTEL_")}


def test_export_endpoint_posts_the_trace_as_otlp_http_protobuf_by_default(demo, db_path,
                                                                          collector):
    handler, url = collector
    demo.close()
    result = invoke("export", "demo", "--format", "otlp", "--endpoint", url, "--db", db_path,
                    env=NO_OTEL)
    assert result.exit_code == 0, result.output
    assert result.output == f"sent 11 span(s) of demo to {url}/v1/traces (http/protobuf)\n"
    ((path, ctype, body, headers),) = handler.received
    assert (path, ctype) == ("/v1/traces", "application/x-protobuf")
    assert "Content-Encoding" not in headers
    printed = invoke("export", "demo", "--format", "otlp", "--db", db_path)
    assert body == json.loads(printed.output)


def test_protocol_http_json_posts_otlp_json_and_gzip_compresses(demo, db_path, collector):
    handler, url = collector
    demo.close()
    result = invoke("export", "demo", "--format", "otlp", "--content", "--endpoint", url,
                    "--protocol", "http/json", "--compression", "gzip", "--db", db_path,
                    env=NO_OTEL)
    assert result.exit_code == 0, result.output
    assert "(http/json, gzip)" in result.output
    ((path, ctype, body, headers),) = handler.received
    assert (ctype, headers["Content-Encoding"]) == ("application/json", "gzip")
    printed = invoke("export", "demo", "--format", "otlp", "--content", "--db", db_path)
    assert body == json.loads(printed.output)


def test_the_environment_names_the_endpoint_headers_and_compression(demo, db_path, collector):
    handler, url = collector
    demo.close()
    env = {**NO_OTEL, "OTEL_EXPORTER_OTLP_ENDPOINT": url,
           "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20s3cr3t-token,x-team=ml",
           "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-team=traces",
           "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}
    result = invoke("export", "demo", "--format", "otlp", "--endpoint", "--header",
                    "x-extra=given", "--db", db_path, env=env)
    assert result.exit_code == 0, result.output
    assert "s3cr3t" not in result.output and f"{url}/v1/traces (http/protobuf, gzip)" in \
        result.output
    ((path, ctype, body, headers),) = handler.received
    assert (path, ctype, headers["Content-Encoding"]) == (
        "/v1/traces", "application/x-protobuf", "gzip")
    assert headers["Authorization"] == "Bearer s3cr3t-token"  # URL-decoded
    assert headers["x-team"] == "traces"  # the traces variant wins over the general one
    assert headers["x-extra"] == "given"
    assert len(spans(body)) == 11


def test_the_traces_endpoint_is_used_as_it_is(demo, db_path, collector):
    handler, url = collector
    demo.close()
    env = {**NO_OTEL, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{url}/custom/path",
           "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9/never",
           "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}
    result = invoke("export", "demo", "--format", "otlp", "--endpoint", "--db", db_path,
                    env=env)
    assert result.exit_code == 0, result.output
    ((path, ctype, _, _),) = handler.received
    assert (path, ctype) == ("/custom/path", "application/json")


def test_credentials_never_appear_in_what_is_printed(demo, db_path, collector):
    handler, url = collector
    handler.status = 401
    demo.close()
    port = url.rsplit(":", 1)[1]
    secret_url = f"http://user:hunter2@127.0.0.1:{port}"
    result = invoke("export", "demo", "--format", "otlp", "--endpoint", secret_url,
                    "--header", "api-key=topsecret", "--db", db_path, env=NO_OTEL)
    assert result.exit_code == 2
    assert "HTTP 401" in result.output and "user:***@127.0.0.1" in result.output
    assert "hunter2" not in result.output and "topsecret" not in result.output
    handler.status = 200
    result = invoke("export", "demo", "--format", "otlp", "--endpoint", secret_url,
                    "--db", db_path, env=NO_OTEL)
    assert result.exit_code == 0 and "hunter2" not in result.output, result.output
    result = invoke("export", "demo", "--format", "otlp", "--endpoint", url, "--db", db_path,
                    env={**NO_OTEL, "OTEL_EXPORTER_OTLP_HEADERS": "api-key"})
    assert result.exit_code == 2 and "OTEL_EXPORTER_OTLP_HEADERS: entry 1" in result.output
    result = invoke("export", "demo", "--format", "otlp", "--endpoint", url, "--header",
                    "k=line\nbreak-secret", "--db", db_path, env=NO_OTEL)
    assert result.exit_code == 2 and "secret" not in result.output


def test_a_partial_success_is_an_error_saying_how_many_spans_were_rejected(demo, collector):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTracePartialSuccess,
        ExportTraceServiceResponse,
    )

    handler, url = collector
    request = export_data(demo, "demo", "otlp")
    answer = ExportTraceServiceResponse(partial_success=ExportTracePartialSuccess(
        rejected_spans=3, error_message="too old"))
    handler.answer = (answer.SerializeToString(), "application/x-protobuf")
    with pytest.raises(OTLPError, match="rejected 3 of 11 span.*too old"):
        send_otlp(request, url)
    handler.answer = (b'{"partialSuccess": {"rejectedSpans": "2"}}', "application/json")
    with pytest.raises(OTLPError, match="rejected 2 of 11 span"):
        send_otlp(request, otlp_target(url, protocol="http/json", environ={}))
    handler.answer = (ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")
    assert send_otlp(request, url) == 11


def test_a_busy_collector_is_tried_again_and_a_lasting_one_is_an_error(demo, collector):
    handler, url = collector
    request = export_data(demo, "demo", "otlp")
    handler.busy = 2
    assert send_otlp(request, url) == 11
    assert len(handler.received) == 1 and handler.busy == 0
    handler.busy = 3
    with pytest.raises(OTLPError, match="HTTP 503"):
        send_otlp(request, url)
    assert len(handler.received) == 1


def test_no_endpoint_anywhere_and_an_unknown_protocol_are_clear_errors(demo, db_path):
    demo.close()
    result = invoke("export", "demo", "--format", "otlp", "--endpoint", "--db", db_path,
                    env=NO_OTEL)
    assert result.exit_code == 2 and "OTEL_EXPORTER_OTLP_ENDPOINT" in result.output
    result = invoke("export", "demo", "--format", "otlp", "--endpoint", "--db", db_path,
                    env={**NO_OTEL, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                         "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"})
    assert result.exit_code == 2 and "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" in result.output \
        and "gRPC is not spoken" in result.output
    result = invoke("export", "demo", "--format", "otlp", "--protocol", "http/json",
                    "--db", db_path, env=NO_OTEL)
    assert result.exit_code == 2 and "give --endpoint too" in result.output


def test_the_headers_variable_parses_as_the_specification_says():
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/",
           "OTEL_EXPORTER_OTLP_HEADERS": " a = 1 ,b=x%3Dy%2Cz,, c=",
           "OTEL_EXPORTER_OTLP_TIMEOUT": "2500"}
    target = otlp_target(environ=env)
    assert target.url == "http://c:4318/v1/traces"
    assert target.headers == {"a": "1", "b": "x=y,z", "c": ""}
    assert (target.protocol, target.compression, target.timeout) == ("http/protobuf", "none", 2.5)
    given = otlp_target("http://c:4318", headers=["a=2"], protocol="http/json",
                        compression="gzip", environ=env)
    assert given.url == "http://c:4318/v1/traces" and given.headers["a"] == "2"
    assert (given.protocol, given.compression) == ("http/json", "gzip")


def test_protobuf_without_opentelemetry_proto_names_the_extra(demo, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_proto(name, *args, **kwargs):
        if name.startswith("opentelemetry.proto"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_proto)
    with pytest.raises(OTLPError, match=r"\.\[otel\].*--protocol http/json"):
        protobuf_request(export_data(demo, "demo", "otlp"))


def test_the_protobuf_body_is_the_json_export_field_for_field(demo):
    request = export_data(demo, "demo", "otlp", content=True)
    message = ExportTraceServiceRequest()
    message.ParseFromString(protobuf_request(request))
    assert from_protobuf(message) == request
    assert message == as_protobuf(request)


def test_a_collector_that_refuses_is_a_clear_error_and_a_bad_endpoint_too(demo, collector):
    handler, url = collector
    handler.status = 400
    request = export_data(demo, "demo", "otlp")
    with pytest.raises(OTLPError, match=r"refused the trace: HTTP 400 .*no thanks"):
        send_otlp(request, url + "/v1/traces")
    with pytest.raises(OTLPError, match="http:// or https://"):
        send_otlp(request, "localhost:4318")
    with pytest.raises(OTLPError, match="could not send the trace to http://127.0.0.1:9/v1"):
        send_otlp(request, "http://127.0.0.1:9")


def test_endpoint_needs_the_otlp_format_and_content_needs_otlp(demo, db_path):
    demo.close()
    before = db_path.read_bytes()
    result = invoke("export", "demo", "--format", "jsonl", "--endpoint", "http://x", "--db",
                    db_path)
    assert result.exit_code == 2 and "--format otlp" in result.output
    result = invoke("export", "demo", "--format", "markdown", "--content", "--db", db_path)
    assert result.exit_code == 2 and "otlp" in result.output
    assert db_path.read_bytes() == before


def test_export_otlp_to_a_file_with_content(demo, db_path, tmp_path):
    demo.close()
    out = tmp_path / "trace.json"
    result = invoke("export", "demo", "--format", "otlp", "--content", "-o", out, "--db", db_path)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert any(a["key"] == "gen_ai.input.messages" for s in spans(data) for a in s["attributes"])


# --- --semconv: both generations of the GenAI conventions ---------------------------------------

@pytest.fixture
def sampled(journal):
    run(journal, DEMO_PROMPT, provider=ScriptedProvider(DEMO_SCRIPT), tools=demo_tools(),
        conversation_id="k", parameters={"top_k": 40, "temperature": 0.5})
    return journal


def _scope_url(request):
    (rs,) = request["resourceSpans"]
    (scope,) = rs["scopeSpans"]
    return rs["schemaUrl"], scope["schemaUrl"]


def test_semconv_picks_the_schema_url_and_the_top_k_type(sampled):
    newest = export_data(sampled, "k", "otlp")
    assert export_data(sampled, "k", "otlp", semconv="genai-0.1") == newest
    old = export_data(sampled, "k", "otlp", semconv="1.41")
    assert _scope_url(newest) == ("https://opentelemetry.io/schemas/gen-ai/0.1.0",) * 2
    assert _scope_url(old) == ("https://opentelemetry.io/schemas/1.41.0",) * 2
    chat = next(s for s in spans(newest) if s["name"].startswith("chat "))
    assert attrs(chat)["gen_ai.request.top_k"] == ("intValue", "40")
    chat = next(s for s in spans(old) if s["name"].startswith("chat "))
    assert attrs(chat)["gen_ai.request.top_k"] == ("doubleValue", 40.0)
    # apart from those, the generations agree span for span
    for a, b in zip(spans(newest), spans(old)):
        assert {k: v for k, v in values(a).items() if k != "gen_ai.request.top_k"} == \
            {k: v for k, v in values(b).items() if k != "gen_ai.request.top_k"}
    as_protobuf(old), as_protobuf(newest)  # both parse as ExportTraceServiceRequest


def test_semconv_on_the_command_line_and_an_unknown_one(sampled, db_path):
    sampled.close()
    result = invoke("export", "k", "--format", "otlp", "--semconv", "1.41", "--db", db_path)
    assert result.exit_code == 0, result.output
    assert _scope_url(json.loads(result.output))[0].endswith("/schemas/1.41.0")
    result = invoke("export", "k", "--format", "otlp", "--semconv", "2.0", "--db", db_path)
    assert result.exit_code == 2 and "genai-0.1" in result.output
    result = invoke("export", "k", "--format", "markdown", "--semconv", "1.41", "--db", db_path)
    assert result.exit_code == 2 and "--format otlp" in result.output
    with pytest.raises(FormatError, match="1.41, genai-0.1"):
        export_data(sampled.__class__(db_path), "k", "otlp", semconv="0.9")


@pytest.mark.parametrize("semconv", ["1.41", "genai-0.1"])
def test_each_generation_imports_back_to_the_same_messages(demo, tmp_path, semconv):
    from turnlog.engine.model.conversation import load_state
    from turnlog.engine.formats.importer import import_file

    path = tmp_path / "trace.json"
    path.write_text(json.dumps(export_data(demo, "demo", "otlp", content=True, semconv=semconv)))
    result = import_file(demo, path, conversation_id=f"back-{semconv}")
    got = load_state(demo, result.conversation_id)
    want = load_state(demo, "demo")
    assert [m.role for m in got.messages] == [m.role for m in want.messages]
    assert [[p.text for p in m.parts if hasattr(p, "text")] for m in got.messages] == \
        [[p.text for p in m.parts if hasattr(p, "text")] for m in want.messages]
