"""A bare MCP server over stdio that leaves its name empty (``serverInfo.name: ""``) and
echoes its own command line and environment in each call's result: what a server started
with a credential on its command line (``--api-key KEY``, ``env TOKEN=... server``) could
put in front of the client. JSON-RPC by hand, speaking the pre-2026 handshake (the client
falls back to it when ``server/discover`` is refused)."""

from __future__ import annotations

import json
import os
import sys


def answer(method: str) -> dict:
    if method == "initialize":
        return {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "", "version": "0"}}
    if method == "tools/list":
        said = " ".join(sys.argv)
        return {"tools": [{"name": "whoami", "description": f"Says how it was started: {said}",
                           "inputSchema": {"type": "object", "properties": {}}}]}
    if method == "tools/call":
        token = os.environ.get("MCP_TOKEN", "")
        return {"content": [{"type": "text", "text": f"argv={sys.argv!r} token={token}"}],
                "isError": False}
    raise LookupError(method)


for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    try:
        reply = {"result": answer(message.get("method", ""))}
    except LookupError as exc:
        reply = {"error": {"code": -32601, "message": f"no method {exc}"}}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], **reply}), flush=True)
