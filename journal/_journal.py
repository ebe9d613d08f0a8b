"""The journal: one SQLite file of append-only, hash-chained event envelopes."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from functools import partial
from itertools import starmap
from types import TracebackType
from typing import TYPE_CHECKING, Any


from ._blobs import (
    BLOBS_FROM,
    DEFAULT_BLOB_THRESHOLD,
    INSERT_BLOB,
    READ_BLOB,
    REFERENCING,
    BlobStore,
    check_blob_threshold,
    check_refs,
    join,
    split_events,
)
from ._erase import (
    COPIES,
    DROP_SNAPSHOTS,
    Record,
    check_chain,
    check_head,
    drop_copies,
    erasures,
    parts_of,
    recorded,
)
from ._hashing import GENESIS_HASH
from ._lineage import Segment, walk_ancestry
from ._one import one_row
from ._rows import Row, chain_rows, check_appends, clock_stamp, sql_limit, stale_error, system_stamp
from ._logtree import LogTree, SqliteTreeStore, grow, last_node, resolve
from ._merkle import TILE_LEVEL, Frontier
from ._schema import (
    COMPACT_HASHES_FROM,
    LOG_TREE_FROM,
    SCHEMA_VERSION,
    TILES_FROM,
    Extension,
    chain_version,
    check_extensions,
    core_guards,
    check_schema,
    missing_guards,
    open_schema,
)
from ._snapshots import SAVED_SNAPSHOT, WRITE_SNAPSHOT, check_snapshot, erased_since, links_hold
from ._sqlite import connect_readonly as _connect_readonly
from ._sqlite import (
    SQLITE_CONSTRAINT_CHECK,
    SQLITE_CONSTRAINT_PRIMARYKEY,
    SQLITE_CONSTRAINT_UNIQUE,
    check_existing,
    check_header,
    connect,
    is_constraint,
    translate,
)
from ._statements import statements, stored_events
from ._types import (
    BadEvent,
    Head,
    NewEvent,
    ProjectionMismatch,
    Snapshot,
    StoredEvent,
    StreamAppend,
    StreamInfo,
    VerifyReport,
)
from ._urls import is_postgres, sqlite_path
from ._verify import bad_payload_in, check_heads, link_of, verify_chains
from .errors import (
    ConcurrencyError,
    EventNotFoundError,
    InvalidAppendError,
    InvalidReadError,
    JournalError,
    JournalLockedError,
    NotAJournalError,
    ReadOnlyJournalError,
    SeqGapError,
    StreamNotFoundError,
    TurnlogError,
)

if TYPE_CHECKING:
    from sqlite_utils import Database

    from ._protocol import JournalProtocol

__all__ = ["Journal", "connect_readonly", "sqlite_database"]

_MAX_SEQ = 2**63 - 1
_INSERT = (
    "INSERT INTO events (stream_id, seq, type, version, recorded_at, payload, prev_hash, hash) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_LINK = "INSERT INTO stream_links (stream_id, parent_stream_id, parent_seq) VALUES (?, ?, ?)"
_WRITE_SNAPSHOT = WRITE_SNAPSHOT.format(p="?")
_LAST_SEQ = "SELECT max(seq) FROM events WHERE stream_id = ?"
_LAST_POSITION = "SELECT coalesce(max(position), 0) FROM events"
_INSERT_NODE = "INSERT INTO tree (id, hash) VALUES (?, ?)"


class Journal:
    """An append-only, hash-chained event journal in one SQLite file (WAL mode).

    Open it as a context manager or call :meth:`close`. A ``Journal`` belongs to the
    thread that opened it; other threads and processes open their own on the same
    file, and :meth:`append`'s ``expected_seq`` keeps their writes apart.

    ``clock`` returns an aware datetime (default: now, UTC); ``synchronous`` is
    ``"FULL"`` (every commit durable, the default) or ``"NORMAL"`` (a power loss may
    lose the last commits, never corrupt the file). ``extensions`` are higher layers'
    own versioned schemas, migrated on open. ``blob_threshold`` (bytes, default 4 KiB):
    each part of an appended payload larger than it (an image, a document, a long tool
    result or text) is stored once in the ``blobs`` table, keyed by its SHA-256, and the
    payload the chain hashes holds its digest and size (``journal._blobs``); reads give
    the payload back whole.

    ``readonly=True`` opens an existing journal for reading only: nothing is ever
    created, migrated or written, not even SQLite's ``-wal``/``-shm`` files left
    behind, so a 0444 file or a read-only mount can be read. A missing file raises
    :class:`JournalNotFoundError`, an empty one :class:`NotAJournalError`, and any
    write :class:`ReadOnlyJournalError`. Extensions are then not installed.
    """

    readonly: bool
    """Whether this handle refuses writes (opened with ``readonly=True``)."""

    chain_version: int
    """The journal's hash chain version (``journal.CHAIN_VERSION`` for a journal created
    by this turnlog; 1 for one that had events before schema 7): only version 2 and up
    can erase content (:func:`journal.erase`)."""

    restored_guards: tuple[str, ...]
    """The guards this (writable) open found missing and reinstalled: triggers that a tool
    rebuilding a table (``sqlite-utils transform``) or a hand edit had dropped. Normally
    empty; ``verify`` reports missing guards, and a lost ``events`` constraint refuses
    every write of this handle (:class:`NotAJournalError`)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], datetime] | None = None,
        synchronous: str = "FULL",
        extensions: Sequence[Extension] = (),
        readonly: bool = False,
        blob_threshold: int = DEFAULT_BLOB_THRESHOLD,
    ) -> None:
        self.path = os.fspath(path)
        self.blob_threshold = check_blob_threshold(blob_threshold)
        self.readonly = bool(readonly)
        synchronous = str(synchronous).upper()
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f'synchronous must be "FULL" or "NORMAL", got {synchronous!r}')
        check_extensions(extensions)
        self._now = system_stamp if clock is None else partial(clock_stamp, clock)
        # stream_id -> (last seq, its hash) as this handle last saw them
        self._heads: dict[str, tuple[int, str]] = {}
        self._extensions = tuple(extensions)
        self._hooks = tuple((e.name, e.on_append) for e in extensions if e.on_append is not None)
        # the log tree's right edge as (size, {(level, idx): hash}) after this handle's
        # last append: the next append starts from it when no other writer came between
        self._edge: tuple[int, dict[tuple[int, int], bytes]] = (-1, {})
        self.restored_guards = ()
        self._unwritable: str | None = None
        if self.readonly:
            self._conn, version = _open_readonly(self.path, extensions, True)
            self._version = version
            self._has_tree = version >= LOG_TREE_FROM
            self._blobs = self._blob_store() if version >= BLOBS_FROM else None
            self._sql = statements(version >= COMPACT_HASHES_FROM)
            self.chain_version = chain_version(self._conn)
            self._cursor = self._conn.cursor()
            self._thread = threading.get_ident()
            return
        check_header(self.path)
        created = self.path != ":memory:" and not os.path.exists(self.path)
        self._conn = connect(self.path)
        self._version = SCHEMA_VERSION
        try:
            restored, self._unwritable = open_schema(
                sqlite_database(self._conn), self.path, extensions, synchronous)
            self.restored_guards = tuple(restored)
        except BaseException as exc:
            self._conn.close()
            if created:  # a failed open leaves no file behind that later opens would refuse
                _remove_new_file(self.path)
            if isinstance(exc, sqlite3.Error):
                raise translate(exc, self.path, "opening the journal") from exc
            raise
        self._sql = statements(True)  # opened to write: migrated to the current schema
        self._has_tree = True
        self.chain_version = chain_version(self._conn)
        self._blobs = self._blob_store()
        self._cursor = self._conn.cursor()
        self._thread = threading.get_ident()

    def _blob_store(self) -> BlobStore:
        def read(digest: str) -> bytes | None:
            row = self._conn.execute(READ_BLOB, (digest,)).fetchone()
            return None if row is None else row[0]
        return BlobStore(read)

    def __repr__(self) -> str:
        return f"Journal({self.path!r})"

    @staticmethod
    def open(target: str | os.PathLike[str], **options: Any) -> JournalProtocol:
        """Open the journal a path or URL names, on the backend it names.

        A file path, ``:memory:`` or ``sqlite:///path``: a SQLite :class:`Journal`;
        ``postgresql://user@host/db``: a :class:`~journal.PostgresJournal` (needs
        ``pip install -e '.[postgres]'``). ``options`` go to the backend. The one place
        that picks the backend (``open_journal`` is this).
        """
        if is_postgres(target):
            from ._postgres import PostgresJournal

            return PostgresJournal(os.fspath(target), **options)
        return Journal(sqlite_path(target), **options)

    def __enter__(self) -> Journal:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the file. Safe to call twice, and from any thread or a finaliser.

        Any later call raises :class:`JournalError`. Closed from another thread than
        the one that opened it, the connection is released there and closed as soon
        as nothing uses it any more (SQLite connections belong to their thread).
        """
        conn = self._conn
        if conn is _CLOSED[0]:
            return
        self._conn, self._cursor = _CLOSED
        if threading.get_ident() == self._thread:
            conn.close()

    # -- writing -------------------------------------------------------------------------

    def append(
        self,
        stream_id: str,
        events: Sequence[NewEvent],
        expected_seq: int,
        *,
        parent: tuple[str, int] | None = None,
    ) -> list[StoredEvent]:
        """Append ``events`` to ``stream_id`` in one transaction, as seqs ``expected_seq + 1``….

        ``expected_seq`` is the stream's last seq as the caller knows it (0 for a new
        stream); if another writer got there first, :class:`ConcurrencyError` says so
        and nothing is written; past the stream's end, :class:`SeqGapError`.
        ``parent=(stream, seq)`` on a stream's first append makes it a fork: its seq 1
        chains to the parent's hash at that seq. The one-stream case of
        :meth:`append_many` (same checks, same transaction, same hooks).

        Raises :class:`InvalidAppendError` (bad stream id, type, version, timestamp or
        payload JSON), :class:`ConcurrencyError`, :class:`EventNotFoundError` (no such
        fork point) or :class:`JournalLockedError`; on any error nothing is written.
        """
        return self.append_many([StreamAppend(stream_id, events, expected_seq, parent)])[0]

    def append_many(self, appends: Iterable[StreamAppend]) -> list[list[StoredEvent]]:
        """Append to several streams in one transaction: all or nothing.

        Each item is a :class:`StreamAppend` (or a ``(stream_id, events, expected_seq
        [, parent])`` tuple), checked exactly as :meth:`append` checks its arguments;
        the first refusal (:class:`ConcurrencyError`, :class:`SeqGapError`, … naming its
        stream) leaves every stream as it was. Items are written in order, so a fork
        may start from an event written by an earlier item. Returns, per item, what
        :meth:`append` returns; all events share one clock reading, and their positions
        are consecutive in item order. Each extension's :attr:`Extension.on_append`
        runs inside the transaction with every appended event; if one raises, nothing
        is written.
        """
        batches = check_appends(appends)
        if self.readonly:
            names = ", ".join(repr(b.stream_id) for b in batches)
            raise ReadOnlyJournalError(
                f"append to stream{'s' * (len(batches) > 1)} {names}: {self.path} is open read-only"
            )
        if self._unwritable:
            raise NotAJournalError(self._unwritable)
        now = self._now()
        conn = self._conn
        try:
            self._cursor.execute("BEGIN IMMEDIATE")
            try:
                written = [self._write(batch, now) for batch in batches]
                edge = self._grow_tree(written)
                if self._hooks:
                    self._run_hooks(written)
                self._cursor.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise translate(exc, self.path, f"append to stream {batches[0].stream_id!r}") from exc
        self._edge = edge
        for stored in written:
            last = stored[-1]
            self._heads[last.stream_id] = (last.seq, last.hash)
        return written

    def erase(self, stream_id: str, kept: Mapping[int, str], record: Record,
              expected_seq: int | None = None, *,
              also: Mapping[str, tuple[Mapping[int, str], Record]] | None = None) -> list[int]:
        """Erase the payloads of ``stream_id``'s events at the seqs of ``kept``: all or nothing.

        In one transaction, each payload not erased yet becomes an erased payload that
        keeps its SHA-256 and ``kept[seq]`` (a JSON object: what the caller keeps of the
        event, its structure without content), the snapshots of the stream and its forks
        are dropped, and ``record(seqs)`` (an ``erasure_recorded`` event naming the seqs
        erased) is appended. Every hash, the log tree and every checkpoint stay valid
        (chain version 2; version 1 is refused with :class:`NotErasableError`). The
        connection overwrites freed bytes (``secure_delete``) and, after the commit, the
        WAL is checkpointed and truncated, so the old content is in neither file; readers
        that keep the WAL busy make it a :class:`JournalLockedError` (the content is
        erased everywhere readers look; running it again finishes the checkpoint).
        Returns the seqs erased (empty: all were erased already, nothing was written).
        ``expected_seq``, when given, is the stream's last seq the caller read: if another
        writer appended since, :class:`ConcurrencyError` and nothing is erased. ``also``
        (stream id -> its ``kept`` and ``record``) erases other streams in the same
        transaction, each recording its own erasure (a fork's copy of its parent's content).
        """
        if self.readonly:
            raise ReadOnlyJournalError(f"erase in stream {stream_id!r}: {self.path} is open read-only")
        if self._unwritable:
            raise NotAJournalError(self._unwritable)
        check_chain(self.path, self.chain_version, stream_id)
        conn, cursor = self._conn, self._cursor
        jobs = [(stream_id, kept, record, expected_seq),
                *((sid, more, rec, None) for sid, (more, rec) in (also or {}).items())]
        erased: dict[str, list[int]] = {}
        written: list[list[StoredEvent]] = []
        try:
            cursor.execute("PRAGMA secure_delete = ON")
            cursor.execute("BEGIN IMMEDIATE")
            try:
                for sid, wanted, rec, expected in jobs:
                    last = cursor.execute(_LAST_SEQ, (sid,)).fetchone()[0] or 0
                    check_head(sid, expected, last)
                    seqs = sorted(wanted)
                    marks = ", ".join("?" * len(seqs))
                    stored = cursor.execute(
                        f"SELECT seq, type, payload FROM events WHERE stream_id = ? AND seq IN ({marks})",
                        (sid, *seqs)).fetchall()
                    changes = erasures(self.path, sid, stored, wanted)
                    erased[sid] = [seq for seq, _ in changes]
                    if changes:
                        self._erase_rows(sid, changes,
                                         parts_of(stored, [seq for seq, _ in changes]))
                        written.append(self._write(StreamAppend(
                            sid, [rec(recorded(changes))], last), self._now()))
                if written:
                    edge = self._grow_tree(written)
                    if self._hooks:
                        self._run_hooks(written)
                cursor.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if written:
                self._edge = edge
                for rows in written:
                    self._heads[rows[-1].stream_id] = (rows[-1].seq, rows[-1].hash)
            busy = cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error as exc:
            raise translate(exc, self.path, f"erase in stream {stream_id!r}") from exc
        if busy is not None and busy[0]:
            raise JournalLockedError(
                f"erase in stream {stream_id!r}: the content is erased from the journal, but "
                f"another connection is reading {self.path}, so older copies of its pages are "
                "still in the WAL file; run the erase again once the readers have closed")
        return erased[stream_id]

    def _erase_rows(self, stream_id: str, changes: list[tuple[int, str]],
                    parts: set[str]) -> None:
        """Rewrite the payloads, drop the stream's (and its forks') snapshots, their rows in
        the tables that copy content (``COPIES``) and the parts (``blobs``) no other event
        references, inside the transaction: the append-only
        guards are lifted for these statements only (a rollback puts them back)."""
        cursor = self._cursor
        guards = core_guards(self._version)
        lifted = ("events_refuse_update", "snapshots_refuse_delete", "blobs_refuse_delete")
        for name in lifted:
            cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
        cursor.executemany("UPDATE events SET payload = ? WHERE stream_id = ? AND seq = ?",
                           [(payload, stream_id, seq) for seq, payload in changes])
        cursor.execute(DROP_SNAPSHOTS.format(p="?"), (stream_id,))
        for table, column in COPIES:
            if cursor.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                              (table,)).fetchone() is not None:
                cursor.execute(drop_copies(table, column, "?"), (stream_id,))
        for digest in sorted(parts):
            if cursor.execute("SELECT 1 FROM events WHERE instr(payload, ?) > 0 LIMIT 1",
                              (f'{{"$blob":"{digest}"',)).fetchone() is None:
                cursor.execute("DELETE FROM blobs WHERE digest = ?", (digest,))
        for name in lifted:
            if name in guards:
                cursor.execute(guards[name])

    def _grow_tree(self, written: list[list[StoredEvent]]
                   ) -> tuple[int, dict[tuple[int, int], bytes]]:
        """Add the appended events' leaves (and the subtrees they complete) to ``tree``,
        inside the append's transaction; return the tree's new right edge."""
        size = written[0][0].position - 1
        cached_size, edge = self._edge
        keys = Frontier.edge(size)
        if cached_size != size:
            store = SqliteTreeStore(self._conn, self.path, True)
            edge = resolve(store, keys)
            if len(edge) != len(keys) or store.last_id() != last_node(size):
                raise JournalError(
                    f"{self.path}: the log tree does not end at event {size} (it was edited "
                    "outside turnlog); turnlog verify --checkpoint reports where")
        rows, new_edge = grow(size, edge, (bytes.fromhex(e.hash)
                                           for stored in written for e in stored))
        self._cursor.executemany(_INSERT_NODE, rows)
        return size + sum(map(len, written)), new_edge

    def _write(self, batch: StreamAppend, now: str) -> list[StoredEvent]:
        """Chain and insert one stream's events inside the open transaction."""
        stream_id, events, expected_seq, parent = batch
        parts: dict[str, bytes] = {}
        try:
            prev_hash = self._prev_hash(stream_id, expected_seq, self._heads.get(stream_id), parent)
            stored = split_events(events, self.blob_threshold, parts)
            rows = chain_rows(prev_hash, stream_id, expected_seq, stored, now,
                              self.chain_version)
            last_position = self._insert(rows, stream_id, parent)
            if parts:
                self._cursor.executemany(INSERT_BLOB, parts.items())
        except sqlite3.Error as exc:
            raise self._append_error(exc, stream_id, expected_seq, events) from exc
        first_position = last_position - len(rows) + 1
        if parts:  # the caller gets the payloads it gave, as every read does
            return [StoredEvent(first_position + i, *row[:5], event.payload, *row[6:])
                    for i, (row, event) in enumerate(zip(rows, events))]
        return [StoredEvent(first_position + i, *row) for i, row in enumerate(rows)]

    def _run_hooks(self, written: list[list[StoredEvent]]) -> None:
        """Run each extension's ``on_append`` with the appended events, in the transaction."""
        appended = [event for stored in written for event in stored]
        db = sqlite_database(self._conn, recursive_triggers=False)
        for name, hook in self._hooks:
            action = f"the on_append hook of extension {name!r}"
            try:
                hook(db, appended)
            except sqlite3.Error as exc:
                raise translate(exc, self.path, action) from exc
            if not self._conn.in_transaction:
                raise JournalError(
                    f"{self.path}: {action} ended the append's transaction (hooks must not "
                    "COMMIT or ROLLBACK); what it committed is in the journal"
                )

    def _prev_hash(
        self,
        stream_id: str,
        expected_seq: int,
        head: tuple[int, str] | None,
        parent: tuple[str, int] | None,
    ) -> str:
        if parent is not None:
            row = self._cursor.execute(self._sql.hash_at, parent).fetchone()
            if row is None:
                raise EventNotFoundError(
                    f"cannot fork stream {stream_id!r} from {parent[0]!r} at seq {parent[1]}: "
                    f"{self.path} has no such event"
                )
            parent_hash: str = row[0]
            return parent_hash
        if expected_seq == 0:
            return GENESIS_HASH  # if the stream exists, the UNIQUE key refuses seq 1
        if head is not None and head[0] == expected_seq:
            return head[1]  # a concurrent writer is still caught by the UNIQUE key
        row = self._cursor.execute(self._sql.head, (stream_id,)).fetchone()
        if row is None or row[0] != expected_seq:
            raise self._stale(stream_id, expected_seq, row)
        self._heads[stream_id] = row
        prev_hash: str = row[1]
        return prev_hash

    def _insert(self, rows: list[Row], stream_id: str, parent: tuple[str, int] | None) -> int:
        """Insert the rows (and the fork link); return the last row's position."""
        cursor = self._cursor
        stored = [(*row[:6], bytes.fromhex(row[6]), bytes.fromhex(row[7])) for row in rows]
        if len(stored) == 1:
            cursor.execute(_INSERT, stored[0])
            last_position = cursor.lastrowid or 0  # an INSERT always sets it
        else:
            cursor.executemany(_INSERT, stored)
            # Under the write lock, SQLite gives each new row max(position) + 1, so the
            # batch's positions are consecutive and end at the last inserted rowid.
            last_position = one_row(cursor.execute("SELECT last_insert_rowid()").fetchone(),
                                    self.path)[0]
        if parent is not None:
            cursor.execute(_INSERT_LINK, (stream_id, *parent))
        return last_position

    def _stale(
        self, stream_id: str, expected_seq: int, head: tuple[int, str] | None
    ) -> ConcurrencyError | SeqGapError:
        """The error for a wrong ``expected_seq``; refreshes the head cache on the way.

        Behind the stream's end: another writer appended first (:class:`ConcurrencyError`).
        Past it: the caller is ahead of the stream (:class:`SeqGapError`, no retry helps).
        """
        if head is None:
            self._heads.pop(stream_id, None)
        else:
            self._heads[stream_id] = head
        return stale_error(self.path, stream_id, expected_seq, 0 if head is None else head[0])

    def _append_error(
        self, exc: sqlite3.Error, stream_id: str, expected_seq: int, events: Sequence[NewEvent]
    ) -> Exception:
        try:
            if is_constraint(exc, SQLITE_CONSTRAINT_UNIQUE, SQLITE_CONSTRAINT_PRIMARYKEY):
                head = self._conn.execute(self._sql.head, (stream_id,)).fetchone()
                return self._stale(stream_id, expected_seq, head)
            if is_constraint(exc, SQLITE_CONSTRAINT_CHECK):
                index = next(
                    (i for i, e in enumerate(events) if not _json_valid(self._conn, e.payload)), 0
                )
                return InvalidAppendError(
                    f"append to stream {stream_id!r} in {self.path}: event {index} "
                    f"(seq {expected_seq + 1 + index}) has a payload that is not valid JSON"
                )
        except sqlite3.Error as second:
            return translate(second, self.path, f"append to stream {stream_id!r}")
        return translate(exc, self.path, f"append to stream {stream_id!r}")

    # -- reading -------------------------------------------------------------------------

    def read(
        self,
        stream_id: str,
        from_seq: int = 1,
        to_seq: int | None = None,
        *,
        limit: int | None = None,
        reverse: bool = False,
    ) -> Iterator[StoredEvent]:
        """Iterate over a stream's own events from ``from_seq`` to ``to_seq`` (inclusive), lazily.

        Oldest first, or newest first with ``reverse``; at most ``limit`` of them (so
        ``reverse=True, limit=n`` gives the stream's last ``n`` events, newest first).
        An unknown stream reads as empty. Rows come from a cursor as they are
        consumed: memory does not grow with the stream.
        """
        upto = _MAX_SEQ if to_seq is None else to_seq
        sql = self._sql.read_backward if reverse else self._sql.read_forward
        params = (stream_id, from_seq, upto, sql_limit(limit, f"reading stream {stream_id!r}"))
        return self._events(sql, params, f"reading stream {stream_id!r}")

    def last_event(self, stream_id: str) -> StoredEvent | None:
        """The stream's newest event, or ``None`` when it has none (as :meth:`read` is empty)."""
        row = self._fetchone(self._sql.last_event, (stream_id,), f"reading stream {stream_id!r}")
        return None if row is None else next(self._whole(stored_events((row,), self._sql.compact)))

    def read_all(
        self,
        after_position: int = 0,
        limit: int | None = None,
        *,
        until: int | None = None,
        types: Collection[str] | None = None,
    ) -> Iterator[StoredEvent]:
        """Iterate over every stream's events in global (position) order, lazily.

        Only events after ``after_position`` and up to ``until`` (inclusive), of one of
        ``types`` when given, at most ``limit`` of them; the filters run in SQL.
        For followers and projections: remember the last position seen and pass it back.
        """
        kinds = () if types is None else tuple(types)
        where = "" if types is None else f"AND type IN ({', '.join('?' * len(kinds))})"
        params = (after_position, _MAX_SEQ if until is None else until, *kinds,
                  sql_limit(limit, "reading all events"))
        return self._events(self._sql.read_all.format(types=where), params, "reading all events")

    def last_position(self) -> int:
        """The newest event's global position, 0 for an empty journal (one index lookup)."""
        row = self._fetchone(_LAST_POSITION, (), "reading the last position")
        result: int = one_row(row, self.path)[0]
        return result

    def lineage(self, stream_id: str, to_seq: int | None = None) -> Iterator[StoredEvent]:
        """Iterate over a stream's whole history: its fork ancestors' events, then its own.

        For a fork, the parent's events up to the fork point come first (recursively for
        forks of forks), then the stream's own events up to ``to_seq``. Lazy.
        """
        try:
            for ancestor, upto in self._ancestry(stream_id, to_seq):
                yield from self._events(
                    self._sql.read_forward, (ancestor, 1, upto, -1), f"reading {ancestor!r}")
        except sqlite3.Error as exc:
            raise translate(exc, self.path, f"reading the lineage of {stream_id!r}") from exc

    def ancestry(self, stream_id: str, to_seq: int | None = None) -> list[Segment]:
        """The segments of a stream's history: ``[(stream, up to seq), ...]``, root first.

        The last segment is ``(stream_id, to_seq)``; ``None`` means the whole stream.
        A stream that is no fork is its own single segment. Fork links that loop
        raise :class:`CorruptEventError`.
        """
        conn = self._conn
        try:
            return walk_ancestry(lambda s: link_of(conn, s), stream_id, to_seq, self.path)
        except sqlite3.Error as exc:
            raise translate(exc, self.path, f"reading the ancestry of {stream_id!r}") from exc

    def _ancestry(self, stream_id: str, to_seq: int | None) -> list[tuple[str, int]]:
        return [(s, _MAX_SEQ if upto is None else upto)
                for s, upto in self.ancestry(stream_id, to_seq)]

    def _events(self, sql: str, params: tuple[Any, ...], action: str) -> Iterator[StoredEvent]:
        try:
            yield from self._whole(stored_events(self._conn.execute(sql, params), self._sql.compact))
        except sqlite3.Error as exc:
            raise translate(exc, self.path, action) from exc

    def _whole(self, events: Iterator[StoredEvent]) -> Iterator[StoredEvent]:
        """``events`` with the parts their payloads reference put back (``_blobs.join``)."""
        blobs = self._blobs
        if blobs is None:
            yield from events
            return
        for event in events:
            if '$blob"' in event.payload:
                payload = join(event.payload, blobs.fetch,
                               f"stream {event.stream_id!r} seq {event.seq}")
                if payload is not event.payload:
                    event = StoredEvent(event.position, event.stream_id, event.seq, event.type,
                                        event.version, event.recorded_at, payload,
                                        event.prev_hash, event.hash)
            yield event

    def streams(self) -> Iterator[StreamInfo]:
        """Iterate over every stream's summary, the most recently appended first."""
        try:
            yield from starmap(StreamInfo, self._conn.execute(self._sql.all_streams))
        except sqlite3.Error as exc:
            raise translate(exc, self.path, "listing streams") from exc

    def stream(self, stream_id: str) -> StreamInfo:
        """One stream's summary; :class:`StreamNotFoundError` if it has no events."""
        row = self._fetchone(self._sql.one_stream, (stream_id,), f"reading stream {stream_id!r}")
        if row is None:
            raise StreamNotFoundError(f"{self.path} has no stream {stream_id!r}")
        return StreamInfo(*row)

    def last_seq(self, stream_id: str) -> int:
        """The stream's last seq, 0 if it has no events."""
        row = self._fetchone(self._sql.head, (stream_id,), f"reading stream {stream_id!r}")
        return 0 if row is None else row[0]

    def hash_at(self, stream_id: str, seq: int) -> str:
        """The hash of the event at ``(stream_id, seq)``; :class:`EventNotFoundError` if none."""
        row = self._fetchone(self._sql.hash_at, (stream_id, seq), f"reading stream {stream_id!r}")
        if row is None:
            raise EventNotFoundError(f"{self.path} has no event at stream {stream_id!r} seq {seq}")
        result: str = row[0]
        return result

    # -- snapshots ------------------------------------------------------------------------

    def read_snapshot(self, stream_id: str, kind: str) -> Snapshot | None:
        """The stream's snapshot of ``kind``, or ``None``: none saved, or its event changed.

        Returned only while the stream's event at the snapshot's seq still has the
        hash recorded with it and every fork link on its way still chains (a parent
        rewritten at the fork point hides it); a journal of schema version 1 read as
        it is has none.
        """
        try:
            row = self._conn.execute(self._sql.read_snapshot, (stream_id, kind)).fetchone()
        except sqlite3.OperationalError as exc:
            if self.readonly and "no such table: snapshots" in str(exc):
                return None
            raise translate(exc, self.path, f"reading a snapshot of {stream_id!r}") from exc
        except sqlite3.Error as exc:
            raise translate(exc, self.path, f"reading a snapshot of {stream_id!r}") from exc
        if row is None or not links_hold(self, stream_id):
            return None
        return Snapshot(stream_id, kind, row[0], row[1], bytes(row[2]))

    def write_snapshot(self, stream_id: str, kind: str, seq: int, data: bytes) -> Snapshot:
        """Save ``data`` as the stream's snapshot of ``kind`` at ``seq`` (a new row: the newest
        snapshot that still holds is the one read; one already saved at ``seq`` is kept, and
        returned).

        The hash is the event's own: :class:`EventNotFoundError` if the stream has no
        event at ``seq``, :class:`ReadOnlyJournalError` on a read-only handle. One
        statement, durable like an append; events are never touched.

        >>> from turnlog.journal import Journal, NewEvent
        >>> j = Journal(":memory:")
        >>> _ = j.append("s", [NewEvent("x", 1, "{}")] * 2, 0)
        >>> j.write_snapshot("s", "counter", 2, b"2").seq
        2
        >>> j.read_snapshot("s", "counter").data
        b'2'
        """
        data = check_snapshot(stream_id, kind, seq, data)
        action = f"writing a snapshot of {stream_id!r}"
        if self.readonly:
            raise ReadOnlyJournalError(f"{action}: {self.path} is open read-only")
        if self._unwritable:
            raise NotAJournalError(self._unwritable)
        try:
            self._conn.execute(_WRITE_SNAPSHOT, (kind, data, stream_id, seq, stream_id))
            row = self._conn.execute(self._sql.hash_at, (stream_id, seq)).fetchone()
            saved = self._conn.execute(SAVED_SNAPSHOT, (stream_id, kind, seq)).fetchone()
        except sqlite3.Error as exc:
            raise translate(exc, self.path, action) from exc
        if saved is None and row is not None:
            raise erased_since(action, stream_id, seq)
        if saved is None or row is None:
            raise EventNotFoundError(
                f"{action}: {self.path} has no event at stream {stream_id!r} seq {seq}")
        return Snapshot(stream_id, kind, seq, row[0], bytes(saved[0]))

    def _fetchone(self, sql: str, params: tuple[Any, ...], action: str) -> tuple[Any, ...] | None:
        try:
            result: tuple[Any, ...] | None = self._conn.execute(sql, params).fetchone()
            return result
        except sqlite3.Error as exc:
            raise translate(exc, self.path, action) from exc

    # -- tamper evidence -----------------------------------------------------------------

    def verify(
        self, stream_id: str | None = None, *, progress: Callable[[int], None] | None = None
    ) -> VerifyReport:
        """Recompute every hash chain (or one stream's) and report the first bad event.

        Finds edited fields, removed, inserted or reordered events and broken fork
        links. For one stream that is a fork, every ancestor's prefix up to the fork
        point is recomputed too. It cannot see events cut off the end of a stream:
        keep :meth:`heads` outside the journal and use :meth:`check_heads` for that.
        The extensions' checks (:attr:`Extension.verify`) recompute their projections
        from events; what they find is in ``report.projections``. ``progress(n)``, when
        given, is told now and then how many more events were checked (a progress bar's
        total is :meth:`last_position` for the whole journal).
        """
        action = "verifying" if stream_id is None else f"verifying stream {stream_id!r}"
        try:
            report = verify_chains(self._conn, stream_id, progress, compact=self._sql.compact,
                                   chain=self.chain_version)
            if stream_id is not None and report.checked_events == 0 and report.ok:
                raise StreamNotFoundError(f"{self.path} has no stream {stream_id!r}")
            if report.first_bad is None and self._blobs is not None:
                report = self._verify_blobs(report, stream_id)
            guards = tuple(missing_guards(sqlite_database(self._conn), self._version,
                                          self._extensions))
            try:
                found = tuple(
                    mismatch
                    for ext in self._extensions if ext.verify is not None
                    for mismatch in ext.verify(sqlite_database(self._conn), stream_id)
                ) + self._verify_journal(stream_id)
            except (sqlite3.Error, TurnlogError):
                # the checks parse payloads: one edited into something else stops them
                bad = report.first_bad or bad_payload_in(self._conn, stream_id,
                                                         compact=self._sql.compact)
                if bad is None:
                    raise
                return VerifyReport(False, report.checked_events, bad, (), guards)
            if found or guards:
                return VerifyReport(False, report.checked_events, report.first_bad, found, guards)
            return report
        except sqlite3.Error as exc:
            raise translate(exc, self.path, action) from exc

    def _verify_blobs(self, report: VerifyReport, stream_id: str | None) -> VerifyReport:
        """``report``, failed at the first event whose part is missing or edited."""
        where, params = ("", ()) if stream_id is None else ("AND stream_id = ?", (stream_id,))
        rows = self._conn.execute(REFERENCING.replace("{where}", where), params)

        def read(digest: str) -> bytes | None:
            row = self._conn.execute(READ_BLOB, (digest,)).fetchone()
            return None if row is None or type(row[0]) is not bytes else row[0]
        bad = check_refs(rows, read)
        if bad is None:
            return report
        return VerifyReport(False, report.checked_events, bad, report.projections,
                            report.missing_guards)

    def _verify_journal(self, stream_id: str | None) -> tuple[ProjectionMismatch, ...]:
        return tuple(mismatch for ext in self._extensions if ext.verify_journal is not None
                     for mismatch in ext.verify_journal(self, stream_id))

    @contextlib.contextmanager
    def log_tree(self) -> Iterator[LogTree]:
        """The journal's log tree (roots, inclusion and consistency proofs, checkpoints),
        read in one snapshot: a context manager, one read transaction.

        An RFC 6962 Merkle tree whose leaf *i* is the chain hash of the event at
        position *i* + 1, kept in step with every append. A journal of an older schema
        read as it is has none stored: :meth:`LogTree.check` then recomputes it from
        the events, and the rest raises :class:`JournalError`. A checkpoint added in
        the block is committed at its end.
        """
        try:
            self._conn.execute("BEGIN")
            try:
                yield LogTree(SqliteTreeStore(self._conn, self.path, self._has_tree,
                                              TILE_LEVEL if self._version >= TILES_FROM else 0))
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise translate(exc, self.path, "reading the log tree") from exc

    def heads(self) -> list[Head]:
        """Every stream's last seq and hash, ordered by stream id."""
        try:
            return list(starmap(Head, self._conn.execute(self._sql.heads)))
        except sqlite3.Error as exc:
            raise translate(exc, self.path, "reading heads") from exc

    def check_heads(self, heads: Iterable[Head]) -> list[BadEvent]:
        """Saved heads that no longer hold: the stream is gone, shorter, or rewritten there.

        A stream that merely grew since is fine.
        """
        try:
            return check_heads(self._conn, heads, compact=self._sql.compact)
        except sqlite3.Error as exc:
            raise translate(exc, self.path, "checking heads") from exc


def connect_readonly(
    path: str | os.PathLike[str],
    *,
    extensions: Sequence[Extension] = (),
    check_same_thread: bool = True,
) -> sqlite3.Connection:
    """A plain ``sqlite3`` connection to the existing journal at ``path``, for SQL over it.

    The same guarantees as ``Journal(path, readonly=True)``: nothing is created,
    migrated or written (temporary tables and views are allowed), a 0444 file or a
    read-only mount can be read; :class:`JournalNotFoundError` for a missing file,
    :class:`NotAJournalError` for an empty or foreign one, :class:`SchemaTooNewError`.
    """
    return _open_readonly(os.fspath(path), extensions, check_same_thread)[0]


def _open_readonly(
    path: str, extensions: Sequence[Extension], check_same_thread: bool
) -> tuple[sqlite3.Connection, int]:
    """:func:`connect_readonly`, and the journal's core schema version."""
    check_existing(path)
    conn = _connect_readonly(path, check_same_thread=check_same_thread)
    try:
        version = check_schema(sqlite_database(conn), path, extensions)
    except BaseException as exc:
        conn.close()
        if isinstance(exc, sqlite3.Error):
            raise translate(exc, path, "opening the journal for reading") from exc
        raise
    return conn, version


def _remove_new_file(path: str) -> None:
    """Remove the journal file (and its ``-wal``/``-shm``) a failed first open created."""
    for name in (path, f"{path}-wal", f"{path}-shm"):
        try:
            os.remove(name)
        except OSError:
            pass


def _closed() -> tuple[sqlite3.Connection, sqlite3.Cursor]:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    cursor = conn.cursor()
    conn.close()
    return conn, cursor


# A closed journal's connection and cursor: every use raises "closed", from any thread.
_CLOSED = _closed()


def _json_valid(conn: sqlite3.Connection, text: str) -> bool:
    return bool(conn.execute("SELECT json_valid(?)", (text,)).fetchone()[0])


def sqlite_database(conn: sqlite3.Connection, **options: Any) -> Database:
    """A ``sqlite_utils.Database`` over the SQLite connection ``conn`` (sqlite-utils is
    imported on first use, so importing turnlog, or asking ``turnlog --help``, never loads it)."""
    from sqlite_utils import Database

    return Database(conn, **options)
