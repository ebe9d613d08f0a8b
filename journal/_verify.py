"""Tamper evidence: recomputing hash chains (streamed, constant memory) and checking saved heads.

Rows are read as raw bytes with their SQLite storage types, so whatever an edit
stored (a BLOB, a number, NULL, text that is not UTF-8) is reported as a bad event
rather than raised.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator

from ._hashing import GENESIS_HASH, hash_encoded
from ._lineage import find_loop
from ._types import BadEvent, Head, VerifyReport

__all__ = ["check_heads", "link_of", "verify_chains"]

_COLUMNS = ("stream_id", "seq", "type", "version", "recorded_at", "payload", "prev_hash", "hash")
_TYPES = ("text", "integer", "text", "integer", "text", "text", "text", "text")
_EXPECTED_TYPES = ",".join(_TYPES)
# Text as its stored bytes, numbers only when they are integers (else NULL), and every
# column's storage type: Python never decodes or trusts what an edit may have stored.
_CHAIN_COLUMNS = (
    ", ".join(f"CAST({c} AS BLOB)" if t == "text" else f"iif(typeof({c}) = 'integer', {c}, NULL)"
              for c, t in zip(_COLUMNS, _TYPES))
    + ", " + " || ',' || ".join(f"typeof({c})" for c in _COLUMNS)
)
_ALL_CHAINS = f"SELECT {_CHAIN_COLUMNS} FROM events ORDER BY stream_id, seq"
_SEGMENT = f"SELECT {_CHAIN_COLUMNS} FROM events WHERE stream_id = ? AND seq <= ? ORDER BY seq"
_LINK = "SELECT parent_stream_id, parent_seq FROM stream_links WHERE stream_id = ?"
_HASH_AT = "SELECT hash FROM events WHERE stream_id = ? AND seq = ?"
_LAST_SEQ = "SELECT max(seq) FROM events WHERE stream_id = ?"
_ORPHAN_LINKS = """
    SELECT stream_id FROM stream_links AS l
    WHERE NOT EXISTS (SELECT 1 FROM events AS e WHERE e.stream_id = l.stream_id)
    {where} ORDER BY stream_id LIMIT 1
"""
_MAX_SEQ = 2**63 - 1
_PROGRESS_EVERY = 1024

Progress = Callable[[int], None]
"""Called with how many more events were checked since the last call."""


def link_of(conn: sqlite3.Connection, stream_id: str) -> tuple[str, int] | None:
    """The stream's fork link ``(parent, parent_seq)`` as stored, or ``None``."""
    return conn.execute(_LINK, (stream_id,)).fetchone()


def verify_chains(
    conn: sqlite3.Connection, stream_id: str | None, progress: Progress | None = None
) -> VerifyReport:
    """Recompute every chain, or one stream's whole history; report the first bad event.

    For one stream that is a fork, every ancestor's prefix up to the fork point is
    recomputed first (root first): an edit in a parent is reported at the parent's seq.
    ``progress(n)``, when given, hears every ~1,000 events how many more were checked.
    """
    if stream_id is None:
        rows: Iterable[tuple] = conn.execute(_ALL_CHAINS)
        return _report(_check(conn, _ticking(rows, progress)), conn, None)
    segments, loop = find_loop(lambda s: link_of(conn, s), stream_id)
    if loop is not None:
        bad = BadEvent(loop, 1, f"the fork link of {loop!r} closes a loop of fork links")
        return VerifyReport(ok=False, checked_events=0, first_bad=bad)

    def rows() -> Iterator[tuple]:
        for sid, upto in segments:
            yield from conn.execute(_SEGMENT, (sid, _MAX_SEQ if upto is None else upto))

    return _report(_check(conn, _ticking(rows(), progress)), conn, stream_id)


def _ticking(rows: Iterable[tuple], progress: Progress | None) -> Iterable[tuple]:
    """``rows``, telling ``progress`` every ``_PROGRESS_EVERY`` rows and at the end."""
    if progress is None:
        return rows
    return _tick(rows, progress)


def _tick(rows: Iterable[tuple], progress: Progress) -> Iterator[tuple]:
    count = 0
    for row in rows:
        yield row
        count += 1
        if count == _PROGRESS_EVERY:
            progress(count)
            count = 0
    if count:
        progress(count)


def _report(
    outcome: tuple[int, BadEvent | None], conn: sqlite3.Connection, stream_id: str | None
) -> VerifyReport:
    checked, bad = outcome
    if bad is None:
        bad = _orphan_link(conn, stream_id)
    return VerifyReport(ok=bad is None, checked_events=checked, first_bad=bad)


def _check(conn: sqlite3.Connection, rows: Iterable[tuple]) -> tuple[int, BadEvent | None]:
    """Walk rows ordered by stream then seq; return how many were checked and the first bad."""
    checked = 0
    current: bytes | None = None
    name = ""
    expected_seq = 0
    prev = b""
    start_reason = ""
    for raw_sid, seq, type_, version, recorded_at, payload, prev_hash, stored, types in rows:
        if raw_sid != current:
            current, expected_seq = raw_sid, 1
            name = _name(raw_sid)
            if type(raw_sid) is not bytes or name is None:
                return checked + 1, BadEvent(_shown(raw_sid), 1, _type_problem(types, raw_sid))
            prev, start_reason = _chain_start(conn, name)
        checked += 1
        if types != _EXPECTED_TYPES or not _utf8(type_, recorded_at, payload, prev_hash, stored):
            return checked, BadEvent(name, seq if type(seq) is int else expected_seq,
                                     _type_problem(types, raw_sid))
        if seq != expected_seq:
            return checked, BadEvent(name, expected_seq,
                                     f"seq {expected_seq} missing (next stored is seq {seq})")
        if prev_hash != prev:
            reason = start_reason if seq == 1 else (
                f"prev_hash does not match the hash of seq {seq - 1} "
                "(an event was removed, inserted or reordered)"
            )
            return checked, BadEvent(name, seq, reason)
        fields = (prev_hash, raw_sid, b"%d" % seq, type_, b"%d" % version, recorded_at, payload)
        if hash_encoded(fields).encode() != stored:
            return checked, BadEvent(
                name, seq, "hash mismatch: the event's fields were edited after it was written"
            )
        prev = stored
        expected_seq += 1
    return checked, None


def _name(raw: object) -> str | None:
    if type(raw) is not bytes:
        return None
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return None


def _shown(raw: object) -> str:
    return raw.decode(errors="replace") if type(raw) is bytes else repr(raw)


def _utf8(*fields: bytes) -> bool:
    try:
        for field in fields:
            field.decode()
    except UnicodeDecodeError:
        return False
    return True


def _type_problem(types: str | None, raw_sid: object) -> str:
    found = (types or "").split(",")
    for column, expected, actual in zip(_COLUMNS, _TYPES, found):
        if actual != expected:
            return (f"{column} is stored as {actual.upper()}, not {expected.upper()} "
                    "(the row was edited outside turnlog)")
    return "a text column holds bytes that are not UTF-8 (the row was edited outside turnlog)"


def _chain_start(conn: sqlite3.Connection, stream_id: str) -> tuple[bytes, str]:
    """The hash seq 1 must chain to, and what to say if it does not."""
    link = link_of(conn, stream_id)
    if link is None:
        return GENESIS_HASH.encode(), (
            "prev_hash of seq 1 is not the genesis hash and the stream has no fork link"
        )
    parent, parent_seq = link
    row = conn.execute(
        "SELECT CAST(hash AS BLOB) FROM events WHERE stream_id = ? AND seq = ?", (parent, parent_seq)
    ).fetchone()
    if row is None:
        # No hash can match: seq 1 is then reported with this reason.
        return b"", f"fork link points to {parent!r} seq {parent_seq}, which does not exist"
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
