"""``RunResult``: what a run hands back, in the reference loop's shape.

Every field is read from the conversation's state after the run, so a result
rebuilt from the journal (``result_of(load_state(...))``) equals the one the
live loop returned.
"""

from __future__ import annotations

from typing import Any

import msgspec

from turnlog.engine.model.messages import Message, ToolCall, Usage
from turnlog.engine.model.state import ConversationState, StateBuilder, ToolOutcome

__all__ = ["RunResult", "result_of"]


class RunResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of a run (the reference's ``execute()`` shape, plus id and status).

    ``turn_count`` and ``usage`` cover the whole conversation; ``run_turns``
    and ``run_usage`` only the last run (a chat's later user message starts a
    new run). ``status`` is ``completed``, ``failed``, ``halted``,
    ``awaiting_approval`` (calls in ``awaiting_approval`` wait for a person's
    decision: ``Loop.decide``, then ``resume``) or ``active`` (a single-turn
    run, or one stopped before its end).
    """

    conversation_id: str
    status: str
    messages: tuple[Message, ...]
    final_content: str
    turn_count: int
    completed: bool
    last_tool_calls: tuple[ToolCall, ...]
    tool_execution_results: tuple[ToolOutcome, ...]
    has_pending_tools: bool
    usage: Usage
    error: str | None = None
    warning: str | None = None
    max_turns_reached: bool = False
    run_turns: int = 0
    run_usage: Usage = Usage()
    #: the calls waiting for a person's decision (status ``awaiting_approval``)
    awaiting_approval: tuple[str, ...] = ()

    def summary(self) -> dict[str, Any]:
        """The CLI's ``--json`` fields."""
        return {"conversation_id": self.conversation_id, "status": self.status,
                "turn_count": self.turn_count, "final_content": self.final_content,
                "usage": msgspec.to_builtins(self.usage), "error": self.error,
                "warning": self.warning, "max_turns_reached": self.max_turns_reached,
                "has_pending_tools": self.has_pending_tools,
                **({"awaiting_approval": list(self.awaiting_approval)}
                   if self.awaiting_approval else {})}


def result_of(state: ConversationState | StateBuilder) -> RunResult:
    """The ``RunResult`` a conversation in ``state`` reports."""
    if isinstance(state, StateBuilder):
        state = state.state()
    return RunResult(
        conversation_id=state.conversation_id, status=state.status, messages=state.messages,
        final_content=state.final_content, turn_count=state.turn_count,
        completed=state.completed, last_tool_calls=state.last_tool_calls,
        tool_execution_results=state.tool_execution_results,
        has_pending_tools=state.has_pending_tools, usage=state.usage, error=state.error,
        warning=state.warning, max_turns_reached=state.max_turns_reached,
        run_turns=state.run_turns, run_usage=state.run_usage,
        awaiting_approval=state.awaiting_approval)
