"""The per-stream SHA-256 chain. Other code (and other programs) depend on it byte for byte."""

from __future__ import annotations

from collections.abc import Iterable
from hashlib import sha256

__all__ = ["GENESIS_HASH", "event_hash", "hash_encoded"]

GENESIS_HASH = "0" * 64
"""The ``prev_hash`` of a stream's first event (unless the stream is a fork)."""


def event_hash(
    prev_hash: str,
    stream_id: str,
    seq: int,
    type: str,
    version: int,
    recorded_at: str,
    payload: str,
) -> str:
    """Return the hex SHA-256 that chains an event to ``prev_hash``.

    Each field is UTF-8 encoded and prefixed with its byte length as 8 big-endian
    bytes, so no two different events hash the same input, whatever their text::

        sha256(b"".join(len(b).to_bytes(8, "big") + b for b in fields)).hexdigest()

    where ``fields`` is ``prev_hash, stream_id, str(seq), type, str(version),
    recorded_at, payload``.
    """
    return hash_encoded(
        field.encode()
        for field in (prev_hash, stream_id, str(seq), type, str(version), recorded_at, payload)
    )


def hash_encoded(fields: Iterable[bytes]) -> str:
    """:func:`event_hash` over fields already encoded as UTF-8 (``str(seq)`` for numbers)."""
    h = sha256()
    for data in fields:
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()
