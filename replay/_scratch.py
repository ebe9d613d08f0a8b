"""The scratch journal a deterministic replay writes into: a real journal in memory.

It is :class:`journal.Journal` over SQLite's ``:memory:`` database, so it keeps
exactly the journal's contract (it runs the same contract suite, see
``tests/journal``), plus one hook: ``checker.check(events, expected_seq)`` sees
every append to the watched stream first. Nothing reaches a disk, so an append
costs no fsync.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from turnlog.journal import Journal, StoredEvent, StreamAppend

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

    def append_many(self, appends: Iterable[StreamAppend]) -> list[list[StoredEvent]]:
        """Append as :meth:`Journal.append_many` does (and so :meth:`Journal.append`), the
        watched stream's events checked by the checker first."""
        checker = self.checker
        if checker is not None and isinstance(appends, Iterable):
            appends = list(appends)
            watched = checker.recording.conversation_id
            for item in appends:
                if isinstance(item, tuple) and len(item) >= 3 and item[0] == watched and item[1]:
                    checker.check(item[1], item[2])
        return super().append_many(appends)


def _epoch() -> datetime:
    return _EPOCH
