"""Real recorded traffic (``tests/data/corpus``, see its SOURCES) imports, exports and swaps.

Every file imports (or is refused with the precise error listed in
``REFUSED``); every tool call the file holds is kept; every provider export
validates against the SDK's request message types (Bedrock's: botocore's service model) and is accepted by the
fake API server; the jsonl export re-imports to equal events; and the
history, swapped to each provider, is a request the fake server accepts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from turnlog.engine.model.conversation import load_state
from turnlog.engine.errors import FormatError
from turnlog.engine.model.events import ModelResponded
from turnlog.engine.formats.cassette import split_document
from turnlog.engine.formats.exporter import export_conversation, export_data, lineage_events
from turnlog.engine.formats.importer import import_entries, import_file, read_transcript
from turnlog.engine.model.messages import ToolCall
from turnlog.journal import Journal
from tests.fakeapi import FakeAPI, reply
from tests.formats.test_export_fakeapi import post
from turnlog.engine.providers.base import ModelRequest
from tests.providerkit import make_provider
from tests.sdktypes import bedrock_problem

CORPUS = Path(__file__).parent.parent / "data" / "corpus"
FILES = sorted(p for p in CORPUS.iterdir() if p.suffix in (".json", ".jsonl"))

_ALONE = "a response body alone is not a conversation"
#: Files refused on purpose, with the error that says why.
REFUSED = {
    "anthropic-response-programmatic-tool-calling-caller.json": _ALONE,
    "anthropic-response-tool-search-tool-result.json": _ALONE,
    "openai-refusal-structured-output.json": _ALONE,
}
#: The wires every imported transcript is exported to and checked on.
WIRES = ("openai", "openai-responses", "anthropic", "gemini", "bedrock")
_ADAPTERS = {}


def adapter(provider: str) -> TypeAdapter:
    """The SDK's request message type for ``provider``, as a pydantic adapter."""
    if provider not in _ADAPTERS:
        if provider == "openai":
            from openai.types.chat import ChatCompletionMessageParam as T
        elif provider == "openai-responses":
            from openai.types.responses import ResponseInputItemParam as T
        else:
            from anthropic.types.beta import BetaMessageParam as T
        _ADAPTERS[provider] = TypeAdapter(list[T])
    return _ADAPTERS[provider]


def wire_calls(value: Any) -> int:
    """Tool calls in a file's entries: tool_use blocks, tool_calls items, functionCall parts."""
    if isinstance(value, list):
        return sum(wire_calls(v) for v in value)
    if not isinstance(value, dict):
        return 0
    own = int(value.get("type") == "tool_use")
    own += int(value.get("type") == "function_call" and isinstance(value.get("name"), str))
    own += sum(1 for k in ("functionCall", "function_call")
               if isinstance(value.get(k), dict) and value[k].get("name"))
    calls = value.get("tool_calls")
    own += len(calls) if isinstance(calls, list) else 0
    return own + sum(wire_calls(v) for k, v in value.items()
                     if k not in ("tool_calls", "input", "args", "functionCall", "function_call"))


@pytest.fixture(scope="module")
def fake():
    with FakeAPI() as server:
        yield server


def test_the_corpus_is_there_with_its_sources():
    assert len(FILES) >= 40
    sources = (CORPUS / "SOURCES").read_text()
    missing = [p.name for p in FILES if p.name not in sources]
    assert missing == []


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_a_real_transcript_imports_exports_and_swaps(path, fake):
    journal = Journal(":memory:")
    refused_before = len(fake.refusals())
    if path.name in REFUSED:
        with pytest.raises(FormatError, match=REFUSED[path.name].replace("(", r"\(")
                           .replace(")", r"\)").replace("`", "`")):
            import_file(journal, path, conversation_id="c")
        return
    import_file(journal, path, conversation_id="c")
    events = lineage_events(journal, "c")
    entries, _ = read_transcript(path.read_bytes())
    kept = sum(1 for e in events if type(e) is ModelResponded
               for p in e.parts if type(p) is ToolCall)
    assert kept == wire_calls(entries), "every tool call is kept"
    doc = json.loads(path.read_text(encoding="utf-8")) if path.suffix == ".json" else None
    if isinstance(doc, dict) and isinstance(doc.get("response"), (dict, list)) and \
            split_document(doc)[1].get("usage"):  # a cassette's response usage is on its turn
        assert load_state(journal, "c").usage.total_tokens > 0
    for provider in WIRES:
        data = export_data(journal, "c", provider)
        if provider == "bedrock":  # botocore's service model: the messages and system shapes
            assert bedrock_problem(data["messages"], shape="Messages") is None
            assert bedrock_problem(data.get("system", []), shape="SystemContentBlocks") is None
        elif provider != "gemini":  # no Gemini SDK is installed: the fake's rules check it
            adapter(provider).validate_python(data.get("messages", data.get("input")))
        response = post(fake, provider, data)
        assert response.status_code == 200, (provider, response.text)
    lines = [json.loads(line) for line in export_conversation(journal, "c", "jsonl").splitlines()]
    import_entries(journal, lines, conversation_id="again")
    assert lineage_events(journal, "again")[1:] == events[1:]
    state = load_state(journal, "c")
    for provider in WIRES:
        fake.script(provider, [reply(provider, text="ok")])
        make_provider(provider, fake).complete(ModelRequest(
            model="fake-model", system=state.system, messages=tuple(state.messages),
            parameters={"max_tokens": 64}))
    assert fake.refusals()[refused_before:] == []


def test_responses_server_tool_calls_are_counted_apart_by_the_audit(tmp_path):
    from turnlog.engine.audit.sql import EVENTS
    from turnlog.engine.audit import audit
    from turnlog.engine.audit.views import EXTENSIONS, connect_readonly

    db = str(tmp_path / "j.db")
    with Journal(db, extensions=EXTENSIONS) as journal:
        import_file(journal, CORPUS / "openai-responses-web-search-call-citations.json",
                    conversation_id="w")
        import_file(journal, CORPUS / "openai-responses-mcp-call.json", conversation_id="m")
    conn = connect_readonly(db)
    try:
        by_projection, by_events = audit(conn), audit(conn, source=EVENTS)
    finally:
        conn.close()
    assert by_projection["source"] == "projections"
    assert by_projection["server_tools"] == by_events["server_tools"] == [
        {"kind": "mcp_call", "tool": "ask_question", "calls": 1},
        {"kind": "web_search_call", "tool": "web_search_call", "calls": 6}]
    assert by_projection["tools"] == {}  # none of them is a client tool turnlog ran


def _results(journal: Journal, cid: str) -> tuple[list[tuple[str, bool]], list[str], list[str]]:
    """(tool_completed (name, success)s, rejected call names, pending call names)."""
    from turnlog.engine.model.events import ToolCallRejected, ToolCompleted

    events = lineage_events(journal, cid)
    done = [(e.name, e.success) for e in events if type(e) is ToolCompleted]
    rejected = [e.name for e in events if type(e) is ToolCallRejected]
    return done, rejected, [c.name for c in load_state(journal, cid).pending_calls]


@pytest.mark.parametrize("path", [p for p in FILES if p.name not in REFUSED],
                         ids=[p.name for p in FILES if p.name not in REFUSED])
def test_an_export_never_invents_a_result_for_a_call_that_has_none(path):
    """Issue 25, 21: a pending call is exported with a placeholder result (every API refuses an
    unanswered call); importing the export leaves it pending, never a recorded result."""
    journal = Journal(":memory:")
    import_file(journal, path, conversation_id="c")
    before = _results(journal, "c")
    for wire in WIRES:
        entries, envelope = read_transcript(export_conversation(journal, "c", wire).encode())
        import_entries(journal, entries, conversation_id=wire, envelope=envelope)
        assert _results(journal, wire) == before, wire


def test_a_placeholder_before_more_history_is_an_unrecorded_call_not_a_result():
    from turnlog.engine.model.events import ToolCallRejected, ToolCompleted
    from turnlog.engine.loop.texts import UNANSWERED

    journal = Journal(":memory:")
    import_entries(journal, [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "a", "type": "function",
         "function": {"name": "weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": UNANSWERED},
        {"role": "assistant", "content": "I could not find out."}], conversation_id="c")
    events = lineage_events(journal, "c")
    assert not [e for e in events if type(e) is ToolCompleted]
    (rejected,) = [e for e in events if type(e) is ToolCallRejected]
    assert (rejected.call_id, rejected.reason, rejected.content) == ("a", "unrecorded", UNANSWERED)
    assert load_state(journal, "c").status == "completed"


@pytest.mark.parametrize("path", [p for p in FILES if p.name not in REFUSED],
                         ids=[p.name for p in FILES if p.name not in REFUSED])
def test_a_content_trace_of_an_imported_conversation_carries_arguments_and_inputs(path):
    """Issue 25, 19: an import records no model_requested and no tool_started; its --content
    trace still has each call's arguments and each answer's input messages."""
    from turnlog.engine.model.events import ToolCallRejected, ToolCompleted, UserMessage

    journal = Journal(":memory:")
    import_file(journal, path, conversation_id="c")
    events = lineage_events(journal, "c")
    calls = {p.id: p.arguments for e in events if type(e) is ModelResponded
             for p in e.parts if type(p) is ToolCall}
    spans = [s for rs in export_data(journal, "c", "otlp", content=True)["resourceSpans"]
             for ss in rs["scopeSpans"] for s in ss["spans"]]
    attrs = [(s["name"], {a["key"]: a["value"] for a in s["attributes"]}) for s in spans]
    tools = [a for name, a in attrs if name.startswith("execute_tool ")]
    answers = [a for _, a in attrs
               if a["gen_ai.operation.name"]["stringValue"] in ("chat", "generate_content")]
    assert len(tools) == sum(type(e) in (ToolCompleted, ToolCallRejected) for e in events)
    assert len(answers) == sum(type(e) is ModelResponded for e in events)
    for a in tools:
        call_id = a["gen_ai.tool.call.id"]["stringValue"]
        assert json.loads(a["gen_ai.tool.call.arguments"]["stringValue"]) == calls[call_id]
    users = [e for e in events if type(e) is UserMessage]
    for a in answers:
        inputs = json.loads(a["gen_ai.input.messages"]["stringValue"])
        assert inputs or not users, "an answer's input is the history before it"
