"""Runners: another agent runtime may take a run over and hand back its result.

The built-in ``Loop`` is one runner. An external one implements ``Runner``::

    class MyRuntime:
        def run(self, request: RunRequest) -> RunnerResult | None:
            if request.mode != "chat":
                return None                       # let the built-in loop run it
            reply = other_runtime(request.messages, request.tools)
            return RunnerResult(messages=[{"role": "assistant", "content": reply}],
                                final_content=reply, completed=True)

    Loop(journal, provider, tools, runner=MyRuntime())

(the reference's ``agents_api_conversation_runner`` filter). ``None`` means
"not mine". The result's ``messages`` are the messages the runner *added*
(assistant messages with text and tool calls, tool messages with results),
as neutral ``Message``s or ``{"role", "content"}`` dicts; they are normalised
into journal events — ``model_responded(source="runner")`` and
``tool_completed(source="runner")`` — and appended in one transaction, so a
result the lifecycle cannot accept (a result for a call nobody made) leaves
the journal as it was and raises ``RunnerError``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import msgspec

from turnlog.engine.errors import InvalidTransition, RunnerError
from turnlog.engine.model.events import (
    ConversationCompleted,
    ConversationFailed,
    Event,
    ModelResponded,
    ToolCallRejected,
    ToolCompleted,
    ToolSpec,
    TurnLimitReached,
)
from turnlog.engine.model.messages import Message, Text, ToolCall, ToolResult, Usage, text_of
from .texts import UNANSWERED

__all__ = ["RunRequest", "Runner", "RunnerResult", "apply_runner_result", "normalise_message"]


class RunRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What a runner gets: the conversation so far and its configuration."""

    conversation_id: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    provider: str
    model: str
    mode: str = "chat"
    system: str = ""
    metadata: dict[str, Any] = {}
    max_turns: int = 8
    single_turn: bool = False


class RunnerResult(msgspec.Struct, kw_only=True):
    """What a runner hands back (the reference's result shape, the parts that are news)."""

    messages: Sequence[Message | dict[str, Any]] = ()
    final_content: str = ""
    completed: bool = True
    usage: Usage = Usage()
    error: str | None = None
    warning: str | None = None
    max_turns_reached: bool = False


@runtime_checkable
class Runner(Protocol):
    """Takes a run over (returns a ``RunnerResult``) or declines (returns ``None``)."""

    def run(self, request: RunRequest) -> RunnerResult | None:
        """Run the conversation in ``request`` or return ``None``."""
        ...


def normalise_message(message: Message | dict[str, Any], where: str = "") -> Message:
    """A neutral ``Message`` from a ``Message`` or a ``{"role", "content"}`` dict.

    A dict's ``content`` may be a string (one text part) or a list of neutral
    parts; a ``tool`` dict needs ``tool_call_id`` and ``name``.
    """
    if isinstance(message, Message):
        return message
    if not isinstance(message, dict) or "role" not in message:
        raise RunnerError(f"runner message{where} is not a Message or a dict with a role")
    role, content = message["role"], message.get("content", "")
    try:
        if role == "tool" and isinstance(content, str):
            return Message(role="tool", parts=(ToolResult(
                call_id=message["tool_call_id"], name=message.get("name", ""), content=content,
                is_error=bool(message.get("is_error", False))),))
        if isinstance(content, str):
            return Message(role=role, parts=(Text(text=content),) if content else ())
        return msgspec.convert({"role": role, "parts": content}, Message)
    except (KeyError, msgspec.ValidationError) as exc:
        raise RunnerError(f"runner message{where} cannot be read: {exc}") from None


def runner_events(result: RunnerResult, first_turn: int, provider: str,
                  model: str) -> list[Event]:
    """The journal events that record ``result`` (turns numbered from ``first_turn``)."""
    messages = [normalise_message(m, f" {i}") for i, m in enumerate(result.messages)]
    last_assistant = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    events: list[Event] = []
    pending: dict[str, ToolCall] = {}
    turn = first_turn
    answered = False
    for i, message in enumerate(messages):
        if message.role == "assistant":
            calls = [p for p in message.parts if type(p) is ToolCall]
            events.extend(_unanswered(pending))
            events.append(ModelResponded(
                turn=turn, parts=message.parts, stop_reason="tool_use" if calls else "end_turn",
                usage=result.usage if i == last_assistant else Usage(), provider=provider,
                model=message.model or model, source="runner"))
            pending = {c.id: c for c in calls}
            answered = not calls
            turn += 1
        elif message.role == "tool":
            for part in message.parts:
                if type(part) is ToolResult:
                    pending.pop(part.call_id, None)
                    events.append(ToolCompleted(call_id=part.call_id, name=part.name,
                                                success=not part.is_error, content=part.content,
                                                source="runner"))
        else:
            raise RunnerError(f"runner message {i} has role {message.role!r}; a runner may only "
                              "add assistant and tool messages")
    events.extend(_unanswered(pending))
    if result.error:
        events.append(ConversationFailed(error=result.error, error_type="runner"))
    elif answered:
        events.append(ConversationCompleted(
            final_content=result.final_content or text_of(messages[last_assistant].parts)))
    elif result.max_turns_reached:
        events.append(TurnLimitReached(turn_count=turn - 1, max_turns=turn - first_turn,
                                       pending_tool_calls=True,
                                       warning=result.warning or "the runner reached max turns"))
    return events


def _unanswered(pending: dict[str, ToolCall]) -> list[Event]:
    return [ToolCallRejected(call_id=c.id, name=c.name, reason="unrecorded", content=UNANSWERED,
                             arguments=c.arguments) for c in pending.values()]


def apply_runner_result(conv: Any, result: RunnerResult,
                        append: Callable[..., None] | None = None) -> None:
    """Record ``result`` on ``conv`` in one transaction, or raise ``RunnerError`` (nothing written)."""
    b = conv.builder
    events = runner_events(result, b.turn_count + 1, b.provider, b.model)
    try:
        (append or (lambda c, *e: c.append(*e)))(conv, *events)
    except InvalidTransition as exc:
        raise RunnerError(f"the runner's result cannot be recorded: {exc}") from None
