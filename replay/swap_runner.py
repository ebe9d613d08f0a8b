"""The provider-swap runner: the engine's loop answering tool calls under a swap's tool policy.

``SwapTools`` answers the swapped run's calls from the source's recorded
results (policy ``recorded``), refuses them all (``refuse``) or lets them run
(``live``). ``loop_runner`` records the swap with ``engine.loop.Loop``: a call
the policy refuses is refused through the loop's public refusal hook
(``Loop(refuse=...)``), where the loop refuses calls, before anything would
run; recorded results are served by ``SwapExecutor``.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from turnlog.engine.model.conversation import Conversation
from turnlog.engine.tools.duplicates import call_key
from turnlog.engine.model.events import (
    ConversationStarted,
    ModelResponded,
    Refusal,
    RejectReason,
    ToolCallRejected,
    ToolCompleted,
    UserMessage,
)
from turnlog.engine.tools.executor import ToolExecution
from turnlog.engine.loop import Loop
from turnlog.engine.model.messages import ToolCall
from turnlog.engine.loop.texts import refusal_message
from turnlog.engine.tools import Tool, ToolContext, ToolRegistry
from turnlog.journal import JournalProtocol

from .errors import ReplayError
from .rebuild import lineage_events
from .tools import execution_of, spec_registry

__all__ = ["POLICIES", "SwapExecutor", "SwapTools", "ToolPolicy", "loop_runner"]

ToolPolicy = Literal["recorded", "live", "refuse"]
POLICIES = ("recorded", "live", "refuse")


class SwapTools:
    """Answers the swapped run's tool calls under a policy, from the source's recorded results.

    Calls match recorded ones by ``call_key`` under the source's duplicate
    policy (same tool, same canonical arguments, volatile keys left out);
    repeated calls get the recorded results in order, the last one again
    once they run out. ``refusal(call)`` says whether the policy refuses a
    call; ``outcome(call)`` returns the event that answers it (``None``
    under ``live``: run the tool).
    """

    def __init__(self, journal: JournalProtocol, source: str, policy: ToolPolicy) -> None:
        if policy not in POLICIES:
            raise ReplayError(f"unknown tool policy {policy!r}; expected one of "
                              f"{', '.join(POLICIES)}")
        self.source, self.policy = source, policy
        self.recorded: dict[str, list[ToolCompleted]] = {}
        self._served: dict[str, int] = {}
        self._policy: Any = None
        if policy == "recorded":
            self._index(journal)

    def _key(self, call: ToolCall) -> str:
        return call_key(call.name, call.arguments, self._policy,
                        call.raw_arguments if call.invalid else None)

    def _index(self, journal: JournalProtocol) -> None:
        calls: dict[str, ToolCall] = {}
        for _row, event in lineage_events(journal, self.source):
            if type(event) is ConversationStarted and self._policy is None:
                self._policy = event.duplicate_policy
            elif type(event) is ModelResponded:
                calls.update((p.id, p) for p in event.parts if type(p) is ToolCall)
            elif type(event) is ToolCompleted and event.call_id in calls:
                self.recorded.setdefault(self._key(calls[event.call_id]), []).append(event)

    def refusal(self, call: ToolCall) -> Refusal | None:
        """The policy's refusal of ``call`` (``refuse``; ``recorded`` with no result), else None."""
        if self.policy == "refuse":
            return Refusal(reason=RejectReason.REFUSED)
        if self.policy == "recorded" and (call.invalid or not self.recorded.get(self._key(call))):
            return Refusal(reason=RejectReason.UNRECORDED, details={"source": self.source})
        return None

    def refuse(self, state: Any, call: ToolCall, tool: Tool) -> Refusal | None:
        """The loop's refusal hook (``Loop(refuse=...)``): ``refusal(call)``."""
        return self.refusal(call)

    def peek(self, call: ToolCall) -> ToolCompleted | ToolCallRejected | None:
        """What ``outcome`` would answer, without using up a recorded result."""
        return self.outcome(call, consume=False)

    def outcome(self, call: ToolCall, *, consume: bool = True
                ) -> ToolCompleted | ToolCallRejected | None:
        """The answer to ``call`` under the policy (``None``: run it live)."""
        if self.policy == "live":
            return None
        refusal = self.refusal(call)
        if refusal is not None:
            return ToolCallRejected(
                call_id=call.id, name=call.name, reason=refusal.reason,
                content=refusal_message(refusal.reason, call.name, refusal.details,
                                        arguments=call.arguments),
                arguments=call.arguments, details=refusal.details)
        key = self._key(call)
        results = self.recorded[key]
        i = self._served.get(key, 0)
        if consume:
            self._served[key] = i + 1
        done = results[min(i, len(results) - 1)]
        return msgspec.structs.replace(done, call_id=call.id, source="recorded",
                                       duration_ms=None)


class SwapExecutor:
    """The loop's ``ToolExecutor`` for a provider swap under the ``recorded`` policy."""

    def __init__(self, tools: SwapTools) -> None:
        self.tools = tools

    def execute(self, call: ToolCall, tool: Tool, context: ToolContext,
                validated: dict[str, Any]) -> ToolExecution:
        """The recorded result matching the call's tool name and canonical arguments."""
        answer = self.tools.outcome(call)
        if type(answer) is not ToolCompleted:  # refused calls never reach the executor
            raise ReplayError(f"no recorded result for {call.name} ({call.id})")
        return execution_of(answer)


def loop_runner(journal: JournalProtocol, started: ConversationStarted, runs: list[list[UserMessage]],
                provider: Any, tools: SwapTools, live_tools: Any = None) -> None:
    """Record a provider swap with the engine's loop: one run per recorded user turn."""
    refuse = tools.refuse if tools.policy != "live" else None
    if tools.policy == "live":
        registry = live_tools if isinstance(live_tools, ToolRegistry) else ToolRegistry(
            live_tools or ())
        loop = Loop(journal, provider, registry)
    else:
        loop = Loop(journal, provider, spec_registry(started.tools), refuse=refuse,
                    executor=SwapExecutor(tools))
    conv = Conversation.start(journal, started, rest=runs[0])
    loop.drive(conv)
    for group in runs[1:]:
        conv.append(*group)
        loop.drive(conv)
