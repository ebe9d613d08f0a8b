"""An MCP server for the tests, written with the SDK's FastMCP (``MCPServer`` in mcp 2).

``python tests/mcp/server.py`` serves it over stdio; ``--http PORT`` over
streamable HTTP. ``TURNLOG_TEST_MCP_LOG`` names a file each call appends a line to
(so a test can tell whether the server ran).
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("testserver")


def _log(line: str) -> None:
    path = os.environ.get("TURNLOG_TEST_MCP_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(city: str) -> str:
    """Look up a city's weather."""
    _log(f"lookup {city}")
    return f"{city}: sunny, 21 C"


@server.tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=False))
def set_flag(name: str, value: bool) -> dict:
    """Set a named flag (the same call twice is harmless)."""
    _log(f"set_flag {name} {value}")
    return {"name": name, "value": value}


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def delete_file(path: str) -> str:
    """Delete a file (pretend)."""
    _log(f"delete_file {path}")
    return f"deleted {path}"


@server.tool()
def fail(reason: str) -> str:
    """Always fails with ``reason``."""
    raise ValueError(reason)


@server.tool()
def die() -> str:
    """Kill the server process mid-call."""
    _log("die")
    os._exit(3)


@server.tool()
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "slept"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
