"""``turnlog ls`` and ``turnlog show``: what is in a journal.

Both read the ``conversations`` view (``engine.views``) instead of folding
every conversation, so they stay fast on journals of millions of events.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import click

from engine.errors import ConversationNotFound
from engine.views import connect_readonly
from journal import walk_ancestry

from ._common import db_option, emit, journal_for, json_option, translate_errors
from ._timeline import header, timeline

__all__ = ["ls", "show"]

_COLUMNS = ("conversation_id, status, provider, model, turns, events, parent, fork_seq, "
            "replay_of, updated_at")
_ANCESTOR_TURNS = ("SELECT count(*) FROM events WHERE type = 'model_responded' "
                   "AND stream_id = ? AND seq <= ?")
_LINK = "SELECT parent_stream_id, parent_seq FROM stream_links WHERE stream_id = ?"


def _reader(db_path: str) -> sqlite3.Connection:
    with journal_for(db_path, readonly=True):  # refuses a missing or foreign file clearly
        pass
    return connect_readonly(db_path)


def _turn_count(conn: sqlite3.Connection, own_turns: int, parent: str | None,
                fork_seq: int | None) -> int:
    """Own model responses plus those a fork inherits from its ancestors up to the fork point."""
    if parent is None:
        return own_turns
    segments = walk_ancestry(lambda s: conn.execute(_LINK, (s,)).fetchone(), parent, fork_seq)
    return own_turns + sum(conn.execute(_ANCESTOR_TURNS, segment).fetchone()[0]
                           for segment in segments)


def _row(conn: sqlite3.Connection, r: tuple) -> dict[str, Any]:
    cid, status, provider, model, turns, events, parent, fork_seq, replay_of, updated = r
    return {"conversation_id": cid, "status": status, "provider": provider, "model": model,
            "turn_count": _turn_count(conn, turns, parent, fork_seq), "events": events,
            "parent": parent, "replay_of": replay_of, "updated_at": updated}


@click.command()
@db_option
@json_option
@translate_errors
def ls(db_path: str, as_json: bool) -> None:
    """List conversations, newest first.

    Example:

        turnlog ls --json
    """
    conn = _reader(db_path)
    try:
        rows = [_row(conn, r) for r in conn.execute(
            f"SELECT {_COLUMNS} FROM conversations ORDER BY last_position DESC")]
    finally:
        conn.close()
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


def _info(conn: sqlite3.Connection, conversation_id: str, db_path: str) -> dict[str, Any]:
    found = conn.execute(f"SELECT {_COLUMNS} FROM conversations WHERE conversation_id = ?",
                         (conversation_id,)).fetchone()
    if found is None:
        raise ConversationNotFound(f"no conversation {conversation_id!r} in {db_path}")
    info = _row(conn, found)
    info["forks"] = [{"conversation_id": c, "fork_seq": s} for c, s in conn.execute(
        "SELECT stream_id, parent_seq FROM stream_links WHERE parent_stream_id = ? "
        "ORDER BY stream_id", (conversation_id,))]
    info["replays"] = [c for (c,) in conn.execute(
        "SELECT stream_id FROM events WHERE type = 'conversation_started' AND seq = 1 "
        "AND json_extract(payload, '$.replay_of.conversation_id') = ? ORDER BY stream_id",
        (conversation_id,))]
    return info


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
        info = _info(conn, conversation_id, db_path)
        events = [{"seq": seq, "type": type_, "recorded_at": at, "payload": json.loads(payload)}
                  for seq, type_, at, payload in conn.execute(
                      "SELECT seq, type, recorded_at, payload FROM events WHERE stream_id = ? "
                      "ORDER BY seq", (conversation_id,))]
    finally:
        conn.close()
    if as_json:
        emit({"conversation_id": conversation_id, "events": events})
        return
    started = events[0]["payload"] if events and events[0]["type"] == "conversation_started" else {}
    for line in header(info, started, full) + [""] + timeline(events, full):
        click.echo(line)


COMMANDS = [ls, show]
