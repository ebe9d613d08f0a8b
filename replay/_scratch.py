"""The scratch journal a deterministic replay writes into: a real journal in memory.

It is :class:`journal.Journal` over SQLite's ``:memory:`` database, so it keeps
exactly the journal's contract (it runs the same contract suite, see
``tests/journal``), plus one hook: ``checker.check(events, expected_seq)`` sees
every append to the watched stream first. Nothing reaches a disk, so an append
costs no fsync.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from journal import Journal, NewEvent, StoredEvent

__all__ = ["ScratchJournal"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class ScratchJournal(Journal):
    """An in-memory journal; ``checker.check(events, expected_seq)`` sees each append first.

    ``checker`` watches one stream (``checker.recording.conversation_id``); a
    divergence it raises leaves the scratch unchanged, like a refused append.
    Events without their own ``recorded_at`` are stamped by ``clock``, by default
    always the epoch: a replay's scratch rows are compared, never kept, and must
    not depend on the time of the replay.
    """

    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        super().__init__(":memory:", synchronous="NORMAL", clock=clock or _epoch)
        self.checker: Any = None

    def __repr__(self) -> str:
        return "ScratchJournal()"

    def append(self, stream_id: str, events: Sequence[NewEvent], expected_seq: int, *,
               parent: tuple[str, int] | None = None) -> list[StoredEvent]:
        """Append as :meth:`Journal.append` does, checked by the checker first when watched."""
        checker = self.checker
        if checker is not None and events and stream_id == checker.recording.conversation_id:
            checker.check(events, expected_seq)
        return super().append(stream_id, events, expected_seq, parent=parent)


def _epoch() -> datetime:
    return _EPOCH
