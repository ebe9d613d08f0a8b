"""The ``JournalProtocol``: what every journal backend offers, whatever stores the events.

:class:`journal.Journal` (one SQLite file, or ``:memory:``) implements it, and so
does replay's scratch journal; a PostgreSQL backend will too. Every
implementation runs the same contract suite (``tests/journal``, parametrised by
the ``journal`` fixture), so callers may rely on exactly what is written here.
Hash values are the same on every backend (:func:`journal.event_hash`).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Protocol, runtime_checkable

from ._lineage import Segment
from ._logtree import LogTree
from ._types import (
    BadEvent,
    Head,
    NewEvent,
    Snapshot,
    StoredEvent,
    StreamAppend,
    StreamInfo,
    VerifyReport,
)

__all__ = ["JournalProtocol"]


@runtime_checkable
class JournalProtocol(Protocol):
    """An append-only store of hash-chained event streams with optimistic concurrency.

    A stream is a gapless sequence of events (seq 1, 2, 3 …), each chained to the
    one before by its hash; every event also has a global ``position``, strictly
    increasing across streams. A stream may start as a fork of another at a seq:
    its seq 1 chains to the parent's hash there, and its history (:meth:`lineage`)
    is the parent's prefix followed by its own events. Nothing is ever rewritten.

    >>> from turnlog.journal import Journal, NewEvent
    >>> j: JournalProtocol = Journal(":memory:")
    >>> [e.seq for e in j.append("s", [NewEvent("note", 1, "{}")], expected_seq=0)]
    [1]
    >>> j.last_seq("s"), j.last_position()
    (1, 1)
    """

    path: str
    """Where the journal lives (a file path, ``:memory:``, a URL), for messages."""

    readonly: bool
    """Whether this handle refuses every write (:class:`~journal.ReadOnlyJournalError`)."""

    chain_version: int
    """The journal's hash chain version (``journal.CHAIN_VERSION`` for new journals; 1 for
    one written before schema 7): what each event's hash covers, and whether it can erase."""

    def __enter__(self) -> JournalProtocol: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def close(self) -> None:
        """Release the journal; safe twice and from any thread. Later calls raise ``JournalError``."""

    def append(
        self,
        stream_id: str,
        events: Sequence[NewEvent],
        expected_seq: int,
        *,
        parent: tuple[str, int] | None = None,
    ) -> list[StoredEvent]:
        """Append ``events`` as seqs ``expected_seq + 1``… in one transaction: all or nothing.

        ``expected_seq`` is the stream's last seq as the caller knows it (0: a new
        stream). Behind the stream's end, :class:`~journal.ConcurrencyError` (another
        writer appended first: re-read and retry); past it,
        :class:`~journal.SeqGapError` (retrying cannot help). ``parent=(stream, seq)``
        on a stream's first append makes it a fork. Exactly
        ``append_many([(stream_id, events, expected_seq, parent)])[0]``.

        >>> from turnlog.journal import Journal, NewEvent
        >>> j = Journal(":memory:")
        >>> _ = j.append("a", [NewEvent("note", 1, '{"n":1}')], 0)
        >>> [e.seq for e in j.append("b", [NewEvent("note", 1, "{}")], 0, parent=("a", 1))]
        [1]
        """
        ...

    def append_many(self, appends: Iterable[StreamAppend]) -> list[list[StoredEvent]]:
        """Append to several streams in one transaction: all or nothing.

        Each item is a :class:`~journal.StreamAppend` or a ``(stream_id, events,
        expected_seq[, parent])`` tuple, checked as :meth:`append` checks its arguments;
        the first refusal (:class:`~journal.ConcurrencyError`,
        :class:`~journal.SeqGapError`, :class:`~journal.InvalidAppendError`, naming its
        stream) leaves every stream as it was. A stream may appear only once. Items are
        written in order (a fork may start at an event an earlier item writes), their
        positions are consecutive in that order, and all share one clock reading.
        Returns what :meth:`append` would return, per item. The backend's append hooks
        (:attr:`~journal.Extension.on_append` for SQLite) run in the same transaction.

        >>> from turnlog.journal import Journal, NewEvent, StreamAppend
        >>> j = Journal(":memory:")
        >>> _ = j.append("a", [NewEvent("x", 1, "{}")], 0)
        >>> a, b = j.append_many([("a", [NewEvent("y", 1, "{}")], 1),
        ...                       StreamAppend("b", [NewEvent("z", 1, "{}")], 0, parent=("a", 2))])
        >>> [(e.stream_id, e.seq) for e in a + b]
        [('a', 2), ('b', 1)]
        >>> j.append_many([("a", [NewEvent("y", 1, "{}")], 2),  # doctest: +ELLIPSIS
        ...                ("b", [NewEvent("z", 1, "{}")], 0)])
        Traceback (most recent call last):
        turnlog.journal.errors.ConcurrencyError: append to stream 'b' in :memory:: expected seq 0, ...
        >>> j.last_seq("a")
        2
        """
        ...

    def read(
        self,
        stream_id: str,
        from_seq: int = 1,
        to_seq: int | None = None,
        *,
        limit: int | None = None,
        reverse: bool = False,
    ) -> Iterator[StoredEvent]:
        """A stream's own events from ``from_seq`` to ``to_seq`` inclusive, lazily.

        Oldest first, or newest first with ``reverse``; at most ``limit`` (an int >= 0,
        else :class:`~journal.InvalidReadError`). An unknown stream reads as empty.

        >>> from turnlog.journal import Journal, NewEvent
        >>> j = Journal(":memory:")
        >>> _ = j.append("s", [NewEvent("x", 1, f'{{"n":{n}}}') for n in range(5)], 0)
        >>> [e.seq for e in j.read("s", 2, 4)], [e.seq for e in j.read("s", reverse=True, limit=2)]
        ([2, 3, 4], [5, 4])
        """
        ...

    def last_event(self, stream_id: str) -> StoredEvent | None:
        """The stream's newest event; ``None`` for a stream without events (as ``read`` is empty).

        >>> from turnlog.journal import Journal, NewEvent
        >>> j = Journal(":memory:")
        >>> _ = j.append("s", [NewEvent("x", 1, "{}"), NewEvent("y", 1, "{}")], 0)
        >>> j.last_event("s").type, j.last_event("nobody")
        ('y', None)
        """
        ...

    def read_all(
        self,
        after_position: int = 0,
        limit: int | None = None,
        *,
        until: int | None = None,
        types: Collection[str] | None = None,
    ) -> Iterator[StoredEvent]:
        """Every stream's events in position order: after ``after_position``, up to ``until``
        (inclusive), only of ``types``, at most ``limit`` — lazily.

        For followers: remember the last position seen and pass it back.

        >>> from turnlog.journal import Journal, NewEvent
        >>> j = Journal(":memory:")
        >>> _ = j.append("a", [NewEvent("x", 1, "{}"), NewEvent("y", 1, "{}")], 0)
        >>> [e.type for e in j.read_all(types={"y"})], [e.position for e in j.read_all(until=1)]
        (['y'], [1])
        """
        ...

    def last_position(self) -> int:
        """The newest event's global position (0 for an empty journal), without a scan."""
        ...

    def ancestry(self, stream_id: str, to_seq: int | None = None) -> list[Segment]:
        """``[(stream, up to seq), ...]`` of a stream's history, root first, itself last.

        >>> from turnlog.journal import Journal, NewEvent
        >>> j = Journal(":memory:")
        >>> _ = j.append("a", [NewEvent("x", 1, "{}")] * 3, 0)
        >>> _ = j.append("b", [NewEvent("x", 1, "{}")], 0, parent=("a", 2))
        >>> j.ancestry("b")
        [('a', 2), ('b', None)]
        """
        ...

    def lineage(self, stream_id: str, to_seq: int | None = None) -> Iterator[StoredEvent]:
        """The events of every :meth:`ancestry` segment in order: the fork's whole history."""
        ...

    def stream(self, stream_id: str) -> StreamInfo:
        """One stream's summary; :class:`~journal.StreamNotFoundError` if it has no events."""
        ...

    def streams(self) -> Iterator[StreamInfo]:
        """Every stream's summary, the most recently appended first."""
        ...

    def last_seq(self, stream_id: str) -> int:
        """The stream's last seq, 0 if it has no events."""
        ...

    def hash_at(self, stream_id: str, seq: int) -> str:
        """The hash at ``(stream_id, seq)``; :class:`~journal.EventNotFoundError` if none."""
        ...

    def read_snapshot(self, stream_id: str, kind: str) -> Snapshot | None:
        """The stream's last snapshot of ``kind``; ``None`` when there is none, when the
        stream's event at its seq no longer has the hash recorded with it, or when a
        fork link of its ancestry no longer chains (the parent's hash at the fork point
        is not the one the fork's first event names).

        Snapshots are a cache beside the history (a higher layer's folded state): the
        reader folds the events after ``snapshot.seq`` onto it.
        """
        ...

    def write_snapshot(self, stream_id: str, kind: str, seq: int, data: bytes) -> Snapshot:
        """Save ``data`` as the stream's snapshot of ``kind`` at ``seq``, replacing the last.

        The recorded hash is the event's own (:class:`~journal.EventNotFoundError` when
        the stream has no event at ``seq``); :class:`~journal.ReadOnlyJournalError` on a
        read-only handle; bad arguments :class:`~journal.InvalidAppendError`.

        >>> from turnlog.journal import Journal, NewEvent
        >>> j = Journal(":memory:")
        >>> _ = j.append("s", [NewEvent("x", 1, "{}")], 0)
        >>> j.write_snapshot("s", "k", 1, b"state").hash == j.hash_at("s", 1)
        True
        """
        ...

    def heads(self) -> list[Head]:
        """Every stream's last seq and hash, ordered by stream id."""
        ...

    def log_tree(self) -> AbstractContextManager[LogTree]:
        """The log tree over every event (RFC 6962), read in one snapshot: a context manager.

        Leaf *i* is the chain hash of the event at position *i* + 1; roots, inclusion
        and consistency proofs, checkpoints kept in the journal, and the check of the
        stored tree against the events (see :class:`~journal._logtree.LogTree`).

        >>> from turnlog.journal import Journal, NewEvent
        >>> j = Journal(":memory:")
        >>> _ = j.append("s", [NewEvent("x", 1, "{}")] * 3, 0)
        >>> with j.log_tree() as tree:
        ...     tree.size(), len(tree.inclusion(0, 3)), len(tree.consistency(1, 3))
        (3, 2, 2)
        """
        ...

    def check_heads(self, heads: Iterable[Head]) -> list[BadEvent]:
        """Saved heads that no longer hold (stream gone, shorter, or rewritten there)."""
        ...

    def erase(self, stream_id: str, kept: Mapping[int, str],
              record: Callable[[Mapping[int, str]], NewEvent],
              expected_seq: int | None = None, *,
              also: Mapping[str, tuple[Mapping[int, str],
                                       Callable[[Mapping[int, str]], NewEvent]]] | None = None
              ) -> list[int]:
        """Erase the payloads of ``stream_id``'s events at the seqs of ``kept``, keeping each
        one's SHA-256 and the JSON object ``kept[seq]``, and append ``record(erased)``
        (an ``erasure_recorded`` event; ``erased`` maps each seq erased, in order, to the
        SHA-256 of its erased payload, which the record keeps for ``verify``) in the same
        transaction; every hash, the log tree
        and every checkpoint stay valid. Then the old bytes are removed from the files.
        Raises :class:`~journal.NotErasableError` under chain version 1. Returns the seqs
        erased (those erased already are skipped; none: nothing written). ``expected_seq``:
        the stream's last seq the caller read; another writer's append since is a
        :class:`~journal.ConcurrencyError` and nothing is erased. ``also`` erases other
        streams' events in the same transaction (stream id -> its ``kept`` and ``record``:
        each stream records its own erasure), as a fork's copy of its parent's content
        goes with the parent's."""
        ...

    def verify(
        self, stream_id: str | None = None, *, progress: Callable[[int], None] | None = None
    ) -> VerifyReport:
        """Recompute every chain (or one stream's whole history, ancestors included).

        ``progress(n)``, when given, is called now and then with how many more events
        were checked, for a progress bar (the whole journal has :meth:`last_position`).

        >>> from turnlog.journal import Journal, NewEvent
        >>> j = Journal(":memory:")
        >>> _ = j.append("s", [NewEvent("x", 1, "{}")] * 3, 0)
        >>> ticks = []
        >>> j.verify(progress=ticks.append).ok, sum(ticks)
        (True, 3)
        """
        ...
