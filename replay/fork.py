"""Fork: a new conversation that continues another from any seq, without copying it.

The fork's own stream starts with a ``conversation_started`` carrying the
parent's complete configuration (with any overrides) and a ``ForkRef`` naming
the parent, the seq and the parent's hash there; the journal chains the
fork's first event to that hash, so ``verify`` checks the fork against its
parent. Storage is O(the fork's own events)::

    >>> from turnlog.journal import Journal
    >>> from turnlog.engine.model.conversation import Conversation
    >>> from turnlog.engine.model.events import ConversationStarted, UserMessage
    >>> j = Journal(":memory:")
    >>> c = Conversation.start(j, ConversationStarted(conversation_id="c", provider="p", model="m"))
    >>> _ = c.append(UserMessage.of("hi"))
    >>> fork(j, "c", 1, new_id="f", model="m2", message="hello instead")
    'f'
    >>> j.last_seq("f"), rebuild(j, "f").model, rebuild(j, "f").messages[0].parts[0].text
    (2, 'm2', 'hello instead')
"""

from __future__ import annotations

import uuid
from typing import Any

from turnlog.engine.audit.erasure import refuse_erased
from turnlog.engine.model.conversation import Conversation, load_state
from turnlog.engine.errors import ConversationExistsError, InvalidTransition
from turnlog.engine.model.events import ConversationStarted, DuplicatePolicy, ForkRef, ToolSpec, UserMessage
from turnlog.engine.model.state import StateBuilder
from turnlog.journal import JournalProtocol

from .errors import ForkPointError
from .rebuild import lineage_events, rebuild

__all__ = ["check_fork_point", "fork", "fork_started", "message_fork_points"]

_UNSET: Any = object()


def fork_started(journal: JournalProtocol, conversation_id: str, at_seq: int, new_id: str,
                 **overrides: Any) -> ConversationStarted:
    """The ``conversation_started`` a fork of ``conversation_id`` at ``at_seq`` begins with.

    It copies the parent's configuration as it stood at ``at_seq``; keyword
    ``overrides`` (``provider``, ``model``, ``system``, ``mode``, ``max_turns``,
    ``tools``, ``duplicate_policy``, ``parameters``, ``metadata``,
    ``replay_of``) replace single fields. Raises ``ForkPointError`` for a seq
    the parent does not have.
    """
    _check_in_range(journal, conversation_id, at_seq)
    state = rebuild(journal, conversation_id, at_seq)
    config: dict[str, Any] = dict(
        provider=state.provider, model=state.model, mode=state.mode, max_turns=state.max_turns,
        system=state.system, tools=state.tools, duplicate_policy=state.duplicate_policy,
        parameters=state.parameters, metadata=state.metadata)
    config.update({k: v for k, v in overrides.items() if v is not _UNSET and v is not None})
    return ConversationStarted(
        conversation_id=new_id,
        fork=ForkRef(conversation_id=conversation_id, seq=at_seq,
                     hash=journal.hash_at(conversation_id, at_seq)),
        **config)


def fork(journal: JournalProtocol, conversation_id: str, at_seq: int, *, new_id: str | None = None,
         provider: str | None = None, model: str | None = None, system: str | None = None,
         message: str | None = None, mode: str | None = None, max_turns: int | None = None,
         tools: tuple[ToolSpec, ...] | None = None,
         duplicate_policy: DuplicatePolicy | None = None,
         parameters: dict[str, Any] | None = None,
         metadata: dict[str, Any] | None = None) -> str:
    """Fork ``conversation_id`` after its seq ``at_seq``; return the new conversation's id.

    The fork shares the parent's first ``at_seq`` events (read through the
    parent, never copied) and continues with the overrides given. ``message``
    records a user message right after the fork's start, in the same
    transaction (run the loop on the fork to get the model's answer). Forks of
    forks work. ``new_id`` defaults to ``<parent>.fork<seq>-<random>``.

    Raises ``ConversationNotFound``, ``ForkPointError`` (no such seq, or a
    user message where the parent was waiting for something else, e.g. tool
    results), ``ConversationExistsError`` (``new_id`` is taken) or
    ``ConversationErasedError`` (its content, or its parent's, was erased); on any error
    the journal is left as it was.
    """
    if journal.last_seq(conversation_id):
        refuse_erased(journal, conversation_id, "fork")
    new_id = new_id or f"{conversation_id}.fork{at_seq}-{uuid.uuid4().hex[:8]}"
    if journal.last_seq(new_id):
        raise ConversationExistsError(f"cannot fork into {new_id!r}: conversation {new_id!r} "
                                      f"already exists in {journal.path}")
    started = fork_started(
        journal, conversation_id, at_seq, new_id, provider=provider, model=model, system=system,
        mode=mode, max_turns=max_turns, tools=tools, duplicate_policy=duplicate_policy,
        parameters=parameters, metadata=metadata)
    then = (UserMessage.of(message),) if message is not None else ()
    try:
        Conversation.start(journal, started, rest=then)
    except InvalidTransition as exc:
        why = exc.reason or f"it is {exc.state.replace('_', ' ')} there"
        raise _no_message_here(journal, conversation_id, at_seq, why) from None
    return new_id


def check_fork_point(journal: JournalProtocol, conversation_id: str, at_seq: int, *,
                     message: bool = False) -> None:
    """Raise the ``ForkPointError`` ``fork`` would raise for this point, writing nothing.

    With ``message`` the point must also be one a user message can follow
    (the error then lists those that can).
    """
    _check_in_range(journal, conversation_id, at_seq)
    if message and at_seq not in message_fork_points(journal, conversation_id):
        state = rebuild(journal, conversation_id, at_seq)
        why = (f"{len(state.pending_calls)} tool call(s) still await results"
               if state.pending_calls else f"it is {state.lifecycle.value.replace('_', ' ')} there")
        raise _no_message_here(journal, conversation_id, at_seq, why)


def _no_message_here(journal: JournalProtocol, conversation_id: str, at_seq: int,
                     why: str) -> ForkPointError:
    points = message_fork_points(journal, conversation_id)
    where = (f"a message can follow seq {_ranges(points)}" if points
             else "no seq of it can take a message")
    return ForkPointError(f"cannot fork {conversation_id} at seq {at_seq} with a message "
                          f"({why}); {where}")


def message_fork_points(journal: JournalProtocol, conversation_id: str) -> list[int]:
    """The seqs of ``conversation_id`` after which a fork may continue with a user message.

    Mid-batch seqs (tool calls still awaiting results, a request in flight)
    are not among them. One fold of the conversation's history.
    """
    builder = StateBuilder()
    probe = UserMessage.of("")
    points = []
    for row, event in lineage_events(journal, conversation_id):
        builder.apply(event, row.seq)
        if row.stream_id == conversation_id and builder.accepts(probe):
            points.append(row.seq)
    return points


def _ranges(seqs: list[int]) -> str:
    """``[1, 2, 3, 7, 9, 10]`` as ``1-3, 7, 9-10``."""
    out: list[str] = []
    start = prev = seqs[0]
    for s in [*seqs[1:], None]:
        if s is not None and s == prev + 1:
            prev = s
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if s is not None:
            start = prev = s
    return ", ".join(out)


def _check_in_range(journal: Any, conversation_id: str, at_seq: Any) -> None:
    """``ConversationNotFound`` or ``ForkPointError`` unless ``at_seq`` is one of its seqs."""
    last = journal.last_seq(conversation_id)
    if last == 0:
        load_state(journal, conversation_id)  # ConversationNotFound, with the usual message
    if type(at_seq) is not int or not 1 <= at_seq <= last:
        raise ForkPointError(f"cannot fork {conversation_id!r} at seq {at_seq!r}: "
                             f"it has seqs 1..{last}")
