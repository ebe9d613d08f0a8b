"""An MCP server for the tests, written with the SDK's FastMCP (``MCPServer`` in mcp 2).

``python tests/mcp/server.py`` serves it over stdio; ``--http PORT`` over
streamable HTTP. ``TURNLOG_TEST_MCP_LOG`` names a file each call appends a line to
(so a test can tell whether the server ran).

Besides plain tools it has what MCP 2026-07-28 adds: a tool with an output schema
(``reading``: its schema caps ``celsius`` at 60, so ``Hell`` returns a result that does not
validate), a tool that asks for input (``confirm_delete``: an ``input_required`` result
carrying an elicitation), a tool run as a task (``long_job``: the Tasks extension,
``io.modelcontextprotocol/tasks``, built on the SDK's ``Extension``: ``tools/call`` answers
with ``resultType: "task"``, ``tasks/get`` and ``tasks/cancel`` follow it), and, over HTTP, a
tool whose first answer never arrives (``flaky``: the response stream is cut after its
headers, as a proxy dropping the connection would).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from datetime import datetime, timezone
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import (
    CLIENT_CAPABILITIES_META_KEY,
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    RequestParams,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel, Field

TASKS = "io.modelcontextprotocol/tasks"


class TaskParams(RequestParams):
    """``tasks/get`` and ``tasks/cancel`` params: the task's id."""

    taskId: str


class Tasks(Extension):
    """The Tasks extension (SEP-2663) for ``long_job``: a call answers with a task handle,
    the job runs on, ``tasks/get`` reports its state (with the result once completed)."""

    identifier = TASKS

    def __init__(self) -> None:
        self.tasks: dict[str, dict[str, Any]] = {}

    def methods(self) -> list[MethodBinding]:
        return [MethodBinding("tasks/get", TaskParams, self.get),
                MethodBinding("tasks/cancel", TaskParams, self.cancel),
                MethodBinding("tasks/update", UpdateParams, self.update)]

    async def intercept_tool_call(self, params, ctx: ServerRequestContext, call_next):
        caps = (ctx.meta or {}).get(CLIENT_CAPABILITIES_META_KEY) or {}
        if params.name not in ("long_job", "gated_job") \
                or TASKS not in (caps.get("extensions") or {}):
            return await call_next(ctx)
        if params.name == "gated_job":
            return self._start_gated(str((params.arguments or {}).get("what", "")))
        steps = int((params.arguments or {}).get("steps", 3))
        task_id = uuid.uuid4().hex
        now = _now()
        task = self.tasks[task_id] = {"taskId": task_id, "status": "working", "createdAt": now,
                                      "lastUpdatedAt": now, "ttlMs": 600000,
                                      "pollIntervalMs": 50, "statusMessage": "started"}
        _log(f"long_job {steps} task")
        asyncio.get_running_loop().create_task(self._run(task, steps))
        return {"resultType": "task", **task}

    async def _run(self, task: dict[str, Any], steps: int) -> None:
        for i in range(steps):
            await asyncio.sleep(float(os.environ.get("TURNLOG_TEST_TASK_STEP", "0.1")))
            if task["status"] == "cancelled":
                return
            task.update(statusMessage=f"step {i + 1} of {steps}", lastUpdatedAt=_now())
        text = f"job of {steps} steps done"
        task.update(status="completed", statusMessage="done", lastUpdatedAt=_now(),
                    result={"content": [{"type": "text", "text": text}],
                            "structuredContent": {"result": text}, "isError": False,
                            "resultType": "complete"})
        _log(f"long_job {steps} done")

    def _start_gated(self, what: str) -> dict[str, Any]:
        """A task that stops to ask (``input_required``, an elicitation) and goes on when
        ``tasks/update`` brings the answer."""
        task_id = uuid.uuid4().hex
        now = _now()
        task = self.tasks[task_id] = {
            "taskId": task_id, "status": "input_required", "createdAt": now,
            "lastUpdatedAt": now, "ttlMs": 600000, "pollIntervalMs": 50,
            "statusMessage": "waiting for approval",
            "inputRequests": {"approve": {"method": "elicitation/create", "params": {
                "mode": "form", "message": f"Run {what}?",
                "requestedSchema": {"type": "object", "properties": {}}}}}}
        _log(f"gated_job {what} task")
        return {"resultType": "task", **{k: v for k, v in task.items()
                                         if k != "inputRequests"}, "status": "working"}

    async def update(self, ctx: ServerRequestContext, params: UpdateParams) -> dict[str, Any]:
        task = self.tasks[params.taskId]
        answer = (params.inputResponses or {}).get("approve") or {}
        ran = answer.get("action") == "accept"
        text = "ran" if ran else f"not run ({answer.get('action')})"
        task.pop("inputRequests", None)
        task.update(status="completed", statusMessage=text, lastUpdatedAt=_now(),
                    result={"content": [{"type": "text", "text": text}],
                            "structuredContent": {"result": text}, "isError": False,
                            "resultType": "complete"})
        _log(f"gated_job {text}")
        return {"resultType": "complete"}

    async def get(self, ctx: ServerRequestContext, params: TaskParams) -> dict[str, Any]:
        task = self.tasks.get(params.taskId)
        if task is None:
            from mcp.shared.exceptions import MCPError

            raise MCPError(-32602, f"no task {params.taskId}")
        return {"resultType": "complete", **task}

    async def cancel(self, ctx: ServerRequestContext, params: TaskParams) -> dict[str, Any]:
        task = self.tasks[params.taskId]
        if task["status"] == "working":
            task.update(status="cancelled", statusMessage="cancelled by the client",
                        lastUpdatedAt=_now())
        return {"resultType": "complete"}


class UpdateParams(RequestParams):
    """``tasks/update`` params: the task's id and the answers to its input requests."""

    taskId: str
    inputResponses: dict[str, Any] | None = None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


server = MCPServer("testserver", extensions=[Tasks()])


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


class Reading(BaseModel):
    """A temperature reading; the schema says no reading exceeds 60 C."""

    city: str
    celsius: float = Field(json_schema_extra={"maximum": 60})


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def reading(city: str) -> Reading:
    """A city's temperature, as structured output."""
    _log(f"reading {city}")
    return Reading(city=city, celsius=99.0 if city == "Hell" else 21.5)


@server.tool()
def confirm_delete(path: str, ctx: Context) -> str | InputRequiredResult:
    """Delete a file after the user confirms (an elicitation)."""
    answers = ctx.input_responses or {}
    if "confirm" not in answers:
        _log(f"confirm_delete {path} ask")
        return InputRequiredResult(
            input_requests={"confirm": ElicitRequest(params=ElicitRequestFormParams(
                message=f"Really delete {path}?",
                requested_schema={"type": "object", "properties": {
                    "sure": {"type": "boolean"}}, "required": ["sure"]}))},
            request_state=f"asked:{path}")
    answer = answers["confirm"]
    assert isinstance(answer, ElicitResult)
    if answer.action == "accept" and (answer.content or {}).get("sure"):
        _log(f"confirm_delete {path} deleted")
        return f"deleted {path}"
    _log(f"confirm_delete {path} kept ({answer.action})")
    return f"kept {path}"


@server.tool()
def long_job(steps: int) -> str:
    """A long job (run as a task when the client speaks the Tasks extension)."""
    _log(f"long_job {steps} inline")
    return f"job of {steps} steps done"


@server.tool()
def gated_job(what: str) -> str:
    """A job that asks for approval while it runs (as a task)."""
    _log(f"gated_job {what} inline")
    return f"ran {what}"


FLAKY_CUT: set[str] = set()


@server.tool()
def flaky(word: str) -> str:
    """Echo ``word`` (over HTTP its first answer's stream is cut)."""
    _log(f"flaky {word}")
    return f"echo {word}"


@server.tool()
def refuse() -> str:
    """Fail with a protocol error (a JSON-RPC error, not an ``isError`` result)."""
    from mcp.shared.exceptions import MCPError

    raise MCPError(-32602, "refused at the protocol level")


@server.tool()
def traced(ctx: Context) -> str:
    """Report the ``traceparent`` the call carried in ``_meta`` (or ``none``)."""
    meta = ctx.request_context.meta or {}
    return str(meta.get("traceparent", "none"))


def _cut_first_flaky(app: Any) -> Any:
    """ASGI middleware: the first ``flaky`` call's response stream ends after its headers."""

    async def middleware(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        cut = b'"flaky"' in body and b"tools/call" in body and "flaky" not in FLAKY_CUT
        if cut:
            FLAKY_CUT.add("flaky")
        sent = False

        async def replay_receive():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        if not cut:
            return await app(scope, replay_receive, send)

        async def cutting_send(message):
            if message["type"] == "http.response.start":
                await send({"type": "http.response.start", "status": 200,
                            "headers": [(b"content-type", b"text/event-stream")]})
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                await send({"type": "http.response.body", "body": b"", "more_body": False})

        await app(scope, replay_receive, cutting_send)

    return middleware


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        import uvicorn

        uvicorn.run(_cut_first_flaky(server.streamable_http_app()), host="127.0.0.1",
                    port=int(sys.argv[2]), log_level="warning")
    else:
        server.run()
