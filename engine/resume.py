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

The idempotency key is derived from the conversation id, the turn and the
canonical arguments — never from the provider's call id, which changes
between attempts::

    >>> idempotency_key("c1", 2, "add", {"b": 2, "a": 1}) == idempotency_key("c1", 2, "add", {"a": 1.0, "b": 2})
    True
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from journal import Journal

from .duplicates import call_key
from .events import DuplicatePolicy, RunInterrupted

__all__ = ["INTERRUPTED", "idempotency_key", "record_interruption"]

#: The error recorded for a side-effecting call whose process died mid-run.
INTERRUPTED = "outcome unknown: interrupted"
_NO_POLICY = DuplicatePolicy()


def idempotency_key(conversation_id: str, turn: int, name: str, arguments: dict[str, Any]) -> str:
    """A stable key for one logical call: same conversation, turn, tool and canonical arguments."""
    key = f"{conversation_id}\x00{turn}\x00{call_key(name, arguments, _NO_POLICY)}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def record_interruption(journal: Journal, conversation_id: str, *, reason: str = "sigint",
                        message: str = "") -> bool:
    """Record that the run of an unfinished conversation was stopped (``run_interrupted``).

    A marker for people (``turnlog show``): it changes nothing about how the
    run resumes. Returns ``False`` (and writes nothing) when the conversation
    does not exist or has nothing unfinished to mark.
    """
    from .conversation import Conversation

    if not journal.last_seq(conversation_id):
        return False
    conv = Conversation.open(journal, conversation_id)
    event = RunInterrupted(reason=reason, message=message)
    if not conv.builder.accepts(event):
        return False
    conv.append(event)
    return True
