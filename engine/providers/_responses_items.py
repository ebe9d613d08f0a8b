"""The item types of the OpenAI Responses API's input, as turnlog reads them.

A module of its own, without the SDK: the importer's format detection needs
the names and must not import ``openai`` to get them. The catalogue test
(``tests/formats/test_sdk_catalogue.py``) checks ``ITEM_TYPES`` against the
SDK's ``ResponseInputItemParam`` union, so a new item type fails it until handled.
"""

from __future__ import annotations

__all__ = ["ASSISTANT_ITEMS", "ITEM_TYPES", "USER_ITEMS"]

#: Input item types the model's side produces that turnlog cannot run or re-create (server
#: tools, built-in client tools, MCP listings): kept verbatim as ``Opaque`` parts of the
#: assistant turn, sent back as they were to this wire, as marked text to others.
ASSISTANT_ITEMS = frozenset({
    "file_search_call", "web_search_call", "code_interpreter_call", "image_generation_call",
    "mcp_call", "mcp_list_tools", "mcp_approval_request", "tool_search_call", "computer_call",
    "local_shell_call", "shell_call", "apply_patch_call", "custom_tool_call", "program"})
#: Input item types the client sends (outputs of built-in tools, approvals, compacted
#: context, references): kept verbatim as ``Opaque`` parts of a user message.
USER_ITEMS = frozenset({
    "computer_call_output", "local_shell_call_output", "shell_call_output",
    "apply_patch_call_output", "custom_tool_call_output", "mcp_approval_response",
    "tool_search_output", "program_output", "additional_tools", "configuration_update",
    "compaction", "compaction_trigger", "item_reference"})
#: Every item type of this wire turnlog reads (``ResponseInputItemParam``'s union).
ITEM_TYPES = frozenset({"message", "function_call", "function_call_output", "reasoning"}
                       | ASSISTANT_ITEMS | USER_ITEMS)
