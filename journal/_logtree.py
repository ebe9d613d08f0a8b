"""The journal's log tree: roots, proofs and checks over the stored complete subtrees.

Every backend keeps a ``tree`` table of ``(id, hash)`` rows, ``id`` the node's
:func:`~._merkle.node_id` (see :mod:`._merkle`), grown in the transaction of every append, and a ``checkpoints``
table of signed notes. :class:`LogTree` reads them through a :class:`TreeStore`,
which each backend supplies (SQLite's is here).

Since schema 7 the table holds only the nodes of level :data:`~._merkle.TILE_LEVEL`
and up (one row per 256 events, and their tree): :func:`resolve` recomputes a lower
node from the leaves under it, at most one tile of events' stored hashes read by
position. A journal of schema 4 to 6 read as it is stores every node (``low`` 0).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol

import msgspec

from ._merkle import (
    TILE_LEVEL,
    Frontier,
    Node,
    consistency_proof,
    inclusion_proof,
    needed,
    node_id,
    root,
    subtree,
    tree_size,
)
from .errors import JournalError

__all__ = ["LEAF_COLUMN", "LogTree", "SqliteTreeStore", "StoredCheckpoint", "TreeMismatch", "TreeStore",
           "grow", "last_node", "leaf_data", "resolve", "stored_size", "tree_end"]


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
    low: int
    """The lowest level stored: :data:`~._merkle.TILE_LEVEL` (0 for a journal of schema
    4 to 6 read as it is, which stores every node)."""

    def tree_size(self) -> int:
        """How many leaves the stored tree has (:func:`tree_end`)."""

    def last_id(self) -> int | None:
        """The largest stored node id (``None``: no node stored)."""

    def leaf_span(self, lo: int, hi: int) -> list[bytes]:
        """The leaf data (:func:`leaf_data`) of leaves ``lo``..``hi - 1``: the stored hashes
        of the events at positions ``lo + 1``..``hi`` (fewer when some are missing)."""

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
    (:meth:`Frontier.edge`) is ``edge``: the ``(id, hash)`` rows to store (the nodes of
    level :data:`TILE_LEVEL` and up), and the tree's new right edge (every level)."""
    frontier = Frontier(size, lambda level, index: edge[(level, index)])
    rows, known = [], dict(edge)
    for level, index, h in frontier.add(hashes):
        if level >= TILE_LEVEL:
            rows.append((node_id(level, index), h))
        known[(level, index)] = h
    return rows, {key: known[key] for key in Frontier.edge(frontier.size)}


def resolve(store: TreeStore, keys: Sequence[Node]) -> dict[Node, bytes]:
    """The hashes of nodes ``keys`` (missing ones left out): those of level
    :data:`TILE_LEVEL` and up as stored, lower ones recomputed from the leaves under
    them (one read of events per tile touched: a proof touches at most three)."""
    found = store.nodes([key for key in keys if key[0] >= TILE_LEVEL])
    spans: dict[int, tuple[int, int]] = {}
    low = [key for key in keys if key[0] < TILE_LEVEL]
    for level, index in low:
        lo, hi = index << level, (index + 1) << level
        a, b = spans.get(lo >> TILE_LEVEL, (lo, hi))
        spans[lo >> TILE_LEVEL] = (min(a, lo), max(b, hi))
    data = {tile: (a, store.leaf_span(a, b)) for tile, (a, b) in spans.items()}
    for level, index in low:
        lo, hi = index << level, (index + 1) << level
        start, leaves = data[lo >> TILE_LEVEL]
        if hi - start <= len(leaves):
            found[(level, index)] = subtree(leaves[lo - start:hi - start])
    return found


def last_node(size: int) -> int | None:
    """The id of the last node a tree of ``size`` leaves stores (``None``: none, under
    one tile): the highest one completed by its last complete tile's last leaf."""
    done = size >> TILE_LEVEL << TILE_LEVEL
    if not done:
        return None
    level = (done & -done).bit_length() - 1
    return node_id(level, (done >> level) - 1)


def tree_end(store: TreeStore) -> int:
    """How many leaves ``store``'s tree has: its events, once its stored nodes end where
    they must (:class:`JournalError` if not: the table was edited outside turnlog).
    A journal of schema 4 to 6 read as it is: its stored leaves (:func:`stored_size`)."""
    last = store.last_id()
    if store.low == 0:
        return stored_size(last, store.path)
    size = store.events()
    if last != last_node(size):
        raise JournalError(
            f"{store.path}: the log tree ends at node #{last}, but the journal's {size} events "
            f"end it at #{last_node(size)} (it was edited outside turnlog); turnlog verify "
            "--checkpoint reports where")
    return size


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
        found = resolve(self._store, keys)
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
        tree, no node missing or extra; a node below the stored levels, kept by an older
        schema, must be the events' too) and the recomputed root at each size of
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
        found = next(nodes, None)
        first: TreeMismatch | None = None
        count = 0
        for position, _stream, _seq, stored in store.leaves(2**63 - 1):
            count += 1
            if progress is not None and count % 4096 == 0:
                progress(4096)
            for level, index, h in frontier.add((leaf_data(stored),)):
                if first is not None or not store.has_tree:
                    continue
                if found is not None and found[0] == node_id(level, index):
                    if found[1] != h:  # a stored node must be the events' node
                        first = _mismatch(position, level, index, found)
                    found = next(nodes, None)
                elif level >= store.low:  # one the layout stores is missing
                    first = _mismatch(position, level, index, None)
            if frontier.size in wanted:
                roots[frontier.size] = frontier.root()
        if progress is not None:
            progress(count % 4096)
        if first is None and found is not None:
            first = TreeMismatch(frontier.size + 1, -1, found[0],
                                 f"the log tree has a node (#{found[0]}) beyond the "
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

    def __init__(self, conn: sqlite3.Connection, path: str, has_tree: bool,
                 low: int = TILE_LEVEL) -> None:
        self._conn = conn
        self.path = path
        self.has_tree = has_tree
        self.low = low

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
        return tree_end(self)

    def last_id(self) -> int | None:
        """The largest stored node id."""
        result: int | None = self._conn.execute("SELECT max(id) FROM tree").fetchone()[0]
        return result

    def leaf_span(self, lo: int, hi: int) -> list[bytes]:
        """The leaf data of leaves ``lo``..``hi - 1`` (events ``lo + 1``..``hi``)."""
        return [leaf_data(h) for (h,) in self._conn.execute(
            f"SELECT {LEAF_COLUMN} FROM events WHERE position > ? AND position <= ? "
            "ORDER BY position", (lo, hi))]

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
