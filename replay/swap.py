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
from typing import Any

import msgspec

from turnlog.engine.audit.erasure import refuse_erased
from turnlog.engine.errors import ConversationExistsError
from turnlog.engine.model.events import ConversationStarted, RejectReason, ReplayRef, UserMessage
from turnlog.engine.loop.texts import refusal_message
from turnlog.journal import JournalProtocol

from .errors import ReplayError
from .rebuild import lineage_events, rebuild, user_runs_of
from .swap_runner import SwapTools, ToolPolicy, loop_runner

__all__ = ["Runner", "SwapResult", "SwapTools", "ToolPolicy", "swap", "swap_started",
           "unrecorded_message", "user_runs"]

def unrecorded_message(name: str, arguments: dict[str, Any], source: str) -> str:
    """What the model reads when a recorded-tools replay has no result for its call."""
    return refusal_message(RejectReason.UNRECORDED, name, {"source": source}, arguments=arguments)


def refused_message(name: str) -> str:
    """What the model reads when the replay's tool policy is ``refuse``."""
    return refusal_message(RejectReason.REFUSED, name)


def swap_started(journal: JournalProtocol, source: str, new_id: str, *, provider: str, model: str,
                 tools: ToolPolicy) -> ConversationStarted:
    """The ``conversation_started`` of a provider-swap replay of ``source``."""
    state = rebuild(journal, source)
    return ConversationStarted(
        conversation_id=new_id, provider=provider, model=model, mode=state.mode,
        max_turns=state.max_turns, system=state.system, tools=state.tools,
        duplicate_policy=state.duplicate_policy, parameters=state.parameters,
        metadata=state.metadata, replay_of=ReplayRef(conversation_id=source, tools=tools))


def user_runs(journal: JournalProtocol, source: str) -> list[list[UserMessage]]:
    """The recorded user messages, grouped by run (consecutive messages go in together)."""
    return user_runs_of(event for _row, event in lineage_events(journal, source))


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


def swap(journal: JournalProtocol, conversation_id: str, provider: Any, *, model: str | None = None,
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
    refuse_erased(journal, conversation_id, "replay")
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
    runner = runner or loop_runner
    runner(journal, started, runs, provider, swap_tools, live_tools)
    state = rebuild(journal, new_id)
    return SwapResult(conversation_id=new_id, replay_of=conversation_id, tools=tools,
                      status=state.status, provider=provider.name, model=model,
                      error=state.error)
