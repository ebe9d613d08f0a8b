"""``turnlog replay``, ``turnlog fork`` and ``turnlog diff`` (see CLI.md).

Registered on the ``turnlog`` group through the ``turnlog.commands`` entry
point (``replay = "replay.cli:COMMANDS"``), so the engine never imports replay.
"""

from __future__ import annotations

import click

from engine.cli._common import (
    CLIError,
    db_option,
    emit,
    fail,
    journal_for,
    json_option,
    translate_errors,
)

from .diff import diff as diff_conversations
from .fork import fork as fork_conversation

__all__ = ["COMMANDS", "diff", "fork"]


@click.command()
@click.argument("conversation_id")
@click.option("--at", "at_seq", type=int, required=True, help="The parent's seq to fork after.")
@click.option("--provider", default=None, help="Continue with this provider (default: the parent's).")
@click.option("--model", default=None, help="Continue with this model (default: the parent's).")
@click.option("--system", default=None, help="Replace the system directive.")
@click.option("--message", default=None, help="Record this user message right after the fork.")
@click.option("--id", "new_id", default=None, help="The new conversation's id.")
@db_option
@json_option
@translate_errors
def fork(conversation_id: str, at_seq: int, provider: str | None, model: str | None,
         system: str | None, message: str | None, new_id: str | None, db_path: str,
         as_json: bool) -> None:
    """Start a new conversation sharing ID's first SEQ events (nothing is copied).

    Example:

        turnlog fork c-1a2b --at 6 --model gpt-4.1 --message "Try another way"
    """
    with journal_for(db_path) as journal:
        fid = fork_conversation(journal, conversation_id, at_seq, new_id=new_id,
                                provider=provider, model=model, system=system, message=message)
    if as_json:
        emit({"conversation_id": fid, "parent": conversation_id, "fork_seq": at_seq})
        return
    click.echo(f"{fid}  fork of {conversation_id} at seq {at_seq}")
    click.echo(f"next: turnlog show {fid}   turnlog diff {conversation_id} {fid}")


@click.command()
@click.argument("a")
@click.argument("b")
@db_option
@json_option
@translate_errors
def diff(a: str, b: str, db_path: str, as_json: bool) -> None:
    """Compare conversations A and B turn by turn (exit 0 either way).

    Example:

        turnlog diff c-openai c-anthropic --json
    """
    with journal_for(db_path) as journal:
        result = diff_conversations(journal, a, b)
    if as_json:
        emit(result.to_dict())
        return
    click.echo(result.render())


COMMANDS = [diff, fork]
