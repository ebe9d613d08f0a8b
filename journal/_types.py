"""The journal's value types: frozen msgspec Structs, cheap to build and to compare."""

from __future__ import annotations

import msgspec

__all__ = ["BadEvent", "Head", "NewEvent", "StoredEvent", "StreamInfo", "VerifyReport"]


class NewEvent(msgspec.Struct, frozen=True):
    """An event to append: its ``type`` tag, payload schema ``version`` and ``payload``.

    ``payload`` is JSON text that the caller has already made canonical; the journal
    stores it byte for byte and only checks that it is valid JSON. ``recorded_at``
    (``YYYY-MM-DDTHH:MM:SS.ffffffZ``) overrides the journal's clock, for imports that
    keep their original timestamps.
    """

    type: str
    version: int
    payload: str
    recorded_at: str | None = None


class StoredEvent(msgspec.Struct, frozen=True):
    """An event as stored: its global ``position``, its ``(stream_id, seq)`` and its hashes."""

    position: int
    stream_id: str
    seq: int
    type: str
    version: int
    recorded_at: str
    payload: str
    prev_hash: str
    hash: str


class StreamInfo(msgspec.Struct, frozen=True):
    """A summary of one stream. ``parent_*`` are set when the stream is a fork."""

    stream_id: str
    last_seq: int
    head_hash: str
    first_recorded_at: str
    last_recorded_at: str
    events: int
    parent_stream_id: str | None
    parent_seq: int | None


class Head(msgspec.Struct, frozen=True):
    """A stream's last seq and its hash, to anchor the chain outside the journal."""

    stream_id: str
    seq: int
    hash: str


class BadEvent(msgspec.Struct, frozen=True):
    """Where a chain or a saved head does not hold, and why."""

    stream_id: str
    seq: int
    reason: str


class VerifyReport(msgspec.Struct, frozen=True):
    """The result of :meth:`Journal.verify`: ``first_bad`` is ``None`` when ``ok``."""

    ok: bool
    checked_events: int
    first_bad: BadEvent | None
