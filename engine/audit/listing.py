"""What is in a journal, read through its SQL views: ``turnlog ls``, ``show`` and ``tail``.

Every function takes a read connection (``engine.audit.views.connect_readonly``: SQLite or
PostgreSQL) and reads the ``conversations`` view instead of folding
every conversation, so listings stay fast on journals of millions of events.
Results are plain dicts, shaped as the CLI's ``--json`` output.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from turnlog.journal import walk_ancestry

from .figures import STATUSES
from turnlog.journal import PgConnection, ReadConnection, dialect_of, whole_payload
from ..errors import BadFilterError, ConversationNotFound
from turnlog.engine.model.events import payload_of

__all__ = ["EVENTS_PER_READ", "appends_waiter", "conversation_events", "conversation_info",
           "events_after", "iter_conversation_events", "last_position", "list_conversations"]

_COLUMNS = ("conversation_id, status, provider, model, turns, events, parent, fork_seq, "
            "replay_of, started_at, updated_at")
_ANCESTOR_TURNS = ("SELECT count(*) FROM events WHERE type = 'model_responded' "
                   "AND stream_id = ? AND seq <= ?")
_LINK = "SELECT parent_stream_id, parent_seq FROM stream_links WHERE stream_id = ?"
_AFTER = ("SELECT position, stream_id, seq, type, recorded_at, version, payload FROM events "
          "WHERE position > ? {and_stream} ORDER BY position LIMIT ?")


def _turn_count(conn: ReadConnection, own_turns: int, parent: str | None,
                fork_seq: int | None) -> int:
    """Own model responses plus those a fork inherits from its ancestors up to the fork point."""
    if parent is None:
        return own_turns
    segments = walk_ancestry(lambda s: conn.execute(_LINK, (s,)).fetchone(), parent, fork_seq)
    return own_turns + sum(conn.execute(_ANCESTOR_TURNS, segment).fetchone()[0]
                           for segment in segments)


def _row(conn: ReadConnection, r: tuple) -> dict[str, Any]:
    cid, status, provider, model, turns, events, parent, fork_seq, replay_of, started, updated = r
    return {"conversation_id": cid, "status": status, "provider": provider, "model": model,
            "turn_count": _turn_count(conn, turns, parent, fork_seq), "events": events,
            "parent": parent, "replay_of": replay_of, "started_at": started,
            "updated_at": updated}


def list_conversations(conn: ReadConnection, *, limit: int | None = None,
                       status: str | None = None, since: str | None = None) -> list[dict[str, Any]]:
    """Conversations, newest (last appended to) first.

    ``status`` keeps one status (one of ``engine.audit.STATUSES``); ``since`` (a journal timestamp, see ``engine.audit.parse_since``)
    keeps conversations updated on or after it; ``limit`` keeps the first N.
    """
    if status is not None and status not in STATUSES:
        raise BadFilterError(f"status {status!r} is not one of {', '.join(STATUSES)}")
    where, params = [], []
    if status is not None:
        where.append("status = ?")
        params.append(status)
    if since is not None:
        where.append("updated_at >= ?")
        params.append(since)
    sql = (f"SELECT {_COLUMNS} FROM conversations"
           + (" WHERE " + " AND ".join(where) if where else "")
           + " ORDER BY last_position DESC" + (" LIMIT ?" if limit is not None else ""))
    if limit is not None:
        params.append(limit)
    return [_row(conn, r) for r in conn.execute(sql, params)]


def conversation_info(conn: ReadConnection, conversation_id: str,
                      where: str = "the journal") -> dict[str, Any]:
    """One conversation's listing row plus its ``forks`` and ``replays``.

    Raises ``ConversationNotFound`` (naming ``where``) for an unknown id.
    """
    found = conn.execute(f"SELECT {_COLUMNS} FROM conversations WHERE conversation_id = ?",
                         (conversation_id,)).fetchone()
    if found is None:
        raise ConversationNotFound(f"no conversation {conversation_id!r} in {where}")
    info = _row(conn, found)
    info["forks"] = [{"conversation_id": c, "fork_seq": s} for c, s in conn.execute(
        "SELECT stream_id, parent_seq FROM stream_links WHERE parent_stream_id = ? "
        "ORDER BY stream_id", (conversation_id,))]
    info["replays"] = [c for (c,) in conn.execute(
        "SELECT stream_id FROM events WHERE type = 'conversation_started' AND seq = 1 "
        # a substring test first: only start events that name a replay are parsed
        f"AND {_has(conn, 'payload', '?')} "
        f"AND {dialect_of(conn).json('payload', '$.replay_of.conversation_id')} = ? "
        "ORDER BY stream_id",
        ('"replay_of"', conversation_id))]
    info["proxy"] = _proxied(conn, conversation_id)
    return info


def _has(conn: ReadConnection, haystack: str, needle: str) -> str:
    """Whether ``needle`` occurs in ``haystack``, case and all (a condition)."""
    if dialect_of(conn).name == "sqlite":
        return f"instr({haystack}, {needle}) > 0"
    return f"strpos({haystack}, {needle}) > 0"


def _proxied(conn: ReadConnection, conversation_id: str) -> dict[str, Any] | None:
    """``{wire, client, to}`` when ``turnlog proxy`` recorded the conversation, else ``None``."""
    json_at = dialect_of(conn).json
    row = conn.execute(
        f"SELECT {json_at('payload', '$.metadata.proxy.wire')}, "
        f"{json_at('payload', '$.metadata.proxy.client')}, "
        f"{json_at('payload', '$.metadata.proxy.to')} FROM events "
        "WHERE stream_id = ? AND seq = 1 AND type = 'conversation_started'",
        (conversation_id,)).fetchone()
    if row is None or row[0] is None:
        return None
    return {"wire": row[0], "client": row[1] or "", "to": row[2]}


def conversation_events(conn: ReadConnection, conversation_id: str) -> list[dict[str, Any]]:
    """The conversation's own events: ``seq``, ``type``, ``recorded_at``, ``payload`` (decoded,
    as its type's current version: ``payload_of`` upcasts older events)."""
    return list(iter_conversation_events(conn, conversation_id))


#: how many events :func:`iter_conversation_events` reads per query
EVENTS_PER_READ = 1000


def iter_conversation_events(conn: ReadConnection, conversation_id: str, *,
                             per_read: int = EVENTS_PER_READ,
                             exact_floats: bool = False) -> Iterator[dict[str, Any]]:
    """:func:`conversation_events` one at a time, read ``per_read`` at a time (by seq, from
    the index): memory holds one batch whatever the conversation's length. ``exact_floats``:
    payloads for ``jsontext.indented`` (``payload_of``)."""
    after = 0
    while True:
        rows = conn.execute(
            "SELECT seq, type, recorded_at, version, payload FROM events "
            "WHERE stream_id = ? AND seq > ? "
            "ORDER BY seq LIMIT ?", (conversation_id, after, per_read)).fetchall()
        for seq, type_, at, version, payload in rows:
            yield {"seq": seq, "type": type_, "recorded_at": at,
                   "payload": payload_of(type_, version, whole_payload(conn, payload),
                                         where=f"stream {conversation_id!r} seq {seq}",
                                         exact_floats=exact_floats)}
        if len(rows) < per_read:
            return
        after = rows[-1][0]


def last_position(conn: ReadConnection) -> int:
    """The global position of the journal's last event (0 when empty)."""
    return conn.execute("SELECT coalesce(max(position), 0) FROM events").fetchone()[0]


def events_after(conn: ReadConnection, position: int, *, conversation_id: str | None = None,
                 limit: int = 1000) -> list[tuple]:
    """Up to ``limit`` events after global ``position`` (of one conversation, if given), in order.

    Rows are ``(position, conversation_id, seq, type, recorded_at, payload)``, the payload
    as its type's current version (``payload_of``: older events upcast).
    """
    sql = _AFTER.format(and_stream="AND stream_id = ?" if conversation_id else "")
    extra = (conversation_id,) if conversation_id else ()
    return [(position, stream, seq, type_, at,
             payload_of(type_, version, whole_payload(conn, payload),
                        where=f"stream {stream!r} seq {seq}"))
            for position, stream, seq, type_, at, version, payload
            in conn.execute(sql, (position, *extra, limit)).fetchall()]


#: The longest a PostgreSQL follower waits without reading (a notification lost with a
#: dropped connection is then noticed anyway).
_LONGEST_WAIT = 5.0


def appends_waiter(conn: ReadConnection, channel: str | None,
                   interval: float) -> Callable[[float], None]:
    """How a follower (``turnlog tail``) waits for the next append, at most ``seconds``.

    On PostgreSQL (``channel``: the journal's ``PostgresJournal.channel``) it
    LISTENs: every append sends a NOTIFY in its own transaction, so the wait
    ends as soon as an append commits. On SQLite it sleeps ``interval`` (polling).
    Either way the caller then reads :func:`events_after`.
    """
    if isinstance(conn, PgConnection) and channel is not None:
        conn.listen(channel)
        return lambda seconds: conn.wait_notified(min(seconds, _LONGEST_WAIT))
    return lambda seconds: time.sleep(min(seconds, interval))
