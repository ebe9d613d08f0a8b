"""The journal on PostgreSQL: the :class:`~journal.JournalProtocol` for many hosts, same hashes.

Open it with ``Journal.open("postgresql://user@host/db")`` (or construct
:class:`PostgresJournal`). Its rows are the SQLite journal's rows column for
column, chained by the same :func:`~journal.event_hash`, so a conversation's
hashes are the same on both backends and ``turnlog copy`` moves it byte for byte.

Positions in commit order. Every append takes one transaction-level advisory
lock (``pg_advisory_xact_lock``, one key per journal) just before it inserts,
reads ``max(position)`` under it, and holds it until its commit is visible
(PostgreSQL releases transaction locks after the commit is visible to others).
So appends commit one at a time in position order, positions are gapless, and
a reader that has seen position *p* has seen every position below *p*: a
follower of :meth:`~PostgresJournal.read_all` (``turnlog tail``) never skips an
event that committed late with a lower position. The lock is held only for the
insert and the commit; checks, hashing and reads run outside it. Optimistic
concurrency per stream is the ``UNIQUE (stream_id, seq)`` key, as on SQLite.
Every append also sends a ``NOTIFY`` (channel :attr:`PostgresJournal.channel`)
with its last position, for followers that would rather wait than poll.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from functools import partial
from itertools import starmap
from types import TracebackType
from typing import Any

import psycopg
from psycopg import errors as pg_errors

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
from ._logtree import LogTree, grow, last_node, resolve
from ._merkle import TILE_LEVEL, Frontier, Node
from ._one import one_row
from ._pg import Pool
from ._pg_tree import PgTreeStore
from ._pg_schema import check_pg_schema, missing_pg_guards, open_pg_schema, pg_chain_version
from ._blobs import (
    BLOBS_FROM,
    DEFAULT_BLOB_THRESHOLD,
    INSERT_BLOB_POSTGRES,
    READ_BLOB_POSTGRES,
    REFERENCING_POSTGRES,
    BlobStore,
    check_blob_threshold,
    check_refs,
    join,
    split_events,
)
from ._rows import Row, chain_rows, check_appends, clock_stamp, sql_limit, stale_error, system_stamp
from ._schema import APPLICATION_ID, SCHEMA_VERSION, TILES_FROM, Extension, check_extensions
from ._snapshots import READ_SNAPSHOT, SAVED_SNAPSHOT, WRITE_SNAPSHOT, check_snapshot, erased_since, links_hold
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
from ._urls import shown_url
from ._verify import TEXT_TYPES, bad_payload, check_heads_in, verify_source
from .errors import (
    EventNotFoundError,
    InvalidAppendError,
    JournalConnectionError,
    JournalError,
    NotAJournalError,
    ReadOnlyJournalError,
    StreamNotFoundError,
    TurnlogError,
)

__all__ = ["PostgresJournal"]

_MAX_SEQ = 2**63 - 1
_PAGE = 1000
_COLUMNS = "position, stream_id, seq, type, version, recorded_at, payload, prev_hash, hash"
_INSERT = """
WITH inserted AS (
    INSERT INTO events (position, stream_id, seq, type, version, recorded_at, payload,
                        prev_hash, hash)
    SELECT base.p + r.ord, r.stream_id, r.seq, r.type, r.version, r.recorded_at, r.payload,
           r.prev_hash, r.hash
    FROM (SELECT coalesce(max(position), 0) AS p FROM events) AS base,
         unnest(%s::text[], %s::bigint[], %s::text[], %s::bigint[], %s::text[], %s::text[],
                %s::text[], %s::text[])
             WITH ORDINALITY AS r(stream_id, seq, type, version, recorded_at, payload,
                                  prev_hash, hash, ord)
    RETURNING position
)
SELECT min(position), max(position), pg_notify(%s, max(position)::text) FROM inserted
"""
_INSERT_LINK = "INSERT INTO stream_links (stream_id, parent_stream_id, parent_seq) VALUES (%s, %s, %s)"
_LOCK = "SELECT pg_advisory_xact_lock(%s)"
_ERASE_GUARDS = (("events", "events_refuse_update"), ("snapshots", "snapshots_refuse_delete"),
                 ("blobs", "blobs_refuse_delete"))
_INSERT_NODE = "INSERT INTO tree (id, hash) VALUES (%s, %s)"
_HEAD = "SELECT seq, hash FROM events WHERE stream_id = %s ORDER BY seq DESC LIMIT 1"
_HASH_AT = "SELECT hash FROM events WHERE stream_id = %s AND seq = %s"
_READ = (f"SELECT {_COLUMNS} FROM events WHERE stream_id = %s AND seq >= %s AND seq <= %s "
         "ORDER BY seq {order} LIMIT %s")
_READ_FORWARD = _READ.format(order="ASC")
_READ_BACKWARD = _READ.format(order="DESC")
_LAST_EVENT = f"SELECT {_COLUMNS} FROM events WHERE stream_id = %s ORDER BY seq DESC LIMIT 1"
_READ_ALL = (f"SELECT {_COLUMNS} FROM events WHERE position > %s AND position <= %s {{types}} "
             "ORDER BY position LIMIT %s")
_LAST_POSITION = "SELECT coalesce(max(position), 0) FROM events"
_HEADS = ("SELECT DISTINCT ON (stream_id) stream_id, seq, hash FROM events "
          "ORDER BY stream_id, seq DESC")
_READ_SNAPSHOT = READ_SNAPSHOT.format(hash="s.hash").replace("?", "%s")
_WRITE_SNAPSHOT = WRITE_SNAPSHOT.replace("?", "%s").format(p='%s::text COLLATE "C"')
_LINK = "SELECT parent_stream_id, parent_seq FROM stream_links WHERE stream_id = %s"
_STREAMS = """
    SELECT g.stream_id, g.last_seq, z.hash, a.recorded_at, z.recorded_at, g.events,
           l.parent_stream_id, l.parent_seq
    FROM (
        SELECT stream_id, min(seq) AS first_seq, max(seq) AS last_seq, count(*) AS events,
               max(position) AS last_position
        FROM events {where} GROUP BY stream_id
    ) AS g
    JOIN events AS a ON a.stream_id = g.stream_id AND a.seq = g.first_seq
    JOIN events AS z ON z.stream_id = g.stream_id AND z.seq = g.last_seq
    LEFT JOIN stream_links AS l ON l.stream_id = g.stream_id
    ORDER BY g.last_position DESC
"""
_ALL_STREAMS = _STREAMS.format(where="")
_ONE_STREAM = _STREAMS.format(where="WHERE stream_id = %s")

# Text as its UTF-8 bytes and each column's storage type, the shape ``_verify`` walks.
_TEXT = ("stream_id", "type", "recorded_at", "payload", "prev_hash", "hash")
_CHAIN_COLUMNS = (
    "convert_to(stream_id, 'UTF8'), seq, convert_to(type, 'UTF8'), version, "
    "convert_to(recorded_at, 'UTF8'), convert_to(payload, 'UTF8'), "
    "convert_to(prev_hash, 'UTF8'), convert_to(hash, 'UTF8'), concat_ws(',', "
    + ", ".join(
        f"CASE WHEN {c} IS NULL THEN 'null' ELSE '{'text' if c in _TEXT else 'integer'}' END"
        for c in ("stream_id", "seq", "type", "version", "recorded_at", "payload",
                  "prev_hash", "hash"))
    + ")"
)
_ALL_CHAINS = f"SELECT {_CHAIN_COLUMNS} FROM events ORDER BY stream_id, seq"
_SEGMENT = f"SELECT {_CHAIN_COLUMNS} FROM events WHERE stream_id = %s AND seq <= %s ORDER BY seq"
_ORPHAN_LINKS = """
    SELECT stream_id FROM stream_links AS l
    WHERE NOT EXISTS (SELECT 1 FROM events AS e WHERE e.stream_id = l.stream_id)
    {where} ORDER BY stream_id LIMIT 1
"""


class PostgresJournal:
    """An append-only, hash-chained event journal in a PostgreSQL database.

    ``url`` is a libpq URL (``postgresql://user:password@host:5432/db``; add
    ``?options=-csearch_path%3Dname`` to keep the journal in its own schema).
    Opening creates or migrates the schema (under an advisory lock: many hosts may
    open it at once); ``readonly=True`` creates nothing and refuses every write.
    Connections come from a pool of at most ``max_connections`` (a handle may be
    shared by threads); ``timeout`` bounds connecting and waiting for a connection.
    A server that cannot be reached, or a connection cut mid-call, raises
    :class:`~journal.JournalConnectionError`: an append then either committed
    completely or not at all, and retrying it with the same ``expected_seq`` is safe.

    ``clock``, ``blob_threshold`` and ``extensions`` are those of :class:`~journal.Journal`
    (parts are kept in the same database's ``blobs`` table); only extensions
    that carry a PostgreSQL schema (a ``migrate_postgres(conn, from_version)``) are
    installed here, the others' objects are absent (as on a read-only SQLite open).
    """

    readonly: bool
    """Whether this handle refuses writes (opened with ``readonly=True``)."""

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], datetime] | None = None,
        extensions: Sequence[Extension] = (),
        readonly: bool = False,
        max_connections: int = 4,
        timeout: float = 10.0,
        blob_threshold: int = DEFAULT_BLOB_THRESHOLD,
    ) -> None:
        self.url = os.fspath(url)
        self.blob_threshold = check_blob_threshold(blob_threshold)
        self.path = shown_url(self.url)
        self.readonly = bool(readonly)
        check_extensions(extensions)
        self._extensions = tuple(extensions)
        self._now = system_stamp if clock is None else partial(clock_stamp, clock)
        self._heads: dict[str, tuple[int, str]] = {}
        self._edge: tuple[int, dict[Node, bytes]] = (-1, {})
        self._pool = Pool(self.url, self.path, max_size=max_connections, timeout=timeout,
                          readonly=self.readonly)
        self.restored_guards: tuple[str, ...] = ()
        """As :attr:`journal.Journal.restored_guards`."""
        self._version = SCHEMA_VERSION
        self._unwritable: str | None = None
        try:
            with self._pool.connection("opening the journal") as conn:
                if self.readonly:
                    self._version = check_pg_schema(conn, self.path, self._extensions)
                else:
                    restored, self._unwritable = open_pg_schema(
                        conn, self.path, self._extensions)
                    self.restored_guards = tuple(restored)
                self.chain_version = pg_chain_version(conn)  # as Journal.chain_version
                oid = one_row(conn.execute("SELECT to_regclass('events')::oid::bigint").fetchone(),
                              self.path)[0]
        except BaseException:
            self._pool.close()
            raise
        self._blobs = BlobStore(self._read_blob) if self._version >= BLOBS_FROM else None
        self._lock_key = (APPLICATION_ID << 32) | oid
        self.channel = f"turnlog_{oid}"
        """The ``LISTEN`` channel every append notifies with its last position."""

    def __repr__(self) -> str:
        return f"PostgresJournal({self.path!r})"

    def _read_blob(self, digest: str) -> bytes | None:
        with self._pool.connection("reading a part") as conn:
            return _blob(conn, digest)

    def __enter__(self) -> PostgresJournal:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection; safe twice and from any thread. Later calls raise."""
        self._pool.close()

    # -- appending -----------------------------------------------------------------------

    def append(
        self,
        stream_id: str,
        events: Sequence[NewEvent],
        expected_seq: int,
        *,
        parent: tuple[str, int] | None = None,
    ) -> list[StoredEvent]:
        """Append ``events`` as seqs ``expected_seq + 1``… in one transaction: all or nothing.

        As :meth:`journal.Journal.append`: :class:`~journal.ConcurrencyError` when
        another writer appended first, :class:`~journal.SeqGapError` past the
        stream's end, :class:`~journal.InvalidAppendError` for malformed input,
        :class:`~journal.EventNotFoundError` for a missing fork point. The one-stream
        case of :meth:`append_many`.
        """
        return self.append_many([StreamAppend(stream_id, events, expected_seq, parent)])[0]

    def append_many(self, appends: Iterable[StreamAppend]) -> list[list[StoredEvent]]:
        """Append to several streams in one transaction: all or nothing.

        As :meth:`journal.Journal.append_many`: items are checked and chained in order
        (a fork may start at an event an earlier item writes), then inserted by one
        statement under the position lock, so their positions are consecutive.
        """
        batches = check_appends(appends)
        if self.readonly:
            names = ", ".join(repr(b.stream_id) for b in batches)
            raise ReadOnlyJournalError(
                f"append to stream{'s' * (len(batches) > 1)} {names}: {self.path} is open read-only")
        if self._unwritable:
            raise NotAJournalError(self._unwritable)
        now = self._now()
        committing = False
        with self._pool.connection(f"append to stream {batches[0].stream_id!r}") as conn:
            try:
                with conn.transaction():
                    parts: dict[str, bytes] = {}
                    chained = self._chain(conn, batches, now, parts)
                    rows = [row for stream_rows in chained for row in stream_rows]
                    if parts:
                        conn.cursor().executemany(INSERT_BLOB_POSTGRES, list(parts.items()))
                    conn.execute(_LOCK, (self._lock_key,))
                    first, _, _ = one_row(conn.execute(
                        _INSERT, [*map(list, zip(*rows)), self.channel]).fetchone(), self.path)
                    edge = self._grow_tree(conn, first - 1, rows)
                    links = [(b.stream_id, *b.parent) for b in batches if b.parent is not None]
                    if links:
                        conn.cursor().executemany(_INSERT_LINK, links)
                    committing = True  # leaving the block sends COMMIT
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if committing:
                    raise self._lost_commit(batches, exc) from exc
                raise
            except pg_errors.UniqueViolation:
                raise self._lost_race(conn, batches) from None
            except psycopg.DataError as exc:
                raise self._bad_payload(conn, batches) from exc
        self._edge = edge
        written, position = [], first
        for stream_rows, batch in zip(chained, batches):
            # the caller gets the payloads it gave, as every read does
            written.append([StoredEvent(position + i, *row[:5], event.payload, *row[6:])
                            for i, (row, event) in enumerate(zip(stream_rows, batch.events))])
            position += len(stream_rows)
            self._heads[stream_rows[-1][0]] = (stream_rows[-1][1], stream_rows[-1][7])
        return written

    def erase(self, stream_id: str, kept: Mapping[int, str], record: Record,
              expected_seq: int | None = None, *,
              also: Mapping[str, tuple[Mapping[int, str], Record]] | None = None) -> list[int]:
        """As :meth:`journal.Journal.erase`, in one transaction under the position lock (the
        append-only triggers disabled for its statements only). After the commit, ``VACUUM
        FULL`` rewrites ``events`` and ``snapshots`` so the old row versions (and their
        TOAST) leave the table files, and a ``CHECKPOINT`` is asked for where the role may
        (the server's WAL segments, archives and backups keep the old content until they
        age out: the operator's retention, see docs/erasure-design.md)."""
        if self.readonly:
            raise ReadOnlyJournalError(f"erase in stream {stream_id!r}: {self.path} is open read-only")
        if self._unwritable:
            raise NotAJournalError(self._unwritable)
        check_chain(self.path, self.chain_version, stream_id)
        jobs = [(stream_id, kept, record, expected_seq),
                *((sid, more, rec, None) for sid, (more, rec) in (also or {}).items())]
        erased: dict[str, list[int]] = {}
        records: list[StreamAppend] = []
        copies: list[str] = []
        with self._pool.connection(f"erase in stream {stream_id!r}") as conn:
            with conn.transaction():
                conn.execute(_LOCK, (self._lock_key,))
                copies = [table for table, column in COPIES if one_row(conn.execute(
                    "SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone(), self.path)[0]]
                for sid, wanted, rec, expected in jobs:
                    head = conn.execute(_HEAD, (sid,)).fetchone()
                    last = head[0] if head else 0
                    check_head(sid, expected, last)
                    changes = self._erase_stream(conn, sid, wanted, copies)
                    erased[sid] = [seq for seq, _ in changes]
                    if changes:
                        records.append(StreamAppend(sid, [rec(recorded(changes))], last))
                if records:
                    parts: dict[str, bytes] = {}
                    rows = [row for chained in self._chain(conn, records, self._now(), parts)
                            for row in chained]
                    if parts:
                        conn.cursor().executemany(INSERT_BLOB_POSTGRES, list(parts.items()))
                    first, _, _ = one_row(conn.execute(
                        _INSERT, [*map(list, zip(*rows)), self.channel]).fetchone(), self.path)
                    edge = self._grow_tree(conn, first - 1, rows)
            if records:
                self._edge = edge
                for row in rows:
                    self._heads[row[0]] = (row[1], row[7])
                conn.execute(", ".join(["VACUUM FULL events, snapshots, blobs", *copies]))
                try:
                    conn.execute("CHECKPOINT")
                except pg_errors.InsufficientPrivilege:
                    pass  # documented: the server's own checkpoint follows within minutes
        return erased[stream_id]

    def _erase_stream(self, conn: psycopg.Connection, stream_id: str, kept: Mapping[int, str],
                      copies: list[str]) -> list[tuple[int, str]]:
        """Inside :meth:`erase`'s transaction: rewrite one stream's payloads, drop its (and its
        forks') snapshots, its rows in ``copies`` and the parts no other event references;
        the changes made (seq, erased payload)."""
        stored = conn.execute(
            "SELECT seq, type, payload FROM events WHERE stream_id = %s AND seq = ANY(%s)",
            (stream_id, sorted(kept))).fetchall()
        changes = erasures(self.path, stream_id, stored, kept)
        if not changes:
            return changes
        for table, name in _ERASE_GUARDS:
            conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER {name}")
        conn.cursor().executemany(
            "UPDATE events SET payload = %s WHERE stream_id = %s AND seq = %s",
            [(payload, stream_id, seq) for seq, payload in changes])
        conn.execute(DROP_SNAPSHOTS.format(p='%s::text COLLATE "C"'), (stream_id,))
        for table, column in COPIES:
            if table in copies:
                conn.execute(drop_copies(table, column, '%s::text COLLATE "C"'), (stream_id,))
        for digest in sorted(parts_of(stored, [seq for seq, _ in changes])):
            if conn.execute("SELECT 1 FROM events WHERE strpos(payload, %s) > 0 "
                            "LIMIT 1", (f'{{"$blob":"{digest}"',)).fetchone() is None:
                conn.execute("DELETE FROM blobs WHERE digest = %s", (digest,))
        for table, name in _ERASE_GUARDS:
            conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER {name}")
        return changes

    def _lost_commit(self, batches: list[StreamAppend], exc: Exception) -> JournalConnectionError:
        """The connection broke while the append's COMMIT was under way: the server may or
        may not have committed it, and only reading the stream's last seq tells which."""
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        checks = "; ".join(
            f"stream {b.stream_id!r} ends at seq {b.expected_seq + len(b.events)} if it "
            f"committed, at seq {b.expected_seq} if not" for b in batches)
        return JournalConnectionError(
            f"append to stream {batches[0].stream_id!r}: the connection to {self.path} was lost "
            f"while the append was committing ({first}): it may have committed. Check before "
            f"writing again: {checks} (the journal's last_seq(stream), or turnlog show ID "
            "--db URL). A retry with the same expected_seq is safe (refused with "
            "ConcurrencyError if it committed); re-reading the stream and appending the "
            "events again is not")

    def _grow_tree(self, conn: psycopg.Connection, size: int, rows: list[Row]
                   ) -> tuple[int, dict[Node, bytes]]:
        """Add the appended events' leaves and completed subtrees to ``tree``, under the
        position lock; return the tree's new right edge (reused by this handle's next
        append when no other writer came between)."""
        cached_size, edge = self._edge
        keys = Frontier.edge(size)
        if cached_size != size:
            store = PgTreeStore(conn, self.path)
            edge = resolve(store, keys)
            if len(edge) != len(keys) or store.last_id() != last_node(size):
                raise JournalError(
                    f"{self.path}: the log tree does not end at event {size} (it was edited "
                    "outside turnlog); turnlog verify --checkpoint reports where")
        nodes, new_edge = grow(size, edge, (bytes.fromhex(row[7]) for row in rows))
        conn.cursor().executemany(_INSERT_NODE, nodes)
        return size + len(rows), new_edge

    @contextlib.contextmanager
    def log_tree(self) -> Iterator[LogTree]:
        """As :meth:`journal.Journal.log_tree`: the log tree, read in one snapshot
        (one connection, one transaction; a checkpoint added commits at the end)."""
        with self._pool.connection("reading the log tree") as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield LogTree(PgTreeStore(conn, self.path,
                                      TILE_LEVEL if self._version >= TILES_FROM else 0))

    def _chain(self, conn: psycopg.Connection, batches: list[StreamAppend],
               now: str, parts: dict[str, bytes]) -> list[list[Row]]:
        """Each item's rows, chained to its stream's head (or its fork point), their payloads
        as stored (``_blobs.split``: the parts taken out are added to ``parts``)."""
        chained: list[list[Row]] = []
        hashes: dict[tuple[str, int], str] = {}  # what this append writes, for forks of it
        for stream_id, events, expected_seq, parent in batches:
            prev_hash = self._prev_hash(conn, stream_id, expected_seq, parent, hashes)
            stored = split_events(events, self.blob_threshold, parts)
            rows = chain_rows(prev_hash, stream_id, expected_seq, stored, now,
                              self.chain_version)
            hashes.update(((row[0], row[1]), row[7]) for row in rows)
            chained.append(rows)
        return chained

    def _prev_hash(self, conn: psycopg.Connection, stream_id: str, expected_seq: int,
                   parent: tuple[str, int] | None, written: dict[tuple[str, int], str]) -> str:
        if parent is not None:
            found = written.get(parent)
            row = (found,) if found is not None else conn.execute(_HASH_AT, parent).fetchone()
            if row is None:
                raise EventNotFoundError(
                    f"cannot fork stream {stream_id!r} from {parent[0]!r} at seq {parent[1]}: "
                    f"{self.path} has no such event")
            parent_hash: str = row[0]
            return parent_hash
        if expected_seq == 0:
            return GENESIS_HASH  # if the stream exists, the UNIQUE key refuses seq 1
        head = self._heads.get(stream_id)
        if head is not None and head[0] == expected_seq:
            return head[1]  # a concurrent writer is still caught by the UNIQUE key
        row = conn.execute(_HEAD, (stream_id,)).fetchone()
        if row is None or row[0] != expected_seq:
            raise self._stale(stream_id, expected_seq, row)
        self._heads[stream_id] = row
        prev_hash: str = row[1]
        return prev_hash

    def _stale(self, stream_id: str, expected_seq: int, head: tuple[int, str] | None) -> Exception:
        if head is None:
            self._heads.pop(stream_id, None)
        else:
            self._heads[stream_id] = head
        return stale_error(self.path, stream_id, expected_seq, 0 if head is None else head[0])

    def _lost_race(self, conn: psycopg.Connection, batches: list[StreamAppend]) -> Exception:
        """After a UNIQUE violation (rolled back): the first item whose stream moved on."""
        for batch in batches:
            head = conn.execute(_HEAD, (batch.stream_id,)).fetchone()
            if (0 if head is None else head[0]) != batch.expected_seq:
                return self._stale(batch.stream_id, batch.expected_seq, head)
        first = batches[0]  # the winner's events vanished again: impossible, append-only
        return self._stale(first.stream_id, first.expected_seq,
                           conn.execute(_HEAD, (first.stream_id,)).fetchone())

    def _bad_payload(self, conn: psycopg.Connection,
                     batches: list[StreamAppend]) -> InvalidAppendError:
        """Which event's payload PostgreSQL refused (the append was rolled back)."""
        for stream_id, events, expected_seq, _ in batches:
            for index, event in enumerate(events):
                if not _json_valid(conn, event.payload):
                    return InvalidAppendError(
                        f"append to stream {stream_id!r} in {self.path}: event {index} "
                        f"(seq {expected_seq + 1 + index}) has a payload that is not valid JSON")
        return InvalidAppendError(
            f"append to stream {batches[0].stream_id!r} in {self.path}: PostgreSQL refused "
            "a value of the append as invalid data")

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
        """A stream's own events from ``from_seq`` to ``to_seq`` inclusive, lazily, in pages.

        Oldest first, or newest first with ``reverse``; at most ``limit``.
        """
        action = f"reading stream {stream_id!r}"
        left = None if sql_limit(limit, action) < 0 else limit
        upto = _MAX_SEQ if to_seq is None else to_seq
        return self._pages(stream_id, max(from_seq, -_MAX_SEQ), upto, left, reverse, action)

    def _pages(self, stream_id: str, low: int, high: int, left: int | None, reverse: bool,
               action: str) -> Iterator[StoredEvent]:
        sql = _READ_BACKWARD if reverse else _READ_FORWARD
        while left is None or left > 0:
            size = _PAGE if left is None else min(_PAGE, left)
            page = self._fetch(sql, (stream_id, low, high, size), action)
            yield from page
            if len(page) < size:
                return
            if reverse:
                high = page[-1].seq - 1
            else:
                low = page[-1].seq + 1
            if left is not None:
                left -= len(page)

    def last_event(self, stream_id: str) -> StoredEvent | None:
        """The stream's newest event, or ``None`` when it has none."""
        row = self._one(_LAST_EVENT, (stream_id,), f"reading stream {stream_id!r}")
        if row is None:
            return None
        with self._pool.connection(f"reading stream {stream_id!r}") as conn:
            return self._whole(conn, [StoredEvent(*row)])[0]

    def read_all(
        self,
        after_position: int = 0,
        limit: int | None = None,
        *,
        until: int | None = None,
        types: Collection[str] | None = None,
    ) -> Iterator[StoredEvent]:
        """Every stream's events in position order, after ``after_position``, up to ``until``,
        of ``types``, at most ``limit``; lazily, in pages. Never skips a late commit
        (see the module's note on positions)."""
        left = None if sql_limit(limit, "reading all events") < 0 else limit
        kinds = None if types is None else list(types)
        return self._all_pages(after_position, _MAX_SEQ if until is None else until, kinds, left)

    def _all_pages(self, after: int, upto: int, kinds: list[str] | None,
                   left: int | None) -> Iterator[StoredEvent]:
        sql = _READ_ALL.format(types="" if kinds is None else "AND type = ANY(%s)")
        while left is None or left > 0:
            size = _PAGE if left is None else min(_PAGE, left)
            params = (after, upto, size) if kinds is None else (after, upto, kinds, size)
            page = self._fetch(sql, params, "reading all events")
            yield from page
            if len(page) < size:
                return
            after = page[-1].position
            if left is not None:
                left -= len(page)

    def _fetch(self, sql: str, params: tuple[Any, ...], action: str) -> list[StoredEvent]:
        with self._pool.connection(action) as conn:
            return self._whole(conn, list(starmap(StoredEvent, conn.execute(sql, params))))

    def _whole(self, conn: psycopg.Connection, events: list[StoredEvent]) -> list[StoredEvent]:
        """``events`` with the parts their payloads reference put back (``_blobs.join``)."""
        blobs = self._blobs
        if blobs is None:
            return events
        read = partial(_blob, conn)
        for index, event in enumerate(events):
            if '$blob"' in event.payload:
                payload = join(event.payload, partial(blobs.fetch, read=read),
                               f"stream {event.stream_id!r} seq {event.seq}")
                events[index] = StoredEvent(event.position, event.stream_id, event.seq,
                                            event.type, event.version, event.recorded_at,
                                            payload, event.prev_hash, event.hash)
        return events

    def _one(self, sql: str, params: tuple[Any, ...], action: str) -> tuple[Any, ...] | None:
        with self._pool.connection(action) as conn:
            return conn.execute(sql, params).fetchone()

    def last_position(self) -> int:
        """The newest event's global position, 0 for an empty journal (one index lookup)."""
        result: int = one_row(self._one(_LAST_POSITION, (), "reading the last position"),
                              self.path)[0]
        return result

    def ancestry(self, stream_id: str, to_seq: int | None = None) -> list[Segment]:
        """``[(stream, up to seq), ...]`` of a stream's history, root first, itself last."""
        with self._pool.connection(f"reading the ancestry of {stream_id!r}") as conn:
            return walk_ancestry(lambda s: conn.execute(_LINK, (s,)).fetchone(), stream_id,
                                 to_seq, self.path)

    def lineage(self, stream_id: str, to_seq: int | None = None) -> Iterator[StoredEvent]:
        """The events of every :meth:`ancestry` segment in order: the fork's whole history."""
        for ancestor, upto in self.ancestry(stream_id, to_seq):
            yield from self.read(ancestor, 1, _MAX_SEQ if upto is None else upto)

    def streams(self) -> Iterator[StreamInfo]:
        """Every stream's summary, the most recently appended first."""
        with self._pool.connection("listing streams") as conn:
            rows = conn.execute(_ALL_STREAMS).fetchall()
        return starmap(StreamInfo, rows)

    def stream(self, stream_id: str) -> StreamInfo:
        """One stream's summary; :class:`~journal.StreamNotFoundError` if it has no events."""
        row = self._one(_ONE_STREAM, (stream_id,), f"reading stream {stream_id!r}")
        if row is None:
            raise StreamNotFoundError(f"{self.path} has no stream {stream_id!r}")
        return StreamInfo(*row)

    def last_seq(self, stream_id: str) -> int:
        """The stream's last seq, 0 if it has no events."""
        row = self._one(_HEAD, (stream_id,), f"reading stream {stream_id!r}")
        return 0 if row is None else row[0]

    def hash_at(self, stream_id: str, seq: int) -> str:
        """The hash at ``(stream_id, seq)``; :class:`~journal.EventNotFoundError` if none."""
        row = self._one(_HASH_AT, (stream_id, seq), f"reading stream {stream_id!r}")
        if row is None:
            raise EventNotFoundError(f"{self.path} has no event at stream {stream_id!r} seq {seq}")
        result: str = row[0]
        return result

    # -- snapshots ------------------------------------------------------------------------

    def read_snapshot(self, stream_id: str, kind: str) -> Snapshot | None:
        """As :meth:`journal.Journal.read_snapshot`: only while the event at its seq has its hash."""
        with self._pool.connection(f"reading a snapshot of {stream_id!r}") as conn:
            try:
                row = conn.execute(_READ_SNAPSHOT, (stream_id, kind)).fetchone()
            except pg_errors.UndefinedTable:  # schema version 1, read as it is
                return None
        if row is None or not links_hold(self, stream_id):
            return None
        return Snapshot(stream_id, kind, row[0], row[1], bytes(row[2]))

    def write_snapshot(self, stream_id: str, kind: str, seq: int, data: bytes) -> Snapshot:
        """As :meth:`journal.Journal.write_snapshot`: the hash is the event's own."""
        data = check_snapshot(stream_id, kind, seq, data)
        action = f"writing a snapshot of {stream_id!r}"
        if self.readonly:
            raise ReadOnlyJournalError(f"{action}: {self.path} is open read-only")
        if self._unwritable:
            raise NotAJournalError(self._unwritable)
        with self._pool.connection(action) as conn, conn.transaction():
            conn.execute(_WRITE_SNAPSHOT, (kind, data, stream_id, seq, stream_id))
            row = conn.execute(_HASH_AT, (stream_id, seq)).fetchone()
            saved = conn.execute(SAVED_SNAPSHOT.replace("?", "%s"),
                                 (stream_id, kind, seq)).fetchone()
        if saved is None and row is not None:
            raise erased_since(action, stream_id, seq)
        if saved is None or row is None:
            raise EventNotFoundError(
                f"{action}: {self.path} has no event at stream {stream_id!r} seq {seq}")
        return Snapshot(stream_id, kind, seq, row[0], bytes(saved[0]))

    # -- tamper evidence -----------------------------------------------------------------

    def heads(self) -> list[Head]:
        """Every stream's last seq and hash, ordered by stream id (bytewise, as on SQLite)."""
        with self._pool.connection("reading heads") as conn:
            return list(starmap(Head, conn.execute(_HEADS)))

    def check_heads(self, heads: Iterable[Head]) -> list[BadEvent]:
        """Saved heads that no longer hold: the stream is gone, shorter, or rewritten there."""
        with self._pool.connection("checking heads") as conn:
            return check_heads_in(_PgChains(conn), heads)

    def verify(
        self, stream_id: str | None = None, *, progress: Callable[[int], None] | None = None
    ) -> VerifyReport:
        """Recompute every chain (or one stream's whole history) and report the first bad event.

        The same walk as :meth:`journal.Journal.verify`, over rows read in one
        snapshot (a server-side cursor: constant memory); ``progress(n)`` hears now
        and then how many more events were checked. Extensions' ``verify_postgres``
        checks run in the same snapshot; what they find is in ``report.projections``.
        """
        action = "verifying" if stream_id is None else f"verifying stream {stream_id!r}"
        with self._pool.connection(action) as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            report = verify_source(_PgChains(conn, self.chain_version), stream_id, progress)
            if stream_id is not None and report.checked_events == 0 and report.ok:
                raise StreamNotFoundError(f"{self.path} has no stream {stream_id!r}")
            if report.first_bad is None and self._blobs is not None:
                where, params = ("", ()) if stream_id is None else (
                    "AND stream_id = %s", (stream_id,))
                with conn.cursor(name="turnlog_verify_blobs") as cursor:
                    cursor.execute(REFERENCING_POSTGRES.replace("{where}", where), params)
                    bad = check_refs(cursor, partial(_blob, conn))
                if bad is not None:
                    report = VerifyReport(False, report.checked_events, bad)
            guards = tuple(missing_pg_guards(conn, self._version, self._extensions))
            try:
                with conn.transaction():  # a savepoint: a failed check leaves the snapshot usable
                    found = tuple(
                        mismatch for ext in self._extensions if ext.verify_postgres is not None
                        for mismatch in ext.verify_postgres(conn, stream_id))
            except (psycopg.DataError, TurnlogError):
                # the checks parse payloads: one edited into something else stops them
                bad = report.first_bad or bad_payload(_PgChains(conn), stream_id)
                if bad is None:
                    raise
                return VerifyReport(False, report.checked_events, bad, (), guards)
        try:
            found += tuple(mismatch for ext in self._extensions if ext.verify_journal is not None
                           for mismatch in ext.verify_journal(self, stream_id))
        except TurnlogError:
            if report.first_bad is None:
                raise
            return VerifyReport(False, report.checked_events, report.first_bad, (), guards)
        if found or guards:
            return VerifyReport(False, report.checked_events, report.first_bad, found, guards)
        return report


class _PgChains:
    """A PostgreSQL connection as a ``ChainSource`` (rows: inside a transaction, for the cursors)."""

    expected_types = TEXT_TYPES  # PostgreSQL keeps hashes as hex text

    def __init__(self, conn: psycopg.Connection, chain: int = 1) -> None:
        self.conn = conn
        self.chain_version = chain
        self._cursors = 0

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
        self._cursors += 1
        with self.conn.cursor(name=f"turnlog_verify_{self._cursors}") as cursor:
            cursor.itersize = 2000
            cursor.execute(sql, params)
            yield from cursor

    def all_rows(self) -> Iterable[tuple[Any, ...]]:
        return self._rows(_ALL_CHAINS)

    def segment_rows(self, stream_id: str, upto: int) -> Iterable[tuple[Any, ...]]:
        return self._rows(_SEGMENT, (stream_id, upto))

    def link(self, stream_id: str) -> tuple[str, int] | None:
        return self.conn.execute(_LINK, (stream_id,)).fetchone()

    def hash_bytes(self, stream_id: str, seq: int) -> bytes | None:
        row = self.conn.execute("SELECT convert_to(hash, 'UTF8') FROM events "
                                "WHERE stream_id = %s AND seq = %s", (stream_id, seq)).fetchone()
        return None if row is None else row[0]

    def orphan_link(self, stream_id: str | None) -> str | None:
        if stream_id is None:
            row = self.conn.execute(_ORPHAN_LINKS.format(where="")).fetchone()
        else:
            row = self.conn.execute(_ORPHAN_LINKS.format(where="AND stream_id = %s"),
                                    (stream_id,)).fetchone()
        return None if row is None else row[0]

    def hash_at(self, stream_id: str, seq: int) -> str | None:
        row = self.conn.execute(_HASH_AT, (stream_id, seq)).fetchone()
        return None if row is None else row[0]

    def last_seq(self, stream_id: str) -> int | None:
        row = self.conn.execute("SELECT max(seq) FROM events WHERE stream_id = %s",
                                (stream_id,)).fetchone()
        result: int | None = one_row(row, "reading the last seq")[0]
        return result



def _blob(conn: psycopg.Connection, digest: str) -> bytes | None:
    """A part's bytes by digest, read on ``conn`` (``None``: no such part)."""
    row = conn.execute(READ_BLOB_POSTGRES, (digest,)).fetchone()
    return None if row is None else bytes(row[0])


def _json_valid(conn: psycopg.Connection, text: str) -> bool:
    """Whether PostgreSQL takes ``text`` as JSON (in its own statement: the append rolled back)."""
    if "\x00" in text:  # no PostgreSQL text holds NUL, and valid JSON never has a raw one
        return False
    try:
        conn.execute("SELECT %s::json IS NOT NULL", (text,))
    except psycopg.DataError:
        return False
    return True
