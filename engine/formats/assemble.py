"""Normalised transcript items into lifecycle-checked events (the importer's second half).

Every format's entries first become ``Item``s (a user message, an assistant
message, a tool result, a refused duplicate, or a turnlog event), each with
the index of the entry it came from. ``assemble`` turns them into events
and folds each into a ``StateBuilder`` as it goes, so a history the
lifecycle refuses is reported with the entry index before anything is
written.

Rules (what an imported history becomes):

- consecutive assistant messages are one model response (one turn): their
  parts are concatenated. Data Machine ``AI ACTION`` messages of the same
  ``(Turn N)`` join one response even with their results between them;
- every tool call gets an id unique in the conversation
  (``engine.calls.assign_call_ids``: a repeated id is suffixed, the
  original kept as ``provider_id``);
- a tool result answers the first unanswered call with its id (or that
  provider id), or (Data Machine text, which has no ids) the first
  unanswered call; a result that answers nothing is refused with its entry
  index;
- the placeholder an export writes for a call with no recorded result
  (``engine.texts.UNANSWERED``, a failed result) is not a result: at the end
  of the transcript its call stays pending, as it was; earlier, the call is
  ``tool_call_rejected`` with reason ``unrecorded`` (what a runner records);
- a Data Machine duplicate correction answers the pending call as a refused
  duplicate; without an ``AI ACTION`` before it (the reference's own
  transcripts) the refused call is the previous call again;
- assistant messages are ``model_responded`` events with
  ``source="imported"`` and consecutive turns from 1; results are
  ``tool_completed`` with ``source="imported"``;
- when the transcript's last entry leaves a final answer (an assistant
  message without tool calls), ``conversation_completed`` ends it;
  otherwise the conversation stays open (awaiting the model, or tools) so
  ``turnlog resume`` can continue it. A final answer followed by a new user
  message completed its run (``conversation_completed`` before the user
  message). Turnlog events are taken as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from turnlog.engine.tools.calls import assign_call_ids
from ..errors import InvalidTransition, TranscriptOrderError
from turnlog.engine.model.events import (
    ConversationCompleted,
    ConversationStarted,
    Event,
    ModelResponded,
    ToolCallRejected,
    ToolCompleted,
    UserMessage,
)
from turnlog.engine.model.machine import Lifecycle
from turnlog.engine.model.messages import Part, ToolCall
from turnlog.engine.model.state import StateBuilder
from turnlog.engine.loop.texts import UNANSWERED

__all__ = ["Item", "assemble"]


@dataclass
class Item:
    """One normalised transcript entry (or part of one); ``index`` is the entry's position.

    ``kind``: ``user``, ``assistant``, ``result``, ``duplicate`` or ``event``.
    """

    kind: str
    index: int
    parts: tuple[Part, ...] = ()
    timestamp: str | None = None
    recorded_at: str | None = None
    context: str | None = None
    provider: str = ""
    turn_hint: int | None = None
    call_id: str | None = None
    name: str = ""
    content: str = ""
    success: bool = True
    data: Any = None
    error: str | None = None
    event: Event | None = None


@dataclass
class _Group:
    """An assistant response being gathered, with the results that answer it so far."""

    index: int
    parts: list[Part]
    timestamp: str | None
    recorded_at: str | None
    provider: str
    turn_hint: int | None
    results: list[tuple[Event, str | None, int]] = field(default_factory=list)
    answered: set[str] = field(default_factory=set)

    @property
    def calls(self) -> list[ToolCall]:
        return [p for p in self.parts if type(p) is ToolCall]


class _Taken:
    """The call ids already used: the conversation's and the open response's."""

    def __init__(self, builder: StateBuilder, group: _Group) -> None:
        self.builder, self.group = builder, group

    def __contains__(self, call_id: object) -> bool:
        return call_id in self.builder.call_ids or any(c.id == call_id for c in self.group.calls)


class _Assembler:
    def __init__(self, started: ConversationStarted) -> None:
        self.builder = StateBuilder()
        self.events: list[Event] = []
        self.stamps: list[str | None] = []
        self.group: _Group | None = None
        self.last_call: ToolCall | None = None
        self._apply(started, None, 0)

    def _apply(self, event: Event, stamp: str | None, index: int) -> None:
        try:
            self.builder.apply(event)
        except InvalidTransition as exc:
            raise TranscriptOrderError(f"entry {index}: {exc}", index=index) from None
        self.events.append(event)
        self.stamps.append(stamp)

    def flush(self) -> None:
        group, self.group = self.group, None
        if group is None:
            return
        calls = group.calls
        self._apply(ModelResponded(
            turn=self.builder.turn_count + 1, parts=tuple(group.parts),
            stop_reason="tool_use" if calls else "end_turn", provider=group.provider,
            source="imported", timestamp=group.timestamp), group.recorded_at, group.index)
        for event, stamp, index in group.results:
            self._apply(event, stamp, index)
        if calls:
            self.last_call = calls[-1]

    def assistant(self, item: Item) -> None:
        group = self.group
        if group is not None and (
                (item.turn_hint is not None and item.turn_hint == group.turn_hint)
                or (not group.calls and not group.results)):
            group.parts.extend(assign_call_ids(item.parts, _Taken(self.builder, group)))
            group.turn_hint = group.turn_hint if group.turn_hint is not None else item.turn_hint
            return
        self.flush()
        self.group = _Group(item.index, list(assign_call_ids(item.parts, self.builder.call_ids)),
                            item.timestamp, item.recorded_at, item.provider, item.turn_hint)

    def _pending(self, item: Item) -> ToolCall:
        group = self.group
        open_calls = [c for c in group.calls if c.id not in group.answered] if group else []
        if item.call_id is None:
            if open_calls:
                return open_calls[0]
            raise TranscriptOrderError(
                f"entry {item.index}: a tool response with no unanswered AI ACTION before it",
                index=item.index)
        for call in open_calls:  # a repeated provider id answers its calls in order
            if call.id == item.call_id or call.provider_id == item.call_id:
                return call
        raise TranscriptOrderError(
            f"entry {item.index}: tool result for call {item.call_id!r} answers no pending "
            "tool call", index=item.index)

    def result(self, item: Item) -> None:
        call = self._pending(item)
        self.group.answered.add(call.id)
        event = ToolCompleted(
            call_id=call.id, name=item.name or call.name, success=item.success,
            content=item.content, data=item.data if item.success else None,
            error=None if item.success else (item.error or item.content), source="imported")
        self.group.results.append((event, item.recorded_at, item.index))

    def unrecorded(self, item: Item) -> None:
        """The export's placeholder for a missing result, before more history: no result."""
        call = self._pending(item)
        self.group.answered.add(call.id)
        self.group.results.append((ToolCallRejected(
            call_id=call.id, name=call.name, reason="unrecorded", content=UNANSWERED,
            arguments=call.arguments), item.recorded_at, item.index))

    def duplicate(self, item: Item) -> None:
        group = self.group
        if group is None or all(c.id in group.answered for c in group.calls):
            previous = (group.calls[-1] if group and group.calls else self.last_call)
            if previous is None:
                raise TranscriptOrderError(
                    f"entry {item.index}: a duplicate correction with no tool call before it",
                    index=item.index)
            call = ToolCall(id=f"dm_{item.index}", name=previous.name,
                            arguments=previous.arguments, raw_arguments=previous.raw_arguments)
            if group is None:
                raise TranscriptOrderError(
                    f"entry {item.index}: a duplicate correction outside a model turn",
                    index=item.index)
            group.parts.append(call)
        else:
            call = self._pending(Item("duplicate", item.index))
        group.answered.add(call.id)
        group.results.append((ToolCallRejected(
            call_id=call.id, name=call.name, reason="duplicate", content=item.content,
            arguments=call.arguments), item.recorded_at, item.index))

    def _complete(self, item: Item) -> None:
        self._apply(ConversationCompleted(final_content=self.builder.final_content),
                    item.recorded_at, item.index)

    def other(self, item: Item) -> None:
        self.flush()
        if item.kind == "user":
            if self.builder.lifecycle is Lifecycle.ANSWERED:
                # a final answer followed by a new request: that run completed
                self._complete(item)
            self._apply(UserMessage(parts=item.parts, timestamp=item.timestamp,
                                    context=item.context), item.recorded_at, item.index)
        else:
            self._apply(item.event, item.recorded_at, item.index)


def _placeholder(item: Item) -> bool:
    """The failed result an export writes where no result was recorded (not a result)."""
    return item.kind == "result" and not item.success and item.content == UNANSWERED


def assemble(started: ConversationStarted, items: list[Item]
             ) -> tuple[list[Event], list[str | None], StateBuilder]:
    """``(events, recorded_at stamps, folded state)`` for ``items``; ``events[0]`` is ``started``.

    Raises ``TranscriptOrderError`` naming the entry index of the first item
    the lifecycle refuses; nothing is written by this function.
    """
    asm = _Assembler(started)
    # placeholders after the last real item: their calls were pending when exported
    trailing = next((n for n in range(len(items), 0, -1) if not _placeholder(items[n - 1])), 0)
    for at, item in enumerate(items):
        if item.kind == "assistant":
            asm.assistant(item)
        elif item.kind == "result":
            if asm.group is None:
                raise TranscriptOrderError(
                    f"entry {item.index}: tool result for call {item.call_id!r} with no model "
                    "turn before it", index=item.index)
            if not _placeholder(item):
                asm.result(item)
            elif at < trailing:
                asm.unrecorded(item)
        elif item.kind == "duplicate":
            asm.duplicate(item)
        else:
            asm.other(item)
    asm.flush()
    if items and items[-1].kind != "event" and asm.builder.lifecycle is Lifecycle.ANSWERED:
        asm._complete(items[-1])
    return asm.events, asm.stamps, asm.builder
