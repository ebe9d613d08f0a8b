"""RFC 6962 (RFC 9162 §2.1) Merkle tree hashing over stored complete subtrees.

The journal's log tree has one leaf per event in position order: leaf *i* is the
event at position *i* + 1 and its data is the event's 32-byte chain hash. A
*node* ``(level, index)`` is the root of the complete subtree over leaves
``index * 2**level`` up to ``(index + 1) * 2**level``; level 0 holds leaf hashes.
Stored, a node is numbered by :func:`node_id`: the order in which appends complete
nodes (post-order), so each append adds rows at the end of one index and the
whole tree reads back in the order :class:`Frontier` recomputes it.
Only complete subtrees are stored: every hash of the RFC's recursion (``MTH``) over
a tree of any size is either one of them or is folded from at most ``log2(n)``
of them, so roots and proofs need a handful of stored nodes, never the leaves.

Only the nodes of level :data:`TILE_LEVEL` and up are stored (schema 7): one
per 256-leaf *tile* and the tiles' own tree, about ``2 n / 256`` rows (cf. C2SP
tlog-tiles, whose tiles are 256 hashes wide). A node below that level spans at most
128 leaves inside one tile; it is recomputed from the leaves' data, which the
journal already stores (the events' chain hashes, in position order).

The functions here are pure: they take a ``get(level, index) -> bytes`` for the
stored nodes. :func:`needed` runs one of them with a recording getter first, so a
backend fetches every node it needs in one query.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from hashlib import sha256

__all__ = [
    "EMPTY_ROOT",
    "TILE_LEVEL",
    "Frontier",
    "consistency_proof",
    "inclusion_proof",
    "leaf_hash",
    "needed",
    "node_count",
    "node_hash",
    "node_at",
    "node_id",
    "root",
    "subtree",
    "tree_size",
]

Getter = Callable[[int, int], bytes]
Node = tuple[int, int]

EMPTY_ROOT = sha256(b"").digest()
"""The root of the empty tree: SHA-256 of nothing (RFC 6962 §2.1)."""


TILE_LEVEL = 8
"""The lowest level of the nodes a journal stores: complete subtrees of 256 leaves and up."""


def leaf_hash(data: bytes) -> bytes:
    """``SHA-256(0x00 ‖ data)``."""
    return sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 ‖ left ‖ right)``."""
    return sha256(b"\x01" + left + right).digest()


def node_id(level: int, index: int) -> int:
    """The stored number of node ``(level, index)``: how many nodes complete before it.

    The node completes with leaf ``b - 1``, ``b = (index + 1) * 2**level``, after the
    ``2(b-1) - popcount(b-1)`` nodes of the first ``b - 1`` leaves and the ``level``
    nodes below it on that leaf's path.
    """
    last = ((index + 1) << level) - 1
    return 2 * last - last.bit_count() + level


def node_at(node: int) -> Node:
    """The ``(level, index)`` whose :func:`node_id` is ``node`` (the inverse)."""
    if node < 0:
        raise ValueError(f"no node has id {node}")
    size = node // 2  # the leaves completed before it: node_count(size) <= node
    while node_count(size + 1) <= node:
        size += 1
    level = node - node_count(size)  # the size-th leaf completes levels 0..ctz(size + 1)
    return level, (size + 1 >> level) - 1


def subtree(leaves: Sequence[bytes]) -> bytes:
    """The root of the complete subtree whose leaves' data are ``leaves`` (a power of two)."""
    level = [leaf_hash(data) for data in leaves]
    while len(level) > 1:
        level = [node_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def node_count(size: int) -> int:
    """How many nodes a tree of ``size`` leaves stores: ``2 size - popcount(size)``."""
    return 2 * size - size.bit_count()


def tree_size(count: int) -> int | None:
    """The number of leaves of a tree that stores ``count`` nodes (``None``: no such tree)."""
    size = count // 2
    while node_count(size) < count:
        size += 1
    return size if node_count(size) == count else None


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (``n`` >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def _mth(get: Getter, lo: int, hi: int) -> bytes:
    """MTH(D[lo:hi]) from stored complete subtrees (``lo`` aligned as the RFC's recursion is)."""
    n = hi - lo
    if n & (n - 1) == 0 and lo % n == 0:
        level = n.bit_length() - 1
        return get(level, lo >> level)
    k = _split(n)
    return node_hash(_mth(get, lo, lo + k), _mth(get, lo + k, hi))


def root(get: Getter, size: int) -> bytes:
    """The root hash of the tree of the first ``size`` leaves."""
    return EMPTY_ROOT if size == 0 else _mth(get, 0, size)


def inclusion_proof(get: Getter, index: int, size: int) -> list[bytes]:
    """The audit path of leaf ``index`` in the tree of ``size`` leaves (RFC 6962 §2.1.1)."""
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of {size} leaves")
    proof: list[bytes] = []
    lo, hi, m = 0, size, index
    while hi - lo > 1:  # PATH(m, D[lo:hi]), iterated from the root down
        k = _split(hi - lo)
        if m < k:
            proof.append(_mth(get, lo + k, hi))
            hi = lo + k
        else:
            proof.append(_mth(get, lo, lo + k))
            lo, m = lo + k, m - k
    proof.reverse()  # the RFC lists the path from the leaf up
    return proof


def consistency_proof(get: Getter, old: int, new: int) -> list[bytes]:
    """The proof that the tree of ``new`` leaves extends that of ``old`` (RFC 6962 §2.1.2).

    Empty when ``old`` is 0 or equals ``new`` (nothing to prove).
    """
    if not 0 <= old <= new:
        raise ValueError(f"no consistency proof from size {old} to size {new}")
    if old == 0 or old == new:
        return []
    proof: list[bytes] = []
    lo, hi, m, whole = 0, new, old, True
    while m != hi - lo:  # SUBPROOF(m, D[lo:hi], whole)
        k = _split(hi - lo)
        if m <= k:
            proof.append(_mth(get, lo + k, hi))
            hi = lo + k
        else:
            proof.append(_mth(get, lo, lo + k))
            lo, m, whole = lo + k, m - k, False
    if not whole:
        proof.append(_mth(get, lo, hi))
    proof.reverse()
    return proof


def needed(compute: Callable[[Getter], object]) -> list[Node]:
    """The stored nodes ``compute(get)`` reads, in first-use order, without hashing real data."""
    seen: dict[Node, None] = {}

    def record(level: int, index: int) -> bytes:
        seen[(level, index)] = None
        return b""

    compute(record)
    return list(seen)


class Frontier:
    """The right edge of a growing tree: the root of each complete subtree along it.

    :meth:`add` takes the next leaves' data and yields every complete subtree they
    complete, as ``(level, index, hash)``: what a backend inserts to keep its tree.
    """

    def __init__(self, size: int, get: Getter) -> None:
        self.size = size
        self._edge = {level: get(level, (size >> level) - 1)
                      for level in range(size.bit_length()) if size >> level & 1}

    @staticmethod
    def edge(size: int) -> list[Node]:
        """The stored nodes a :class:`Frontier` of ``size`` leaves starts from."""
        return [(level, (size >> level) - 1)
                for level in range(size.bit_length()) if size >> level & 1]

    def root(self) -> bytes:
        """The root of the tree of the leaves added so far (:data:`EMPTY_ROOT` for none)."""
        h = None
        for level in sorted(self._edge):
            h = self._edge[level] if h is None else node_hash(self._edge[level], h)
        return EMPTY_ROOT if h is None else h

    def add(self, leaves: Iterable[bytes]) -> Iterator[tuple[int, int, bytes]]:
        """Append each leaf's data; yield the new stored nodes, leaf first, then its parents."""
        edge = self._edge
        for data in leaves:
            index = self.size
            h = leaf_hash(data)
            level = 0
            yield 0, index, h
            while index & 1:
                h = node_hash(edge.pop(level), h)
                level += 1
                index >>= 1
                yield level, index, h
            edge[level] = h
            self.size += 1
