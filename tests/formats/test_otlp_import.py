"""OTLP/JSON traces whose GenAI spans carry messages import as conversations."""

from __future__ import annotations

import json

import pytest

from turnlog.engine.model.conversation import load_state
from turnlog.engine.demo import DEMO_PROMPT, DEMO_SCRIPT, demo_tools
from turnlog.engine.errors import FormatError
from turnlog.engine.formats.exporter import export_conversation
from turnlog.engine.formats.importer import import_file
from turnlog.engine.loop import run
from turnlog.engine.model.messages import Text, ToolCall, ToolResult
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.journal import Journal


def _kv(key, value):
    if isinstance(value, str):
        return {"key": key, "value": {"stringValue": value}}
    return {"key": key, "value": {"intValue": str(value)}}


def _doc(*spans):
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": list(spans)}]}]}


def _span(trace="t1", start=1, **attrs):
    return {"traceId": trace, "spanId": "s", "name": "chat m", "startTimeUnixNano": str(start),
            "attributes": [_kv(k.replace("__", "."), v) for k, v in attrs.items()]}


def test_an_exported_trace_with_content_imports_as_the_same_conversation(journal, tmp_path):
    run(journal, DEMO_PROMPT, provider=ScriptedProvider(DEMO_SCRIPT), tools=demo_tools(),
        conversation_id="demo", system="Be brief.")
    path = tmp_path / "trace.json"
    path.write_text(export_conversation(journal, "demo", "otlp", content=True))
    result = import_file(journal, path, conversation_id="back")
    assert result.status == "completed"
    a, b = load_state(journal, "demo"), load_state(journal, "back")
    assert b.system == a.system and b.model == "scripted"
    assert [m.role for m in b.messages] == [m.role for m in a.messages]
    for x, y in zip(a.messages, b.messages):
        assert [type(p) for p in x.parts] == [type(p) for p in y.parts]
        for p, q in zip(x.parts, y.parts):
            if isinstance(p, Text):
                assert p.text == q.text
            elif isinstance(p, ToolCall):
                assert (p.id, p.name, p.arguments) == (q.id, q.name, q.arguments)
            elif isinstance(p, ToolResult):
                assert (p.call_id, p.content) == (q.call_id, q.content)


def test_a_trace_without_content_is_refused_and_nothing_is_written(journal, tmp_path):
    run(journal, "hi", provider=ScriptedProvider([{"text": "hello"}]), conversation_id="c")
    path = tmp_path / "bare.json"
    path.write_text(export_conversation(journal, "c", "otlp"))
    before = [s.stream_id for s in journal.streams()]
    with pytest.raises(FormatError, match="no spans carrying messages"):
        import_file(journal, path)
    assert [s.stream_id for s in journal.streams()] == before


def test_two_traces_with_messages_are_refused(journal, tmp_path):
    msgs = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}])
    path = tmp_path / "two.json"
    path.write_text(json.dumps(_doc(_span("a", gen_ai__input__messages=msgs),
                                    _span("b", gen_ai__input__messages=msgs))))
    with pytest.raises(FormatError, match="2 traces"):
        import_file(journal, path)


def test_the_last_model_span_holds_the_history_and_structured_values_are_read(journal, tmp_path):
    first = _span(start=1, gen_ai__input__messages=json.dumps(
        [{"role": "user", "parts": [{"type": "text", "content": "old"}]}]))
    last = _span(start=5, **{"gen_ai__request__model": "gpt-x"})
    last["attributes"].append({"key": "gen_ai.input.messages", "value": {"arrayValue": {"values": [
        {"kvlistValue": {"values": [
            {"key": "role", "value": {"stringValue": "user"}},
            {"key": "parts", "value": {"arrayValue": {"values": [{"kvlistValue": {"values": [
                {"key": "type", "value": {"stringValue": "text"}},
                {"key": "content", "value": {"stringValue": "new question"}}]}}]}}}]}}]}}})
    last["attributes"].append(_kv("gen_ai.output.messages", json.dumps(
        [{"role": "assistant", "parts": [{"type": "text", "content": "answer"}],
          "finish_reason": "stop"}])))
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_doc(last, first)))
    result = import_file(journal, path, conversation_id="x")
    state = load_state(journal, "x")
    assert [m.parts[0].text for m in state.messages] == ["new question", "answer"]
    assert state.model == "gpt-x" and result.status == "completed"


@pytest.mark.parametrize("prefix", ["gen_ai.prompt", "llm.input_messages"])
def test_flattened_messages_of_langfuse_and_phoenix_import(journal, tmp_path, prefix):
    out = "gen_ai.completion" if prefix == "gen_ai.prompt" else "llm.output_messages"
    mid = "" if prefix == "gen_ai.prompt" else "message."
    attrs = [_kv(f"{prefix}.0.{mid}role", "system"), _kv(f"{prefix}.0.{mid}content", "Be kind."),
             _kv(f"{prefix}.1.{mid}role", "user"), _kv(f"{prefix}.1.{mid}content", "hi"),
             _kv(f"{out}.0.{mid}role", "assistant"), _kv(f"{out}.0.{mid}content", "hello")]
    span = {"traceId": "t", "spanId": "s", "name": "llm", "attributes": attrs}
    path = tmp_path / "flat.json"
    path.write_text(json.dumps(_doc(span)))
    import_file(journal, path, conversation_id="f")
    state = load_state(journal, "f")
    assert state.system == "Be kind."
    assert [(m.role, m.parts[0].text) for m in state.messages] == [("user", "hi"),
                                                                   ("assistant", "hello")]


def test_openinference_tool_calls_import(journal, tmp_path):
    p = "llm.input_messages"
    attrs = [_kv(f"{p}.0.message.role", "user"), _kv(f"{p}.0.message.content", "sum?"),
             _kv(f"{p}.1.message.role", "assistant"),
             _kv(f"{p}.1.message.tool_calls.0.tool_call.id", "c1"),
             _kv(f"{p}.1.message.tool_calls.0.tool_call.function.name", "add"),
             _kv(f"{p}.1.message.tool_calls.0.tool_call.function.arguments", '{"a":1,"b":2}'),
             _kv(f"{p}.2.message.role", "tool"), _kv(f"{p}.2.message.tool_call_id", "c1"),
             _kv(f"{p}.2.message.content", "3"),
             _kv("llm.output_messages.0.message.role", "assistant"),
             _kv("llm.output_messages.0.message.content", "It is 3."),
             _kv("llm.model_name", "gpt-oi")]
    path = tmp_path / "oi.json"
    path.write_text(json.dumps(_doc({"traceId": "t", "spanId": "s", "attributes": attrs})))
    import_file(journal, path, conversation_id="oi")
    messages = load_state(journal, "oi").messages
    call = messages[1].parts[0]
    assert isinstance(call, ToolCall) and (call.id, call.name, call.arguments) == (
        "c1", "add", {"a": 1, "b": 2})
    assert messages[2].parts[0].content == "3" and messages[3].parts[0].text == "It is 3."
    assert load_state(journal, "oi").model == "gpt-oi"  # OpenInference's llm.model_name


def test_a_malformed_message_is_refused_saying_where(journal, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_doc(_span(gen_ai__input__messages=json.dumps(["nope"])))))
    with pytest.raises(FormatError, match=r"gen_ai.input.messages\[0\]"):
        import_file(journal, path)
