"""The journal's value types: frozen msgspec Structs, cheap to build and to compare."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import msgspec

__all__ = [
    "BadEvent",
    "Head",
    "NewEvent",
    "ProjectionMismatch",
    "Snapshot",
    "StoredEvent",
    "StreamAppend",
    "StreamInfo",
    "VerifyReport",
]


class NewEvent(msgspec.Struct, frozen=True):
    """An event to append: its ``type`` tag, payload schema ``version`` and ``payload``.

    ``payload`` is JSON text in the caller's own stable encoding (the engine writes sorted
    JSON, ``engine.canonical.sorted_json``); the journal stores it byte for byte and only
    checks that it is valid JSON. ``recorded_at``
    (``YYYY-MM-DDTHH:MM:SS.ffffffZ``) overrides the journal's clock, for imports that
    keep their original timestamps.
    """

    type: str
    version: int
    payload: str
    recorded_at: str | None = None


class StreamAppend(NamedTuple):
    """One stream's share of an atomic :meth:`Journal.append_many`.

    The arguments :meth:`Journal.append` takes, as one value: ``events`` become seqs
    ``expected_seq + 1``…; ``parent=(stream, seq)`` on the stream's first append
    makes it a fork. A plain ``(stream_id, events, expected_seq)`` tuple is accepted
    wherever a ``StreamAppend`` is.
    """

    stream_id: str
    events: Sequence[NewEvent]
    expected_seq: int
    parent: tuple[str, int] | None = None


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

    @property
    def erased(self) -> bool:
        """Whether this event's content was erased (:func:`journal.erase`): its payload
        then keeps only the original's digest and what the erasure chose to keep."""
        return self.payload.startswith('{"turnlog:erased":"')


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


class ProjectionMismatch(msgspec.Struct, frozen=True):
    """Where an extension's derived object (a projection table, a view) disagrees with events.

    ``extension`` and ``object`` (its table or view) say what; ``stream_id``,
    ``position`` and ``column`` say where, when the difference is in one row; ``seq``,
    when the difference is an event of the stream (an illegal history: ``object`` is
    ``"history"``).
    """

    extension: str
    object: str
    stream_id: str | None
    position: int | None
    column: str | None
    reason: str
    seq: int | None = None


class Snapshot(msgspec.Struct, frozen=True):
    """A higher layer's saved state of a stream at ``seq``, whose event there had ``hash``.

    ``kind`` names the layer and its format (``"turnlog.engine.model.state/…"``); ``data`` is that
    layer's bytes, opaque to the journal. A snapshot is a cache, never history: it
    is returned only while the stream's event at ``seq`` still has ``hash``, and a
    reader folds the events after ``seq`` onto it.
    """

    stream_id: str
    kind: str
    seq: int
    hash: str
    data: bytes


class VerifyReport(msgspec.Struct, frozen=True):
    """The result of :meth:`Journal.verify`; ``ok`` when no chain and no projection is bad.

    ``first_bad`` is the first event whose chain does not hold; ``projections`` lists
    what the extensions' checks (:attr:`Extension.verify`) found recomputing their
    derived objects from ``events``; ``missing_guards`` what of the journal's guards
    (the triggers that keep it append-only, the ``events`` table's constraints) is gone
    or disabled, each in a few words.
    """

    ok: bool
    checked_events: int
    first_bad: BadEvent | None
    projections: tuple[ProjectionMismatch, ...] = ()
    missing_guards: tuple[str, ...] = ()
