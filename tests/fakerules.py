"""The request rules the fake API server enforces, one checker per wire format.

Each ``check_*`` takes a request body (already JSON-decoded) and returns the
first broken rule as text, or ``None`` when the real API would accept the
request as far as turnlog's mapping is concerned. The rules are the ones the
real APIs answer with HTTP 400 (plus turnlog's own stricter ones, such as
merged same-role messages), so a request the fake accepts is one the
mapping got right.
"""

from __future__ import annotations

import functools
import re
import typing
from typing import Any

__all__ = ["check_anthropic", "check_bedrock", "check_gemini", "check_openai", "check_responses"]

_ID = re.compile(r"[a-zA-Z0-9_-]+")
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_ANTHROPIC_KEYS = {"model", "messages", "max_tokens", "system", "tools", "tool_choice",
                   "stop_sequences", "temperature", "top_p", "top_k", "metadata", "stream",
                   "thinking"}
_OPENAI_KEYS = {"model", "messages", "tools", "tool_choice", "temperature", "top_p",
                "max_completion_tokens", "max_tokens", "seed", "stop", "stream", "stream_options", "n",
                "parallel_tool_calls", "user", "response_format", "reasoning_effort"}
_GEMINI_KEYS = {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig",
                "safetySettings", "cachedContent"}
_GEMINI_DATA = {"text", "inlineData", "fileData", "functionCall", "functionResponse",
                "executableCode", "codeExecutionResult"}


def _blank(text: Any) -> bool:
    return not isinstance(text, str) or not text.strip()


def _anthropic_block(block: Any, role: str, at: str) -> str | None:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        return f"{at}: text content blocks must contain non-whitespace text" \
            if _blank(block.get("text")) else None
    if kind == "image":
        src = block.get("source") or {}
        ok = (src.get("type") == "base64" and src.get("media_type") and src.get("data")) or \
             (src.get("type") == "url" and src.get("url"))
        return None if ok and role == "user" else f"{at}: invalid image block"
    if kind in ("thinking", "redacted_thinking"):
        return None if role == "assistant" else f"{at}: thinking only in assistant messages"
    if kind == "tool_use":
        if role != "assistant":
            return f"{at}: tool_use only in assistant messages"
        if not isinstance(block.get("id"), str) or not _ID.fullmatch(block["id"]):
            return f"{at}.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
        if not isinstance(block.get("input"), dict) or not isinstance(block.get("name"), str):
            return f"{at}: tool_use needs a name and an object input"
        return None
    if kind == "tool_result":
        if role != "user":
            return f"{at}: tool_result only in user messages"
        if not isinstance(block.get("tool_use_id"), str) or not _ID.fullmatch(block["tool_use_id"]):
            return f"{at}.tool_use_id: String should match pattern '^[a-zA-Z0-9_-]+$'"
        content = block.get("content", "")
        if not isinstance(content, (str, list)) or not isinstance(block.get("is_error", False), bool):
            return f"{at}: invalid tool_result"
        return None
    return _anthropic_sdk_block(block, at)


def _anthropic_sdk_block(block: Any, at: str) -> str | None:
    """Any other block the Messages API defines (server tools, documents ...), per its SDK."""
    from anthropic.types.beta import BetaContentBlockParam
    from pydantic import TypeAdapter, ValidationError

    global _BLOCK_ADAPTER
    if _BLOCK_ADAPTER is None:
        _BLOCK_ADAPTER = TypeAdapter(BetaContentBlockParam)
    try:
        _BLOCK_ADAPTER.validate_python(block)
    except ValidationError:
        return f"{at}: unknown content block type {block.get('type')!r}"
    return None


_BLOCK_ADAPTER: Any = None


def _anthropic_tool_turn(messages: list[Any], i: int) -> str | None:
    """Every tool_use of assistant message i is answered first thing in message i+1."""
    uses = [b["id"] for b in messages[i]["content"]
            if isinstance(b, dict) and b.get("type") == "tool_use"]
    if len(set(uses)) != len(uses):
        return f"messages.{i}: tool_use ids must be unique"
    if not uses:
        return None
    nxt = messages[i + 1]["content"] if i + 1 < len(messages) else None
    if not isinstance(nxt, list):
        return (f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(uses)}")
    results = [b.get("tool_use_id") for b in nxt if b.get("type") == "tool_result"]
    leading = [b.get("tool_use_id") for b in nxt[:len(results)] if b.get("type") == "tool_result"]
    if leading != results:
        return f"messages.{i + 1}: tool_result blocks must come first in the user message"
    missing = [u for u in uses if u not in results]
    extra = [r for r in results if r not in uses]
    if missing:
        return (f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(missing)}")
    if extra or len(set(results)) != len(results):
        return f"messages.{i + 1}: unexpected `tool_use_id` in `tool_result` blocks: {extra}"
    return None


def check_anthropic(body: Any) -> str | None:
    """The first Messages API rule ``body`` breaks, or ``None``."""
    if not isinstance(body, dict):
        return "body must be a JSON object"
    if extra := sorted(set(body) - _ANTHROPIC_KEYS):
        return f"{extra[0]}: Extra inputs are not permitted"
    if not isinstance(body.get("model"), str) or not isinstance(body.get("max_tokens"), int):
        return "model and max_tokens are required"
    system = body.get("system", "")
    if not isinstance(system, (str, list)):
        return "system: must be a string or a list of text blocks"
    for t in body.get("tools", []):
        if not _TOOL_NAME.fullmatch(str(t.get("name"))) or \
                (t.get("input_schema") or {}).get("type") != "object":
            return f"tools: invalid tool {t.get('name')!r}"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    seen: set[str] = set()
    for i, msg in enumerate(messages):
        role, content = msg.get("role"), msg.get("content")
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if i and messages[i - 1].get("role") == role:
            return f"messages.{i}: consecutive {role} messages must be merged"
        if isinstance(content, str):
            if _blank(content):
                return f"messages.{i}: content must be non-empty"
            continue
        if not isinstance(content, list) or not content:
            return f"messages.{i}: content must be a non-empty list"
        for j, block in enumerate(content):
            if problem := _anthropic_block(block, role, f"messages.{i}.content.{j}"):
                return problem
            if block.get("type") == "tool_use":
                if block["id"] in seen:
                    return f"messages.{i}.content.{j}: `tool_use` ids must be unique: {block['id']}"
                seen.add(block["id"])
        if role == "assistant" and (problem := _anthropic_tool_turn(messages, i)):
            return problem
        if role == "user" and any(b.get("type") == "tool_result" for b in content):
            prev = messages[i - 1]["content"] if i else []
            prev = prev if isinstance(prev, list) else []
            uses = {b.get("id") for b in prev if isinstance(b, dict)}
            orphan = [b["tool_use_id"] for b in content
                      if b.get("type") == "tool_result" and b["tool_use_id"] not in uses]
            if orphan:
                return (f"messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{orphan[0]}. Each `tool_result` block must have a corresponding "
                        f"`tool_use` block in the previous message.")
    if messages[0]["role"] != "user":
        return "messages.0: the first message must use the user role"
    return None


def _openai_assistant(msg: dict[str, Any], at: str) -> tuple[str | None, list[str]]:
    calls = msg.get("tool_calls")
    content = msg.get("content")
    if calls is None:
        # an assistant audio reply (referenced by its id) stands in for content
        if (content is None or content == "") and not isinstance(msg.get("audio"), dict):
            return f"{at}: assistant content is required when there are no tool_calls", []
        return None, []
    if not isinstance(calls, list) or not calls:
        return f"{at}.tool_calls: empty array; omit it instead", []
    if content == "":
        return f"{at}: content must be null, not an empty string, when tool_calls are given", []
    ids = []
    for k, call in enumerate(calls):
        fn = call.get("function") or {}
        if call.get("type") != "function" or not isinstance(call.get("id"), str) or \
                not 0 < len(call["id"]) <= 40:
            return (f"{at}.tool_calls[{k}]: a function call needs an id of 1 to 40 "
                    f"characters and type 'function'"), []
        if not _TOOL_NAME.fullmatch(str(fn.get("name"))) or not isinstance(fn.get("arguments"), str):
            return f"{at}.tool_calls[{k}].function: arguments must be a JSON string", []
        if call["id"] in ids:
            return f"{at}.tool_calls[{k}]: duplicate tool call id {call['id']!r}", []
        ids.append(call["id"])
    return None, ids


def _openai_content(content: Any, at: str) -> str | None:
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        return f"{at}.content: must be a string or an array of parts"
    for k, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            continue
        if kind == "image_url" and isinstance((part.get("image_url") or {}).get("url"), str):
            continue
        if kind in ("file", "input_audio") and _openai_sdk_part(part):
            continue
        return f"{at}.content[{k}]: invalid content part"
    return None


def _openai_sdk_part(part: Any) -> bool:
    """Whether ``part`` is a content part the Chat Completions SDK defines (file, audio)."""
    from openai.types.chat import ChatCompletionContentPartParam
    from pydantic import TypeAdapter, ValidationError

    try:
        TypeAdapter(ChatCompletionContentPartParam).validate_python(part)
    except ValidationError:
        return False
    return True


def check_openai(body: Any) -> str | None:
    """The first Chat Completions rule ``body`` breaks, or ``None``."""
    if not isinstance(body, dict):
        return "body must be a JSON object"
    if extra := sorted(set(body) - _OPENAI_KEYS):
        return f"Unrecognized request argument supplied: {extra[0]}"
    messages = body.get("messages")
    if not isinstance(body.get("model"), str) or not isinstance(messages, list) or not messages:
        return "model and a non-empty messages array are required"
    for t in body.get("tools", []):
        name = (t.get("function") or {}).get("name")
        if t.get("type") != "function" or not _TOOL_NAME.fullmatch(str(name)):
            return "tools: invalid function tool"
    pending: list[str] = []
    for i, msg in enumerate(messages):
        role, at = msg.get("role"), f"messages[{i}]"
        if role == "tool":
            call_id = msg.get("tool_call_id")
            if call_id not in pending:
                return (f"Invalid parameter: {at}: messages with role 'tool' must be a response "
                        f"to a preceeding message with 'tool_calls'.")
            pending.remove(call_id)
            if not isinstance(msg.get("content"), str):
                return f"{at}.content: a tool result must be a string"
            continue
        if pending:
            return (f"An assistant message with 'tool_calls' must be followed by tool messages "
                    f"responding to each 'tool_call_id'. The following tool_call_ids did not "
                    f"have response messages: {', '.join(pending)}")
        if role == "assistant":
            problem, pending = _openai_assistant(msg, at)
            if problem:
                return problem
        elif role in ("system", "developer", "user"):
            if problem := _openai_content(msg.get("content"), at):
                return problem
        else:
            return f"{at}.role: invalid role {role!r}"
    if pending:
        return ("An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. Missing: {', '.join(pending)}")
    return None


def _gemini_part(part: Any, role: str, at: str) -> str | None:
    if not isinstance(part, dict):
        return f"{at}: a part must be an object"
    data = [k for k in part if k in _GEMINI_DATA]
    if len(data) != 1 or set(part) - _GEMINI_DATA - {"thought", "thoughtSignature"}:
        return f"{at}: a part must have exactly one data field, got {sorted(part)}"
    kind = data[0]
    text = part.get("text")
    # the real API takes an empty user text (an empty message), not an empty model text
    if kind == "text" and (not isinstance(text, str) or (
            not text and not part.get("thought") and role != "user")):
        return f"{at}.text: must be a non-empty string"
    if kind == "functionCall":
        fc = part["functionCall"]
        if role != "model" or not isinstance(fc.get("name"), str) or \
                not isinstance(fc.get("args", {}), dict):
            return f"{at}.functionCall: needs role model, a name and object args"
    if kind == "functionResponse":
        fr = part["functionResponse"]
        if role != "user" or not isinstance(fr.get("name"), str) or \
                not isinstance(fr.get("response"), dict):
            return f"{at}.functionResponse: needs role user, a name and an object response"
    return None


def _gemini_turn(contents: list[Any], i: int) -> str | None:
    """functionResponse parts answer the previous model turn's calls, by name and order."""
    prev = contents[i - 1]["parts"] if i and contents[i - 1].get("role") == "model" else []
    calls = [p["functionCall"]["name"] for p in prev if "functionCall" in p]
    parts = contents[i]["parts"] if contents[i].get("role") == "user" else []
    answers = [p["functionResponse"]["name"] for p in parts if "functionResponse" in p]
    leading = [p["functionResponse"]["name"] for p in parts[:len(answers)] if "functionResponse" in p]
    if answers != calls or leading != answers:
        return (f"contents[{i}]: Please ensure that the number of function response parts is "
                f"equal to the number of function call parts of the function call turn, in "
                f"order (calls {calls}, responses {answers}).")
    return None


# Gemini's Schema: "a select subset of an OpenAPI 3.0 schema object" (generativelanguage
# v1beta Schema). ``default`` is refused as older API versions did.
_GEMINI_SCHEMA = {"type", "format", "title", "description", "nullable", "enum", "maxItems",
                  "minItems", "properties", "required", "minProperties", "maxProperties",
                  "minLength", "maxLength", "pattern", "example", "anyOf", "propertyOrdering",
                  "items", "minimum", "maximum"}
_GEMINI_TYPES = {"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"}
_GEMINI_FORMATS = {"STRING": {"enum", "date-time"}, "NUMBER": {"float", "double"},
                   "INTEGER": {"int32", "int64"}}
_GEMINI_COUNTS = {"maxItems", "minItems", "minProperties", "maxProperties", "minLength",
                  "maxLength"}


def _gemini_count(value: Any) -> bool:
    return (type(value) is int or (isinstance(value, str) and value.isdigit()))


def _gemini_schema_problem(schema: Any, at: str) -> str | None:
    """The first thing in ``schema`` the real API refuses, in its words, or ``None``."""
    if not isinstance(schema, dict):
        return f"Invalid value at '{at}': expected a Schema object"
    for key in schema:
        if key not in _GEMINI_SCHEMA:
            return f"Invalid JSON payload received. Unknown name \"{key}\" at '{at}': Cannot find field."
    kind = schema.get("type")
    if isinstance(kind, list):
        return (f"Invalid JSON payload received. Unknown name \"type\" at '{at}': Proto field "
                "is not repeating, cannot start list.")
    if kind is not None and (not isinstance(kind, str) or kind.upper() not in _GEMINI_TYPES):
        return f"Invalid value at '{at}.type': {kind!r}"
    kind = kind.upper() if isinstance(kind, str) else None
    props = schema.get("properties")
    if props is not None and not isinstance(props, dict):
        return f"Invalid value at '{at}.properties': expected a map of Schema"
    if kind == "OBJECT" and not props:
        return f"{at}.properties: should be non-empty for OBJECT type"
    if kind == "ARRAY" and "items" not in schema:
        return f"{at}.items: missing field."
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return f"Invalid value at '{at}.required': expected a list of strings"
    for i, name in enumerate(required):
        if name not in (props or {}):
            return f"{at}.required[{i}]: property is not defined"
    enum = schema.get("enum")
    if enum is not None and (not isinstance(enum, list)
                             or not all(isinstance(v, str) for v in enum)):
        return f"Invalid value at '{at}.enum': enum values must be strings"
    fmt = schema.get("format")
    if fmt is not None and kind in _GEMINI_FORMATS and fmt not in _GEMINI_FORMATS[kind]:
        return f"{at}.format: only {sorted(_GEMINI_FORMATS[kind])} are supported for {kind} type"
    for key in _GEMINI_COUNTS & set(schema):
        if not _gemini_count(schema[key]):
            return f"Invalid value at '{at}.{key}': expected an int64"
    for key in ("minimum", "maximum"):
        if key in schema and (type(schema[key]) not in (int, float)):
            return f"Invalid value at '{at}.{key}': expected a number"
    if "nullable" in schema and not isinstance(schema["nullable"], bool):
        return f"Invalid value at '{at}.nullable': expected a bool"
    subs = [(f"{at}.properties[{name}]", sub) for name, sub in (props or {}).items()]
    if "items" in schema:
        subs.append((f"{at}.items", schema["items"]))
    any_of = schema.get("anyOf")
    if any_of is not None:
        if not isinstance(any_of, list):
            return f"Invalid value at '{at}.anyOf': expected a list"
        subs.extend((f"{at}.any_of[{i}]", sub) for i, sub in enumerate(any_of))
    for where, sub in subs:
        if problem := _gemini_schema_problem(sub, where):
            return problem
    return None


_GEMINI_DECLARATION = {"name", "description", "parameters", "parametersJsonSchema", "response",
                       "responseJsonSchema", "behavior"}


def _gemini_declaration(d: Any, at: str) -> str | None:
    if not isinstance(d, dict) or not _TOOL_NAME.fullmatch(str(d.get("name"))):
        return f"{at}.name: invalid function declaration name"
    for key in d:
        if key not in _GEMINI_DECLARATION:
            return f"Invalid JSON payload received. Unknown name \"{key}\" at '{at}': Cannot find field."
    if "parameters" in d:
        return _gemini_schema_problem(d["parameters"], f"{at}.parameters")
    return None


def check_gemini(body: Any) -> str | None:
    """The first ``generateContent`` rule ``body`` breaks, or ``None``."""
    if not isinstance(body, dict):
        return "body must be a JSON object"
    if extra := sorted(set(body) - _GEMINI_KEYS):
        return f'Invalid JSON payload received. Unknown name "{extra[0]}"'
    si = body.get("systemInstruction")
    if si is not None and (not isinstance(si, dict) or
                           not all("text" in p for p in si.get("parts", [None]))):
        return "systemInstruction: must hold text parts"
    for t, tool in enumerate(body.get("tools", [])):
        for i, d in enumerate(tool.get("functionDeclarations", [None])):
            if problem := _gemini_declaration(
                    d, f"GenerateContentRequest.tools[{t}].function_declarations[{i}]"):
                return problem

    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return "contents is not specified"
    for i, content in enumerate(contents):
        role, parts = content.get("role"), content.get("parts")
        if role not in ("user", "model"):
            return f"contents[{i}].role: Please use a valid role: user, model."
        if i and contents[i - 1].get("role") == role:
            return f"contents[{i}]: consecutive {role} contents must be merged"
        if not isinstance(parts, list) or not parts:
            return f"contents[{i}].parts: must not be empty"
        for j, part in enumerate(parts):
            if problem := _gemini_part(part, role, f"contents[{i}].parts[{j}]"):
                return problem
        if problem := _gemini_turn(contents, i):
            return problem
    last = contents[-1]
    if last["role"] == "model" and any("functionCall" in p for p in last["parts"]):
        return "the last function call turn has no function response turn after it"
    return None


_RESPONSES_KEYS = {"model", "input", "instructions", "tools", "tool_choice", "max_output_tokens",
                   "temperature", "top_p", "store", "include", "parallel_tool_calls",
                   "reasoning", "text", "stream", "user"}


def _responses_item(item: Any, at: str) -> str | None:
    kind = item.get("type", "message") if isinstance(item, dict) else None
    if kind == "message":
        content = item.get("content")
        if item.get("role") not in ("user", "assistant", "system", "developer"):
            return f"{at}.role: invalid role"
        if isinstance(content, str):
            return None if content else f"{at}.content: must not be empty"
        if not isinstance(content, list) or not content:
            return f"{at}.content: must be a string or a non-empty array"
        for k, c in enumerate(content):
            ok = (c.get("type") in ("input_text", "output_text") and isinstance(c.get("text"), str)) \
                or (c.get("type") == "input_image" and isinstance(c.get("image_url"), str)) \
                or (c.get("type") == "input_image" and isinstance(c.get("file_id"), str)) \
                or (c.get("type") == "input_file" and any(
                    isinstance(c.get(key), str) for key in ("file_id", "file_data", "file_url")))
            if not ok or (item["role"] == "assistant" and c.get("type") == "input_image"):
                return f"{at}.content[{k}]: invalid content"
        return None
    if kind == "function_call":
        if not isinstance(item.get("call_id"), str) or not item["call_id"] or \
                not isinstance(item.get("arguments"), str) or \
                not _TOOL_NAME.fullmatch(str(item.get("name"))):
            return f"{at}: a function_call needs call_id, name and string arguments"
        return None
    if kind == "function_call_output":
        if not isinstance(item.get("call_id"), str) or not isinstance(item.get("output"), str):
            return f"{at}: a function_call_output needs call_id and string output"
        return None
    if kind in _sdk_item_types():
        return None  # a built-in tool's item: its shape is the SDK check's (sdk_problem) to judge
    return f"{at}.type: invalid input item type {kind!r}"


@functools.cache
def _sdk_item_types() -> frozenset[str]:
    """The ``type`` of every member of the SDK's ``ResponseInputItemParam`` union."""
    from openai.types.responses import ResponseInputItemParam

    kinds = set()
    for member in typing.get_args(ResponseInputItemParam):
        hint = typing.get_type_hints(member, include_extras=True).get("type")
        kinds.update(a for a in typing.get_args(_unwrap(hint)) if isinstance(a, str))
    return frozenset(kinds)


def _unwrap(hint: Any) -> Any:
    """``Literal[...]`` from ``Required[Literal[...]]`` and the like."""
    while hint is not None and typing.get_origin(hint) is not typing.Literal and typing.get_args(hint):
        hint = typing.get_args(hint)[0]
    return hint


def _strict_problem(schema: Any, at: str) -> str | None:
    """Why a strict function schema is refused (every object closed, every property required)."""
    if not isinstance(schema, dict):
        return None
    props = schema.get("properties")
    if schema.get("type") == "object" or isinstance(props, dict):
        if schema.get("additionalProperties") is not False:
            return f"In context={at}, 'additionalProperties' is required to be supplied and to be false"
        if sorted(schema.get("required", [])) != sorted(props or {}):
            return f"In context={at}, 'required' is required to include every key in properties"
    subs = [*(props or {}).values(), schema.get("items"), *(schema.get("anyOf") or [])]
    return next((p for sub in subs if (p := _strict_problem(sub, at))), None)


def check_responses(body: Any) -> str | None:
    """The first Responses API rule ``body`` breaks, or ``None``."""
    if not isinstance(body, dict):
        return "body must be a JSON object"
    if extra := sorted(set(body) - _RESPONSES_KEYS):
        return f"Unknown parameter: '{extra[0]}'."
    items = body.get("input")
    if not isinstance(body.get("model"), str) or not isinstance(items, list) or not items:
        return "model and a non-empty input array are required"
    for i, t in enumerate(body.get("tools", [])):
        if t.get("type") != "function" or not _TOOL_NAME.fullmatch(str(t.get("name"))):
            return "tools: invalid function tool"
        if t.get("strict", True) is not False and (problem := _strict_problem(
                t.get("parameters") or {}, f"tools[{i}].parameters")):
            return f"Invalid schema for function '{t.get('name')}' (strict by default): {problem}"
    calls: list[str] = []
    outputs: list[str] = []
    for i, item in enumerate(items):
        if problem := _responses_item(item, f"input[{i}]"):
            return problem
        if item.get("type") == "function_call":
            if item["call_id"] in calls:
                return f"input[{i}]: duplicate call_id {item['call_id']}"
            calls.append(item["call_id"])
        if item.get("type") == "function_call_output":
            if item["call_id"] not in calls or item["call_id"] in outputs:
                return (f"No tool call found for function call output with call_id "
                        f"{item['call_id']}.")
            outputs.append(item["call_id"])
    missing = [c for c in calls if c not in outputs]
    if missing:
        return f"No tool output found for function call {missing[0]}."
    return None


# --- Amazon Bedrock Converse ---------------------------------------------------------

_BEDROCK_ID = re.compile(r"[a-zA-Z0-9_.:-]{1,64}")


def _bedrock_texts(value: Any) -> list[str]:
    """Every ``text`` string in ``value`` (blocks, tool results), depth first."""
    if isinstance(value, list):
        return [t for v in value for t in _bedrock_texts(v)]
    if not isinstance(value, dict):
        return []
    own = [value["text"]] if isinstance(value.get("text"), str) else []
    return own + [t for k, v in value.items() if k not in ("json", "input")
                  for t in _bedrock_texts(v)]


def check_bedrock(body: Any) -> str | None:
    """The first Converse rule ``body`` breaks (the ``ValidationException`` text), or ``None``."""
    if not isinstance(body, dict):
        return "body must be a JSON object"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    if any(_blank(t) for t in _bedrock_texts([body.get("system"), messages])):
        return "The text field in the ContentBlock object is blank. Add text to the text field, and try again."
    tool_blocks = False
    for i, msg in enumerate(messages):
        role, content = msg.get("role"), msg.get("content")
        if i and messages[i - 1].get("role") == role:
            return ("A conversation must alternate between user and assistant roles. "
                    f"messages.{i} repeats {role!r}")
        if not isinstance(content, list) or not content:
            return f"messages.{i}.content: at least one content block is required"
        uses, results = [], []
        for j, block in enumerate(content):
            if not isinstance(block, dict) or len(block) != 1:
                return f"messages.{i}.content.{j}: a content block has exactly one member"
            if "toolUse" in block:
                uses.append(block["toolUse"].get("toolUseId"))
            if "toolResult" in block:
                results.append(block["toolResult"].get("toolUseId"))
        tool_blocks = tool_blocks or bool(uses or results)
        for tool_id in uses + results:
            if not isinstance(tool_id, str) or not _BEDROCK_ID.fullmatch(tool_id):
                return f"messages.{i}: toolUseId {tool_id!r} does not match [a-zA-Z0-9_.:-]{{1,64}}"
        if role == "assistant" and uses:
            following = messages[i + 1]["content"] if i + 1 < len(messages) else None
            if following is not None:
                answered = [b["toolResult"].get("toolUseId") for b in following
                            if isinstance(b, dict) and "toolResult" in b]
                if sorted(answered) != sorted(uses):
                    return (f"messages.{i + 1}: The number of toolResult blocks exceeds or "
                            f"falls short of the toolUse blocks of the previous turn")
        if role == "user" and results:
            prev = messages[i - 1]["content"] if i else []
            asked = {b["toolUse"].get("toolUseId") for b in prev if "toolUse" in b}
            if orphan := [r for r in results if r not in asked]:
                return f"messages.{i}: toolResult {orphan[0]!r} answers no toolUse of the previous turn"
    if messages[0].get("role") != "user":
        return "A conversation must start with a user message. Try again with a conversation that starts with a user message."
    if tool_blocks and not (body.get("toolConfig") or {}).get("tools"):
        return "The toolConfig field must be defined when using toolUse and toolResult content blocks."
    return None
