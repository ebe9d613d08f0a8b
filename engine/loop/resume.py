"""Crash-safe resume rules: idempotency keys and the interrupted-call outcome.

When a process dies, the journal says exactly how far the run got. The loop
(``Loop.resume``) continues from there by these rules:

- a ``model_requested`` without a response: the request is sent again (it is
  rebuilt from the same state, so its digest is the same);
- a tool call with a recorded ``tool_completed``/``tool_call_rejected``: never
  run again, its recorded result stands;
- a ``tool_started`` without a result (the process died while the tool ran):
  re-run only if the tool is ``read_only`` or ``idempotent``, with the same
  ``idempotency_key`` it had the first time; otherwise the call is recorded as
  failed, ``outcome unknown: interrupted``, so the model can decide.

The idempotency key is derived from the chain of the call, as recorded: the
digest of the request the call answers (``model_requested.digest``: the
whole history up to it), the provider's response id, the turn, the call's
position in the response and its call key (``engine.duplicates.call_key``:
tool name and canonical arguments). It never uses the conversation's id
(an exported conversation imported under another id keeps its keys, so it
replays) nor the provider's call id (it changes between attempts)::

    >>> from turnlog.engine.model.messages import ToolCall
    >>> from turnlog.engine.model.state import ConversationState
    >>> s = ConversationState(request_digest="ab", response_id="r1", turn_count=2,
    ...                       last_tool_calls=(ToolCall(id="x", name="add", arguments={"a": 1}),))
    >>> idempotency_key(s, s.last_tool_calls[0]) == idempotency_key(
    ...     s, ToolCall(id="x", name="add", arguments={"a": 1.0}))
    True
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from turnlog.journal import JournalProtocol

from turnlog.engine.tools.duplicates import call_key
from turnlog.engine.model.events import RunInterrupted
from turnlog.engine.model.messages import ToolCall

__all__ = ["INTERRUPTED", "idempotency_key", "record_interruption"]

#: The error recorded for a side-effecting call whose process died mid-run.
INTERRUPTED = "outcome unknown: interrupted"


def record_interruption(journal: JournalProtocol, conversation_id: str, *, reason: str = "sigint",
                        message: str = "") -> bool:
    """Record that the run of an unfinished conversation was stopped (``run_interrupted``).

    A marker for people (``turnlog show``): it changes nothing about how the
    run resumes. Returns ``False`` (and writes nothing) when the conversation
    does not exist or has nothing unfinished to mark.
    """
    from turnlog.engine.model.conversation import Conversation

    if not journal.last_seq(conversation_id):
        return False
    conv = Conversation.open(journal, conversation_id)
    event = RunInterrupted(reason=reason, message=message)
    if not conv.builder.accepts(event):
        return False
    conv.append(event)
    return True


def idempotency_key(state: Any, call: ToolCall) -> str:
    """A stable key for one logical call of ``state``'s last response (see the module docstring).

    ``state`` is a ``ConversationState`` or the live ``StateBuilder``; a
    ``call`` not among its ``last_tool_calls`` takes position -1.
    """
    position = -1
    for i, c in enumerate(state.last_tool_calls):
        if c.id == call.id:
            position = i
            break
    raw = call.raw_arguments if call.invalid else None
    chain = (state.request_digest, state.response_id or "", str(state.turn_count), str(position),
             call_key(call.name, call.arguments, raw_arguments=raw))
    data: list[bytes] = []  # each field length-prefixed (8 bytes, big-endian), then hashed
    for field in chain:
        encoded = field.encode("utf-8", "surrogatepass")
        data += (len(encoded).to_bytes(8, "big"), encoded)
    return hashlib.sha256(b"".join(data)).hexdigest()[:32]
