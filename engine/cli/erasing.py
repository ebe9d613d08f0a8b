"""``turnlog erase``, ``prune`` and ``hold``: erasing conversations' content (data-protection
requests, retention) while every hash, checkpoint and proof still holds."""

from __future__ import annotations

import click

from ..audit.erasure import erase_conversation, forks_of, hold, prune
from ._common import db_option, emit, journal_for, json_option, translate_errors

__all__ = ["COMMANDS", "erase", "hold_command", "prune_command"]

_BY = click.option("--by", metavar="WHO",
                   help="Who is erasing, as recorded (default: user@host of this process).")


@click.command()
@click.argument("conversation_id")
@click.option("--seq", type=click.IntRange(min=1), default=None,
              help="Erase only the event at this seq (default: every event of the conversation).")
@click.option("--reason", required=True, metavar="TEXT",
              help="Why (e.g. the data-protection request), recorded with the erasure.")
@_BY
@db_option
@json_option
@translate_errors
def erase(conversation_id: str, seq: int | None, reason: str, by: str | None, db_path: str,
          as_json: bool) -> None:
    """Erase a conversation's content (messages, arguments, results); keep its proof.

    Every event keeps its type, seq and the SHA-256 of its payload, so verify,
    verify --checkpoint and every proof still pass; an erasure_recorded event
    says who, when and why. The old bytes are removed from the journal's files.

    Example:

        turnlog erase c-1234 --reason "GDPR request 2025-17"
    """
    with journal_for(db_path) as journal:
        seqs = erase_conversation(journal, conversation_id, reason=reason, seq=seq, by=by)
        forks = [fork for fork in forks_of(journal, conversation_id)
                 if next(iter(journal.read(fork, 1, 1))).erased]
    if as_json:
        emit({"conversation_id": conversation_id, "erased": seqs, "forks": forks})
        return
    if seqs:
        click.echo(f"erased {len(seqs)} event(s) of {conversation_id} (seqs "
                   f"{', '.join(map(str, seqs))}); the erasure is recorded")
    else:
        click.echo(f"nothing to erase: {conversation_id} was erased already")
    if forks:
        click.echo(f"its forks show its events erased, and the copy of its start each began "
                   f"with is erased too ({', '.join(forks)}); their own later events stay: "
                   "erase them by their ids")


@click.command("prune")
@click.option("--before", required=True, metavar="DATE",
              help="Erase conversations whose last event is older than this (2025-01-31, or a "
                   "UTC time).")
@click.option("--hold", "holds", multiple=True, metavar="ID",
              help="Keep this conversation too (repeatable), besides those under a legal hold.")
@click.option("--reason", default="retention", show_default=True, metavar="TEXT",
              help="Recorded with each erasure.")
@click.option("--dry-run", is_flag=True, help="List what would be erased; change nothing.")
@_BY
@db_option
@json_option
@translate_errors
def prune_command(before: str, holds: tuple[str, ...], reason: str, dry_run: bool,
                  by: str | None, db_path: str, as_json: bool) -> None:
    """Erase the content of conversations older than DATE (retention), except held ones.

    Each conversation is erased as turnlog erase does, in its own transaction.

    Example:

        turnlog prune --before 2025-01-01 --hold c-litigation --dry-run
    """
    with journal_for(db_path, readonly=dry_run) as journal:
        result = prune(journal, before, reason=reason, holds=holds, by=by, dry_run=dry_run)
    if as_json:
        emit(result)
        return
    verb = "would erase" if dry_run else "erased"
    for sid, seqs in result.erased.items():
        click.echo(f"{verb} {sid} ({len(seqs)} event(s))")
    for sid in result.held:
        click.echo(f"held {sid} (not pruned)")
    click.echo(f"{verb} {len(result.erased)} conversation(s); {len(result.held)} held; "
               f"{len(result.unchanged)} erased already")


@click.command("hold")
@click.argument("conversation_id")
@click.option("--reason", default="", metavar="TEXT",
              help="Why the conversation is held (required to place a hold); recorded.")
@click.option("--release", is_flag=True, help="Lift the conversation's legal hold instead.")
@_BY
@db_option
@json_option
@translate_errors
def hold_command(conversation_id: str, reason: str, release: bool, by: str | None,
                 db_path: str, as_json: bool) -> None:
    """Place a legal hold on a conversation: prune never erases it while held.

    Example:

        turnlog hold c-1234 --reason "litigation 2025-04"
    """
    with journal_for(db_path) as journal:
        stored = hold(journal, conversation_id, reason=reason, by=by, release=release)
    if as_json:
        emit({"conversation_id": conversation_id, "seq": stored.seq, "type": stored.type})
    else:
        click.echo(f"{'released the hold on' if release else 'held'} {conversation_id} "
                   f"(seq {stored.seq})")


COMMANDS = [erase, hold_command, prune_command]
