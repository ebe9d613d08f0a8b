"""Signed checkpoints of a journal's log tree, and the check of a journal against one.

A checkpoint (:mod:`._note`) commits to the root of the tree of the first *n*
events. :func:`check_checkpoint` finds any rewrite of those events, even one whose
chain hashes were recomputed: the recomputed tree has another root.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from ._logtree import LogTree
from ._note import (
    Checkpoint,
    SignerKey,
    VerifierKey,
    parse_checkpoint,
    sign_note,
    verify_note,
)
from .errors import CheckpointError, JournalError

__all__ = ["CheckpointReport", "check_checkpoint", "last_signed", "make_checkpoint"]


class CheckpointReport(msgspec.Struct, frozen=True):
    """What :func:`check_checkpoint` found: ``ok``, or the ``problem`` and where.

    ``position`` is the first event known to differ (or the last event the checkpoint
    covers when only the range is known), ``None`` when the problem is not an event's.
    """

    ok: bool
    size: int
    journal_size: int
    problem: str | None = None
    position: int | None = None
    after: int = 0
    """Events up to this position are known to be as signed (a checkpoint kept in the
    journal proves them) when the first differing one cannot be named exactly."""


def make_checkpoint(tree: LogTree, key: SignerKey, *, origin: str | None = None,
                    cosigners: Sequence[SignerKey] = (), keep: bool = True) -> Checkpoint:
    """Sign the tree's current root as a checkpoint note (``keep``: and keep it in the journal)."""
    origin = tree.origin if origin is None else origin
    if not origin or origin != origin.strip() or "\n" in origin:
        raise CheckpointError(f"checkpoint: origin {origin!r} must be one line, no outer spaces")
    size = tree.size()
    text = Checkpoint.body(origin, size, tree.root(size))
    note = text + "\n" + "".join(sign_note(text, k) for k in (key, *cosigners))
    if keep:
        tree.add_checkpoint(size, note)
    return parse_checkpoint(note)


def check_checkpoint(tree: LogTree, note: str, key: VerifierKey,
                     progress: Callable[[int], None] | None = None) -> CheckpointReport:
    """Check ``note``'s signature by ``key``, then that the journal holds what it signed.

    - :class:`CheckpointError` for a malformed note (``tampered=False``) or a
      signature that fails (``tampered=True``).
    - The tree of ``size`` events recomputed from the events' chain hashes must have
      the signed root; every stored tree node must be the events' (so the current tree,
      which proofs are served from, extends the signed one); every checkpoint kept in
      the journal must be signed by ``key`` and hold too.
    """
    checkpoint = parse_checkpoint(note)
    verify_note(note, key)
    size = checkpoint.size
    have = tree.events()
    if size > have:
        return CheckpointReport(
            False, size, have, f"the checkpoint covers {size} events but the journal has only "
            f"{have}: events were cut off its end", position=have + 1)
    kept = tree.checkpoints()
    signed: dict[int, bytes] = {}
    for stored in kept:
        try:
            found = parse_checkpoint(stored.note)
            verify_note(stored.note, key)
        except CheckpointError as exc:
            return CheckpointReport(False, size, have, f"checkpoint #{stored.id} kept in the "
                                    f"journal does not hold: {exc}")
        if found.size != stored.size or found.size > have:
            return CheckpointReport(False, size, have, f"checkpoint #{stored.id} kept in the "
                                    f"journal says {found.size} events, its row {stored.size}, "
                                    f"the journal has {have}")
        signed[found.size] = found.root
    mismatch, roots = tree.check({size, *signed}, progress)
    if mismatch is not None:
        return CheckpointReport(False, size, have, mismatch.reason, position=mismatch.position)
    if roots[size] != checkpoint.root:
        proven = max((s for s, r in signed.items() if s < size and roots[s] == r), default=0)
        try:
            origin: str | None = tree.origin
        except JournalError:  # an older journal read as it is: no origin stored yet
            origin = None
        other = ("" if origin in (None, checkpoint.origin) else
                 f" (the checkpoint's origin {checkpoint.origin!r} is not this journal's "
                 f"{origin!r}: is it another journal's?)")
        return CheckpointReport(
            False, size, have, f"the journal's first {size} events are not the ones signed "
            f"(their tree's root differs): an event among positions {proven + 1}..{size} was "
            f"rewritten, and the log tree recomputed with it{other}", after=proven)
    for stored_size, root in sorted(signed.items()):
        if roots[stored_size] != root:
            return CheckpointReport(False, size, have, f"a checkpoint kept in the journal at "
                                    f"size {stored_size} does not match the journal's tree",
                                    position=stored_size)
    return CheckpointReport(True, size, have)


def last_signed(journal: object) -> dict[str, int] | None:
    """The newest checkpoint kept in ``journal`` (a :class:`JournalProtocol`) as
    ``{"size": events it signs, "events": events now}``, or ``None`` when none is kept.

    Only reads the kept row: ``turnlog verify --checkpoint`` is what checks it.
    """
    with journal.log_tree() as tree:  # type: ignore[attr-defined]
        kept = tree.checkpoints()
        return {"size": kept[-1].size, "events": tree.events()} if kept else None
