"""``OTelObserver``: the same GenAI spans as the OTLP export, emitted live through the SDK."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from turnlog.engine.demo import DEMO_PROMPT, DEMO_SCRIPT, demo_tools
from turnlog.engine.formats.exporter import export_data
from turnlog.engine.loop import Loop, run
from turnlog.engine.loop.otel import OTelObserver
from turnlog.engine.providers.scripted import ScriptedProvider


@pytest.fixture
def tracing():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def live(span):
    return span.name, {k: _plain(v) for k, v in span.attributes.items()}


def exported(span):
    def plain(v):
        ((kind, value),) = v.items()
        if kind == "arrayValue":
            return [plain(x) for x in value["values"]]
        return int(value) if kind == "intValue" else value
    return span["name"], {a["key"]: plain(a["value"]) for a in span["attributes"]}


def export_spans(journal, cid, content=False):
    return export_data(journal, cid, "otlp", content=content)["resourceSpans"][0][
        "scopeSpans"][0]["spans"]


@pytest.mark.parametrize("content", [False, True])
def test_a_live_run_emits_the_spans_the_export_has(journal, tracing, content):
    provider, exporter = tracing
    run(journal, DEMO_PROMPT, provider=ScriptedProvider(DEMO_SCRIPT), tools=demo_tools(),
        conversation_id="demo", observers=[OTelObserver(provider, journal=journal,
                                                         content=content)])
    got = exporter.get_finished_spans()
    *children, root = got
    assert root.name == "invoke_agent" and root.parent is None
    assert all(s.parent.span_id == root.context.span_id for s in children)
    assert {s.context.trace_id for s in got} == {root.context.trace_id}
    models = [s for s in children if s.kind is SpanKind.CLIENT]
    tools = [s for s in children if s.kind is SpanKind.INTERNAL]
    assert len(models) == 5 and len(tools) == 5
    want = export_spans(journal, "demo", content)
    assert [live(s) for s in children] == [exported(s) for s in want[1:]]
    assert live(root) == exported(want[0])
    times = [(s.start_time, s.end_time) for s in children]
    assert times == [(int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"])) for s in want[1:]]
    failed = [s for s in tools if s.status.status_code is StatusCode.ERROR]
    assert sorted(s.attributes["error.type"] for s in failed) == ["duplicate", "tool_error"]


def test_each_run_of_a_chat_is_its_own_trace_and_a_resumed_run_knows_the_history(journal,
                                                                                  tracing):
    provider, exporter = tracing
    observer = OTelObserver(provider, journal=journal, content=True)
    loop = Loop(journal, ScriptedProvider([{"text": "one"}]), observers=[observer])
    loop.start("first", conversation_id="chat")
    loop.send("chat", "second")
    roots = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent"]
    assert len(roots) == 2 and roots[0].context.trace_id != roots[1].context.trace_id
    last_model = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.CLIENT][-1]
    history = json.loads(last_model.attributes["gen_ai.input.messages"])
    assert [m["role"] for m in history] == ["user", "assistant", "user"]


def test_a_failed_run_marks_its_root_and_a_run_that_never_ends_is_closed(journal, tracing):
    provider, exporter = tracing
    observer = OTelObserver(provider)
    run(journal, "hi", provider=ScriptedProvider([{"error": {"type": "auth", "message": "no"}}]),
        conversation_id="f", observers=[observer])
    (model, root) = exporter.get_finished_spans()
    assert model.attributes["error.type"] == "AuthenticationError"
    assert root.status.status_code is StatusCode.ERROR
    assert root.attributes["error.type"] == "model_failed"
    exporter.clear()
    Loop(journal, ScriptedProvider([{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}]),
         demo_tools(), observers=[observer]).start("go", conversation_id="half", single_turn=True)
    names = [s.name for s in exporter.get_finished_spans()]
    assert names == ["chat scripted", "execute_tool add"]  # the run goes on: its root is open
    observer.close()
    root = exporter.get_finished_spans()[-1]
    assert root.name == "invoke_agent" and root.attributes["error.type"] == "unfinished"


def test_observing_never_changes_what_is_recorded(journal, tmp_path, tracing):
    from turnlog.journal import Journal

    from ..conftest import FixedClock

    provider, _ = tracing
    plain = Journal(str(tmp_path / "plain.db"), clock=FixedClock())
    for j, observers in ((journal, [OTelObserver(provider, journal=journal)]), (plain, [])):
        clock = FixedClock()
        Loop(j, ScriptedProvider(DEMO_SCRIPT), demo_tools(), observers=observers,
             timer=lambda: 0.0, clock=clock).start(DEMO_PROMPT, conversation_id="demo")
    assert [(e.type, e.payload, e.hash) for e in journal.read("demo")] == \
        [(e.type, e.payload, e.hash) for e in plain.read("demo")]
    plain.close()


@pytest.mark.parametrize("semconv", ["1.41", "genai-0.1"])
def test_live_spans_follow_the_generation_asked_for_as_the_export_does(journal, tracing,
                                                                        semconv):
    provider, exporter = tracing
    run(journal, DEMO_PROMPT, provider=ScriptedProvider(DEMO_SCRIPT), tools=demo_tools(),
        conversation_id="k", parameters={"top_k": 40},
        observers=[OTelObserver(provider, journal=journal, semconv=semconv)])
    *children, root = exporter.get_finished_spans()
    want = export_data(journal, "k", "otlp", semconv=semconv)
    scope = want["resourceSpans"][0]["scopeSpans"][0]
    assert [live(s) for s in children] == [exported(s) for s in scope["spans"][1:]]
    assert root.instrumentation_scope.schema_url == scope["schemaUrl"]
    top_k = next(s for s in children if s.kind is SpanKind.CLIENT).attributes[
        "gen_ai.request.top_k"]
    assert type(top_k) is (float if semconv == "1.41" else int)
