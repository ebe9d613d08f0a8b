"""Transcript formats: import, export, the Data Machine text projection and context summaries.

- ``importer``: ``import_file`` / ``import_entries`` — any supported format,
  mixed entries, one atomic conversation;
- ``exporter``: ``export_conversation`` — openai, anthropic, gemini, jsonl,
  datamachine, markdown;
- ``datamachine``: the reference's text messages, rendered and parsed
  byte-exact, and its text duplicate rule;
- ``context``: the reference's conversation-context summary.
"""

from .context import ContextLimits, build_context, context_entries
from .datamachine import (
    Truncated,
    extract_tool_call,
    extract_tool_response,
    format_tool_call_message,
    format_tool_result_message,
    render_events,
    validate_tool_call,
)
from .detect import FORMATS, detect_entry
from .exporter import EXPORT_FORMATS, export_conversation, export_data, lineage_events
from .importer import ImportResult, import_entries, import_file, read_transcript

__all__ = [
    "EXPORT_FORMATS",
    "FORMATS",
    "ContextLimits",
    "ImportResult",
    "Truncated",
    "build_context",
    "context_entries",
    "detect_entry",
    "export_conversation",
    "export_data",
    "extract_tool_call",
    "extract_tool_response",
    "format_tool_call_message",
    "format_tool_result_message",
    "import_entries",
    "import_file",
    "lineage_events",
    "read_transcript",
    "render_events",
    "validate_tool_call",
]
