"""Snapshots: higher layers' folded state of a stream, cached beside the events.

A snapshot is never history. It is kept in its own table (``snapshots``: one row
per stream, ``kind`` and seq; from schema 4 on, guarded like ``events``: rows are
only inserted, so a newer snapshot is a new row), names the seq it was taken at
and the hash of the event there, and is returned only while that event still has
that hash, and while every fork link on its way still chains (each fork's first
event names, as its ``prev_hash``, its parent's hash at the fork point) — so a
history rewritten under it (a tampered chain or parent, a journal restored from
another copy) hides it, and the reader folds the events instead. Both
backends run the same statements (``?`` placeholders here; PostgreSQL's ``%s``).
"""

from __future__ import annotations

from typing import Any

from .errors import EventNotFoundError, InvalidAppendError

__all__ = [
    "READ_SNAPSHOT",
    "SAVED_SNAPSHOT",
    "WRITE_SNAPSHOT",
    "check_snapshot",
    "erased_since",
    "links_hold",
]

READ_SNAPSHOT = (
    "SELECT s.seq, {hash}, s.data FROM snapshots AS s "
    "JOIN events AS e ON e.stream_id = s.stream_id AND e.seq = s.seq AND e.hash = s.hash "
    "WHERE s.stream_id = ? AND s.kind = ? ORDER BY s.seq DESC LIMIT 1"
)
"""The stream's newest snapshot of a kind whose event at the snapshot's seq has its hash.

``{hash}``: the SQL for ``s.hash`` as hex text (SQLite stores it as bytes)."""

WRITE_SNAPSHOT = (
    "INSERT INTO snapshots (stream_id, kind, seq, hash, data) "
    "SELECT stream_id, ?, seq, hash, ? FROM events WHERE stream_id = ? AND seq = ? "
    "AND NOT EXISTS (SELECT 1 FROM events AS x WHERE x.stream_id = events.stream_id "
    "AND x.seq > events.seq AND x.type = 'erasure_recorded') "
    "AND NOT EXISTS (WITH RECURSIVE up(s) AS (SELECT l.parent_stream_id FROM stream_links "
    "AS l WHERE l.stream_id = {p} UNION SELECT l.parent_stream_id FROM stream_links AS l "
    "JOIN up ON l.stream_id = up.s) SELECT 1 FROM events AS x WHERE x.stream_id IN "
    "(SELECT s FROM up) AND x.position > events.position AND x.type = 'erasure_recorded') "
    "ON CONFLICT (stream_id, kind, seq) DO NOTHING"
)
"""Take the hash from the event itself: a snapshot can only name an event that exists.

Parameters: kind, data, stream id, seq, and the stream id again (``{p}``: its
placeholder, typed as the column is on PostgreSQL). Never at a seq before an erasure's
record of the stream, nor before (in position order) one of any fork ancestor (a fork's
fold holds its parents' history up to the fork point): a state folded up to there may
have been read before the erasure (a writer racing it), with the content it erased
(erasures keep every hash, so the hash alone cannot tell). An ancestor's erasure of
events after the fork point counts too (one comparison of positions); the fork's next
snapshot, past the record, is saved as usual.

Inserts only (the table refuses UPDATE and DELETE): a snapshot already saved at that
seq stays as it is."""


SAVED_SNAPSHOT = "SELECT data FROM snapshots WHERE stream_id = ? AND kind = ? AND seq = ?"
"""The bytes saved as a stream's snapshot of a kind at a seq."""


def erased_since(action: str, stream_id: str, seq: int) -> InvalidAppendError:
    """The error for a snapshot :data:`WRITE_SNAPSHOT` refused at an event that exists."""
    return InvalidAppendError(
        f"{action}: stream {stream_id!r} has an erasure recorded after seq {seq} (in it or in "
        "a fork parent it inherits from), so a state folded up to there may hold content "
        "erased since; save one at its end")


def check_snapshot(stream_id: object, kind: object, seq: object, data: object) -> bytes:
    """``data`` as bytes; :class:`InvalidAppendError` naming the bad argument otherwise."""
    where = f"snapshot of stream {stream_id!r}"
    if not isinstance(stream_id, str) or not stream_id:
        raise InvalidAppendError(f"{where}: the stream id must be a non-empty string")
    if not isinstance(kind, str) or not kind:
        raise InvalidAppendError(f"{where}: kind must be a non-empty string, got {kind!r}")
    if type(seq) is not int or seq < 1:
        raise InvalidAppendError(f"{where}: seq must be an int >= 1, got {seq!r}")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidAppendError(f"{where}: data must be bytes, got {type(data).__name__}")
    return bytes(data)


def links_hold(journal: Any, stream_id: str) -> bool:
    """Whether every fork link of the stream's ancestry still chains to its parent.

    One lookup for a stream that is no fork; two per fork level otherwise.
    """
    segments = journal.ancestry(stream_id)
    for (parent, parent_seq), (child, _) in zip(segments, segments[1:]):
        first = next(iter(journal.read(child, 1, 1)), None)
        try:
            parent_hash = journal.hash_at(parent, parent_seq)
        except EventNotFoundError:
            return False
        if first is None or first.prev_hash != parent_hash:
            return False
    return True
