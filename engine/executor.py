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

Contract of ``execute(call, tool, context) -> ToolExecution``:

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
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from .messages import ToolCall
from .tools import Tool, ToolContext

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
        """Run ``tool`` with ``validated`` arguments and the injected context."""
        start = self.timer()
        try:
            data = tool.invoke(validated, context)
        except Exception as exc:  # a tool failure is a result, never the end of a run
            return ToolExecution(success=False, error=str(exc) or type(exc).__name__,
                                 duration_ms=_ms(self.timer() - start))
        duration = _ms(self.timer() - start)
        if isinstance(data, dict) and data.get("success") is False:
            return ToolExecution(success=False, error=str(data.get("error") or "tool failed"),
                                 data=data.get("data"), duration_ms=duration)
        if isinstance(data, dict) and data.get("success") is True and "data" in data:
            data = data["data"]
        return ToolExecution(success=True, data=data, duration_ms=duration)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)
