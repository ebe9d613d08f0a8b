"""The journal's log tree: roots, proofs and checks over the stored complete subtrees.

Every backend keeps a ``tree`` table of ``(id, hash)`` rows, ``id`` the node's
:func:`~._merkle.node_id` (see :mod:`._merkle`), grown in the transaction of every append, and a ``checkpoints``
table of signed notes. :class:`LogTree` reads them through a :class:`TreeStore`,
which each backend supplies (SQLite's is here).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol

import msgspec

from ._merkle import (
    Frontier,
    Node,
    consistency_proof,
    inclusion_proof,
    needed,
    node_id,
    root,
    tree_size,
)
from .errors import JournalError

__all__ = ["LEAF_COLUMN", "LogTree", "SqliteTreeStore", "StoredCheckpoint", "TreeMismatch", "TreeStore",
           "grow", "leaf_data", "stored_size"]


class StoredCheckpoint(msgspec.Struct, frozen=True):
    """A signed checkpoint kept in the journal: its row ``id``, tree ``size`` and note text."""

    id: int
    size: int
    note: str


class TreeMismatch(msgspec.Struct, frozen=True):
    """Where the stored log tree and the events disagree (see :meth:`LogTree.check`).

    ``position`` is the first event whose leaf differs, or, for an inner node, the
    first event below it; ``level``/``index`` name the stored node (level 0: a leaf).
    """

    position: int
    level: int
    index: int
    reason: str


class TreeStore(Protocol):
    """What a backend supplies to :class:`LogTree`."""

    path: str
    has_tree: bool
    """False for an older journal read as it is: no stored tree, only the events."""

    def tree_size(self) -> int:
        """How many leaves the stored tree has (its level-0 rows)."""

    def events(self) -> int:
        """How many events the journal has (its last position)."""

    def nodes(self, keys: Sequence[Node]) -> dict[Node, bytes]:
        """The stored hashes of ``keys`` (missing ones left out)."""

    def stored(self) -> Iterator[tuple[int, bytes]]:
        """Every stored node as ``(id, hash)``, by id."""

    def leaves(self, until: int) -> Iterator[tuple[int, str, int, object]]:
        """``(position, stream_id, seq, stored hash)`` of events 1..``until``, by position."""

    def origin(self) -> str:
        """The journal's stable origin (the default first line of its checkpoints)."""

    def checkpoints(self) -> list[StoredCheckpoint]:
        """The checkpoints kept in the journal, oldest first."""

    def add_checkpoint(self, size: int, note: str) -> None:
        """Keep a signed checkpoint in the journal."""


LEAF_COLUMN = ("iif(typeof(hash) = 'text' AND length(hash) = 64 AND NOT hash GLOB '*[^0-9a-f]*', "
               "hash, CAST(hash AS BLOB))")
"""SQLite: ``events.hash`` as :func:`leaf_data` takes it (hex text, else the stored bytes),
so that no edit stored there (text that is not UTF-8, say) fails to read."""


def leaf_data(stored: object) -> bytes:
    """An event's stored chain hash as a leaf's data: its 32 bytes (hex text decoded).

    Whatever else an edit stored is used as it is (text as UTF-8), so the leaf differs.
    """
    if isinstance(stored, (bytes, bytearray, memoryview)):
        return bytes(stored)
    text = str(stored)
    if len(text) == 64 and text == text.lower():
        try:
            return bytes.fromhex(text)
        except ValueError:
            pass
    return text.encode("utf-8", "surrogatepass")


def grow(size: int, edge: dict[Node, bytes], hashes: Iterable[bytes]
         ) -> tuple[list[tuple[int, bytes]], dict[Node, bytes]]:
    """Append leaves with data ``hashes`` to a tree of ``size`` leaves whose right edge
    (:meth:`Frontier.edge`) is ``edge``: the ``(id, hash)`` rows to store, and the
    tree's new right edge."""
    frontier = Frontier(size, lambda level, index: edge[(level, index)])
    rows, known = [], dict(edge)
    for level, index, h in frontier.add(hashes):
        rows.append((node_id(level, index), h))
        known[(level, index)] = h
    return rows, {key: known[key] for key in Frontier.edge(frontier.size)}


class LogTree:
    """Roots and proofs of one journal's log tree, and its check against the events."""

    def __init__(self, store: TreeStore) -> None:
        self._store = store

    @property
    def origin(self) -> str:
        """The journal's stable origin line."""
        return self._store.origin()

    def size(self) -> int:
        """How many events the tree holds (every event: the journal's last position)."""
        return self._store.tree_size()

    def events(self) -> int:
        """How many events the journal has (the tree's size, unless either was edited)."""
        return self._store.events()

    def _get(self, compute: Callable[[Callable[[int, int], bytes]], object]) -> object:
        keys = needed(compute)
        found = self._store.nodes(keys)
        if len(found) != len(keys):
            missing = next(k for k in keys if k not in found)
            raise JournalError(
                f"{self._store.path}: the log tree has no node {missing} (level, index): "
                "it is damaged; turnlog verify --checkpoint reports where")
        return compute(lambda level, index: found[(level, index)])

    def _size_ok(self, size: int, what: str) -> None:
        have = self.size()
        if not 0 <= size <= have:
            raise JournalError(
                f"{self._store.path}: {what}: the journal's tree has {have} events, not {size}")

    def root(self, size: int | None = None) -> bytes:
        """The root hash of the tree of the first ``size`` events (default: all)."""
        size = self.size() if size is None else size
        self._size_ok(size, f"root of size {size}")
        return self._get(lambda get: root(get, size))  # type: ignore[return-value]

    def inclusion(self, index: int, size: int) -> list[bytes]:
        """The inclusion proof of leaf ``index`` (the event at position ``index + 1``)."""
        self._size_ok(size, f"inclusion proof in size {size}")
        return self._get(lambda get: inclusion_proof(get, index, size))  # type: ignore[return-value]

    def consistency(self, old: int, new: int) -> list[bytes]:
        """The proof that the tree of ``new`` events extends the tree of ``old``."""
        self._size_ok(new, f"consistency proof to size {new}")
        return self._get(lambda get: consistency_proof(get, old, new))  # type: ignore[return-value]

    def checkpoints(self) -> list[StoredCheckpoint]:
        """The signed checkpoints kept in the journal, oldest first."""
        return self._store.checkpoints()

    def add_checkpoint(self, size: int, note: str) -> None:
        """Keep a signed checkpoint note of the tree of ``size`` events in the journal."""
        self._store.add_checkpoint(size, note)

    def check(self, roots_at: Iterable[int] = (),
              progress: Callable[[int], None] | None = None
              ) -> tuple[TreeMismatch | None, dict[int, bytes]]:
        """Recompute the tree from the events' stored hashes; compare every stored node.

        Returns the first stored node that differs (``None``: the tree is the events'
        tree, no node missing or extra) and the recomputed root at each size of
        ``roots_at`` that the journal reaches. Constant memory: one pass over the
        events and one ordered read per level.
        """
        store = self._store
        wanted = set(roots_at)
        roots: dict[int, bytes] = {}
        if 0 in wanted:
            roots[0] = root(lambda *_: b"", 0)
        frontier = Frontier(0, lambda *_: b"")
        nodes = store.stored() if store.has_tree else iter(())
        first: TreeMismatch | None = None
        count = 0
        for position, _stream, _seq, stored in store.leaves(2**63 - 1):
            count += 1
            if progress is not None and count % 4096 == 0:
                progress(4096)
            for level, index, h in frontier.add((leaf_data(stored),)):
                if first is None and store.has_tree:
                    found = next(nodes, None)
                    if found != (node_id(level, index), h):
                        first = _mismatch(position, level, index, found)
            if frontier.size in wanted:
                roots[frontier.size] = frontier.root()
        if progress is not None:
            progress(count % 4096)
        if first is None and store.has_tree:
            extra = next(nodes, None)
            if extra is not None:
                first = TreeMismatch(frontier.size + 1, -1, extra[0],
                                     f"the log tree has a node (#{extra[0]}) beyond the "
                                     f"journal's {frontier.size} events")
        return first, roots


def _mismatch(position: int, level: int, index: int, found: tuple[int, bytes] | None
              ) -> TreeMismatch:
    first = (index << level) + 1
    if found is None or found[0] != node_id(level, index):
        what = f"the log tree has no node ({level}, {index}) where the events put one"
    elif level == 0:
        what = "its chain hash is not the log tree's leaf (the event or the tree was rewritten)"
    else:
        what = (f"the log tree's node ({level}, {index}) over events {first}..{position} "
                "is not their hash")
    return TreeMismatch(first if level else position, level, index, what)


def stored_size(last_id: int | None, path: str) -> int:
    """The leaves of a stored tree whose last node id is ``last_id`` (``None``: empty)."""
    size = 0 if last_id is None else tree_size(last_id + 1)
    if size is None:
        raise JournalError(f"{path}: the log tree ends at node #{last_id}, which no tree "
                           "ends at (it was edited outside turnlog)")
    return size


class SqliteTreeStore:
    """The log tree of a SQLite journal (schema 4: ``tree`` and ``checkpoints`` tables)."""

    def __init__(self, conn: sqlite3.Connection, path: str, has_tree: bool) -> None:
        self._conn = conn
        self.path = path
        self.has_tree = has_tree

    def _require(self) -> None:
        if not self.has_tree:
            raise JournalError(
                f"{self.path} has no log tree yet (an older journal schema): open it once "
                "for writing (any turnlog command that writes) to add it")

    def events(self) -> int:
        """How many events the journal has (its last position)."""
        result: int = self._conn.execute("SELECT coalesce(max(position), 0) FROM events").fetchone()[0]
        return result

    def tree_size(self) -> int:
        """How many leaves the stored tree has."""
        if not self.has_tree:
            return self.events()
        row = self._conn.execute("SELECT max(id) FROM tree").fetchone()
        return stored_size(row[0], self.path)

    def nodes(self, keys: Sequence[Node]) -> dict[Node, bytes]:
        """The stored hashes of ``keys``."""
        self._require()
        if not keys:
            return {}
        ids = {node_id(*key): key for key in keys}
        marks = ", ".join("?" * len(ids))
        return {ids[i]: h for i, h in self._conn.execute(
            f"SELECT id, hash FROM tree WHERE id IN ({marks})", list(ids))}

    def stored(self) -> Iterator[tuple[int, bytes]]:
        """Every stored node as ``(id, hash)``, by id."""
        return iter(self._conn.execute("SELECT id, hash FROM tree ORDER BY id"))

    def leaves(self, until: int) -> Iterator[tuple[int, str, int, object]]:
        """The events' positions, streams, seqs and stored hashes, by position."""
        return iter(self._conn.execute(
            f"SELECT position, stream_id, seq, {LEAF_COLUMN} FROM events WHERE position <= ? "
            "ORDER BY position", (until,)))

    def origin(self) -> str:
        """The origin recorded in ``_turnlog_meta``."""
        self._require()
        row = self._conn.execute(
            "SELECT value FROM _turnlog_meta WHERE key = 'origin'").fetchone()
        if row is None:
            raise JournalError(f"{self.path} is damaged: its _turnlog_meta has no origin")
        result: str = row[0]
        return result

    def checkpoints(self) -> list[StoredCheckpoint]:
        """The kept checkpoints, oldest first."""
        if not self.has_tree:
            return []
        return [StoredCheckpoint(*row) for row in self._conn.execute(
            "SELECT id, size, note FROM checkpoints ORDER BY id")]

    def add_checkpoint(self, size: int, note: str) -> None:
        """Insert one checkpoint row (autocommit: one statement)."""
        self._require()
        self._conn.execute("INSERT INTO checkpoints (size, note) VALUES (?, ?)", (size, note))
