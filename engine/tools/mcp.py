"""Tools from MCP servers: ``tools_from_mcp`` and ``turnlog run/resume --mcp``.

``tools_from_mcp("python server.py")`` (a command: stdio) or
``tools_from_mcp("http://host/mcp")`` (a URL: streamable HTTP) connects to
an MCP server through the official ``mcp`` SDK (``pip install
-e '.[mcp]'``, mcp 2.3: MCP 2026-07-28, falling back to the handshake for older
servers) and returns an ``MCPToolset``: a ``ToolRegistry``
of its tools, usable wherever tools are, and closed with ``close()`` (or
``with``)::

    with tools_from_mcp("python server.py") as tools:
        Loop(journal, provider, tools).start("...")

Each tool's ``ToolSpec`` is the server's: its name, description and input
schema (recorded in the conversation's tool specs), ``server`` naming the
server, and its effect class from the server's annotations, read with the
spec's defaults for a hint left out (``readOnlyHint`` false,
``destructiveHint`` true, ``idempotentHint`` false): ``readOnlyHint`` →
``read_only``; ``idempotentHint`` with ``destructiveHint: false`` →
``idempotent``; anything else → ``side_effecting`` — so resume never blindly
re-runs a destructive call, and a hint written out as its default changes nothing.

A call is recorded like any tool call (``tool_started``/``tool_completed``):
its data is ``{"server", "tool", "content", "structuredContent"?, "mcp"}``, where
``mcp`` is the call's record under MCP 2026-07-28 (the model reads the rest, never
``mcp``; see :func:`call_record`): the server's info, the protocol version, the
result type, ``isError``, the output schema's digest and whether ``structuredContent``
validated against it (JSON Schema 2020-12, ``jsonschema``), the digest of the tool
catalogue the call was made against, every ``input_required`` round with the answers
given (an elicitation's answer names who decided it and when, as an approval does),
the states of a task the call became, and how many times a request whose response
stream broke was re-issued (one logical call: one ``tool_started``, one result). While
the call runs, each round, answer, task state and re-issue is also written at once as a
``tool_progressed`` event of the call (the context's ``progress`` hook), so a crash
knows how far it got: ``resume`` follows a task by its id (``MCPTool.picks_up``)
instead of calling again. An ``isError`` result, a protocol error (``protocolError``:
its code and message), a call that gets no answer in time and
a server that died all become a failed result whose text says which server,
which tool and what happened; the run goes on.

The client speaks the Tasks extension (``io.modelcontextprotocol/tasks``, which the
SDK leaves to extensions: its ``ClientExtension``/``ResultClaim``): a call answered
with a task is polled with ``tasks/get`` until the task ends, or cancelled with
``tasks/cancel`` when it brings no news for the toolset's timeout; a task that asks
for input (``input_required``) is answered with ``tasks/update``, as a call's round
is. Elicitations are answered by an :data:`Elicitor` (:func:`elicitor`: a policy, or a
person asked). With an ``OTelObserver`` watching the run, each request carries the
run's ``traceparent`` in ``_meta``.

The loop is synchronous and the SDK is async: the toolset owns a background
thread running an event loop, on which one task holds the client session for
the toolset's life; calls are submitted to it and waited for.

Replays need no server: a recording's MCP tools are known from their specs
and their results, and the news of every round, are served from the journal
(``replay.tools``, ``replay.driver``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import queue
import shlex
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Any

from turnlog.journal import shown_url

from turnlog.engine.errors import EngineError, MalformedResponseError, ToolError
from turnlog.engine.model.canonical import canonical_json, digest
from turnlog.engine.model.events import ToolEffect, ToolSpec
from turnlog.engine.providers._redact import Redactor, command_secrets
from turnlog.engine.tools.registry import Tool, ToolContext, ToolRegistry

__all__ = ["ELICIT_POLICIES", "TASKS_EXTENSION", "Elicitor", "MCPError", "MCPTool", "MCPToolset",
           "call_record", "effect_of", "elicitor", "tools_from_mcp"]

#: The Tasks extension's identifier (SEP-2663), advertised in the client's capabilities.
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
#: The answers a policy gives every elicitation (``--mcp-elicit``); ``ask`` asks a person.
ELICIT_POLICIES = ("decline", "cancel", "ask")
#: How many times a request whose response stream broke is re-issued (a new request id each).
REISSUES = 2
#: Who answers an elicitation: ``(server, tool, request) -> {"action", "content"?, "approver"}``,
#: ``request`` being the ``elicitation/create`` params as sent (``message``,
#: ``requestedSchema``).
Elicitor = Callable[[str, str, dict[str, Any]], dict[str, Any]]


class MCPError(EngineError):
    """An MCP server that cannot be used: not installed, not started, not answering."""


def effect_of(annotations: Any) -> ToolEffect:
    """The effect class an MCP tool's annotations claim (see the module doc).

    A hint left out has the spec's default, so writing it out changes nothing:

    >>> class A:  # the SDK's ToolAnnotations, in short
    ...     read_only_hint = None; idempotent_hint = True; destructive_hint = None
    >>> class B(A):
    ...     destructive_hint = False
    >>> effect_of(A()), effect_of(B()), effect_of(None)
    ('side_effecting', 'idempotent', 'side_effecting')
    """
    def hint(name: str, default: bool) -> bool:
        value = getattr(annotations, name, None)
        return default if value is None else value is True

    if hint("read_only_hint", False):
        return "read_only"
    if hint("idempotent_hint", False) and not hint("destructive_hint", True):
        return "idempotent"
    return "side_effecting"


def _effect_of_wire(annotations: dict[str, Any]) -> ToolEffect:
    """``effect_of`` for annotations as the wire has them (``readOnlyHint``, ...)."""
    class Hints:
        read_only_hint = annotations.get("readOnlyHint")
        idempotent_hint = annotations.get("idempotentHint")
        destructive_hint = annotations.get("destructiveHint")

    return effect_of(Hints())


def _block(block: Any) -> dict[str, Any]:
    wire: dict[str, Any] = block.model_dump(mode="json", by_alias=True, exclude_none=True)
    return wire


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def elicitor(policy: str, *, ask: Callable[[str], str] | None = None) -> Elicitor:
    """The ``Elicitor`` a policy names (``ELICIT_POLICIES``).

    ``decline``/``cancel`` answer every elicitation so, as ``policy:decline`` /
    ``policy:cancel``; ``ask`` puts the message to a person through ``ask(prompt) ->
    answer`` (``click.prompt`` in the CLI): ``y`` accepts, filling each field of the
    requested schema from a further answer, anything else declines; the approver is the
    person (``$USER``).
    """
    if policy not in ELICIT_POLICIES:
        raise MCPError(f"--mcp-elicit: {policy!r} is not one of {', '.join(ELICIT_POLICIES)}")
    if policy != "ask":
        return lambda server, tool, request: {"action": policy, "approver": f"policy:{policy}"}
    if ask is None:
        raise MCPError("--mcp-elicit ask needs a person to ask (a terminal)")

    def person(server: str, tool: str, request: dict[str, Any]) -> dict[str, Any]:
        who = f"person:{os.environ.get('USER') or 'unknown'}"
        said = ask(f"MCP server {server!r}, tool {tool!r} asks: {request.get('message', '')} "
                   "[y/N]").strip().lower()
        if said not in ("y", "yes"):
            return {"action": "decline", "approver": who}
        schema = request.get("requestedSchema") or {}
        content: dict[str, Any] = {}
        for field, spec in (schema.get("properties") or {}).items():
            content[field] = _typed(ask(f"{field}"), spec.get("type"))
        return {"action": "accept", "content": content, "approver": who}

    return person


def _typed(text: str, kind: Any) -> Any:
    """An answer typed at a prompt as the JSON type the requested schema names."""
    text = text.strip()
    if kind == "boolean":
        return text.lower() in ("y", "yes", "true", "1")
    if kind == "integer":
        return int(text)
    if kind == "number":
        return float(text)
    return text


def call_record(data: Any) -> dict[str, Any] | None:
    """The MCP record of a recorded call's data (``data["mcp"]``), or ``None``: not an MCP
    call, or one recorded before calls were recorded in full."""
    record = data.get("mcp") if isinstance(data, dict) else None
    return record if isinstance(record, dict) else None


@functools.cache
def _sdk() -> Any:
    """The SDK parts the client needs, built once: the Tasks extension's task handle model
    and the ``ClientExtension`` that claims ``resultType: "task"`` for it."""
    from typing import Literal

    import mcp_types
    from mcp.client.extension import ClientExtension, ResultClaim
    from pydantic import ConfigDict

    class TaskHandle(mcp_types.Result):
        """A task a ``tools/call`` became (SEP-2663's ``CreateTaskResult``: the task inline)."""

        model_config = ConfigDict(extra="allow")
        result_type: Literal["task"] = "task"
        task_id: str
        status: str

    async def never(result: Any, context: Any) -> Any:  # the toolset drives tasks itself
        raise RuntimeError("turnlog follows its MCP tasks itself")

    class Tasks(ClientExtension):
        identifier = TASKS_EXTENSION

        def claims(self) -> list[Any]:
            return [ResultClaim(result_type="task", model=TaskHandle, resolve=never)]

    class SDK:
        types = mcp_types
        handle = TaskHandle
        extension = Tasks

    return SDK


class MCPTool(Tool):
    """One tool of an MCP server: its spec is the server's, a call goes to the server."""

    def __init__(self, toolset: MCPToolset, spec: ToolSpec) -> None:
        super().__init__(_never_local, name=spec.name)
        self.spec = spec
        self.toolset = toolset

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments as given: the server checks them against its own schema."""
        if not isinstance(arguments, dict):
            raise ToolError("the arguments must be a JSON object")
        return dict(arguments)

    def invoke(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        """Call the tool on the server; a failure is ``{"success": False, "error": ...}``."""
        return self.toolset.call(self.spec.name, arguments, context)

    def picks_up(self, progress: tuple[dict[str, Any], ...]) -> bool:
        """Yes when the call had become a task that had not failed or been cancelled: it is
        followed by its id (a completed one gives its result again)."""
        task = _last_task(progress)
        return task is not None and task.get("status") in (*_RUNNING, "completed")

    def render(self, *, success: bool, data: Any, error: str | None,
               arguments: dict[str, Any]) -> str:
        """What the model reads: the result without its MCP record (``data["mcp"]``)."""
        if call_record(data) is not None:
            data = {k: v for k, v in data.items() if k != "mcp"}
        return super().render(success=success, data=data, error=error, arguments=arguments)


def _never_local() -> None:
    raise ToolError("an MCP tool runs on its server")


class ServerLog:
    """Where a stdio server's own stderr goes (its log lines, its tracebacks): a file, never
    the terminal ``turnlog run`` prints its output to.

    ``$TURNLOG_MCP_LOG`` names the file (appended to); else a temporary file, removed at
    :meth:`close` when the server wrote nothing.
    """

    def __init__(self, server: str) -> None:
        self.server = server
        chosen = os.environ.get("TURNLOG_MCP_LOG")
        if chosen:
            self.path, self._kept = chosen, True
            self.file = open(chosen, "a", encoding="utf-8", errors="replace")  # noqa: SIM115
        else:
            fd, self.path = tempfile.mkstemp(prefix="turnlog-mcp-", suffix=".log")
            self._kept = False
            self.file = os.fdopen(fd, "w", encoding="utf-8", errors="replace")
        self._start = self.file.tell()
        self.note: str | None = None

    def lines(self) -> list[str]:
        """The non-blank lines the server has written to its stderr so far."""
        if not self.file.closed:
            self.file.flush()
        with open(self.path, encoding="utf-8", errors="replace") as f:
            f.seek(self._start)
            return [line.rstrip() for line in f if line.strip()]

    def last_line(self) -> str | None:
        """The server's last non-blank stderr line (``None``: it wrote none)."""
        lines = self.lines()
        return lines[-1] if lines else None

    def close(self) -> str | None:
        """Close the file; return one line saying what the server wrote there (``None``:
        nothing, and a temporary file is removed)."""
        if self.file.closed:
            return self.note
        self.file.close()
        lines = self.lines()
        if not lines:
            if not self._kept:
                os.unlink(self.path)
            return None
        last = lines[-1] if len(lines[-1]) <= 160 else lines[-1][:159] + "…"
        self.note = (f"MCP server {self.server!r} wrote {len(lines)} line(s) to its stderr, "
                     f"in {self.path} (last: {last})")
        return self.note


class MCPToolset(ToolRegistry):
    """The tools of one MCP server, connected (see the module doc); close it when done.

    ``server`` is a URL (``http://``/``https://``: streamable HTTP) or a
    command line (stdio: the command is started, its stdin/stdout carry the
    protocol). ``timeout`` bounds connecting and each call (seconds).
    """

    def __init__(self, server: str, *, timeout: float = 60.0,
                 env: dict[str, str] | None = None, elicit: Elicitor | None = None) -> None:
        super().__init__()
        try:
            from mcp import Client, StdioServerParameters
        except ImportError:
            raise MCPError("MCP tools need the mcp package: pip install -e '.[mcp]' in turnlog's "
                           "checkout") from None
        url = server.startswith(("http://", "https://"))
        words = [server] if url else shlex.split(server)
        if not words:
            raise MCPError("--mcp: name a server as a command line or an http(s) URL")
        #: masks the credentials the server was given (its command line's, its URL's,
        #: ``env``'s) in everything the toolset hands the journal: specs, results, progress
        self.redactor = Redactor(*command_secrets(words, env))
        #: the server as messages show it: a URL's password masked (``shown_url``), a
        #: command line's credentials (``Redactor.command``)
        self.target = shown_url(server) if url else self.redactor.command(words)
        self.timeout = timeout
        #: who answers the server's elicitations (default: ``decline``, as a policy)
        self.elicit = elicit or elicitor("decline")
        #: recorded in each tool's spec (``server``) until the server names itself
        self.name = self.target
        #: the server's info (``serverInfo``), the protocol version spoken, the digest of the
        #: tool catalogue (``tools/list``) and each tool's output schema: set once listed
        self.server_info: dict[str, Any] | None = None
        self.protocol_version: str | None = None
        self.catalogue_digest: str | None = None
        self.output_schemas: dict[str, Any] = {}
        if url:
            transport: Any = server
        else:
            transport = StdioServerParameters(command=words[0], args=words[1:],
                                              env={**os.environ, **(env or {})})
        self._client_type = Client
        #: the stdio server's stderr (``None`` over HTTP): see :class:`ServerLog`
        self.log: ServerLog | None = None
        if isinstance(transport, StdioServerParameters):
            from mcp.client.stdio import stdio_client

            self.log = ServerLog(self.target)
            transport = stdio_client(transport, errlog=self.log.file)
        self._transport = transport
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="turnlog-mcp",
                                        daemon=True)
        self._thread.start()
        self._client: Any = None
        self._lost: str | None = None
        self._stop: asyncio.Event | None = None
        self._ready: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._owner = asyncio.run_coroutine_threadsafe(self._hold(), self._loop)
        try:
            listed = self._ready.result(timeout)
        except concurrent.futures.TimeoutError:
            self.close()
            raise MCPError(self._with_log(
                f"MCP server {self.target!r} did not answer within {timeout:g} s")) from None
        except MCPError as exc:
            self.close()
            raise MCPError(self._with_log(str(exc))) from None
        for spec in listed:
            self.register(MCPTool(self, spec))

    async def _hold(self) -> None:
        """The one task that owns the client session: open, list the tools, wait, close."""
        self._stop = asyncio.Event()
        try:
            async with self._client_type(self._transport, read_timeout_seconds=self.timeout,
                                         extensions=[_sdk().extension()]) as client:
                self._client = client
                info = getattr(client, "server_info", None)
                if info is not None and getattr(info, "name", None):
                    self.name = self.redactor.text(info.name)
                    self.server_info = self.clean(_block(info))
                    if self.log is not None:
                        self.log.server = self.name
                self.protocol_version = client.protocol_version
                tools = await self._list(client)
                self.catalogue_digest = digest(tools)
                self.output_schemas = {t["name"]: t.get("outputSchema") for t in tools}
                specs = [self._spec(t) for t in tools]
                self._ready.set_result(specs)
                await self._stop.wait()
        except BaseException as exc:  # a server that cannot start or dies: reported, never raised here
            if not self._ready.done():
                self._ready.set_exception(MCPError(self._start_failure(exc)))
            self._client = None
            if not isinstance(exc, Exception):
                raise

    @staticmethod
    async def _list(client: Any) -> list[dict[str, Any]]:
        """Every tool the server lists (all pages), as the wire has them."""
        tools: list[dict[str, Any]] = []
        cursor = None
        for _ in range(100):  # a paginator that never ends cannot hang the start
            page = await client.list_tools(cursor=cursor)
            tools += [_block(t) for t in page.tools]
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    def _start_failure(self, exc: BaseException) -> str:
        """Why the server could not be used, with its last line on stderr when it wrote one."""
        described = _describe(exc)
        if _LOST in described:  # it went away before answering: it did not start
            described = "it failed to start (it exited or closed the connection before answering)"
        line = self.log.last_line() if self.log is not None else None
        said = f"; its last stderr line: {line}" if line else ""
        return f"cannot use MCP server {self.target!r}: {described}{said}"

    def clean(self, value: Any) -> Any:
        """``value`` (JSON data the server sent, or built from it) with the server's
        credentials masked in every string (:attr:`redactor`); as it is when it has none."""
        if not self.redactor.secrets:
            return value
        return self.redactor.data(value, f"MCP server {self.name!r}")

    def _spec(self, tool: dict[str, Any]) -> ToolSpec:
        tool = self.clean(tool)
        schema = dict(tool.get("inputSchema") or {"type": "object", "properties": {}})
        annotations = tool.get("annotations") or {}
        return ToolSpec(name=tool["name"], description=tool.get("description") or "",
                        parameters=schema, effect=_effect_of_wire(annotations),
                        server=self.name,
                        display_name=annotations.get("title") or tool.get("title"))

    def call(self, name: str, arguments: dict[str, Any],
             context: ToolContext | None = None) -> dict[str, Any]:
        """Call ``name`` on the server: its result data, or ``{"success": False, "error"}``.

        ``context`` (the engine's ``ToolContext``) brings the run's ``traceparent``, the
        hook that records each round while the call runs (``progress``) and what an
        interrupted run recorded of this call (``resumed``: a task is picked up by its id).
        """
        where = f"MCP server {self.name!r}, tool {name!r}"
        client = self._client
        if client is None or self._owner.done() or self._lost is not None:
            why = f": {self._lost}" if self._lost else " (it stopped or was closed)"
            return {"success": False, "error": f"{where}: the server is not running{why}"}
        call = _Call(self, name, arguments, context)
        future = asyncio.run_coroutine_threadsafe(call.run(client), self._loop)
        try:
            return self._cleaned(call.wait(future, self.timeout + 5), where)
        except (concurrent.futures.TimeoutError, TimeoutError):
            future.cancel()
            return self._cleaned(call.failed(f"{where}: no answer within {self.timeout:g} s"),
                                 where)
        except _call_errors() as exc:  # the SDK's protocol and transport errors
            described = _describe(exc)
            if _LOST in described:  # no later call can reach it
                self._lost = f"the connection was lost during a call to {name!r}"
            return self._cleaned(call.failed(f"{where}: {described}", exc), where)

    def _cleaned(self, outcome: dict[str, Any], where: str) -> dict[str, Any]:
        """A call's outcome as :meth:`clean` masks it (one it cannot walk fails, saying why)."""
        try:
            cleaned: dict[str, Any] = self.clean(outcome)
        except MalformedResponseError as exc:
            return {"success": False, "error": f"{where}: {exc}"}
        return cleaned

    def _with_log(self, message: str) -> str:
        """``message`` plus what the server wrote to its stderr, if anything (after close)."""
        notes = self.notes()
        return f"{message}; {notes[0]}" if notes else message

    def notes(self) -> list[str]:
        """After :meth:`close`: a line for each server that wrote to its stderr (see
        :class:`ServerLog`), for the caller to show once instead of the server's output."""
        note = self.log.note if self.log is not None else None
        return [note] if note else []

    def close(self) -> None:
        """Close the session (a stdio server is stopped), the event-loop thread and the
        server's log."""
        try:
            self._close_session()
        finally:
            if self.log is not None:
                self.log.close()

    def _close_session(self) -> None:
        if self._loop.is_closed():
            return
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        try:
            self._owner.result(10)  # _hold reports its failures instead of raising them
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            self._owner.cancel()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> MCPToolset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Refused(Exception):
    """The server asked for something turnlog does not answer: the call fails, saying so."""


#: A task's states that go on (the others end it).
_RUNNING = ("working", "input_required")


class _Call:
    """One logical ``tools/call``: its rounds, its task, its re-issues and its record.

    :meth:`run` runs on the toolset's event loop; :meth:`wait`, on the caller's thread,
    does what must happen there while it runs (recording each round through the context's
    ``progress`` hook, asking a person) and returns the outcome.
    """

    def __init__(self, toolset: MCPToolset, name: str, arguments: dict[str, Any],
                 context: ToolContext | None) -> None:
        self.toolset, self.name, self.arguments = toolset, name, arguments
        self.where = f"MCP server {toolset.name!r}, tool {name!r}"
        self.progress = getattr(context, "progress", None)
        self.resumed = tuple(getattr(context, "resumed", ()) or ())
        traceparent = getattr(context, "traceparent", None)
        self.meta = {"traceparent": traceparent} if traceparent else None
        self.schema = toolset.output_schemas.get(name)
        self.record: dict[str, Any] = {
            "serverInfo": toolset.server_info, "protocolVersion": toolset.protocol_version,
            "catalogueDigest": toolset.catalogue_digest}
        if self.schema is not None:
            self.record["outputSchemaDigest"] = digest(self.schema)
        self.types: list[str] = []
        self.rounds: list[dict[str, Any]] = []
        self.task: dict[str, Any] | None = None
        self.reissued = 0
        #: what the call asks of the caller's thread (``None``: the call has ended)
        self._inbox: queue.SimpleQueue[tuple[Callable[[], Any], asyncio.Future[Any]] | None] = \
            queue.SimpleQueue()

    # --- on the caller's thread ----------------------------------------------------------

    def wait(self, future: concurrent.futures.Future[Any], timeout: float) -> dict[str, Any]:
        """Serve the call's requests for the caller's thread until it ends; its outcome.

        ``timeout`` bounds the time without news: each round, each task state restarts it.
        """
        future.add_done_callback(lambda _: self._inbox.put(None))  # wakes the wait at once
        deadline = time.monotonic() + timeout
        while True:
            try:
                item = self._inbox.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                raise TimeoutError from None
            if item is None:
                outcome: dict[str, Any] = future.result()
                return outcome
            job, reply = item
            deadline = time.monotonic() + timeout
            try:
                answer, error = job(), None
            except Exception as exc:  # handed back to the call, which fails with it
                answer, error = None, exc
            self.toolset._loop.call_soon_threadsafe(_settle, reply, answer, error)

    def failed(self, error: str, exc: BaseException | None = None) -> dict[str, Any]:
        """A failed outcome that keeps what the call recorded before it failed (and, for a
        protocol error, its JSON-RPC code and message: ``protocolError``)."""
        data = self._data(None)
        code = getattr(exc, "code", None)
        if isinstance(code, int):
            data["mcp"]["protocolError"] = {"code": code, "message": str(exc)}
        return {"success": False, "error": error, "data": data}

    # --- on the toolset's event loop -----------------------------------------------------

    async def _on_caller(self, job: Callable[[], Any]) -> Any:
        reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._inbox.put((job, reply))
        return await reply

    async def _note(self, item: dict[str, Any]) -> None:
        """Record ``item`` (a round, an answer, a task state) through ``progress``: durable
        before the call goes on."""
        if self.progress is not None:
            progress, item = self.progress, self.toolset.clean(item)
            await self._on_caller(lambda: progress(item))

    async def run(self, client: Any) -> dict[str, Any]:
        T = _sdk().types
        session = client.session
        picked = _last_task(self.resumed)
        try:
            if picked is not None:  # an interrupted run's task: follow it, never call again
                self.record["resumedTask"] = picked["taskId"]
                self.types.append("task")
                now = await _task_request(session, "tasks/get", picked["taskId"])
                result = await self._follow(session, now)
            else:
                result = await self._send(session, None, None)
                while isinstance(result, T.InputRequiredResult):
                    responses = await self._answer(result)
                    result = await self._send(session, responses, result.request_state)
                if isinstance(result, _sdk().handle):
                    result = await self._follow(session, _task_of(result))
        except _Refused as exc:
            return self.failed(f"{self.where}: {exc}")
        return self._finish(result)

    async def _send(self, session: Any, responses: Any, state: str | None) -> Any:
        """One ``tools/call`` round; a response stream that broke before its answer is
        re-issued (a new request id, the same logical call)."""
        T = _sdk().types
        request = T.CallToolRequest(params=T.CallToolRequestParams(
            name=self.name, arguments=self.arguments, input_responses=responses,
            request_state=state, _meta=dict(self.meta) if self.meta else None))
        from mcp.shared.exceptions import MCPError as SDKError

        for attempt in range(REISSUES + 1):
            try:
                result = await session.send_request(request, session._call_tool_adapter)
            except SDKError as exc:
                if attempt == REISSUES or not _broken_stream(exc):
                    raise
                self.reissued += 1
                await self._note({"kind": "reissued", "attempt": attempt + 2,
                                  "error": str(exc)})
                continue
            self.types.append(getattr(result, "result_type", None) or "complete")
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    async def _answer(self, result: Any) -> dict[str, Any]:
        """Answers to an ``input_required`` round's requests, each recorded."""
        T = _sdk().types
        number = len(self.rounds) + 1
        asked = {k: _block(r) for k, r in (result.input_requests or {}).items()}
        entry: dict[str, Any] = {"round": number, "inputRequests": asked}
        if result.request_state is not None:
            entry["requestStateDigest"] = digest(result.request_state)
        entry["answers"] = answers = {}
        self.rounds.append(entry)
        await self._note({"kind": "input_required", **{k: v for k, v in entry.items()
                                                       if k != "answers"}})
        responses: dict[str, Any] = {}
        for key, request in (result.input_requests or {}).items():
            method = request.method
            if method == "roots/list":  # turnlog offers the server no roots
                responses[key] = T.ListRootsResult(roots=[])
                answers[key] = {"method": method, "roots": []}
                continue
            if method != "elicitation/create":
                raise _Refused(f"the server asked for {method}, which turnlog does not answer")
            decided = await self._on_caller(functools.partial(
                self.toolset.elicit, self.toolset.name, self.name,
                asked[key].get("params") or {}))
            answer = {"method": method, "action": decided["action"],
                      "approver": str(decided.get("approver") or "unknown"),
                      "decided_at": _now()}
            if decided.get("content") is not None:
                answer["content"] = decided["content"]
            answers[key] = answer
            await self._note({"kind": "elicitation", "round": number, "key": key, **answer})
            responses[key] = T.ElicitResult(action=answer["action"],
                                            content=answer.get("content"))
        return responses

    async def _follow(self, session: Any, task: dict[str, Any]) -> Any:
        """Poll a task with ``tasks/get`` until it ends (each new state recorded), answering
        its input requests with ``tasks/update``; cancel it with ``tasks/cancel`` when it
        brings no news for the toolset's timeout."""
        T = _sdk().types
        self.task = {"taskId": task["taskId"], "states": []}
        await self._state(task)
        quiet_since = time.monotonic()
        while task.get("status") in _RUNNING:
            if task.get("status") == "input_required" and task.get("inputRequests"):
                await self._update(session, task)
                quiet_since = time.monotonic()
            pause = task.get("pollIntervalMs")
            await asyncio.sleep(min(max(float(pause or 500) / 1000, 0.01), 5.0))
            if time.monotonic() - quiet_since > self.toolset.timeout:
                await self._cancel(session, task, f"no news for {self.toolset.timeout:g} s")
            task = await _task_request(session, "tasks/get", task["taskId"])
            last = self.task["states"][-1]
            if (task.get("status"), task.get("statusMessage")) != (last["status"],
                                                                   last.get("statusMessage")):
                await self._state(task)
                quiet_since = time.monotonic()
        status = task.get("status")
        if status == "completed" and isinstance(task.get("result"), dict):
            return T.CallToolResult.model_validate(task["result"], by_name=False)
        if status == "failed":
            error = task.get("error") or {}
            raise _Refused(f"its task {task['taskId']} failed: "
                           f"{error.get('message') or task.get('statusMessage') or 'no details'}")
        raise _Refused(f"its task {task['taskId']} ended {status}"
                       + (f": {task['statusMessage']}" if task.get("statusMessage") else ""))

    async def _update(self, session: Any, task: dict[str, Any]) -> None:
        """Answer a task's input requests (a round, recorded like a call's) with
        ``tasks/update``."""
        T = _sdk().types
        asked = T.InputRequiredResult.model_validate(
            {"resultType": "input_required", "inputRequests": task["inputRequests"]},
            by_name=False)
        responses = await self._answer(asked)
        wire = {k: v.model_dump(mode="json", by_alias=True, exclude_none=True)
                for k, v in responses.items()}
        await _task_request(session, "tasks/update", task["taskId"], inputResponses=wire)

    async def _cancel(self, session: Any, task: dict[str, Any], why: str) -> None:
        await _task_request(session, "tasks/cancel", task["taskId"])
        await self._state({**task, "status": "cancelled", "statusMessage": f"cancelled: {why}"})
        raise _Refused(f"its task {task['taskId']} was cancelled: {why}")

    async def _state(self, task: dict[str, Any]) -> None:
        assert self.task is not None
        state = {"status": task.get("status"), "at": _now()}
        if task.get("statusMessage") is not None:
            state["statusMessage"] = task["statusMessage"]
        self.task["states"].append(state)
        await self._note({"kind": "task", "taskId": task["taskId"], **state})

    def _finish(self, result: Any) -> dict[str, Any]:
        data = self._data(result)
        record = data["mcp"]
        if result.is_error:
            text = " ".join(b.get("text", "") for b in data["content"] if b.get("type") == "text")
            return {"success": False, "data": data,
                    "error": f"{self.where} reported an error: {text or 'no details'}"}
        if record.get("validated") is False:
            return {"success": False, "data": data,
                    "error": f"{self.where} returned a result that does not match its output "
                             f"schema: {record['validationError']}"}
        return data

    def _data(self, result: Any) -> dict[str, Any]:
        """The call's data: the result as the server sent it and the call's record."""
        data: dict[str, Any] = {"server": self.toolset.name, "tool": self.name}
        record = {k: v for k, v in self.record.items() if v is not None}
        if result is not None:
            data["content"] = [_block(b) for b in result.content]
            if result.structured_content is not None \
                    or "structured_content" in result.model_fields_set:
                data["structuredContent"] = result.structured_content
            record["resultType"] = self.types[0] if self.types else "complete"
            record["isError"] = bool(result.is_error)
            if self.schema is not None and not result.is_error:
                problem = _invalid(self.schema, result.structured_content)
                record["validated"] = problem is None
                if problem is not None:
                    record["validationError"] = problem
        record["resultTypes"] = list(self.types)
        if self.rounds:
            record["rounds"] = self.rounds
        if self.task is not None:
            record["task"] = self.task
        if self.reissued:
            record["reissued"] = self.reissued
        data["mcp"] = record
        return data


def _settle(reply: asyncio.Future[Any], answer: Any, error: BaseException | None) -> None:
    if reply.done():
        return
    if error is not None:
        reply.set_exception(_Refused(f"could not record or answer the call's round: {error}"))
    else:
        reply.set_result(answer)


def _task_of(handle: Any) -> dict[str, Any]:
    """A task handle (``resultType: "task"``) as the wire has it, without the envelope."""
    wire = handle.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {k: v for k, v in wire.items() if k not in ("resultType", "_meta")}


def _last_task(resumed: tuple[dict[str, Any], ...]) -> dict[str, Any] | None:
    """The task an interrupted run's call had become (its last recorded state), if any."""
    for item in reversed(resumed):
        if isinstance(item, dict) and item.get("kind") == "task" and item.get("taskId"):
            return {"taskId": item["taskId"], "status": item.get("status"),
                    **({"statusMessage": item["statusMessage"]}
                       if item.get("statusMessage") is not None else {})}
    return None


async def _task_request(session: Any, method: str, task_id: str,
                        **params: Any) -> dict[str, Any]:
    """Send ``tasks/get``, ``tasks/update`` or ``tasks/cancel`` for ``task_id``; the result
    as the wire has it."""
    request_type, result_type = _task_models()
    result = await session.send_request(
        request_type(method=method, params={"taskId": task_id, **params}), result_type)
    return {k: v for k, v in result.model_dump(mode="json", by_alias=True,
                                                exclude_none=True).items()
            if k not in ("resultType", "_meta")}


@functools.cache
def _task_models() -> tuple[Any, Any]:
    from typing import ClassVar

    import mcp_types
    from pydantic import ConfigDict

    class TaskRequest(mcp_types.Request[dict[str, Any], str]):
        """``tasks/get``/``tasks/cancel`` (SEP-2663): the task id names the request."""

        name_param: ClassVar[str | None] = "taskId"

    class TaskResult(mcp_types.Result):
        model_config = ConfigDict(extra="allow")

    return TaskRequest, TaskResult


def _broken_stream(exc: BaseException) -> bool:
    """Whether an SDK error says the response stream broke before the answer came (the
    connection itself still works): the request is re-issued."""
    from mcp_types import CONNECTION_CLOSED

    return getattr(exc, "code", None) == CONNECTION_CLOSED and "stream" in str(exc).lower()


def _invalid(schema: Any, value: Any) -> str | None:
    """Why ``value`` does not match the output ``schema`` (JSON Schema, 2020-12 unless it names
    another draft), or ``None``: it does."""
    from jsonschema import exceptions

    checker = _checker(canonical_json(schema))
    if isinstance(checker, str):
        return checker
    try:
        error = exceptions.best_match(checker.iter_errors(value))
    except Exception as exc:  # an unresolvable $ref and the like
        return f"its output schema cannot be applied: {exc}"
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{error.message}" + (f" (at /{where})" if where else "")


@functools.lru_cache(maxsize=256)
def _checker(schema_json: str) -> Any:
    """The compiled validator of an output schema (compiling costs far more than validating,
    so each schema is compiled once), or why the schema cannot be one."""
    import json

    from jsonschema import SchemaError
    from jsonschema.validators import Draft202012Validator, validator_for
    from referencing import Registry

    schema = json.loads(schema_json)
    try:
        cls = validator_for(schema, default=Draft202012Validator)
        cls.check_schema(schema)
    except SchemaError as exc:
        return f"its output schema is not a valid JSON Schema: {exc.message}"
    except Exception as exc:  # not even a schema's shape (a number, a list)
        return f"its output schema is not a valid JSON Schema: {exc}"
    return cls(schema, registry=Registry())


_LOST = "the connection to the server was lost"


def _call_errors() -> tuple[type[BaseException], ...]:
    """What a call to an MCP server may raise when the server or the connection fails."""
    import anyio
    import httpx
    import pydantic
    from mcp.shared.exceptions import MCPError as SDKError

    return (SDKError, anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream,
            OSError, EOFError, httpx.HTTPError, pydantic.ValidationError, ExceptionGroup)


def _describe(exc: BaseException) -> str:
    """What went wrong, in words, from an exception (or a group of them)."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    name = type(exc).__name__
    text = str(exc)
    if text == "Connection closed":
        return f"{_LOST} while the call ran (the server died or closed it)"
    if name in ("ClosedResourceError", "BrokenResourceError", "EndOfStream") or isinstance(
            exc, (ConnectionError, EOFError)):
        return f"{_LOST} ({name}{': ' + text if text else ''}); the server may have died"
    return f"{name}: {text}" if text else name


def tools_from_mcp(servers: str | Iterable[str], *, timeout: float = 60.0,
                   elicit: Elicitor | None = None) -> MCPToolset:
    """The tools of an MCP server (a command line or a URL) as a connected ``MCPToolset``.

    Several servers (an iterable) give one toolset holding all their tools;
    their names must not collide. ``elicit`` answers the servers' elicitations
    (default: :func:`elicitor` ``("decline")``).
    """
    if isinstance(servers, str):
        return MCPToolset(servers, timeout=timeout, elicit=elicit)
    sets = [MCPToolset(s, timeout=timeout, elicit=elicit) for s in servers]
    if len(sets) == 1:
        return sets[0]
    return _Combined(sets)


class _Combined(MCPToolset):
    """Several servers' toolsets as one registry; closing it closes them all."""

    def __init__(self, sets: list[MCPToolset]) -> None:  # noqa: D107 - no connection of its own
        ToolRegistry.__init__(self)
        self._sets = sets
        try:
            for s in sets:
                for t in s:
                    self.register(t)
        except ToolError:
            self.close()
            raise

    def close(self) -> None:
        """Close every server's toolset."""
        for s in self._sets:
            s.close()

    def notes(self) -> list[str]:
        """Every server's note (see :meth:`MCPToolset.notes`)."""
        return [n for s in self._sets for n in s.notes()]
