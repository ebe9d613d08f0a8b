"""Human approval of tool calls, recorded in the journal.

A tool declares ``needs_approval=True`` or a predicate over its validated
arguments (``needs_approval=lambda args: args["amount"] > 100``); a run may
also mark tools (``Loop(approve=[...])``, ``turnlog run --approve TOOL``),
recorded as ``conversation_started.approve`` so every resume knows. Before
such a call runs the loop appends ``approval_requested`` (the call's
canonical-arguments hash and its tool's spec hash) and the run pauses with
status ``awaiting_approval``.

``decide`` (``Loop.decide``, ``turnlog approve``) appends one
``approval_decided`` from any process, with the journal's optimistic
concurrency. ``resume`` then runs an approved call once (with the approver's
edited arguments, if any) while its tool's spec hash still matches, and
answers a denied one as its tool result (``denied by NAME: reason``).

>>> arguments_hash("pay", {"amount": 5}) == arguments_hash("pay", {"amount": 5.0})
True
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec

from turnlog.journal import ConcurrencyError, format_timestamp

from turnlog.engine.model.canonical import digest
from .duplicates import call_key
from turnlog.engine.errors import EngineError, InvalidEventError, TranscriptLockContention
from turnlog.engine.model.events import ApprovalDecided, ApprovalRequested, ToolSpec, check_json_data, encode_event
from turnlog.engine.model.messages import ToolCall

if TYPE_CHECKING:
    from turnlog.journal import JournalProtocol

__all__ = ["AlreadyDecidedError", "ApprovalError", "ApprovalMismatchError", "NeedsApproval",
           "NotAwaitingApprovalError", "UnknownApprovalToolError", "UnknownCallError",
           "approved_call", "arguments_hash", "awaiting", "check_approve", "decide",
           "needs_approval", "reason_for", "request_for", "spec_hash"]

#: ``True``/``False`` or a predicate over a call's validated arguments
NeedsApproval = bool | Callable[[dict[str, Any]], bool]


class ApprovalError(EngineError):
    """A decision that cannot be recorded; nothing was written."""


class UnknownCallError(ApprovalError):
    """No tool call of the conversation has that id."""


class NotAwaitingApprovalError(ApprovalError):
    """The call exists but does not wait for a decision (never asked, or already answered)."""


class AlreadyDecidedError(ApprovalError):
    """The call was already approved or denied."""


class ApprovalMismatchError(ApprovalError):
    """The call's arguments no longer match what approval was asked for."""


class UnknownApprovalToolError(EngineError):
    """``approve`` names a tool that is not offered: its calls could never wait for a decision."""


def check_approve(approve: Iterable[str], offered: Iterable[str]) -> tuple[str, ...]:
    """``approve``'s names, sorted and unique, once each names an ``offered`` tool.

    A name no offered tool has (a misspelling) would let the tool it meant
    run with no approval, so it is refused with ``UnknownApprovalToolError``
    naming it, the closest offered name and the offered tools.

    >>> check_approve(["add"], ["add", "get_weather"])
    ('add',)
    >>> try:
    ...     check_approve(["ad"], ["add"])
    ... except UnknownApprovalToolError as exc:
    ...     print(exc)
    approve names 'ad', which no offered tool has (did you mean 'add'?); offered tools: add
    """
    if isinstance(approve, str):
        raise UnknownApprovalToolError(
            f"approve takes tool names (a list), got the string {approve!r}")
    names = tuple(sorted(set(approve)))
    tools = sorted(set(offered))
    unknown = [n for n in names if n not in tools]
    if unknown:
        close = [m for n in unknown for m in difflib.get_close_matches(n, tools, n=1)]
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        raise UnknownApprovalToolError(
            f"approve names {', '.join(map(repr, unknown))}, which no offered tool has{hint}; "
            f"offered tools: {', '.join(tools) or 'none'}")
    return names


def arguments_hash(name: str, arguments: dict[str, Any]) -> str:
    """SHA-256 of the call key (tool name and canonical arguments: ``call_key``)."""
    return hashlib.sha256(call_key(name, arguments).encode("utf-8", "surrogatepass")).hexdigest()


def spec_hash(spec: ToolSpec) -> str:
    """SHA-256 of the canonical JSON of a tool's spec."""
    return digest(msgspec.to_builtins(spec))


def needs_approval(b: Any, call: ToolCall, tool: Any, validated: dict[str, Any],
                   marked: frozenset[str] | set[str] = frozenset()) -> bool:
    """Whether ``call`` must wait for a decision: the run marks its tool (``b.approve`` or
    ``marked``) or the tool's own ``needs_approval`` says so for these arguments."""
    if call.name in b.approve or call.name in marked:
        return True
    rule = getattr(tool, "needs_approval", False)
    return bool(rule(validated)) if callable(rule) else bool(rule)


def request_for(call: ToolCall, tool: Any, reason: str | None = None) -> ApprovalRequested:
    """The ``approval_requested`` event for ``call`` of ``tool`` (``reason``: why it needs a
    decision, for the approver)."""
    return ApprovalRequested(call_id=call.id, name=call.name,
                             arguments_hash=arguments_hash(call.name, call.arguments),
                             spec_hash=spec_hash(tool.spec), reason=reason)


def reason_for(b: Any, call: ToolCall, marked: frozenset[str] | set[str] = frozenset(),
               loop_reason: str | None = None) -> str | None:
    """Why ``call`` needs a decision: the run's ``approve_reason`` (recorded, else the
    loop's) when the run marks its tool; ``None`` when only the tool's own rule asks."""
    if call.name not in b.approve and call.name not in marked:
        return None
    return getattr(b, "approve_reason", None) or loop_reason


def awaiting(state: Any) -> tuple[str, ...]:
    """The ids of ``state``'s pending calls that wait for a decision, in call order."""
    return tuple(c for c in state.pending if c in state.approvals and c not in state.decisions)


def approved_call(b: Any, call: ToolCall) -> ToolCall:
    """``call`` as approved: with the approver's edited arguments, if the decision has any."""
    decision = b.decisions.get(call.id)
    if decision is None or decision.arguments is None:
        return call
    return msgspec.structs.replace(call, arguments=decision.arguments)


def decide(journal: JournalProtocol, conversation_id: str, call_id: str, approve: bool, approver: str,
           reason: str | None = None, arguments: dict[str, Any] | None = None, *,
           clock: Callable[[], datetime] | None = None) -> ApprovalDecided:
    """Record a person's decision on ``call_id`` (``approval_decided``) and return it.

    Raises (writing nothing) ``ConversationNotFound``, ``ConversationErasedError`` (the
    conversation's history, its fork parents' included, has an erased event: resume
    could never act on the decision), ``UnknownCallError``,
    ``NotAwaitingApprovalError``, ``AlreadyDecidedError``,
    ``ApprovalMismatchError`` (the call's arguments hash differs from the
    requested one) or ``ApprovalError`` (bad ``approver`` / ``arguments``);
    ``TranscriptLockContention`` when another writer appended at the same time.
    """
    from turnlog.engine.audit.erasure import refuse_erased
    from turnlog.engine.errors import ConversationNotFound
    from turnlog.engine.model.conversation import Conversation

    if not isinstance(approver, str) or not approver.strip():
        raise ApprovalError("an approval needs the approver's name (approver / --as)")
    if arguments is not None and (not approve or not isinstance(arguments, dict)):
        raise ApprovalError("edited arguments go with an approval, as a JSON object")
    if arguments is not None:
        try:
            check_json_data(arguments)
        except (TypeError, ValueError) as exc:
            raise ApprovalError(f"the edited arguments are not JSON data: {exc}") from None
    if not journal.last_seq(conversation_id):
        raise ConversationNotFound(f"no conversation {conversation_id!r} in {journal.path}")
    # resume refuses an erased history, so a decision could never be acted on
    refuse_erased(journal, conversation_id, f"decide call {call_id!r} of")
    conv = Conversation.open(journal, conversation_id)
    b = conv.builder
    where = f"call {call_id!r} of conversation {conversation_id!r}"
    if call_id not in b.call_ids:
        raise UnknownCallError(f"no tool call {call_id!r} in conversation {conversation_id!r}")
    if call_id in b.decisions:
        earlier = b.decisions[call_id]
        done = "approved" if earlier.decision == "approve" else "denied"
        raise AlreadyDecidedError(f"{where} was already {done} by "
                                  f"{earlier.approver} at {earlier.decided_at}")
    if call_id not in b.pending or call_id not in b.approvals:
        raise NotAwaitingApprovalError(f"{where} does not await approval")
    call, asked = b.pending[call_id], b.approvals[call_id]
    if arguments_hash(call.name, call.arguments) != asked.arguments_hash:
        raise ApprovalMismatchError(f"{where}: its arguments no longer match the hash approval "
                                    f"was asked for ({asked.arguments_hash[:12]})")
    chosen = arguments if arguments is not None else call.arguments
    try:
        chosen_hash = arguments_hash(call.name, chosen)
        event = ApprovalDecided(
            call_id=call_id, decision="approve" if approve else "deny", approver=approver,
            reason=reason, decided_at=format_timestamp((clock or (lambda: datetime.now(UTC)))()),
            arguments=arguments, arguments_hash=chosen_hash)
        encode_event(event)
    except InvalidEventError as exc:
        raise ApprovalError(f"{where}: the edited arguments are not JSON data: {exc}") from None
    try:
        conv.append(event)
    except ConcurrencyError as exc:
        raise TranscriptLockContention(
            f"conversation {conversation_id!r} was written by another process at the same time; "
            f"the decision was not recorded ({exc})") from exc
    return event
