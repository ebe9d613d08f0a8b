"""The SQLite journal's statements, for the way a journal file stores its hashes.

From schema version 3 on, ``events.prev_hash`` and ``hash`` (and ``snapshots.hash``)
are 32-byte BLOBs; before it, 64-character hex text, as a read-only handle may still
find them. Every statement that returns a hash returns it as hex text either way, so
nothing above this module sees the difference.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import cache
from itertools import starmap
from typing import Any

import msgspec

from ._snapshots import READ_SNAPSHOT
from ._types import StoredEvent
from .errors import CorruptEventError

__all__ = ["Statements", "hex_of", "statements", "stored_events"]


def hex_of(column: str, compact: bool) -> str:
    """SQL for ``column``'s hash as lower-case hex text (a BLOB hash's ``lower(hex(…))``).

    Not ``compact`` (a reader of an older journal), the text as it is — or, should a
    writer migrate the file while the reader has it open, the BLOB's hex.
    """
    if compact:
        return f"lower(hex({column}))"
    return f"iif(typeof({column}) = 'blob', lower(hex({column})), {column})"


class Statements(msgspec.Struct, frozen=True):
    """The journal's SQL for one storage layout of hashes (see :func:`statements`).

    The event reads (``read_*``, ``last_event``) select the hashes as stored; pass
    their rows through :func:`stored_events` with ``compact``. The rest return hex.
    """

    compact: bool
    head: str
    hash_at: str
    read_forward: str
    read_backward: str
    last_event: str
    read_all: str
    heads: str
    all_streams: str
    one_stream: str
    read_snapshot: str


@cache
def statements(compact: bool) -> Statements:
    """The statements for hashes stored as BLOBs (``compact``) or as hex text."""
    hash_ = hex_of("hash", compact)
    # A BLOB hash is turned into hex in Python (bytes.hex), which costs less than
    # reading 64 characters of text; SQL's lower(hex()) would cost more than both.
    hashes = "prev_hash, hash" if compact else f"{hex_of('prev_hash', False)}, {hash_}"
    columns = f"position, stream_id, seq, type, version, recorded_at, payload, {hashes}"
    read = (f"SELECT {columns} FROM events WHERE stream_id = ? AND seq BETWEEN ? AND ? "
            "ORDER BY seq {order} LIMIT ?")
    streams = f"""
        SELECT g.stream_id, g.last_seq, {hex_of("z.hash", compact)}, a.recorded_at,
               z.recorded_at, g.events, l.parent_stream_id, l.parent_seq
        FROM (
            SELECT stream_id, min(seq) AS first_seq, max(seq) AS last_seq, count(*) AS events,
                   max(position) AS last_position
            FROM events {{where}} GROUP BY stream_id
        ) AS g
        JOIN events AS a ON a.stream_id = g.stream_id AND a.seq = g.first_seq
        JOIN events AS z ON z.stream_id = g.stream_id AND z.seq = g.last_seq
        LEFT JOIN stream_links AS l ON l.stream_id = g.stream_id
        ORDER BY g.last_position DESC
    """
    return Statements(
        compact=compact,
        head=f"SELECT seq, {hash_} FROM events WHERE stream_id = ? ORDER BY seq DESC LIMIT 1",
        hash_at=f"SELECT {hash_} FROM events WHERE stream_id = ? AND seq = ?",
        read_forward=read.format(order="ASC"),
        read_backward=read.format(order="DESC"),
        last_event=f"SELECT {columns} FROM events WHERE stream_id = ? ORDER BY seq DESC LIMIT 1",
        read_all=(f"SELECT {columns} FROM events WHERE position > ? AND position <= ? "
                  "{types} ORDER BY position LIMIT ?"),
        heads=(f"SELECT stream_id, max(seq), {hash_} FROM events "
               "GROUP BY stream_id ORDER BY stream_id"),
        all_streams=streams.format(where=""),
        one_stream=streams.format(where="WHERE stream_id = ?"),
        read_snapshot=READ_SNAPSHOT.format(hash=hex_of("s.hash", compact)),
    )


def stored_events(rows: Iterable[tuple[Any, ...]], compact: bool) -> Iterator[StoredEvent]:
    """The rows of an event read as :class:`StoredEvent`, their hashes as hex text.

    A hash that is not a BLOB in a ``compact`` journal (an edit outside turnlog) is a
    :class:`CorruptEventError` naming the event; ``verify`` reports it in full.
    """
    if not compact:
        yield from starmap(StoredEvent, rows)
        return
    event = StoredEvent
    try:
        for position, stream_id, seq, type_, version, recorded_at, payload, prev, hash_ in rows:
            yield event(position, stream_id, seq, type_, version, recorded_at, payload,
                        prev.hex(), hash_.hex())
    except (AttributeError, TypeError):
        raise CorruptEventError(
            f"stream {stream_id!r} seq {seq}: its hashes are stored as "
            f"{type(prev).__name__} and {type(hash_).__name__}, not bytes (the row was "
            "edited outside turnlog; turnlog verify reports it)") from None
