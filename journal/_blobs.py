"""Content-addressed parts: each large string of a payload stored once, keyed by its SHA-256.

An append replaces every JSON string of an event's payload whose content is larger
than the journal's threshold (4 KiB by default) with a reference to a row of the
``blobs`` table, written in the same transaction::

    {"$blob":"<sha-256 hex>","size":N}                    UTF-8 text
    {"$blob":"<sha-256 hex>","enc":"base64","size":N}     base64 text, kept as its bytes
    {"$blob":"<sha-256 hex>","enc":"data:image/png;base64","size":N}   a base64 data URL

The payload with its references is what the journal stores and what the hash chain
commits to, so the chain proves each part through its digest; ``verify`` reports an
event whose part is missing or does not hash to its digest. Identical parts
(the same screenshot sent every turn, the same file read twice) are one row, across
events and streams. Reads put the parts back: every read returns the payload exactly
as it was appended, byte for byte.

The substitution is textual, so a payload's other bytes are untouched: a string is
taken out only when its JSON text is exactly what re-encoding its content gives
(canonical JSON, which every turnlog event is), and base64 only when it is canonical
base64. An object key spelled ``$blob`` (with any number of ``$``) in an appended
payload gets one more ``$`` in the stored text, and loses it on read, so a stored
reference is never ambiguous.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable
from hashlib import sha256
from typing import Any

import msgspec

from ._types import BadEvent, NewEvent
from .errors import CorruptEventError

__all__ = [
    "BLOBS_FROM",
    "BLOBS_TABLE",
    "BLOBS_TABLE_POSTGRES",
    "DEFAULT_BLOB_THRESHOLD",
    "INSERT_BLOB",
    "INSERT_BLOB_POSTGRES",
    "READ_BLOB",
    "READ_BLOB_POSTGRES",
    "REFERENCING",
    "REFERENCING_POSTGRES",
    "BlobStore",
    "check_blob_threshold",
    "check_refs",
    "join",
    "refs",
    "split",
    "split_events",
    "whole_payload",
]

DEFAULT_BLOB_THRESHOLD = 4096
"""Parts whose content is larger than this many bytes are stored once, by digest."""

BLOBS_FROM = 6
"""The first core schema with the ``blobs`` table."""

# A JSON string literal (the unrolled form: runs of plain characters between escapes).
_LITERAL = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_KEY_AFTER = re.compile(r"\s*:")
# An object key spelled $blob, $$blob, …: only where a key can start ({ or , then ").
_ESCAPE = re.compile(r'(?<=[{,])"(\$+blob)"(?=:)')
_UNESCAPE = re.compile(r'(?<=[{,])"\$(\$+blob)"(?=:)')
_REF = re.compile(r'\{"\$blob":"([0-9a-f]{64})",(?:"enc":"(base64|data:[-\w.+]+/[-\w.+]+;base64)",)?'
                  r'"size":([0-9]+)\}', re.ASCII)
_DATA_URL = re.compile(r"data:[-\w.+]+/[-\w.+]+;base64,", re.ASCII)
_MARK = '$blob"'
_encode = msgspec.json.encode
_decode = msgspec.json.decode


def check_blob_threshold(threshold: object) -> int:
    """``threshold`` as an int >= 0, or :class:`ValueError` saying what was given."""
    if type(threshold) is not int or threshold < 0:
        raise ValueError(f"blob_threshold must be an int >= 0 (bytes), got {threshold!r}")
    return threshold


def _width(text: str) -> int:
    """The most UTF-8 bytes a character of ``text`` takes (1 for ASCII, a flag CPython keeps)."""
    return 1 if text.isascii() else 4


def _base64(text: str) -> bytes | None:
    """The bytes ``text`` encodes when it is canonical base64 (re-encoding gives it back)."""
    if len(text) % 4 or not text:
        return None
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return data if base64.b64encode(data).decode("ascii") == text else None


def _part(literal: str, threshold: int) -> tuple[bytes, str | None] | None:
    """The bytes to store for a string literal and its encoding, or ``None`` to keep it."""
    text = _decode(literal)
    if "\\" not in literal:
        url = _DATA_URL.match(text)
        prefix = url.group() if url else ""
        data = _base64(text[len(prefix):])
        if data is not None:
            # base64 (an image, a document) is measured and kept as the bytes it encodes
            if len(data) <= threshold:
                return None
            return data, (prefix[:-1] if prefix else "base64")
    try:
        data = text.encode()
    except UnicodeEncodeError:  # a lone surrogate: kept in the payload as it is
        return None
    if len(data) <= threshold or _encode(text).decode() != literal:
        return None
    return data, None


def split(payload: str, threshold: int) -> tuple[str, dict[str, bytes]]:
    """The payload to store for ``payload``, and the parts taken out of it (hex digest: bytes).

    A payload with no string larger than ``threshold`` comes back as it is (and no
    parts), unless it has an object key spelled ``$blob``, which is escaped.
    """
    if _MARK in payload:
        payload = _ESCAPE.sub(r'"$\1"', payload)
    width = _width(payload)
    if width * len(payload) <= threshold:
        return payload, {}
    parts: dict[str, bytes] = {}
    pieces: list[str] = []
    done = 0
    for match in _LITERAL.finditer(payload):
        start, end = match.span()
        if width * (end - start - 2) <= threshold:  # no text of it can be larger
            continue
        found = _part(match.group(), threshold)
        if found is None or _KEY_AFTER.match(payload, end):
            continue
        data, enc = found
        digest = sha256(data).hexdigest()
        parts[digest] = data
        pieces.append(payload[done:start])
        kind = f'"enc":"{enc}",' if enc else ""
        pieces.append(f'{{"$blob":"{digest}",{kind}"size":{len(data)}}}')
        done = end
    if not parts:
        return payload, {}
    pieces.append(payload[done:])
    return "".join(pieces), parts


def split_events(events: Iterable[NewEvent], threshold: int | None,
                 parts: dict[str, bytes]) -> list[NewEvent]:
    """``events`` with their payloads as stored (:func:`split`), adding their parts to
    ``parts``. ``threshold`` ``None``: the journal keeps no parts (an older schema)."""
    events = list(events)
    if threshold is None:
        return events
    stored = []
    for event in events:
        payload = getattr(event, "payload", None)  # chain_rows refuses what is no NewEvent
        if isinstance(event, NewEvent) and type(payload) is str and (
                _MARK in payload or _width(payload) * len(payload) > threshold):
            new, found = split(payload, threshold)
            if new is not payload:
                event = NewEvent(event.type, event.version, new, event.recorded_at)
                parts.update(found)
        stored.append(event)
    return stored


def refs(stored: str) -> list[tuple[str, int, bool]]:
    """The parts a stored payload references: ``(digest hex, size, base64)`` each (``base64``:
    kept as the bytes base64 text encodes)."""
    if _MARK not in stored:
        return []
    return [(m[1], int(m[3]), m[2] is not None) for m in _REF.finditer(stored)]


def join(stored: str, fetch: Callable[[str], bytes | None], where: str = "") -> str:
    """The payload as appended: ``stored`` with each reference replaced by its part.

    ``fetch(digest_hex)`` returns the part's bytes (``None`` when missing: a
    :class:`CorruptEventError` naming ``where``)."""
    if _MARK not in stored:
        return stored

    def literal(match: re.Match[str]) -> str:
        data = fetch(match[1])
        if data is None:
            raise CorruptEventError(
                f"{where or 'an event'}: its part {match[1]} is missing from the blobs "
                "table (turnlog verify reports it)")
        if match[2]:
            prefix = "" if match[2] == "base64" else match[2] + ","
            return f'"{prefix}{base64.b64encode(data).decode("ascii")}"'
        try:
            return _encode(data.decode()).decode()
        except UnicodeDecodeError:
            raise CorruptEventError(
                f"{where or 'an event'}: its part {match[1]} is not UTF-8 text (it was "
                "edited outside turnlog; turnlog verify reports it)") from None

    text = _REF.sub(literal, stored)
    return _UNESCAPE.sub(r'"\1"', text) if "$$" in stored else text


def check_refs(rows: Iterable[tuple[str, int, str]],
               fetch: Callable[[str], bytes | None]) -> BadEvent | None:
    """The first event of ``rows`` (``stream_id, seq, stored payload``, in order) whose part
    is missing, or whose bytes do not hash to its digest or have another size; each part
    is read and hashed once."""
    checked: dict[str, str | None] = {}
    for stream_id, seq, stored in rows:
        for digest, size, _ in refs(stored):
            if digest not in checked:
                data = fetch(digest)
                if data is None:
                    checked[digest] = f"its part {digest} is missing from the blobs table"
                elif sha256(data).hexdigest() != digest:
                    checked[digest] = (f"its part {digest} was edited: the blob's bytes no "
                                       "longer hash to its digest")
                elif len(data) != size:
                    checked[digest] = (f"its part {digest} has {len(data)} bytes, not the "
                                       f"{size} its event records")
                else:
                    checked[digest] = None
            problem = checked[digest]
            if problem is not None:
                return BadEvent(stream_id, seq, problem)
    return None


BLOBS_TABLE = """CREATE TABLE blobs (
    digest TEXT PRIMARY KEY,
    data BLOB NOT NULL
) WITHOUT ROWID"""

BLOBS_TABLE_POSTGRES = ('CREATE TABLE blobs (digest TEXT COLLATE "C" PRIMARY KEY, '
                        "data BYTEA NOT NULL)")

INSERT_BLOB = "INSERT OR IGNORE INTO blobs (digest, data) VALUES (?, ?)"
INSERT_BLOB_POSTGRES = ("INSERT INTO blobs (digest, data) VALUES (%s, %s) "
                        "ON CONFLICT (digest) DO NOTHING")
READ_BLOB = "SELECT data FROM blobs WHERE digest = ?"
READ_BLOB_POSTGRES = "SELECT data FROM blobs WHERE digest = %s"
# the events that reference a part (a stored reference always starts so)
REFERENCING = ("SELECT stream_id, seq, payload FROM events WHERE instr(payload, '{\"$blob\":\"') > 0 "
               "{where} ORDER BY position")
REFERENCING_POSTGRES = ("SELECT stream_id, seq, payload FROM events "
                        "WHERE strpos(payload, '{\"$blob\":\"') > 0 {where} ORDER BY position")


def whole_payload(conn: Any, payload: str, where: str = "") -> str:
    """A payload read by SQL from ``events`` (on a ``sqlite3`` connection or a
    :class:`PgConnection`), with the parts it references put back: what the journal's
    reads return. For code that reads ``events`` itself (the viewer, the audit)."""
    if _MARK not in payload:
        return payload

    def fetch(digest: str) -> bytes | None:
        row = conn.execute(READ_BLOB, (digest,)).fetchone()
        return None if row is None else bytes(row[0])
    return join(payload, fetch, where)


class BlobStore:
    """Reads parts for one backend's connection factory, keeping the last few read."""

    def __init__(self, read: Callable[[str], Any], keep: int = 64) -> None:
        self._read = read
        self._keep = keep
        self._recent: dict[str, bytes] = {}

    def fetch(self, digest: str, read: Callable[[str], Any] | None = None) -> bytes | None:
        """The part's bytes by hex digest, or ``None`` when the journal has no such part
        (read by ``read`` when given, say on a connection already held)."""
        data = self._recent.get(digest)
        if data is None:
            data = (read or self._read)(digest)
            if data is None:
                return None
            data = bytes(data)
            if len(self._recent) >= self._keep:
                self._recent.pop(next(iter(self._recent)))
            self._recent[digest] = data
        return data
