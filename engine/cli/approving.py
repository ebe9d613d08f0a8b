"""``turnlog approve``: a person's decision on tool calls waiting for approval (docs/cli.md)."""

from __future__ import annotations

import json
from typing import Any

import click

from turnlog.engine.tools.approvals import decide
from turnlog.engine.model.conversation import load_state
from turnlog.engine.model.nesting import load_json

from ._common import (
    CLIError,
    db_option,
    emit,
    flag_pair,
    hint,
    journal_for,
    json_option,
    translate_errors,
)
from .run import UNRECORDED, options_of, waiting_calls

__all__ = ["COMMANDS", "approve"]

_PAST = {"approve": "approved", "deny": "denied"}


@click.command()
@click.argument("conversation_id")
@click.option("--call", "call_ids", multiple=True, metavar="CALL_ID",
              help="The waiting call to decide (repeatable).")
@click.option("--all", "every", is_flag=True, help="Decide every call waiting for approval.")
@flag_pair("--yes/--no", "approved", default=None,
           help="Approve (the call runs on resume) or deny (the model is told).")
@click.option("--as", "approver", metavar="NAME", required=True, help="Who decides (recorded).")
@click.option("--reason", help="Why (recorded; a denial's reason is shown to the model).")
@click.option("--arguments", "edited", metavar="JSON",
              help="Approve with these arguments instead (a JSON object; one --call only).")
@db_option
@json_option
@translate_errors
def approve(conversation_id: str, call_ids: tuple[str, ...], every: bool,
            approved: bool | None, approver: str, reason: str | None, edited: str | None,
            db_path: str, as_json: bool) -> None:
    """Approve or deny tool calls that wait for a person's decision.

    Each decision is an approval_decided event in the conversation; `turnlog
    resume ID` then runs the approved calls once and answers the denied ones.

    Example:

        turnlog approve c-1a2b3c --all --yes --as alice --reason "checked the amount"
    """
    if approved is None:
        raise CLIError("say --yes (approve) or --no (deny)")
    arguments = _edited(edited, call_ids, approved)
    with journal_for(db_path) as journal:
        before = load_state(journal, conversation_id)
        waiting = before.awaiting_approval
        if every == bool(call_ids):
            raise CLIError("name the calls to decide with --call CALL_ID, or use --all"
                           + ("; waiting: " + "; ".join(
                               line.strip() for line in waiting_calls(before, waiting))
                              if waiting else ""))
        chosen = tuple(waiting) if every else call_ids
        if not chosen:
            raise CLIError(f"conversation {conversation_id} has no tool call waiting for "
                           "approval (nothing was written)")
        decided = [decide(journal, conversation_id, call_id, approved, approver, reason,
                          arguments) for call_id in chosen]
        state = load_state(journal, conversation_id)
        left = state.awaiting_approval
    recorded = options_of(state)
    continue_with = hint("resume", conversation_id, run=recorded) + (
        "" if recorded is not None else UNRECORDED)
    if as_json:
        emit({"conversation_id": conversation_id,
              "decisions": [{"call_id": d.call_id, "decision": d.decision, "approver": d.approver,
                             "reason": d.reason, "decided_at": d.decided_at,
                             "request_reason": before.approvals[d.call_id].reason,
                             "edited": d.arguments is not None} for d in decided],
              "awaiting_approval": list(left)})
        return
    for d in decided:
        asked = before.approvals.get(d.call_id)
        click.echo(f"{d.call_id}: {_PAST[d.decision]} by {d.approver}"
                   + (" (with edited arguments)" if d.arguments is not None else "")
                   + (f"; it waited because: {asked.reason}" if asked and asked.reason else ""))
    if left:
        click.echo(f"still waiting: {', '.join(left)}")
    else:
        click.echo(f"Continue the run with:\n  {continue_with}")


def _edited(edited: str | None, call_ids: tuple[str, ...], approved: bool) -> Any:
    if edited is None:
        return None
    if not approved or len(call_ids) != 1:
        raise CLIError("--arguments goes with --yes and exactly one --call")
    try:
        # the one nesting limit (engine.nesting)
        value = load_json(edited, "--arguments", parse_constant=_not_json)
    except json.JSONDecodeError as exc:
        raise CLIError(f"--arguments is not JSON: {exc}") from None
    except ValueError as exc:  # NaN, Infinity: Python reads them, JSON has no such numbers
        raise CLIError(f"--arguments is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise CLIError("--arguments must be a JSON object")
    return value


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


COMMANDS = [approve]
