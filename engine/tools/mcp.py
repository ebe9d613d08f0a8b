"""Tools from MCP servers: ``tools_from_mcp`` and ``turnlog run/resume --mcp``.

``tools_from_mcp("python server.py")`` (a command: stdio) or
``tools_from_mcp("http://host/mcp")`` (a URL: streamable HTTP) connects to
an MCP server through the official ``mcp`` SDK (``pip install
-e '.[mcp]'``, mcp 2) and returns an ``MCPToolset``: a ``ToolRegistry``
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
its data is ``{"server", "tool", "content", "structuredContent"?}``. An
``isError`` result, a protocol error, a call that gets no answer in time and
a server that died all become a failed result whose text says which server,
which tool and what happened; the run goes on.

The loop is synchronous and the SDK is async: the toolset owns a background
thread running an event loop, on which one task holds the client session for
the toolset's life; calls are submitted to it and waited for.

Replays need no server: a recording's MCP tools are known from their specs
and their results are served from the journal (``replay.tools``).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import os
import shlex
import tempfile
import threading
from collections.abc import Iterable
from typing import Any

from turnlog.journal import shown_url

from turnlog.engine.errors import EngineError, ToolError
from turnlog.engine.model.events import ToolEffect, ToolSpec
from turnlog.engine.tools.registry import Tool, ToolContext, ToolRegistry

__all__ = ["MCPError", "MCPTool", "MCPToolset", "effect_of", "tools_from_mcp"]


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


def _block(block: Any) -> dict[str, Any]:
    return block.model_dump(mode="json", by_alias=True, exclude_none=True)


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
        return self.toolset.call(self.spec.name, arguments)


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
                 env: dict[str, str] | None = None) -> None:
        super().__init__()
        try:
            from mcp import Client, StdioServerParameters
        except ImportError:
            raise MCPError("MCP tools need the mcp package: pip install -e '.[mcp]' in turnlog's "
                           "checkout") from None
        #: the server as messages show it (a URL's password masked: ``shown_url``)
        self.target = shown_url(server)
        self.timeout = timeout
        #: recorded in each tool's spec (``server``) until the server names itself
        self.name = self.target
        if server.startswith(("http://", "https://")):
            transport: Any = server
        else:
            words = shlex.split(server)
            if not words:
                raise MCPError("--mcp: name a server as a command line or an http(s) URL")
            transport = StdioServerParameters(command=words[0], args=words[1:],
                                              env={**os.environ, **(env or {})})
        self._client_type = Client
        #: the stdio server's stderr (``None`` over HTTP): see :class:`ServerLog`
        self.log: ServerLog | None = None
        if isinstance(transport, StdioServerParameters):
            from mcp.client.stdio import stdio_client

            self.log = ServerLog(server)
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
            async with self._client_type(self._transport,
                                         read_timeout_seconds=self.timeout) as client:
                self._client = client
                info = getattr(client, "server_info", None)
                if info is not None and getattr(info, "name", None):
                    self.name = info.name
                    if self.log is not None:
                        self.log.server = info.name
                listed = await client.list_tools()
                specs = [self._spec(t) for t in listed.tools]
                self._ready.set_result(specs)
                await self._stop.wait()
        except BaseException as exc:  # a server that cannot start or dies: reported, never raised here
            if not self._ready.done():
                self._ready.set_exception(MCPError(self._start_failure(exc)))
            self._client = None
            if not isinstance(exc, Exception):
                raise

    def _start_failure(self, exc: BaseException) -> str:
        """Why the server could not be used, with its last line on stderr when it wrote one."""
        described = _describe(exc)
        if _LOST in described:  # it went away before answering: it did not start
            described = "it failed to start (it exited or closed the connection before answering)"
        line = self.log.last_line() if self.log is not None else None
        said = f"; its last stderr line: {line}" if line else ""
        return f"cannot use MCP server {self.target!r}: {described}{said}"

    def _spec(self, tool: Any) -> ToolSpec:
        schema = dict(tool.input_schema or {"type": "object", "properties": {}})
        return ToolSpec(name=tool.name, description=tool.description or "", parameters=schema,
                        effect=effect_of(tool.annotations), server=self.name,
                        display_name=getattr(tool.annotations, "title", None) or tool.title)

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call ``name`` on the server: its result data, or ``{"success": False, "error"}``."""
        where = f"MCP server {self.name!r}, tool {name!r}"
        client = self._client
        if client is None or self._owner.done() or self._lost is not None:
            why = f": {self._lost}" if self._lost else " (it stopped or was closed)"
            return {"success": False, "error": f"{where}: the server is not running{why}"}
        future = asyncio.run_coroutine_threadsafe(client.call_tool(name, arguments), self._loop)
        try:
            result = future.result(self.timeout + 5)
        except (concurrent.futures.TimeoutError, TimeoutError):
            future.cancel()
            return {"success": False, "error": f"{where}: no answer within {self.timeout:g} s"}
        except _call_errors() as exc:  # the SDK's protocol and transport errors
            described = _describe(exc)
            if _LOST in described:  # no later call can reach it
                self._lost = f"the connection was lost during a call to {name!r}"
            return {"success": False, "error": f"{where}: {described}"}
        content = [_block(b) for b in result.content]
        data: dict[str, Any] = {"server": self.name, "tool": name, "content": content}
        if result.structured_content is not None:
            data["structuredContent"] = result.structured_content
        if result.is_error:
            text = " ".join(b.get("text", "") for b in content if b.get("type") == "text")
            return {"success": False, "data": data,
                    "error": f"{where} reported an error: {text or 'no details'}"}
        return data

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


def tools_from_mcp(servers: str | Iterable[str], *, timeout: float = 60.0) -> MCPToolset:
    """The tools of an MCP server (a command line or a URL) as a connected ``MCPToolset``.

    Several servers (an iterable) give one toolset holding all their tools;
    their names must not collide.
    """
    if isinstance(servers, str):
        return MCPToolset(servers, timeout=timeout)
    sets = [MCPToolset(s, timeout=timeout) for s in servers]
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
