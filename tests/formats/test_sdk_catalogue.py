"""Every message, content and part type the installed SDKs define is read by turnlog.

The catalogue is generated from the SDKs' own typed unions (Anthropic's
``ContentBlock``/``ContentBlockParam`` and their beta versions, OpenAI's
``ChatCompletionContentPartParam``, ``ChatCompletionMessageParam``, the
assistant message's fields and tool call types), so an SDK release that adds
a type fails ``test_the_catalogue_covers_every_sdk_type`` until a sample of it
imports here (or it is listed in ``UNHANDLED`` with a reason). Gemini has no
SDK installed (turnlog speaks its REST API through httpx): its ``Part`` fields
are a hand list from the REST reference (``Part``: text, inlineData,
functionCall, functionResponse, fileData, executableCode,
codeExecutionResult, thought, thoughtSignature, videoMetadata,
mediaResolution, partMetadata, toolCall, toolResponse).

Each sample is first validated against the SDK's request type (so it is a
real shape), then imported, and must come back in the export to its own wire.
"""

from __future__ import annotations

import json
from typing import Any, Literal, get_args, get_origin, get_type_hints

import pytest
from pydantic import TypeAdapter

from turnlog.engine.formats.exporter import export_data
from turnlog.engine.formats.importer import import_entries
from turnlog.journal import Journal

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def _members(union: Any) -> list[type]:
    out: list[type] = []
    for arg in get_args(union):
        if arg in (str, type(None)):  # a plain-text alternative, or an optional member
            continue
        if isinstance(arg, type):
            out.append(arg)
        elif get_args(arg):
            out.extend(_members(arg))
    return out


def _literal(annotation: Any) -> tuple[str, ...]:
    while get_origin(annotation) is not Literal:
        args = get_args(annotation)
        if not args:
            return ()
        annotation = args[0]
    return get_args(annotation)


def _tags(union: Any, field: str = "type") -> set[str]:
    """The values of ``field`` (a ``Literal``) over the members of an SDK union."""
    tags: set[str] = set()
    for cls in _members(union):
        if hasattr(cls, "model_fields"):
            tags.update(_literal(cls.model_fields[field].annotation))
        else:
            tags.update(_literal(get_type_hints(cls, include_extras=True)[field]))
    return tags


def _keys(cls: Any) -> set[str]:
    return set(cls.model_fields) if hasattr(cls, "model_fields") else set(get_type_hints(cls))


def sdk_catalogue() -> set[str]:
    """``wire:name`` for every type and field the installed SDKs define."""
    import anthropic.types as a
    import anthropic.types.beta as b
    import openai.types.chat as o

    names = {f"anthropic:{t}" for u in (a.ContentBlock, a.ContentBlockParam, b.BetaContentBlock,
                                        b.BetaContentBlockParam) for t in _tags(u)}
    names |= {f"openai:part:{t}" for t in _tags(o.ChatCompletionContentPartParam)}
    names |= {f"openai:role:{r}" for r in _tags(o.ChatCompletionMessageParam, "role")}
    names |= {f"openai:assistant:{k}" for k in _keys(o.ChatCompletionAssistantMessageParam)
              | _keys(o.ChatCompletionMessage)}
    names |= {f"openai:assistant-part:{t}" for t in _tags(
        get_type_hints(o.ChatCompletionAssistantMessageParam)["content"])}
    names |= {f"openai:tool-call:{t}" for t in _tags(o.ChatCompletionMessageToolCallUnionParam)}
    return names


#: The Gemini REST ``Part`` fields (no SDK installed: a hand list from the reference).
GEMINI_PART_FIELDS = {
    "text", "inlineData", "functionCall", "functionResponse", "fileData", "executableCode",
    "codeExecutionResult", "thought", "thoughtSignature", "videoMetadata", "mediaResolution",
    "partMetadata", "toolCall", "toolResponse"}

#: Types turnlog does not import, with the reason. Empty: every type has a sample below.
UNHANDLED: dict[str, str] = {}

_SRV = "srvtoolu_01"


def _anthropic(block: dict[str, Any], role: str = "assistant") -> list[dict[str, Any]]:
    if role == "user":
        return [{"role": "user", "content": [block]}]
    return [{"role": "user", "content": "go"}, {"role": "assistant", "content": [block]}]


_ANTHROPIC_BLOCKS: dict[str, tuple[dict[str, Any], str]] = {
    "text": ({"type": "text", "text": "hi", "citations": [{
        "type": "char_location", "cited_text": "g", "document_index": 0,
        "document_title": None, "start_char_index": 0, "end_char_index": 1}]}, "assistant"),
    "image": ({"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                           "data": PNG}}, "user"),
    "document": ({"type": "document", "title": "t", "context": "c", "citations": {"enabled": True},
                  "source": {"type": "text", "media_type": "text/plain", "data": "grass"}}, "user"),
    "search_result": ({"type": "search_result", "source": "https://x.test", "title": "t",
                       "content": [{"type": "text", "text": "c"}]}, "user"),
    "thinking": ({"type": "thinking", "thinking": "hm", "signature": "c2ln"}, "assistant"),
    "redacted_thinking": ({"type": "redacted_thinking", "data": "ZGF0YQ=="}, "assistant"),
    "tool_use": ({"type": "tool_use", "id": "toolu_01", "name": "f", "input": {"a": 1}},
                 "assistant"),
    "tool_result": ({"type": "tool_result", "tool_use_id": "toolu_01", "content": "ok"}, "user"),
    "server_tool_use": ({"type": "server_tool_use", "id": _SRV, "name": "web_search",
                         "input": {"query": "q"}}, "assistant"),
    "web_search_tool_result": ({"type": "web_search_tool_result", "tool_use_id": _SRV,
                                "content": []}, "assistant"),
    "web_fetch_tool_result": ({"type": "web_fetch_tool_result", "tool_use_id": _SRV, "content": {
        "type": "web_fetch_tool_result_error", "error_code": "url_not_accessible"}}, "assistant"),
    "code_execution_tool_result": ({"type": "code_execution_tool_result", "tool_use_id": _SRV,
                                    "content": {"type": "code_execution_result", "stdout": "1",
                                                "stderr": "", "return_code": 0, "content": []}},
                                   "assistant"),
    "bash_code_execution_tool_result": ({"type": "bash_code_execution_tool_result",
                                         "tool_use_id": _SRV, "content": {
                                             "type": "bash_code_execution_result", "stdout": "1",
                                             "stderr": "", "return_code": 0, "content": []}},
                                        "assistant"),
    "text_editor_code_execution_tool_result": ({
        "type": "text_editor_code_execution_tool_result", "tool_use_id": _SRV, "content": {
            "type": "text_editor_code_execution_tool_result_error",
            "error_code": "unavailable"}}, "assistant"),
    "tool_search_tool_result": ({"type": "tool_search_tool_result", "tool_use_id": _SRV,
                                 "content": {"type": "tool_search_tool_search_result",
                                             "tool_references": []}}, "assistant"),
    "container_upload": ({"type": "container_upload", "file_id": "file_01"}, "user"),
    "mcp_tool_use": ({"type": "mcp_tool_use", "id": "mcptoolu_01", "name": "ask",
                      "server_name": "wiki", "input": {}}, "assistant"),
    "mcp_tool_result": ({"type": "mcp_tool_result", "tool_use_id": "mcptoolu_01",
                         "is_error": False, "content": "ok"}, "assistant"),
    "mcp_tool_listing": ({"type": "mcp_tool_listing", "mcp_server_name": "wiki",
                          "tools": []}, "assistant"),
    "advisor_tool_result": ({"type": "advisor_tool_result", "tool_use_id": _SRV, "content": {
        "type": "advisor_tool_result_error", "error_code": "unavailable"}}, "assistant"),
    "compaction": ({"type": "compaction", "content": "summary so far"}, "assistant"),
    "fallback": ({"type": "fallback", "from": {"model": "claude-opus-4-7"},
                  "to": {"model": "claude-sonnet-4-6"}}, "assistant"),
    "tool_addition": ({"type": "tool_addition", "tool": {
        "type": "tool_reference", "tool_name": "f"}}, "user"),
    "tool_removal": ({"type": "tool_removal", "tool": {
        "type": "tool_reference", "tool_name": "f"}}, "user"),
}


def _anthropic_sample(kind: str) -> list[dict[str, Any]]:
    block, role = _ANTHROPIC_BLOCKS[kind]
    entries = _anthropic(block, role)
    if kind == "tool_result":
        entries = _anthropic(_ANTHROPIC_BLOCKS["tool_use"][0]) + entries
    return entries


def _openai_user(part: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [part]}]


def _openai_assistant(**fields: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "go"}, {"role": "assistant", **fields}]


_CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
_OPENAI: dict[str, list[dict[str, Any]]] = {
    "part:text": _openai_user({"type": "text", "text": "hi"}),
    "part:image_url": _openai_user({"type": "image_url", "image_url": {
        "url": f"data:image/png;base64,{PNG}", "detail": "low"}}),
    "part:input_audio": _openai_user({"type": "input_audio", "input_audio": {
        "data": "UklGRg==", "format": "wav"}}),
    "part:file": _openai_user({"type": "file", "file": {"file_id": "file-1"}}),
    "role:developer": [{"role": "developer", "content": "be brief"},
                       {"role": "user", "content": "hi"}],
    "role:system": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
    "role:user": [{"role": "user", "content": "hi", "name": "ann"}],
    "role:assistant": _openai_assistant(content="hello"),
    "role:tool": _openai_assistant(content=None, tool_calls=[_CALL]) + [
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"}],
    "role:function": _openai_assistant(content=None, function_call={
        "name": "f", "arguments": "{}"}) + [{"role": "function", "name": "f", "content": "ok"}],
    "assistant:role": _openai_assistant(content="hello"),
    "assistant:content": _openai_assistant(content="hello"),
    "assistant:name": _openai_assistant(content="hello", name="bot"),
    "assistant:refusal": _openai_assistant(content=None, refusal="I can't help with that."),
    "assistant:audio": _openai_assistant(content=None, audio={"id": "audio_1"}),
    "assistant:annotations": _openai_assistant(content="see x", annotations=[{
        "type": "url_citation", "url_citation": {"url": "https://x.test", "title": "x",
                                                 "start_index": 0, "end_index": 5}}]),
    "assistant:tool_calls": _openai_assistant(content=None, tool_calls=[_CALL]) + [
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"}],
    "assistant:function_call": _openai_assistant(content=None, function_call={
        "name": "f", "arguments": "{}"}),
    "assistant-part:text": _openai_assistant(content=[{"type": "text", "text": "hello"}]),
    "assistant-part:refusal": _openai_assistant(content=[
        {"type": "refusal", "refusal": "I can't help with that."}]),
    "tool-call:function": _openai_assistant(content=None, tool_calls=[_CALL]),
    # a custom (free-text) tool call is kept whole, as a call marked invalid (never run):
    # the export carries it in the call's arguments, not as a `custom` call
    "tool-call:custom": _openai_assistant(content=None, tool_calls=[{
        "id": "call_2", "type": "custom", "custom": {"name": "grep", "input": "a.*b"}}]),
}
#: A field of the response message that the request type does not carry.
_RESPONSE_ONLY = {"assistant:annotations"}

_GEMINI_CALL = {"functionCall": {"name": "f", "args": {"a": 1}, "id": "fc1"}}
_GEMINI: dict[str, list[dict[str, Any]]] = {
    "text": [{"role": "user", "parts": [{"text": "hi"}]}],
    "inlineData": [{"role": "user", "parts": [{"inlineData": {"mimeType": "image/png",
                                                              "data": PNG}}]}],
    "fileData": [{"role": "user", "parts": [{"fileData": {"mimeType": "application/pdf",
                                                          "fileUri": "gs://b/x.pdf"}}]}],
    "videoMetadata": [{"role": "user", "parts": [{"fileData": {
        "mimeType": "video/mp4", "fileUri": "gs://b/v.mp4"}, "videoMetadata": {
        "startOffset": "1s", "endOffset": "2s"}}]}],
    "mediaResolution": [{"role": "user", "parts": [{"inlineData": {
        "mimeType": "image/png", "data": PNG}, "mediaResolution": {"level": "MEDIA_RESOLUTION_LOW"}}]}],
    "partMetadata": [{"role": "user", "parts": [{"text": "hi", "partMetadata": {"k": "v"}}]}],
    "functionCall": [{"role": "user", "parts": [{"text": "go"}]},
                     {"role": "model", "parts": [_GEMINI_CALL]}],
    "functionResponse": [{"role": "user", "parts": [{"text": "go"}]},
                         {"role": "model", "parts": [_GEMINI_CALL]},
                         {"role": "user", "parts": [{"functionResponse": {
                             "name": "f", "id": "fc1", "response": {"return_value": 2}}}]}],
    "thought": [{"role": "user", "parts": [{"text": "go"}]},
                {"role": "model", "parts": [{"text": "hm", "thought": True}, {"text": "ok"}]}],
    "thoughtSignature": [{"role": "user", "parts": [{"text": "go"}]},
                         {"role": "model", "parts": [{**_GEMINI_CALL, "thoughtSignature": "c2ln"}]}],
    "executableCode": [{"role": "user", "parts": [{"text": "go"}]},
                       {"role": "model", "parts": [{"executableCode": {
                           "language": "PYTHON", "code": "print(1)"}}]}],
    "codeExecutionResult": [{"role": "user", "parts": [{"text": "go"}]},
                            {"role": "model", "parts": [{"codeExecutionResult": {
                                "outcome": "OUTCOME_OK", "output": "1"}}]}],
    "toolCall": [{"role": "user", "parts": [{"text": "go"}]},
                 {"role": "model", "parts": [{"toolCall": {"name": "google_search"}}]}],
    "toolResponse": [{"role": "user", "parts": [{"text": "go"}]},
                     {"role": "model", "parts": [{"toolCall": {"name": "google_search"}},
                                                 {"toolResponse": {"name": "google_search"}}]}],
}

SAMPLES: dict[str, tuple[str, list[dict[str, Any]]]] = {
    **{f"anthropic:{k}": ("anthropic", _anthropic_sample(k)) for k in _ANTHROPIC_BLOCKS},
    **{f"openai:{k}": ("openai", v) for k, v in _OPENAI.items()},
    **{f"gemini:{k}": ("gemini", v) for k, v in _GEMINI.items()},
}


def test_the_catalogue_covers_every_sdk_type():
    catalogue = sdk_catalogue() | {f"gemini:{f}" for f in GEMINI_PART_FIELDS}
    assert not set(UNHANDLED) & set(SAMPLES)
    assert sorted(catalogue - set(SAMPLES) - set(UNHANDLED)) == [], "a type with no sample"
    assert sorted(set(SAMPLES) - catalogue) == [], "a sample of a type the SDKs do not define"


def _validate(name: str, wire: str, entries: list[dict[str, Any]]) -> None:
    """The sample is a shape the SDK's request types accept."""
    if wire == "anthropic":
        from anthropic.types.beta import BetaMessageParam

        TypeAdapter(list[BetaMessageParam]).validate_python(entries)
    elif wire == "openai" and name not in _RESPONSE_ONLY:
        from openai.types.chat import ChatCompletionMessageParam

        TypeAdapter(list[ChatCompletionMessageParam]).validate_python(entries)


def _marker(name: str) -> str:
    """What the sample's export to its own wire must still contain."""
    field = name.rsplit(":", 1)[1]
    return {"openai:role:developer": "be brief", "openai:role:system": "be brief",
            "openai:role:user": "hi", "openai:part:text": "hi",
            "openai:assistant-part:text": "hello",
            # a refusal is the assistant's text; a legacy function_call goes back as a
            # tool call (its id from the one id rule), the form every current server takes
            "openai:assistant:refusal": "I can't help", "openai:assistant-part:refusal": "I can't",
            "openai:assistant:function_call": '"legacy_f"'}.get(name, field)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_sample_of_each_type_imports_and_goes_back_to_its_wire(name):
    wire, entries = SAMPLES[name]
    _validate(name, wire, entries)
    journal = Journal(":memory:")
    import_entries(journal, entries, fmt=wire, conversation_id="c")
    exported = json.dumps(export_data(journal, "c", wire))
    assert _marker(name) in exported, exported


def test_every_responses_input_item_type_of_the_sdk_is_one_turnlog_reads():
    from openai.types.responses import ResponseInputItemParam

    from turnlog.engine.providers._responses_items import ASSISTANT_ITEMS, ITEM_TYPES, USER_ITEMS

    assert _tags(ResponseInputItemParam) == ITEM_TYPES
    assert not ASSISTANT_ITEMS & USER_ITEMS


def _responses_items() -> list[str]:
    from turnlog.engine.providers._responses_items import ASSISTANT_ITEMS, USER_ITEMS

    return sorted(ASSISTANT_ITEMS | USER_ITEMS)


@pytest.mark.parametrize("kind", _responses_items())
def test_a_built_in_responses_item_goes_back_verbatim_and_to_others_as_marked_text(kind):
    item = {"type": kind, "id": f"{kind}_1", "status": "completed", "detail": "é"}
    entries = [{"role": "user", "content": "go"}, item,
               {"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "done", "annotations": []}]}]
    journal = Journal(":memory:")
    import_entries(journal, entries, fmt="openai-responses", conversation_id="c")
    back = export_data(journal, "c", "openai-responses")["input"]
    assert item in back, back
    for other in ("openai", "anthropic", "gemini"):
        exported = json.dumps(export_data(journal, "c", other), ensure_ascii=False)
        assert f"[openai-responses {kind}: " in exported and f"{kind}_1" in exported
