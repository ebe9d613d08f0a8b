"""Import: every format in, mixed entries in one conversation, refused input leaves no trace."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from turnlog.engine.cli import cli
from turnlog.engine.model.conversation import load_state
from turnlog.engine.errors import (
    ConversationExistsError,
    FormatError,
    TranscriptOrderError,
    UnknownEntryError,
)
from turnlog.engine.model.events import ModelResponded, ToolCallRejected, ToolCompleted, UserMessage
from turnlog.engine.formats.exporter import lineage_events
from turnlog.engine.formats.importer import import_entries, import_file
from turnlog.engine.model.messages import Image, Text, Thinking, ToolCall, ToolResult
from turnlog.engine.loop.texts import duplicate_message
from tests.formats.test_context import MIXED


def snapshot(db_path):
    """The journal's bytes on disk: the database file and its WAL, if any."""
    wal = db_path.with_name(db_path.name + "-wal")
    return db_path.read_bytes(), wal.read_bytes() if wal.exists() else None


def events_of(journal, cid):
    return lineage_events(journal, cid)


def test_the_reference_mixed_history_imports_into_one_conversation_with_all_three(journal):
    result = import_entries(journal, MIXED, conversation_id="mixed")
    assert result.formats == {"api": 2, "orchestrator": 1}
    events = events_of(journal, "mixed")
    users = [e for e in events if type(e) is UserMessage]
    answers = [e for e in events if type(e) is ModelResponded]
    assert [u.parts[0].text for u in users] == [MIXED[0]["content"], MIXED[2]["input"]]
    assert users[1].context == "patent_streaming"
    assert answers[0].parts == (Text(text=MIXED[1]["content"]),) and answers[0].source == "imported"
    assert users[0].timestamp == "2025-08-27T21:40:00.000Z"
    assert answers[0].timestamp == "2025-08-27T21:43:00.000Z"
    rows = list(journal.read("mixed"))
    assert [r.recorded_at for r in rows[1:3]] == ["2025-08-27T21:40:00.000000Z",
                                                  "2025-08-27T21:43:00.000000Z"]
    assert load_state(journal, "mixed").lifecycle.value == "awaiting_model"


def test_a_transcript_ending_with_a_final_answer_is_completed(journal):
    result = import_entries(journal, [{"role": "system", "content": "Be brief."},
                                      {"role": "user", "content": "hi"},
                                      {"role": "assistant", "content": "hel"},
                                      {"role": "assistant", "content": "lo"}], conversation_id="c")
    state = load_state(journal, "c")
    assert result.status == "completed" and state.final_content == "hello"
    assert state.system == "Be brief." and state.turn_count == 1


def test_openai_messages_with_tool_calls_import_as_calls_and_results(journal):
    entries = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 21}'},
        {"role": "assistant", "content": "Sunny, 21C."},
    ]
    result = import_entries(journal, entries, conversation_id="o")
    assert result.formats == {"api": 3, "openai": 2}
    state = load_state(journal, "o")
    call = state.messages[1].parts[0]
    assert (call.id, call.name, call.arguments) == ("call_1", "get_weather", {"city": "Paris"})
    assert state.messages[2].parts[0] == ToolResult(call_id="call_1", name="get_weather",
                                                    content='{"temp_c": 21}')
    assert state.status == "completed" and state.system == "sys"


def _legacy_history(first_args: str, second_args: str) -> list[dict]:
    return [
        {"role": "user", "content": "weather in Paris, then Rome?"},
        {"role": "assistant", "content": None,
         "function_call": {"name": "get_weather", "arguments": first_args}},
        {"role": "function", "name": "get_weather", "content": "sunny"},
        {"role": "assistant", "content": None,
         "function_call": {"name": "get_weather", "arguments": second_args}},
        {"role": "function", "name": "get_weather", "content": "rain"},
        {"role": "assistant", "content": "Sunny, then rain."},
    ]


@pytest.mark.parametrize("second", ['{"city":"Rome"}', '{"city":"Paris"}'])
def test_legacy_function_calls_get_their_ids_from_the_one_id_rule(journal, second):
    """A pre-tools ``function_call`` has no id: ``legacy_<name>``, repeats made unique by
    ``assign_call_ids`` in order (the same ids on every import), each answered in order."""
    entries = _legacy_history('{"city":"Paris"}', second)
    import_entries(journal, entries, fmt="openai", conversation_id="a")
    import_entries(journal, entries, fmt="openai", conversation_id="b")
    events = events_of(journal, "a")
    calls = [p for e in events if type(e) is ModelResponded for p in e.parts
             if type(p) is ToolCall]
    assert [(c.id, c.provider_id, c.arguments["city"]) for c in calls] == [
        ("legacy_get_weather", None, "Paris"),
        ("legacy_get_weather_2", "legacy_get_weather", json.loads(second)["city"])]
    results = [(e.call_id, e.content) for e in events if type(e) is ToolCompleted]
    assert results == [("legacy_get_weather", "sunny"), ("legacy_get_weather_2", "rain")]
    assert events_of(journal, "b")[1:] == events[1:]  # deterministic from the transcript


def test_anthropic_blocks_import_with_thinking_images_and_batched_results(journal):
    entries = [
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image", "source": {"type": "base64",
                                                                  "media_type": "image/png",
                                                                  "data": "AAAA"}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1, "b": 2}},
            {"type": "tool_use", "id": "toolu_2", "name": "add", "input": {"a": 3, "b": 4}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "3"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "boom", "is_error": True}]},
    ]
    import_entries(journal, entries, conversation_id="a")
    events = events_of(journal, "a")
    assert events[1].parts == (Text(text="look"), Image(media_type="image/png", data="AAAA"))
    parts = events[2].parts
    assert type(parts[0]) is Thinking and parts[0].text == "hmm" and parts[0].signature == "sig"
    assert [p.arguments for p in parts if type(p) is ToolCall] == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    results = [e for e in events if type(e) is ToolCompleted]
    assert [(r.call_id, r.success, r.content) for r in results] == [
        ("toolu_1", True, "3"), ("toolu_2", False, "boom")]
    assert load_state(journal, "a").lifecycle.value == "awaiting_model"


def test_gemini_contents_import_with_function_calls_and_responses(journal):
    entries = [
        {"role": "user", "parts": [{"text": "add 2 and 3"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "add", "args": {"a": 2, "b": 3}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "add",
                                                         "response": {"output": "5"}}}]},
        {"role": "model", "parts": [{"text": "5"}]},
    ]
    result = import_entries(journal, entries, conversation_id="g")
    events = events_of(journal, "g")
    call = events[2].parts[0]
    done = next(e for e in events if type(e) is ToolCompleted)
    assert (call.name, call.arguments) == ("add", {"a": 2, "b": 3})
    assert (done.call_id, done.content, done.success) == (call.id, "5", True)
    assert result.status == "completed"


def test_data_machine_text_imports_as_calls_results_and_a_refused_duplicate(journal):
    entries = [
        {"role": "user", "content": "Search for WordPress"},
        {"role": "assistant", "content": "AI ACTION (Turn 1): Executing Google Search with "
                                         "parameters: query: WordPress, num_results: 5"},
        {"role": "user", "content": "TOOL RESPONSE (Turn 1): SUCCESS: Google Search completed "
                                    "successfully. The requested operation has been finished as "
                                    'requested.\n\n{"hits":2}'},
        {"role": "user", "content": duplicate_message("google_search")},
        {"role": "assistant", "content": "Found 2 results."},
    ]
    result = import_entries(journal, entries, conversation_id="dm")
    assert result.formats == {"api": 2, "datamachine": 3}
    events = events_of(journal, "dm")
    first, second = [e for e in events if type(e) is ModelResponded][:2]
    call = first.parts[0]
    assert (call.name, call.arguments) == ("google_search", {"query": "WordPress", "num_results": 5})
    done = next(e for e in events if type(e) is ToolCompleted)
    assert done.success and done.data == {"hits": 2}
    # the reference writes no AI ACTION for a refused duplicate: the call is the previous one again
    refused = next(e for e in events if type(e) is ToolCallRejected)
    assert refused.reason == "duplicate" and refused.arguments == call.arguments
    # ... and it joins the turn it follows, whose results it comes after
    assert [p.name for p in first.parts] == ["google_search", "google_search"]
    assert refused.call_id == first.parts[1].id
    assert second.parts == (Text(text="Found 2 results."),)
    assert result.status == "completed"


def test_data_machine_calls_of_one_turn_join_one_model_response(journal):
    entries = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "AI ACTION (Turn 1): Executing Add with parameters: a: 1"},
        {"role": "user", "content": "TOOL RESPONSE (Turn 1): SUCCESS: ok"},
        {"role": "assistant", "content": "AI ACTION (Turn 1): Executing Add with parameters: a: 2"},
        {"role": "user", "content": "TOOL RESPONSE (Turn 1): TOOL FAILED: add execution failed - no"},
        {"role": "assistant", "content": "AI ACTION (Turn 2): Executing Add with parameters: a: 3"},
    ]
    import_entries(journal, entries, conversation_id="t")
    responses = [e for e in events_of(journal, "t") if type(e) is ModelResponded]
    assert [len(r.parts) for r in responses] == [2, 1]
    assert [r.turn for r in responses] == [1, 2]
    failed = [e for e in events_of(journal, "t") if type(e) is ToolCompleted][1]
    assert not failed.success and failed.error == "no"
    assert load_state(journal, "t").lifecycle.value == "awaiting_tools"


def test_an_unknown_entry_is_refused_with_its_index_and_keys_and_nothing_is_written(db_path, journal):
    before = snapshot(db_path)
    with pytest.raises(UnknownEntryError) as info:
        import_entries(journal, [MIXED[0], {"speaker": "bot", "text": "hi"}], conversation_id="x")
    assert info.value.index == 1 and info.value.keys == ["speaker", "text"]
    assert "entry 1" in str(info.value) and "['speaker', 'text']" in str(info.value)
    assert snapshot(db_path) == before and list(journal.streams()) == []


def test_an_unknown_role_is_refused_naming_the_role(journal):
    with pytest.raises(UnknownEntryError, match=r"entry 0: .*role 'unknown'"):
        import_entries(journal, [{"role": "unknown", "content": "x"}])


def test_a_tool_result_with_no_matching_call_is_refused_with_the_entry_index(db_path, journal):
    before = snapshot(db_path)
    entries = [{"role": "user", "content": "hi"},
               {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                     "function": {"name": "f", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "c2", "content": "x"}]
    with pytest.raises(TranscriptOrderError, match="entry 2: .*'c2'") as info:
        import_entries(journal, entries, conversation_id="x")
    assert info.value.index == 2
    assert snapshot(db_path) == before


def test_a_user_message_while_calls_await_results_is_refused_with_its_index(journal):
    entries = [{"role": "user", "content": "hi"},
               {"role": "assistant", "content": "AI ACTION (Turn 1): Executing F with parameters: "},
               {"role": "user", "content": "next"}]
    with pytest.raises(TranscriptOrderError, match="entry 2") as info:
        import_entries(journal, entries)
    assert info.value.index == 2


def test_forcing_a_format_reads_every_entry_as_that_format(journal):
    text = "AI ACTION (Turn 1): Executing Add with parameters: a: 1"
    import_entries(journal, [{"role": "user", "content": "q"},
                             {"role": "assistant", "content": text}], fmt="api",
                   conversation_id="f")
    assert load_state(journal, "f").final_content == text
    with pytest.raises(UnknownEntryError, match="expected an orchestrator entry"):
        import_entries(journal, [{"role": "user", "content": "q"}], fmt="orchestrator")


def test_an_existing_conversation_id_is_refused(journal):
    import_entries(journal, [{"role": "user", "content": "q"}], conversation_id="same")
    with pytest.raises(ConversationExistsError):
        import_entries(journal, [{"role": "user", "content": "q"}], conversation_id="same")


def test_request_bodies_and_jsonl_files_are_read(tmp_path, journal):
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"system": "sys", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}]}))
    import_file(journal, body, conversation_id="b")
    assert load_state(journal, "b").system == "sys"
    lines = tmp_path / "t.jsonl"
    lines.write_text('{"role": "user", "content": "a"}\n\n{"role": "assistant", "content": "b"}\n')
    assert import_file(journal, lines, conversation_id="l").status == "completed"


def test_a_bad_jsonl_line_and_invalid_utf8_are_format_errors(tmp_path, journal):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "a"}\n{oops\n')
    with pytest.raises(FormatError, match="line 2"):
        import_file(journal, bad)
    raw = tmp_path / "raw.json"
    raw.write_bytes(b'[{"role": "user", "content": "\xff"}]')
    with pytest.raises(FormatError, match="not UTF-8"):
        import_file(journal, raw)


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_cli_import_prints_the_documented_json_fields(tmp_path, db_path):
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(MIXED))
    result = invoke("import", path, "--db", db_path, "--id", "m1", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["conversation_id"] == "m1" and data["events"] == 5
    assert data["formats"] == {"api": 2, "orchestrator": 1}


def test_cli_import_of_bad_input_exits_2_with_the_entry_index(tmp_path, db_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"role": "user", "content": "a"}, {"nope": 1}]))
    result = invoke("import", path, "--db", db_path)
    assert result.exit_code == 2 and "entry 1" in result.output and "nope" in result.output


def test_cli_export_then_import_as_a_subprocess(tmp_path, db_path):
    import os
    import subprocess

    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(MIXED))
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    run = [sys.executable, "-m", "turnlog.engine.cli", "--help"]
    assert subprocess.run(run, env=env, capture_output=True).returncode == 0
    assert invoke("import", path, "--db", db_path, "--id", "m").exit_code == 0
    out = tmp_path / "m.jsonl"
    result = invoke("export", "m", "--db", db_path, "--format", "jsonl", "-o", out)
    assert result.exit_code == 0, result.output
    again = subprocess.run([sys.executable, "-m", "turnlog.engine.cli", "import", str(out), "--db",
                            str(db_path), "--id", "m2", "--json"], env=env, capture_output=True,
                           text=True)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["events"] == 5
    assert lineage_events_equal(db_path, "m", "m2")


def lineage_events_equal(db_path, a, b):
    from turnlog.journal import Journal

    j = Journal(str(db_path))
    try:
        ea, eb = lineage_events(j, a), lineage_events(j, b)
        return ea[1:] == eb[1:] and [r.recorded_at for r in j.read(a)] == [
            r.recorded_at for r in j.read(b)]
    finally:
        j.close()


def test_cli_export_writes_every_format_and_refuses_an_unknown_conversation(tmp_path, db_path):
    path = tmp_path / "dm.json"
    path.write_text(json.dumps([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "AI ACTION (Turn 1): Executing Add with parameters: a: 1"},
        {"role": "user", "content": "TOOL RESPONSE (Turn 1): SUCCESS: ok"},
        {"role": "assistant", "content": "done"}]))
    assert invoke("import", path, "--db", db_path, "--id", "d").exit_code == 0
    dm = invoke("export", "d", "--db", db_path, "--format", "datamachine")
    assert dm.exit_code == 0 and json.loads(dm.output) == json.loads(path.read_text())
    openai = json.loads(invoke("export", "d", "--db", db_path, "--format", "openai").output)
    assert [m["role"] for m in openai["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert json.loads(invoke("export", "d", "--db", db_path, "--format", "gemini").output)["contents"]
    assert "## Assistant (turn 2)" in invoke("export", "d", "--db", db_path, "--format",
                                              "markdown").output
    lines = invoke("export", "d", "--db", db_path, "--format", "jsonl").output.splitlines()
    assert [json.loads(line)["type"] for line in lines][-1] == "conversation_completed"
    missing = invoke("export", "nope", "--db", db_path, "--format", "jsonl")
    assert missing.exit_code == 2 and "nope" in missing.output


def test_conversation_start_with_rest_writes_all_events_in_one_transaction_or_none(journal):
    from turnlog.engine.model.conversation import Conversation
    from turnlog.engine.errors import InvalidTransition
    from turnlog.engine.model.events import ConversationStarted

    started = ConversationStarted(conversation_id="s", provider="p", model="m")
    bad = ToolCompleted(call_id="x", name="f", success=True, content="ok")
    with pytest.raises(InvalidTransition):
        Conversation.start(journal, started, rest=[UserMessage.of("hi"), bad])
    assert list(journal.streams()) == []
    conv = Conversation.start(journal, started, "2025-01-01T00:00:00.000000Z",
                              rest=[UserMessage.of("hi")],
                              rest_recorded_at=["2025-01-02T00:00:00.000000Z"])
    assert conv.last_seq == 2
    assert [r.recorded_at for r in journal.read("s")] == ["2025-01-01T00:00:00.000000Z",
                                                         "2025-01-02T00:00:00.000000Z"]
