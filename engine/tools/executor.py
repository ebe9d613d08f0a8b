"""The tool-execution seam: how the loop gets a call's outcome.

The loop decides *whether* a call runs (unknown, disabled, invalid, duplicate
calls are refused before this seam is reached); a ``ToolExecutor`` decides
*how* an accepted call becomes an outcome. ``LocalExecutor`` runs the Python
function; a replay executor can serve recorded results instead::

    class Recorded:
        def __init__(self, results):           # call id -> ToolCompleted
            self.results = results

        def execute(self, call, tool, context):
            r = self.results[call.id]
            return ToolExecution(success=r.success, data=r.data, error=r.error,
                                 content=r.content, source="recorded")

Contract of ``execute(call, tool, context, validated) -> ToolExecution``:

- ``call`` is the model's ``ToolCall``; ``call.arguments`` were validated
  against the tool's schema (``validated`` holds the converted values the
  ``LocalExecutor`` passes on). ``tool`` is the registered ``Tool`` (``None``
  never reaches an executor). ``context`` is the ``ToolContext``.
- Return a ``ToolExecution``. ``content=None`` lets the loop render the text
  the model reads from ``success``/``data``/``error`` with the tool's rules;
  a string is used verbatim (recorded results).
- Exceptions should be caught and returned as ``success=False``; the loop
  also converts anything an executor raises into a failed result, so a tool
  can never end a run.
- An executor may also define ``async def aexecute(...)`` (same arguments);
  ``AsyncLoop`` awaits it (else it runs ``execute`` in a worker thread).

Scheduling hooks (optional; replay's executor uses them to repeat a recorded
schedule, see ``engine.step``): ``keep_open(batch, default) -> bool`` — may
more calls be started with ``batch`` (the calls started so far) before it
runs; ``joins(batch, call, default) -> bool`` — is ``call`` started with
them; ``order(batch) -> calls | None`` — run the batch one at a time in this
order. ``default`` is the loop's own answer.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from turnlog.engine.model.messages import ToolCall
from turnlog.engine.tools.registry import Tool, ToolContext

__all__ = ["LocalExecutor", "ToolExecution", "ToolExecutor"]


class ToolExecution(msgspec.Struct, frozen=True, kw_only=True):
    """One call's outcome as an executor reports it (see the module docstring)."""

    success: bool
    data: Any = None
    error: str | None = None
    content: str | None = None
    duration_ms: float | None = None
    source: Literal["live", "recorded", "imported", "interrupted", "runner"] = "live"
    #: fields whose invalid Unicode was already replaced (a recorded outcome served again)
    replaced: tuple[str, ...] = ()


@runtime_checkable
class ToolExecutor(Protocol):
    """Turns an accepted tool call into its outcome."""

    def execute(self, call: ToolCall, tool: Tool, context: ToolContext,
                validated: dict[str, Any]) -> ToolExecution:
        """Run (or look up) ``call`` and report its outcome."""
        ...


class LocalExecutor:
    """Runs the tool's Python function in-process.

    A tool's return value is its ``data``. A tool signals failure by raising
    (any exception: its message becomes the error) or by returning a dict
    ``{"success": False, "error": "..."}`` (the reference's result shape).
    """

    def __init__(self, timer: Callable[[], float] = time.perf_counter) -> None:
        self.timer = timer

    def execute(self, call: ToolCall, tool: Tool, context: ToolContext,
                validated: dict[str, Any]) -> ToolExecution:
        """Run ``tool`` with ``validated`` arguments and the injected context.

        An ``async def`` tool runs to its end here on an event loop of its own
        (``asyncio.run``; the async loop awaits it natively instead).
        """
        start = self.timer()
        try:
            data = tool.invoke(validated, context)
            if inspect.iscoroutine(data):
                data = asyncio.run(data)
        except Exception as exc:  # a tool failure is a result, never the end of a run
            return ToolExecution(success=False, error=str(exc) or type(exc).__name__,
                                 duration_ms=_ms(self.timer() - start))
        return _outcome(data, _ms(self.timer() - start))

    async def aexecute(self, call: ToolCall, tool: Tool, context: ToolContext,
                       validated: dict[str, Any]) -> ToolExecution:
        """``execute`` for the async loop: an ``async def`` tool is awaited on the running
        event loop, any other runs in a worker thread (``asyncio.to_thread``)."""
        if not inspect.iscoroutinefunction(tool.fn):
            return await asyncio.to_thread(self.execute, call, tool, context, validated)
        start = self.timer()
        try:
            data = await tool.invoke(validated, context)
        except Exception as exc:  # a tool failure is a result, never the end of a run
            return ToolExecution(success=False, error=str(exc) or type(exc).__name__,
                                 duration_ms=_ms(self.timer() - start))
        return _outcome(data, _ms(self.timer() - start))


def _outcome(data: Any, duration: float) -> ToolExecution:
    """A tool's return value as its outcome (a ``{"success": False}`` dict is a failure)."""
    if isinstance(data, dict) and data.get("success") is False:
        return ToolExecution(success=False, error=str(data.get("error") or "tool failed"),
                             data=data.get("data"), duration_ms=duration)
    if isinstance(data, dict) and data.get("success") is True and "data" in data:
        data = data["data"]
    return ToolExecution(success=True, data=data, duration_ms=duration)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)
