"""The journal a deterministic replay's driver writes into: its events in memory, checked.

A replay compares what the re-run appends with the recording and keeps
nothing, so ``RerunJournal`` is no database: every append to the replayed
stream is shown to the checker first (``checker.check(events, expected_seq)``;
a divergence it raises leaves the stream as it was, like a refused append),
then kept as rows in a list. The recorded journal is read for the rest: a
fork's ancestors, and any stream the re-run has not written.

It serves what a driver needs from a journal (``Conversation.start``,
``open``, ``append``, ``flush``; reads, lineage and ancestry, for the loop's
state and observers) and keeps no snapshots and no hash chain (``hash`` and
``prev_hash`` are empty: nothing here is verified, it is compared).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from turnlog.journal import (
    ConcurrencyError,
    JournalProtocol,
    NewEvent,
    SeqGapError,
    StoredEvent,
    StreamAppend,
)

__all__ = ["RerunJournal"]

#: what a re-run's rows say they were recorded at: a replay must not depend on the time
EPOCH = "1970-01-01T00:00:00.000000Z"


class RerunJournal:
    """The re-run's journal: streams it writes live in memory, others are read from ``source``.

    ``checker.check(events, expected_seq)`` sees each append to the watched
    stream (``checker.recording.conversation_id``) first.
    """

    readonly = False

    def __init__(self, source: JournalProtocol, checker: Any) -> None:
        self.source, self.checker = source, checker
        self.watched: str = checker.recording.conversation_id
        self.path = f"replay of {source.path}"
        self._rows: dict[str, list[StoredEvent]] = {}
        self._parents: dict[str, tuple[str, int]] = {}
        self._position = 0

    def __repr__(self) -> str:
        return f"RerunJournal({self.source.path!r})"

    def __enter__(self) -> RerunJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop the re-run's rows (the recorded journal stays open: it is the caller's)."""
        self._rows.clear()

    def _local(self, stream_id: str) -> bool:
        return stream_id == self.watched or stream_id in self._rows

    # --- appends ---------------------------------------------------------------------

    def append(self, stream_id: str, events: Sequence[NewEvent], expected_seq: int, *,
               parent: tuple[str, int] | None = None) -> list[StoredEvent]:
        """Check (for the watched stream) and keep ``events`` as seqs ``expected_seq + 1``…"""
        self._check(stream_id, events, expected_seq)
        return self._keep(stream_id, events, expected_seq, parent)

    def append_many(self, appends: Iterable[StreamAppend]) -> list[list[StoredEvent]]:
        """Append to several streams: every item is checked before any is kept."""
        items = [StreamAppend(*item) for item in appends]
        for stream_id, events, expected_seq, _parent in items:
            self._check(stream_id, events, expected_seq)
        return [self._keep(*item) for item in items]

    def _check(self, stream_id: str, events: Sequence[NewEvent], expected_seq: int) -> None:
        # a stream the re-run writes is its own from then on (a recorded one is shadowed)
        last = self.last_seq(stream_id) if self._local(stream_id) else 0
        if last > expected_seq:
            raise ConcurrencyError(
                f"append to stream {stream_id!r} in {self.path}: expected seq "
                f"{expected_seq}, the stream is at {last}",
                stream_id=stream_id, expected_seq=expected_seq, actual_seq=last)
        if last < expected_seq:
            raise SeqGapError(f"append to stream {stream_id!r} in {self.path}: expected seq "
                              f"{expected_seq} is past its last seq {last}",
                              stream_id=stream_id, expected_seq=expected_seq, actual_seq=last)
        if stream_id == self.watched and events:
            self.checker.check(events, expected_seq)

    def _keep(self, stream_id: str, events: Sequence[NewEvent], expected_seq: int,
              parent: tuple[str, int] | None) -> list[StoredEvent]:
        rows = self._rows.get(stream_id)
        if rows is None:
            rows = self._rows[stream_id] = []
            if parent is not None:
                self._parents[stream_id] = parent
        position = self._position
        new = [StoredEvent(position + i, stream_id, expected_seq + i, e.type, e.version,
                           e.recorded_at or EPOCH, e.payload, "", "")
               for i, e in enumerate(events, 1)]
        self._position = position + len(new)
        rows.extend(new)
        return new

    # --- reads -----------------------------------------------------------------------

    def last_seq(self, stream_id: str) -> int:
        """The stream's last seq, 0 if it has no events."""
        if not self._local(stream_id):
            return self.source.last_seq(stream_id)
        rows = self._rows.get(stream_id)
        return rows[-1].seq if rows else 0

    def last_event(self, stream_id: str) -> StoredEvent | None:
        """The stream's newest event; ``None`` for a stream without events."""
        if not self._local(stream_id):
            return self.source.last_event(stream_id)
        rows = self._rows.get(stream_id)
        return rows[-1] if rows else None

    def read(self, stream_id: str, from_seq: int = 1, to_seq: int | None = None, *,
             limit: int | None = None, reverse: bool = False) -> Iterator[StoredEvent]:
        """A stream's own events from ``from_seq`` to ``to_seq`` inclusive."""
        if not self._local(stream_id):
            return self.source.read(stream_id, from_seq, to_seq, limit=limit, reverse=reverse)
        rows = self._rows.get(stream_id, [])
        picked = rows[max(from_seq, 1) - 1:to_seq]
        if reverse:
            picked.reverse()
        return iter(picked if limit is None else picked[:limit])

    def ancestry(self, stream_id: str, to_seq: int | None = None) -> list[tuple[str, int | None]]:
        """``[(stream, up to seq), ...]`` of a stream's history, root first, itself last."""
        if not self._local(stream_id):
            return self.source.ancestry(stream_id, to_seq)
        parent = self._parents.get(stream_id)
        above = self.ancestry(*parent) if parent is not None else []
        return [*above, (stream_id, to_seq)]

    def lineage(self, stream_id: str, to_seq: int | None = None) -> Iterator[StoredEvent]:
        """The events of every ``ancestry`` segment in order."""
        for segment, upto in self.ancestry(stream_id, to_seq):
            yield from self.read(segment, 1, upto)

    def read_snapshot(self, stream_id: str, kind: str) -> Any:
        """No snapshots of the re-run's streams (the recorded ones are the source's)."""
        return None if self._local(stream_id) else self.source.read_snapshot(stream_id, kind)

    def write_snapshot(self, stream_id: str, kind: str, seq: int, data: bytes) -> Any:
        """Nothing is kept: a re-run's snapshot would be thrown away with it."""
        return None
