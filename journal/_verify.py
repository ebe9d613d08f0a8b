"""Tamper evidence: recomputing hash chains (streamed, constant memory) and checking saved heads."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from ._hashing import GENESIS_HASH, event_hash
from ._types import BadEvent, Head, VerifyReport

__all__ = ["check_heads", "verify_chains"]

_CHAIN_COLUMNS = "stream_id, seq, type, version, recorded_at, payload, prev_hash, hash"
_ALL_CHAINS = f"SELECT {_CHAIN_COLUMNS} FROM events ORDER BY stream_id, seq"
_ONE_CHAIN = f"SELECT {_CHAIN_COLUMNS} FROM events WHERE stream_id = ? ORDER BY seq"
_LINK = "SELECT parent_stream_id, parent_seq FROM stream_links WHERE stream_id = ?"
_HASH_AT = "SELECT hash FROM events WHERE stream_id = ? AND seq = ?"
_LAST_SEQ = "SELECT max(seq) FROM events WHERE stream_id = ?"
_ORPHAN_LINKS = """
    SELECT stream_id FROM stream_links AS l
    WHERE NOT EXISTS (SELECT 1 FROM events AS e WHERE e.stream_id = l.stream_id)
    {where} ORDER BY stream_id LIMIT 1
"""


def verify_chains(conn: sqlite3.Connection, stream_id: str | None) -> VerifyReport:
    """Recompute every chain (or one stream's); report the first event that does not hold."""
    if stream_id is None:
        rows = conn.execute(_ALL_CHAINS)
    else:
        rows = conn.execute(_ONE_CHAIN, (stream_id,))
    checked = 0
    current = None
    expected_seq = 0
    prev = start_reason = ""
    for sid, seq, type_, version, recorded_at, payload, prev_hash, stored_hash in rows:
        if sid != current:
            current, expected_seq = sid, 1
            prev, start_reason = _chain_start(conn, sid)
        checked += 1
        bad = None
        if seq != expected_seq:
            reason = f"seq {expected_seq} missing (next stored is seq {seq})"
            bad = BadEvent(sid, expected_seq, reason)
        elif prev_hash != prev:
            reason = start_reason if seq == 1 else (
                f"prev_hash does not match the hash of seq {seq - 1} "
                "(an event was removed, inserted or reordered)"
            )
            bad = BadEvent(sid, seq, reason)
        elif event_hash(prev_hash, sid, seq, type_, version, recorded_at, payload) != stored_hash:
            reason = "hash mismatch: the event's fields were edited after it was written"
            bad = BadEvent(sid, seq, reason)
        if bad is not None:
            return VerifyReport(ok=False, checked_events=checked, first_bad=bad)
        prev = stored_hash
        expected_seq += 1
    orphan = _orphan_link(conn, stream_id)
    if orphan is not None:
        return VerifyReport(ok=False, checked_events=checked, first_bad=orphan)
    return VerifyReport(ok=True, checked_events=checked, first_bad=None)


def _chain_start(conn: sqlite3.Connection, stream_id: str) -> tuple[str, str]:
    """The hash seq 1 must chain to, and what to say if it does not."""
    link = conn.execute(_LINK, (stream_id,)).fetchone()
    if link is None:
        return GENESIS_HASH, (
            "prev_hash of seq 1 is not the genesis hash and the stream has no fork link"
        )
    parent, parent_seq = link
    row = conn.execute(_HASH_AT, (parent, parent_seq)).fetchone()
    if row is None:
        # No hash can match: seq 1 is then reported with this reason.
        return "", f"fork link points to {parent!r} seq {parent_seq}, which does not exist"
    return row[0], (
        f"prev_hash of seq 1 does not match the hash of its fork parent {parent!r} at seq "
        f"{parent_seq} (the fork link or the parent was changed)"
    )


def _orphan_link(conn: sqlite3.Connection, stream_id: str | None) -> BadEvent | None:
    if stream_id is None:
        row = conn.execute(_ORPHAN_LINKS.format(where="")).fetchone()
    else:
        row = conn.execute(_ORPHAN_LINKS.format(where="AND stream_id = ?"), (stream_id,)).fetchone()
    if row is None:
        return None
    return BadEvent(row[0], 1, "seq 1 missing: the stream has a fork link but no events")


def check_heads(conn: sqlite3.Connection, heads: Iterable[Head]) -> list[BadEvent]:
    """Every saved head whose stream is gone, now ends earlier, or has another hash there."""
    bad = []
    for head in heads:
        row = conn.execute(_HASH_AT, (head.stream_id, head.seq)).fetchone()
        if row is not None:
            if row[0] != head.hash:
                reason = f"hash at seq {head.seq} differs from the saved head (history rewritten)"
                bad.append(BadEvent(head.stream_id, head.seq, reason))
            continue
        last = conn.execute(_LAST_SEQ, (head.stream_id,)).fetchone()[0]
        if last is None:
            reason = f"stream is missing (the saved head is at seq {head.seq})"
        else:
            reason = (
                f"stream ends at seq {last}, before the saved head at seq {head.seq} "
                "(events were cut off its end)"
            )
        bad.append(BadEvent(head.stream_id, head.seq, reason))
    return bad
