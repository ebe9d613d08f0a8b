"""The per-stream SHA-256 chain. Other code (and other programs) depend on it byte for byte.

Two versions of the chain exist (a journal records its own as ``chain_version``):

- version 1 hashes each event's payload text itself;
- version 2 (every journal created since) hashes the SHA-256 of the payload instead,
  so the payload can be erased (replaced by an *erased* payload that keeps its digest,
  see :func:`erased_digest`) while every hash, the log tree, every checkpoint and every
  proof stay exactly as they were.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from hashlib import sha256

__all__ = [
    "CHAIN_VERSION",
    "ERASED_KEY",
    "GENESIS_HASH",
    "erased_digest",
    "erased_payload",
    "event_hash",
    "hash_encoded",
    "payload_field",
]

GENESIS_HASH = "0" * 64
"""The ``prev_hash`` of a stream's first event (unless the stream is a fork)."""

CHAIN_VERSION = 2
"""The chain version of journals created by this turnlog (see the module's docstring)."""

ERASED_KEY = "turnlog:erased"
"""The first key of an erased event's payload; its value is the original payload's digest."""

_ERASED = re.compile(rb'\{"turnlog:erased":"([0-9a-f]{64})"[,}]')


def erased_digest(payload: str | bytes) -> str | None:
    """The hex SHA-256 of the original payload when ``payload`` is an erased one, else ``None``.

    An erased payload is JSON whose first member is ``"turnlog:erased": "<64 hex>"``,
    byte for byte (``{"turnlog:erased":"…",`` or ``…"}``), followed by what the erasure
    kept (an event's structure with its content replaced)::

        {"turnlog:erased":"9f86d0…","type":"user_message","parts":[{"type":"text","text":"erased"}]}
    """
    data = payload.encode() if isinstance(payload, str) else payload
    if not data.startswith(b'{"turnlog:erased":"'):
        return None
    found = _ERASED.match(data)
    return None if found is None else found.group(1).decode()


def erased_payload(digest: str, kept: str = "{}") -> str:
    """The erased payload for an event whose payload had ``digest``; ``kept`` is a JSON
    object (text) whose members follow the marker."""
    rest = kept.strip()
    if not (rest.startswith("{") and rest.endswith("}")):
        raise ValueError(f"what an erasure keeps must be a JSON object, got {kept[:40]!r}")
    inner = rest[1:-1].strip()
    return f'{{"{ERASED_KEY}":"{digest}"' + (f",{inner}}}" if inner else "}")


def payload_field(payload: str, chain: int) -> str:
    """What the chain hashes for ``payload``: the text itself (version 1), else its hex
    SHA-256 (or, erased, the digest it keeps)."""
    if chain == 1:
        return payload
    data = payload.encode()
    kept = erased_digest(data)
    return sha256(data).hexdigest() if kept is None else kept


def event_hash(
    prev_hash: str,
    stream_id: str,
    seq: int,
    type: str,
    version: int,
    recorded_at: str,
    payload: str,
    *,
    chain: int = CHAIN_VERSION,
) -> str:
    """Return the hex SHA-256 that chains an event to ``prev_hash``.

    Each field is UTF-8 encoded and prefixed with its byte length as 8 big-endian
    bytes, so no two different events hash the same input, whatever their text::

        sha256(b"".join(len(b).to_bytes(8, "big") + b for b in fields)).hexdigest()

    where ``fields`` is ``prev_hash, stream_id, str(seq), type, str(version),
    recorded_at, P``: ``P`` is the payload under chain version 1, and the payload's
    hex SHA-256 under version 2 (an erased payload's kept digest: :func:`payload_field`).
    """
    return hash_encoded(
        field.encode()
        for field in (prev_hash, stream_id, str(seq), type, str(version), recorded_at,
                      payload_field(payload, chain))
    )


def hash_encoded(fields: Iterable[bytes]) -> str:
    """:func:`event_hash` over fields already encoded as UTF-8 (``str(seq)`` for numbers)."""
    h = sha256()
    for data in fields:
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()
