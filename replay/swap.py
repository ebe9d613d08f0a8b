"""Provider swap: re-run a recorded conversation's user inputs against another provider.

The new conversation starts with the recorded configuration (system
directive, tools, duplicate policy, parameters, mode, turn limit) and the
target's provider and model, and records ``replay_of=ReplayRef(source,
tools=policy)``. The recorded user messages are sent again, one run each, as
in the recording. Tool calls follow ``tools``:

- ``recorded`` (default): a call whose tool name and canonical arguments match
  a recorded call is answered with that call's recorded result (``source``
  ``recorded``; repeated calls get the recorded results in order, the last
  one again once they run out); any other call is refused with
  ``ToolCallRejected(reason="unrecorded")`` and a message telling the model the
  tool was not run;
- ``live``: the registered tools run, as in a live run;
- ``refuse``: every call is refused (``reason="refused"``).

What does not cross providers blindly (done by the provider adapters, see
``engine.providers._common.plan_history``): thinking blocks carry the
signature of the provider that made them and are sent back only to that
provider, another provider's thinking is dropped from requests (it stays in
the journal); tool-call ids are rewritten to each target's id rules on the
wire, and the neutral history keeps the ids the target minted. A request the
target refuses (``BadRequestError`` and other provider errors) is recorded as
``model_failed`` + ``conversation_failed`` and never becomes history. Every
``model_responded`` records the provider and model that wrote it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Literal

import msgspec

from engine.canonical import canonical_json
from engine.errors import ConversationExistsError, InvalidEventError
from engine.events import (
    ConversationStarted,
    ModelResponded,
    ReplayRef,
    ToolCallRejected,
    ToolCompleted,
    UserMessage,
)
from engine.messages import ToolCall
from journal import Journal

from .errors import ReplayError
from .rebuild import lineage_events, rebuild

__all__ = ["Runner", "SwapResult", "SwapTools", "ToolPolicy", "swap", "swap_started",
           "unrecorded_message", "user_runs"]

ToolPolicy = Literal["recorded", "live", "refuse"]
POLICIES = ("recorded", "live", "refuse")


def unrecorded_message(name: str, arguments: dict[str, Any], source: str) -> str:
    """What the model reads when a recorded-tools replay has no result for its call."""
    return (f"Tool call refused: this conversation replays recorded conversation {source!r} and "
            f"serves tool results only from its recording, which has no {name} call with these "
            f"arguments ({_key_args(arguments)}). The tool was not run; answer without it or "
            "use a call the recording has.")


def refused_message(name: str) -> str:
    """What the model reads when the replay's tool policy is ``refuse``."""
    return (f"Tool call refused: this replay runs with tools disabled, so {name} was not run. "
            "Answer without tools.")


def _key_args(arguments: dict[str, Any]) -> str:
    try:
        return canonical_json(arguments)
    except InvalidEventError:
        return repr(arguments)


class SwapTools:
    """Answers the swapped run's tool calls under a policy, from the source's recorded results.

    ``outcome(call)`` returns the event that answers ``call`` (a
    ``ToolCompleted`` with ``source="recorded"`` or a ``ToolCallRejected``), or
    ``None`` under the ``live`` policy (run the tool).
    """

    def __init__(self, journal: Journal, source: str, policy: ToolPolicy) -> None:
        if policy not in POLICIES:
            raise ReplayError(f"unknown tool policy {policy!r}; expected one of "
                              f"{', '.join(POLICIES)}")
        self.source, self.policy = source, policy
        self.recorded: dict[tuple[str, str], list[ToolCompleted]] = {}
        self._served: dict[tuple[str, str], int] = {}
        if policy == "recorded":
            self._index(journal)

    def _index(self, journal: Journal) -> None:
        calls: dict[str, ToolCall] = {}
        for _row, event in lineage_events(journal, self.source):
            if type(event) is ModelResponded:
                calls.update((p.id, p) for p in event.parts if type(p) is ToolCall)
            elif type(event) is ToolCompleted and event.call_id in calls:
                call = calls[event.call_id]
                self.recorded.setdefault((call.name, _key_args(call.arguments)), []).append(event)

    def peek(self, call: ToolCall) -> ToolCompleted | ToolCallRejected | None:
        """What ``outcome`` would answer, without using up a recorded result."""
        return self.outcome(call, consume=False)

    def outcome(self, call: ToolCall, *, consume: bool = True
                ) -> ToolCompleted | ToolCallRejected | None:
        """The answer to ``call`` under the policy (``None``: run it live)."""
        if self.policy == "live":
            return None
        if self.policy == "refuse":
            return ToolCallRejected(call_id=call.id, name=call.name, reason="refused",
                                    content=refused_message(call.name), arguments=call.arguments)
        key = (call.name, _key_args(call.arguments))
        results = self.recorded.get(key) if not call.invalid else None
        if not results:
            return ToolCallRejected(call_id=call.id, name=call.name, reason="unrecorded",
                                    content=unrecorded_message(call.name, call.arguments,
                                                               self.source),
                                    arguments=call.arguments)
        i = self._served.get(key, 0)
        if consume:
            self._served[key] = i + 1
        done = results[min(i, len(results) - 1)]
        return msgspec.structs.replace(done, call_id=call.id, source="recorded",
                                       duration_ms=None)


def swap_started(journal: Journal, source: str, new_id: str, *, provider: str, model: str,
                 tools: ToolPolicy) -> ConversationStarted:
    """The ``conversation_started`` of a provider-swap replay of ``source``."""
    state = rebuild(journal, source)
    return ConversationStarted(
        conversation_id=new_id, provider=provider, model=model, mode=state.mode,
        max_turns=state.max_turns, system=state.system, tools=state.tools,
        duplicate_policy=state.duplicate_policy, parameters=state.parameters,
        metadata=state.metadata, replay_of=ReplayRef(conversation_id=source, tools=tools))


def user_runs(journal: Journal, source: str) -> list[list[UserMessage]]:
    """The recorded user messages, grouped by run (consecutive messages go in together)."""
    runs: list[list[UserMessage]] = []
    fresh = True
    for _row, event in lineage_events(journal, source):
        if type(event) is UserMessage:
            if fresh:
                runs.append([])
            runs[-1].append(event)
            fresh = False
        elif type(event) is not ConversationStarted:
            fresh = True
    return runs


def new_replay_id(source: str, provider: str) -> str:
    """The default id of a swap replay: ``<source>.replay-<provider>-<random>``."""
    return f"{source}.replay-{provider}-{uuid.uuid4().hex[:8]}"


#: ``runner(journal, started, runs, provider, tools, live_tools)`` records the swapped run.
Runner = Callable[..., None]


class SwapResult(msgspec.Struct, kw_only=True):
    """The new conversation a swap recorded: its id, source, policy and final status."""

    conversation_id: str
    replay_of: str
    tools: str
    status: str
    provider: str
    model: str
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``conversation_id``, ``replay_of``, ``status``, ...)."""
        return msgspec.to_builtins(self)


def swap(journal: Journal, conversation_id: str, provider: Any, *, model: str | None = None,
         tools: ToolPolicy = "recorded", live_tools: Any = None, new_id: str | None = None,
         runner: Runner | None = None) -> SwapResult:
    """Re-run ``conversation_id``'s user inputs against ``provider`` (a ``Provider``).

    ``model`` defaults to the provider's ``model`` attribute, else the
    recorded model. ``live_tools`` are the tools run under the ``live`` policy
    (the loop's tool registry). Returns the new conversation's id and status;
    a provider that refuses a request leaves it ``failed`` (recorded as
    ``model_failed`` + ``conversation_failed``). Raises ``ConversationNotFound``
    for an unknown source, ``ReplayError`` for an unknown policy or a source
    without user input, ``ConversationExistsError`` for a taken ``new_id``.
    """
    source_state = rebuild(journal, conversation_id)
    swap_tools = SwapTools(journal, conversation_id, tools)
    model = model or getattr(provider, "model", None) or source_state.model
    new_id = new_id or new_replay_id(conversation_id, provider.name)
    if journal.last_seq(new_id):
        raise ConversationExistsError(f"cannot replay into {new_id!r}: conversation "
                                      f"{new_id!r} already exists in {journal.path}")
    runs = user_runs(journal, conversation_id)
    if not runs:
        raise ReplayError(f"conversation {conversation_id!r} has no user message to replay")
    started = swap_started(journal, conversation_id, new_id, provider=provider.name, model=model,
                           tools=tools)
    if runner is None:
        from .driver import loop_runner as runner
    runner(journal, started, runs, provider, swap_tools, live_tools)
    state = rebuild(journal, new_id)
    return SwapResult(conversation_id=new_id, replay_of=conversation_id, tools=tools,
                      status=state.status, provider=provider.name, model=model,
                      error=state.error)
