"""Tamper evidence: recomputing hash chains (streamed, constant memory) and checking saved heads.

Rows are read as raw bytes with their storage types, so whatever an edit stored
(a BLOB, a number, NULL, text that is not UTF-8) is reported as a bad event rather
than raised. The walk is written once (:func:`verify_source`, :func:`check_heads_in`)
over a :class:`ChainSource`; each backend supplies the rows (SQLite's is here).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator
from hashlib import sha256
from typing import Any, Protocol

import msgspec

from ._erase import ERASURE_TYPE
from ._hashing import GENESIS_HASH, erased_digest, hash_encoded
from ._lineage import find_loop
from ._statements import hex_of, statements
from ._types import BadEvent, Head, VerifyReport

__all__ = [
    "ChainSource",
    "bad_payload",
    "bad_payload_in",
    "check_heads",
    "check_heads_in",
    "link_of",
    "verify_chains",
    "verify_source",
]

_ERASURE = ERASURE_TYPE.encode()  # the record whose ``seqs`` names the erased events

_COLUMNS = ("stream_id", "seq", "type", "version", "recorded_at", "payload", "prev_hash", "hash")
_TYPES = ("text", "integer", "text", "integer", "text", "text", "text", "text")
_HASHES = ("prev_hash", "hash")
TEXT_TYPES = ",".join(_TYPES)
"""The columns' storage types in a journal that stores hashes as hex text."""
COMPACT_TYPES = ",".join("blob" if c in _HASHES else t for c, t in zip(_COLUMNS, _TYPES))
"""The columns' storage types in a journal that stores hashes as 32-byte BLOBs (schema 3)."""


def _chain_columns(compact: bool) -> str:
    """Text as its stored bytes (a BLOB hash as its hex), numbers only when they are
    integers (else NULL), and every column's storage type: Python never decodes or
    trusts what an edit may have stored.

    Not ``compact`` (a handle that opened the journal before schema 3), a hash stored
    as 32 bytes counts as its hex text: a writer may have migrated the file since.
    """
    def value(column: str, kind: str) -> str:
        if kind != "text":
            return f"iif(typeof({column}) = 'integer', {column}, NULL)"
        if column in _HASHES:
            if compact:
                return f"CAST(lower(hex({column})) AS BLOB)"
            return f"CAST(iif({_bytes32(column)}, lower(hex({column})), {column}) AS BLOB)"
        return f"CAST({column} AS BLOB)"

    def storage(column: str) -> str:
        if column in _HASHES and not compact:
            return f"iif({_bytes32(column)}, 'text', typeof({column}))"
        return f"typeof({column})"
    return (", ".join(value(c, t) for c, t in zip(_COLUMNS, _TYPES))
            + ", " + " || ',' || ".join(storage(c) for c in _COLUMNS))


def _bytes32(column: str) -> str:
    return f"typeof({column}) = 'blob' AND length({column}) = 32"


_LINK = "SELECT parent_stream_id, parent_seq FROM stream_links WHERE stream_id = ?"
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


class ChainSource(Protocol):
    """What :func:`verify_source` and :func:`check_heads_in` read, whatever stores the events.

    Rows are ``(stream_id, seq, type, version, recorded_at, payload, prev_hash, hash,
    types)``: text columns as their stored UTF-8 bytes (hashes as their hex), numbers
    as ints (``None`` when not an integer), and ``types`` the columns' storage types
    joined by commas, ordered by stream then seq. ``expected_types`` is ``types`` when
    nothing was edited (``text,integer,...``).
    """

    expected_types: str
    chain_version: int
    """The journal's chain version (``_hashing``): what each event's hash covers."""

    def all_rows(self) -> Iterable[tuple[Any, ...]]:
        """Every stream's rows."""
        ...

    def segment_rows(self, stream_id: str, upto: int) -> Iterable[tuple[Any, ...]]:
        """One stream's rows up to seq ``upto``."""
        ...

    def link(self, stream_id: str) -> tuple[str, int] | None:
        """The stream's fork link as stored."""
        ...

    def hash_bytes(self, stream_id: str, seq: int) -> bytes | None:
        """The stored hash at ``(stream_id, seq)`` as bytes, ``None`` if no such event."""
        ...

    def orphan_link(self, stream_id: str | None) -> str | None:
        """The first stream (or ``stream_id``) with a fork link but no events."""
        ...

    def hash_at(self, stream_id: str, seq: int) -> str | None:
        """The stored hash at ``(stream_id, seq)``, ``None`` if no such event."""
        ...

    def last_seq(self, stream_id: str) -> int | None:
        """The stream's last seq, ``None`` if it has no events."""
        ...


class _SqliteChains:
    """A SQLite connection as a :class:`ChainSource` (``compact``: hashes stored as BLOBs)."""

    def __init__(self, conn: sqlite3.Connection, compact: bool, chain: int = 1) -> None:
        self.conn = conn
        self.chain_version = chain
        self.expected_types = COMPACT_TYPES if compact else TEXT_TYPES
        columns = _chain_columns(compact)
        self._all = f"SELECT {columns} FROM events ORDER BY stream_id, seq"
        self._segment = f"SELECT {columns} FROM events WHERE stream_id = ? AND seq <= ? ORDER BY seq"
        self._hash_at = statements(compact).hash_at
        self._hash_bytes = (f"SELECT CAST({hex_of('hash', compact)} AS BLOB) FROM events "
                            "WHERE stream_id = ? AND seq = ?")

    def all_rows(self) -> Iterable[tuple[Any, ...]]:
        return self.conn.execute(self._all)

    def segment_rows(self, stream_id: str, upto: int) -> Iterable[tuple[Any, ...]]:
        return self.conn.execute(self._segment, (stream_id, upto))

    def link(self, stream_id: str) -> tuple[str, int] | None:
        return link_of(self.conn, stream_id)

    def hash_bytes(self, stream_id: str, seq: int) -> bytes | None:
        row = self.conn.execute(self._hash_bytes, (stream_id, seq)).fetchone()
        return None if row is None else row[0]

    def orphan_link(self, stream_id: str | None) -> str | None:
        if stream_id is None:
            row = self.conn.execute(_ORPHAN_LINKS.format(where="")).fetchone()
        else:
            row = self.conn.execute(_ORPHAN_LINKS.format(where="AND stream_id = ?"),
                                    (stream_id,)).fetchone()
        return None if row is None else row[0]

    def hash_at(self, stream_id: str, seq: int) -> str | None:
        row = self.conn.execute(self._hash_at, (stream_id, seq)).fetchone()
        return None if row is None else row[0]

    def last_seq(self, stream_id: str) -> int | None:
        result: int | None = self.conn.execute(_LAST_SEQ, (stream_id,)).fetchone()[0]
        return result


def link_of(conn: sqlite3.Connection, stream_id: str) -> tuple[str, int] | None:
    """The stream's fork link ``(parent, parent_seq)`` as stored, or ``None``."""
    result: tuple[str, int] | None = conn.execute(_LINK, (stream_id,)).fetchone()
    return result


def verify_chains(
    conn: sqlite3.Connection,
    stream_id: str | None,
    progress: Progress | None = None,
    *,
    compact: bool = True,
    chain: int = 1,
) -> VerifyReport:
    """:func:`verify_source` over a SQLite journal's connection (``compact``: schema 3 on;
    ``chain``: its chain version)."""
    return verify_source(_SqliteChains(conn, compact, chain), stream_id, progress)


def verify_source(
    source: ChainSource, stream_id: str | None, progress: Progress | None = None
) -> VerifyReport:
    """Recompute every chain, or one stream's whole history; report the first bad event.

    For one stream that is a fork, every ancestor's prefix up to the fork point is
    recomputed first (root first): an edit in a parent is reported at the parent's seq.
    ``progress(n)``, when given, hears every ~1,000 events how many more were checked.
    """
    if stream_id is None:
        return _report(_check(source, _ticking(source.all_rows(), progress), None),
                       source, None)
    segments, loop = find_loop(source.link, stream_id)
    if loop is not None:
        bad = BadEvent(loop, 1, f"the fork link of {loop!r} closes a loop of fork links")
        return VerifyReport(ok=False, checked_events=0, first_bad=bad)

    def rows() -> Iterator[tuple[Any, ...]]:
        for sid, upto in segments:
            yield from source.segment_rows(sid, _MAX_SEQ if upto is None else upto)

    whole = {sid for sid, upto in segments if upto is None}
    return _report(_check(source, _ticking(rows(), progress), whole), source, stream_id)


def bad_payload_in(conn: sqlite3.Connection, stream_id: str | None, *,
                   compact: bool = True) -> BadEvent | None:
    """:func:`bad_payload` over a SQLite journal's connection."""
    return bad_payload(_SqliteChains(conn, compact), stream_id)


def bad_payload(source: ChainSource, stream_id: str | None) -> BadEvent | None:
    """The first event (of every stream, or of one stream's history) whose payload is not
    JSON, ``None`` if there is none.

    The chain walk does not parse payloads (it hashes their bytes); the extensions'
    checks do, and a payload edited into something that is not JSON makes them fail.
    Then this names the event: a slow path, taken only when a check failed.
    """
    if stream_id is None:
        rows: Iterable[tuple[Any, ...]] = source.all_rows()
    else:
        segments, _ = find_loop(source.link, stream_id)
        rows = (row for sid, upto in segments
                for row in source.segment_rows(sid, _MAX_SEQ if upto is None else upto))
    for raw_sid, seq, _type, _version, _at, payload, *_ in rows:
        try:
            msgspec.json.decode(payload)
        except (msgspec.DecodeError, TypeError):
            return BadEvent(_shown(raw_sid), seq if type(seq) is int else 0,
                            "the payload is not JSON (the row was edited outside turnlog)")
    return None


def _ticking(rows: Iterable[tuple[Any, ...]], progress: Progress | None) -> Iterable[tuple[Any, ...]]:
    """``rows``, telling ``progress`` every ``_PROGRESS_EVERY`` rows and at the end."""
    if progress is None:
        return rows
    return _tick(rows, progress)


def _tick(rows: Iterable[tuple[Any, ...]], progress: Progress) -> Iterator[tuple[Any, ...]]:
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
    outcome: tuple[int, BadEvent | None], source: ChainSource, stream_id: str | None
) -> VerifyReport:
    checked, bad = outcome
    if bad is None:
        orphan = source.orphan_link(stream_id)
        if orphan is not None:
            bad = BadEvent(orphan, 1, "seq 1 missing: the stream has a fork link but no events")
    return VerifyReport(ok=bad is None, checked_events=checked, first_bad=bad)


def _check(source: ChainSource, rows: Iterable[tuple[Any, ...]],
           whole: set[str] | None) -> tuple[int, BadEvent | None]:
    """Walk rows ordered by stream then seq; return how many were checked and the first bad.

    Under chain version 2 an erased event must be named by a later ``erasure_recorded``
    event of its stream (checked for the streams walked to their end: all of them, or
    those in ``whole``): a payload replaced without that record was tampered with.
    """
    chain = getattr(source, "chain_version", 1)
    unlisted: dict[int, str] = {}  # erased seq -> its erased payload's hex SHA-256
    checked = 0
    current: bytes | None = None
    name = ""
    expected_seq = 0
    prev = b""
    start_reason = ""
    expected_types = source.expected_types
    for raw_sid, seq, type_, version, recorded_at, payload, prev_hash, stored, types in rows:
        if raw_sid != current:
            if unlisted and (whole is None or name in whole):
                return checked, _unlisted(name, unlisted)
            unlisted = {}
            current, expected_seq = raw_sid, 1
            decoded = _name(raw_sid)
            if type(raw_sid) is not bytes or decoded is None:
                return checked + 1, BadEvent(_shown(raw_sid), 1, _type_problem(types, expected_types))
            name = decoded
            prev, start_reason = _chain_start(source, name)
        checked += 1
        if types != expected_types or not _utf8(type_, recorded_at, payload, prev_hash, stored):
            return checked, BadEvent(name, seq if type(seq) is int else expected_seq,
                                     _type_problem(types, expected_types))
        if seq != expected_seq:
            return checked, BadEvent(name, expected_seq,
                                     f"seq {expected_seq} missing (next stored is seq {seq})")
        if prev_hash != prev:
            reason = start_reason if seq == 1 else (
                f"prev_hash does not match the hash of seq {seq - 1} "
                "(an event was removed, inserted or reordered)"
            )
            return checked, BadEvent(name, seq, reason)
        if chain == 1:
            field = payload
        else:
            kept = erased_digest(payload)
            if kept is not None:
                unlisted[seq] = sha256(payload).hexdigest()
                field = kept.encode()
            else:
                field = sha256(payload).hexdigest().encode()
                if type_ == _ERASURE:
                    for listed, digest in _listed(payload):
                        if digest is not None and listed in unlisted and unlisted[listed] != digest:
                            return checked, BadEvent(name, listed, _EDITED)
                        unlisted.pop(listed, None)
        fields = (prev_hash, raw_sid, b"%d" % seq, type_, b"%d" % version, recorded_at, field)
        if hash_encoded(fields).encode() != stored:
            return checked, BadEvent(
                name, seq, "hash mismatch: the event's fields were edited after it was written"
            )
        prev = stored
        expected_seq += 1
    if unlisted and (whole is None or name in whole):
        return checked, _unlisted(name, unlisted)
    return checked, None


_EDITED = ("the erased payload was edited after its erasure: it does not hash to the digest "
           "its erasure_recorded event keeps")


def _unlisted(name: str, unlisted: dict[int, str]) -> BadEvent:
    seq = min(unlisted)
    return BadEvent(name, seq, "the payload was erased, but no later erasure_recorded event "
                    "of the conversation names it (it was replaced outside turnlog)")


def _listed(payload: bytes) -> list[tuple[int, str | None]]:
    """The seqs an ``erasure_recorded`` payload names, each with the SHA-256 it records of
    the erased payload (``kept``, same order; ``None`` for a record without it), none when
    the payload is not as written."""
    try:
        record = msgspec.json.decode(payload)
        seqs, kept = record.get("seqs", []), record.get("kept", [])
    except (msgspec.DecodeError, AttributeError):
        return []
    if not isinstance(seqs, list):
        return []
    if not isinstance(kept, list) or len(kept) != len(seqs):
        kept = [None] * len(seqs)
    return [(s, d if isinstance(d, str) else None) for s, d in zip(seqs, kept) if type(s) is int]


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


def _type_problem(types: str | None, expected_types: str) -> str:
    found = (types or "").split(",")
    for column, expected, actual in zip(_COLUMNS, expected_types.split(","), found):
        if actual != expected:
            return (f"{column} is stored as {actual.upper()}, not {expected.upper()} "
                    "(the row was edited outside turnlog)")
    return "a text column holds bytes that are not UTF-8 (the row was edited outside turnlog)"


def _chain_start(source: ChainSource, stream_id: str) -> tuple[bytes, str]:
    """The hash seq 1 must chain to, and what to say if it does not."""
    link = source.link(stream_id)
    if link is None:
        return GENESIS_HASH.encode(), (
            "prev_hash of seq 1 is not the genesis hash and the stream has no fork link"
        )
    parent, parent_seq = link
    stored = source.hash_bytes(parent, parent_seq)
    if stored is None:
        # No hash can match: seq 1 is then reported with this reason.
        return b"", f"fork link points to {parent!r} seq {parent_seq}, which does not exist"
    return stored, (
        f"prev_hash of seq 1 does not match the hash of its fork parent {parent!r} at seq "
        f"{parent_seq} (the fork link or the parent was changed)"
    )


def check_heads(
    conn: sqlite3.Connection, heads: Iterable[Head], *, compact: bool = True
) -> list[BadEvent]:
    """:func:`check_heads_in` over a SQLite journal's connection."""
    return check_heads_in(_SqliteChains(conn, compact), heads)


def check_heads_in(source: ChainSource, heads: Iterable[Head]) -> list[BadEvent]:
    """Every saved head whose stream is gone, now ends earlier, or has another hash there."""
    bad = []
    for head in heads:
        stored = source.hash_at(head.stream_id, head.seq)
        if stored is not None:
            if stored != head.hash:
                reason = f"hash at seq {head.seq} differs from the saved head (history rewritten)"
                bad.append(BadEvent(head.stream_id, head.seq, reason))
            continue
        last = source.last_seq(head.stream_id)
        if last is None:
            reason = f"stream is missing (the saved head is at seq {head.seq})"
        else:
            reason = (
                f"stream ends at seq {last}, before the saved head at seq {head.seq} "
                "(events were cut off its end)"
            )
        bad.append(BadEvent(head.stream_id, head.seq, reason))
    return bad
