"""The log tree of a PostgreSQL journal: :class:`~._logtree.TreeStore` over one connection.

The same ``tree`` and ``checkpoints`` tables as SQLite's (``BYTEA`` hashes), read
inside one transaction so that events and nodes come from one snapshot; long reads
go through server-side cursors (constant memory).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import psycopg

from ._logtree import StoredCheckpoint, leaf_data, tree_end
from ._merkle import TILE_LEVEL, Node, node_id
from ._one import one_row
from .errors import JournalError

__all__ = ["PgTreeStore"]


class PgTreeStore:
    """A PostgreSQL connection (inside a transaction) as a ``TreeStore``."""

    has_tree = True  # a writer migrates on open; schema 4 added the tree on both backends

    def __init__(self, conn: psycopg.Connection, path: str, low: int = TILE_LEVEL) -> None:
        self.conn = conn
        self.path = path
        self.low = low
        self._cursors = 0

    def _rows(self, sql: str, params: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
        self._cursors += 1
        with self.conn.cursor(name=f"turnlog_tree_{self._cursors}") as cursor:
            cursor.itersize = 5000
            cursor.execute(sql, params)
            yield from cursor

    def events(self) -> int:
        """How many events the journal has (its last position)."""
        row = self.conn.execute("SELECT coalesce(max(position), 0) FROM events").fetchone()
        result: int = one_row(row, self.path)[0]
        return result

    def tree_size(self) -> int:
        """How many leaves the stored tree has."""
        return tree_end(self)

    def last_id(self) -> int | None:
        """The largest stored node id."""
        row = self.conn.execute("SELECT max(id) FROM tree").fetchone()
        result: int | None = one_row(row, self.path)[0]
        return result

    def leaf_span(self, lo: int, hi: int) -> list[bytes]:
        """The leaf data of leaves ``lo``..``hi - 1`` (events ``lo + 1``..``hi``)."""
        return [leaf_data(h) for (h,) in self.conn.execute(
            "SELECT hash FROM events WHERE position > %s AND position <= %s ORDER BY position",
            (lo, hi))]

    def nodes(self, keys: Sequence[Node]) -> dict[Node, bytes]:
        """The stored hashes of ``keys``, in one query."""
        if not keys:
            return {}
        ids = {node_id(*key): key for key in keys}
        return {ids[i]: bytes(h) for i, h in self.conn.execute(
            "SELECT id, hash FROM tree WHERE id = ANY(%s)", (list(ids),))}

    def stored(self) -> Iterator[tuple[int, bytes]]:
        """Every stored node as ``(id, hash)``, by id."""
        for node, h in self._rows("SELECT id, hash FROM tree ORDER BY id", ()):
            yield node, bytes(h)

    def leaves(self, until: int) -> Iterator[tuple[int, str, int, object]]:
        """The events' positions, streams, seqs and stored hashes, by position."""
        return self._rows("SELECT position, stream_id, seq, hash FROM events "
                          "WHERE position <= %s ORDER BY position", (until,))

    def origin(self) -> str:
        """The origin recorded in ``_turnlog_meta``."""
        row = self.conn.execute("SELECT value FROM _turnlog_meta WHERE key = 'origin'").fetchone()
        if row is None:
            raise JournalError(f"{self.path} is damaged: its _turnlog_meta has no origin")
        result: str = row[0]
        return result

    def checkpoints(self) -> list[StoredCheckpoint]:
        """The kept checkpoints, oldest first."""
        return [StoredCheckpoint(*row) for row in self.conn.execute(
            "SELECT id, size, note FROM checkpoints ORDER BY id")]

    def add_checkpoint(self, size: int, note: str) -> None:
        """Insert one checkpoint row (committed with the surrounding transaction)."""
        self.conn.execute("INSERT INTO checkpoints (size, note) VALUES (%s, %s)", (size, note))
