"""The scratch journal a deterministic replay writes into: in memory, checked on every append.

It implements the part of ``journal.Journal``'s API that conversations use
(``append`` with optimistic concurrency and fork parents, ``read``,
``lineage``, ``stream``, ``streams``, ``last_seq``, ``hash_at``, ``close``)
over Python lists, with the same hash chain (except on the watched stream,
whose hashes nothing reads). A replay never needs the
scratch's rows on disk, and SQLite's per-transaction cost would dominate a
replay (one transaction per loop step), so this keeps replay close to the
cost of the fold.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from journal import (
    GENESIS_HASH,
    ConcurrencyError,
    EventNotFoundError,
    InvalidAppendError,
    NewEvent,
    StoredEvent,
    StreamInfo,
    StreamNotFoundError,
    event_hash,
)

__all__ = ["ScratchJournal"]

_STAMP = "1970-01-01T00:00:00.000000Z"


class ScratchJournal:
    """An in-memory journal; ``checker.check(events, expected_seq)`` sees each append first.

    ``checker`` watches one stream (``checker.recording.conversation_id``); a
    divergence it raises leaves the scratch unchanged, like a refused append.
    """

    path = ":scratch:"

    def __init__(self) -> None:
        self._streams: dict[str, list[StoredEvent]] = {}
        self._links: dict[str, tuple[str, int]] = {}
        self._position = 0
        self.checker: Any = None

    def __enter__(self) -> ScratchJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop everything."""
        self._streams.clear()

    def append(self, stream_id: str, events: Sequence[NewEvent], expected_seq: int, *,
               parent: tuple[str, int] | None = None) -> list[StoredEvent]:
        """Append as ``Journal.append`` does (checked by the checker first when watched)."""
        if not events:
            raise InvalidAppendError(f"append to stream {stream_id!r}: no events given")
        checker = self.checker
        if checker is not None and stream_id == checker.recording.conversation_id:
            checker.check(events, expected_seq)
        rows = self._streams.get(stream_id)
        last = len(rows) if rows else 0
        if last != expected_seq:
            raise ConcurrencyError(
                f"append to stream {stream_id!r} in the scratch journal: expected seq "
                f"{expected_seq}, but the stream's last seq is {last}",
                stream_id=stream_id, expected_seq=expected_seq, actual_seq=last)
        if rows:
            prev = rows[-1].hash
        elif parent is not None:
            prev = self.hash_at(*parent)
        else:
            prev = GENESIS_HASH
        out = []
        for i, e in enumerate(events):
            seq = expected_seq + 1 + i
            stamp = e.recorded_at or _STAMP
            # the watched stream is thrown away after the comparison: no chain to compute
            h = "" if checker is not None and stream_id == checker.recording.conversation_id \
                else event_hash(prev, stream_id, seq, e.type, e.version, stamp, e.payload)
            self._position += 1
            out.append(StoredEvent(self._position, stream_id, seq, e.type, e.version, stamp,
                                   e.payload, prev, h))
            prev = h
        if rows is None:
            self._streams[stream_id] = rows = []
            if parent is not None:
                self._links[stream_id] = parent
        rows.extend(out)
        return out

    def read(self, stream_id: str, from_seq: int = 1,
             to_seq: int | None = None) -> Iterator[StoredEvent]:
        """A stream's own events from ``from_seq`` to ``to_seq`` (inclusive)."""
        rows = self._streams.get(stream_id, [])
        return iter(rows[from_seq - 1:to_seq])

    def lineage(self, stream_id: str, to_seq: int | None = None) -> Iterator[StoredEvent]:
        """Fork ancestors' events up to the fork points, then the stream's own."""
        segments = [(stream_id, to_seq)]
        while segments[-1][0] in self._links:
            segments.append(self._links[segments[-1][0]])
        for sid, upto in reversed(segments):
            yield from self.read(sid, 1, upto)

    def stream(self, stream_id: str) -> StreamInfo:
        """One stream's summary (``StreamNotFoundError`` if it has no events)."""
        rows = self._streams.get(stream_id)
        if not rows:
            raise StreamNotFoundError(f"the scratch journal has no stream {stream_id!r}")
        link = self._links.get(stream_id, (None, None))
        return StreamInfo(stream_id, len(rows), rows[-1].hash, rows[0].recorded_at,
                          rows[-1].recorded_at, len(rows), link[0], link[1])

    def streams(self) -> Iterator[StreamInfo]:
        """Every stream's summary."""
        return (self.stream(sid) for sid in self._streams)

    def last_seq(self, stream_id: str) -> int:
        """The stream's last seq, 0 if it has no events."""
        return len(self._streams.get(stream_id, ()))

    def hash_at(self, stream_id: str, seq: int) -> str:
        """The hash of the event at ``(stream_id, seq)``."""
        rows = self._streams.get(stream_id, [])
        if not 1 <= seq <= len(rows):
            raise EventNotFoundError(f"the scratch journal has no event at {stream_id!r} "
                                     f"seq {seq}")
        return rows[seq - 1].hash
