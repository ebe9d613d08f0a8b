"""``turnlog ls`` and ``turnlog show``: what is in a journal."""

from __future__ import annotations

import json

import click

from engine.conversation import load_state

from ._common import db_option, emit, journal_for, json_option, translate_errors

__all__ = ["ls", "show"]


@click.command()
@db_option
@json_option
@translate_errors
def ls(db_path: str, as_json: bool) -> None:
    """List conversations, newest first.

    Example:

        turnlog ls --json
    """
    rows = []
    with journal_for(db_path) as journal:
        for info in journal.streams():
            state = load_state(journal, info.stream_id)
            rows.append({
                "conversation_id": info.stream_id, "status": state.status,
                "provider": state.provider, "model": state.model,
                "turn_count": state.turn_count, "events": info.events,
                "parent": info.parent_stream_id,
                "replay_of": state.replay_of.conversation_id if state.replay_of else None,
                "updated_at": info.last_recorded_at,
            })
    if as_json:
        emit(rows)
        return
    if not rows:
        click.echo("no conversations")
    for r in rows:
        lineage = f"  fork of {r['parent']}" if r["parent"] else ""
        lineage += f"  replay of {r['replay_of']}" if r["replay_of"] else ""
        click.echo(f"{r['conversation_id']}  {r['status']:<9} {r['provider']}/{r['model']}  "
                   f"turns={r['turn_count']} events={r['events']}{lineage}")


@click.command()
@click.argument("conversation_id")
@db_option
@json_option
@translate_errors
def show(conversation_id: str, db_path: str, as_json: bool) -> None:
    """Show the timeline of one conversation.

    Example:

        turnlog show c-1a2b --json
    """
    with journal_for(db_path) as journal:
        load_state(journal, conversation_id)  # a typed error for an unknown id
        events = [{"seq": e.seq, "type": e.type, "recorded_at": e.recorded_at,
                   "payload": json.loads(e.payload)} for e in journal.read(conversation_id)]
    if as_json:
        emit({"conversation_id": conversation_id, "events": events})
        return
    for e in events:
        payload = dict(e["payload"])
        payload.pop("type", None)
        click.echo(f"{e['seq']:>4}  {e['type']:<22} {json.dumps(payload, ensure_ascii=False)[:160]}")


COMMANDS = [ls, show]
