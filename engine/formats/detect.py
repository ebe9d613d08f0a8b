"""Which format one transcript entry is in, decided from that entry alone.

>>> detect_entry({"role": "user", "content": "hi", "timestamp": "2025-08-27T21:40:00.000Z"})
'api'
>>> detect_entry({"role": "user", "content": "hi", "id": "m1"})  # a key no wire defines
'api'
>>> detect_entry({"role": "assistant", "content": "hi", "refusal": None})
'openai'
>>> detect_entry({"input": "draft claims", "context": "patent_streaming"})
'orchestrator'
>>> detect_entry({"role": "assistant", "content": "AI ACTION (Turn 1): Executing Add with parameters: a: 1"})
'datamachine'
>>> detect_entry({"role": "model", "parts": [{"text": "hi"}]})
'gemini'
>>> detect_entry({"what": 1}) is None
True

A list of text blocks (``[{"type": "text", "text": "hi"}]``) is valid for
both OpenAI and Anthropic and means the same in both; ``detect_entry``
answers ``anthropic`` for it and the importer lets it join a neighbouring
OpenAI run.

The shared rules below tell apart the wires whose shapes overlap (OpenAI's
two APIs, Anthropic, Gemini, and the plain role/content formats); an entry
they leave unrecognised goes to each wire of ``engine.providers.registry``
that says which entries are its own (``detect_entry``).
"""

from __future__ import annotations

from typing import Any

from turnlog.engine.model.events import EVENT_TYPES
from ..providers._responses_items import ITEM_TYPES as RESPONSES_ITEMS
from ..providers.registry import WIRES, wires
from .datamachine import duplicate_tool_name, extract_tool_call, extract_tool_response

__all__ = ["AMBIGUOUS_TEXT", "FORMATS", "PROVIDER_FORMATS", "detect_entry"]

#: Every entry format the importer reads.
FORMATS = ("api", "orchestrator", *WIRES, "datamachine", "turnlog")
#: The formats read with a provider's own ``unmap_messages``: the registry's wires.
PROVIDER_FORMATS = tuple(WIRES)
#: Marker for a text-block list both OpenAI and Anthropic accept.
AMBIGUOUS_TEXT = "anthropic?"

_API_KEYS = {"role", "content", "timestamp"}
_ORCH_KEYS = {"input", "context", "timestamp"}
_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking", "image",
                     "server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
                     "code_execution_tool_result", "bash_code_execution_tool_result",
                     "text_editor_code_execution_tool_result", "tool_search_tool_result",
                     "mcp_tool_use", "mcp_tool_result", "mcp_tool_listing", "container_upload",
                     "document", "search_result", "compaction", "advisor_tool_result",
                     "fallback"}
_OPENAI_PARTS = {"image_url", "input_audio", "refusal", "file"}
_RESPONSES_PARTS = {"input_text", "output_text", "input_image", "input_file"}
_OPENAI_KEYS = {"tool_calls", "tool_call_id", "name", "refusal", "function_call", "audio",
                "annotations", "reasoning_content", "reasoning", "reasoning_details",
                "thought_signature", "extra_content"}


def _content_list(content: list[Any]) -> str | None:
    if not all(isinstance(b, dict) for b in content):
        return None
    kinds = {b.get("type") if isinstance(b.get("type"), str) else None for b in content}
    if kinds & _ANTHROPIC_BLOCKS:
        return "anthropic"
    if kinds & _RESPONSES_PARTS:
        return "openai-responses"
    if kinds & _OPENAI_PARTS:
        return "openai"
    if kinds <= {"text"}:
        return AMBIGUOUS_TEXT
    return None


def _role_entry(entry: dict[str, Any]) -> str | None:
    role, content = entry.get("role"), entry.get("content")
    if role in ("tool", "developer", "function") and "parts" not in entry:
        return "openai"
    if role == "assistant" and (entry.keys() & _OPENAI_KEYS or content is None):
        return "openai"
    if role == "user" and "tool_call_id" in entry:
        return "openai"
    if isinstance(content, list):
        return _content_list(content)
    if not isinstance(content, str) or role not in ("user", "assistant", "system"):
        return None
    if (entry.keys() - _API_KEYS) & _OPENAI_KEYS:
        # a key of the OpenAI wire beside string content (its reader keeps the others as
        # `extra` and reports them); keys no wire has leave the entry as it was (`api`)
        return "openai"
    if (extract_tool_call(entry) or extract_tool_response(entry)
            or duplicate_tool_name(entry)):
        return "datamachine"
    return "api"


def detect_entry(entry: Any) -> str | None:
    """The format of ``entry`` (one of ``FORMATS``, or ``AMBIGUOUS_TEXT``), or ``None``."""
    if not isinstance(entry, dict):
        return None
    found = _shared(entry)
    if found is not None:
        return found
    for module in wires():
        claims = getattr(module, "detect_entry", None)
        if claims is not None and claims(entry):
            return str(module.NAME)
    return None


def _shared(entry: dict[str, Any]) -> str | None:
    kind = entry.get("type")
    if isinstance(kind, str) and kind in EVENT_TYPES and "role" not in entry:
        return "turnlog"
    if isinstance(kind, str) and kind in RESPONSES_ITEMS and "parts" not in entry:
        return "openai-responses"  # an input item of the OpenAI Responses API
    if "parts" in entry and "content" not in entry and entry.get("role") in (
            None, "user", "model", "function"):
        return "gemini"
    if "input" in entry and "role" not in entry:
        return "orchestrator" if entry.keys() <= _ORCH_KEYS else None
    if "role" in entry:
        return _role_entry(entry)
    return None
