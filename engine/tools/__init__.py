"""Tools and what guards their calls.

- ``registry``: the ``@tool`` decorator, the ``Tool`` it builds and the ``ToolRegistry``;
- ``executor``: the tool-execution seam, how the loop gets a call's outcome;
- ``calls``, ``duplicates``: one neutral id per call, and the duplicate-call rule;
- ``approvals``: human approval of tool calls, recorded in the journal;
- ``mcp``: tools from MCP servers.

>>> from turnlog.engine.tools import tool, ToolRegistry
"""

from turnlog._lazy import export

#: What this package re-exports, by the module that defines it (imported on first use).
_EXPORTS = {
    ".registry": ("INJECTED", "Tool", "ToolContext", "ToolRegistry", "tool"),
}

__all__ = export(__name__, _EXPORTS)
