"""``turnlog ls`` and ``turnlog show``: what is in a journal.

Both read the ``conversations`` view (``engine.audit.views``) instead of folding
every conversation, so they stay fast on journals of millions of events.
"""

from __future__ import annotations

import itertools

import click

from turnlog.engine.audit import (
    STATUSES,
    UNFINISHED,
    ReadConnection,
    connect_readonly,
    conversation_info,
    list_conversations,
    parse_since,
)
from turnlog.engine.audit.listing import iter_conversation_events
from turnlog.journal import shown_url

from ._common import (
    colour,
    db_option,
    emit,
    emit_streamed,
    hint,
    journal_for,
    json_option,
    translate_errors,
)
from ._timeline import header, iter_timeline
from .run import UNRECORDED, options_of

__all__ = ["ls", "show"]


def _reader(db_path: str) -> ReadConnection:
    with journal_for(db_path, readonly=True):  # refuses a missing or foreign file clearly
        pass
    return connect_readonly(db_path)


def _when(stamp: str | None) -> str:
    """``2026-01-31T12:00:05.123456Z`` as ``2026-01-31 12:00:05`` (UTC)."""
    return (stamp or "")[:19].replace("T", " ")


def _who(provider: str | None, model: str | None) -> str:
    return "/".join(x for x in (provider, model) if x) or "-"


@click.command()
@click.option("--limit", type=click.IntRange(min=1), help="List at most this many.")
@click.option("--status", type=click.Choice(STATUSES), help="Only conversations in this status.")
@click.option("--since", help="Only conversations updated on or after this date "
              "(2025-01-31, an ISO timestamp, or 7d / 12h / 30m ago).")
@db_option
@json_option
@translate_errors
def ls(limit: int | None, status: str | None, since: str | None, db_path: str,
       as_json: bool) -> None:
    """List conversations, newest first.

    Example:

        turnlog ls --status failed --since 7d --limit 20
    """
    conn = _reader(db_path)
    try:
        rows = list_conversations(conn, limit=limit, status=status,
                                  since=parse_since(since) if since is not None else None)
    finally:
        conn.close()
    if as_json:
        emit(rows)
        return
    if not rows:
        click.echo("no conversations" + (" match" if status or since else ""))
        return
    width = max(len("CONVERSATION"), *(len(r["conversation_id"]) for r in rows))
    wide = max(len(s) for s in STATUSES)
    click.echo(f"{'CONVERSATION':<{width}}  {'STATUS':<{wide}}  {'UPDATED (UTC)':<19}  "
               f"{'TURNS':>5}  {'EVENTS':>6}  PROVIDER/MODEL")
    for r in rows:
        lineage = f"  fork of {r['parent']}" if r["parent"] else ""
        lineage += f"  replay of {r['replay_of']}" if r["replay_of"] else ""
        status = colour(f"{r['status']:<{wide}}", r["status"])
        click.echo(f"{r['conversation_id']:<{width}}  {status}  "
                   f"{_when(r['updated_at']):<19}  {r['turn_count']:>5}  {r['events']:>6}  "
                   f"{_who(r['provider'], r['model'])}{lineage}")


@click.command()
@click.argument("conversation_id")
@click.option("--full", is_flag=True, help="Print every text, argument and result in full.")
@db_option
@json_option
@translate_errors
def show(conversation_id: str, full: bool, db_path: str, as_json: bool) -> None:
    """Show one conversation as a timeline, turn by turn.

    The model's text, each tool call with its arguments and result, refusals
    and why, model failures, usage per turn and fork/replay lineage. Long
    values are cut; --full prints them whole. --json prints the raw events.

    Example:

        turnlog show c-1a2b --full
    """
    conn = _reader(db_path)
    try:
        info = conversation_info(conn, conversation_id, shown_url(db_path))
        # read as they are printed
        events = iter_conversation_events(conn, conversation_id, exact_floats=as_json)
        if as_json:
            emit_streamed({"conversation_id": conversation_id}, "events", events, exact=True)
            return
        first = next(events, None)
        started = first["payload"] if first and first["type"] == "conversation_started" else {}
        for line in header(info, started, full, db_path) + [""]:
            click.echo(line)
        for line in iter_timeline(itertools.chain([first] if first else [], events), full):
            click.echo(line)
    finally:
        conn.close()
    recorded = options_of(started)
    continue_with = hint("resume", conversation_id, run=recorded) + (
        "" if recorded is not None else UNRECORDED)
    if info["status"] == "awaiting_approval":
        decide = hint("approve", conversation_id, "--all", "--yes", "--as", "NAME")
        click.echo(f"\nwaiting for approval: {decide} decides (or --call CALL_ID, --no), "
                   f"then {continue_with} continues it")
    elif info["status"] in UNFINISHED:
        click.echo(f"\nunfinished: {continue_with} continues it")


COMMANDS = [ls, show]
