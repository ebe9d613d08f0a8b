"""Erasure, shared by both backends: which payloads change, into what, and what is refused.

An erasure replaces an event's payload by an erased one (``_hashing.erased_payload``)
that keeps the original's SHA-256, so under chain version 2 the event's hash, the log
tree, every checkpoint and every proof stay as they were. The same transaction appends
an ``erasure_recorded`` event naming the erased seqs (``verify`` requires it) and drops
the snapshots folded from the old content; each backend then removes the old bytes from
its files (SQLite: ``secure_delete`` and a WAL checkpoint; PostgreSQL: ``VACUUM FULL``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from hashlib import sha256

from ._blobs import refs
from ._hashing import erased_digest, erased_payload
from ._types import NewEvent
from .errors import ConcurrencyError, EventNotFoundError, InvalidAppendError, NotErasableError

__all__ = ["COPIES", "DROP_SNAPSHOTS", "ERASURE_TYPE", "Record", "check_chain", "check_head", "drop_copies",
           "erasures", "parts_of", "recorded"]

ERASURE_TYPE = "erasure_recorded"
"""The event type of an erasure's record; its payload's ``seqs`` lists the erased seqs."""

Record = Callable[[Mapping[int, str]], NewEvent]
"""Builds the ``erasure_recorded`` event for the seqs actually erased: it gets, in seq
order, each erased seq and the hex SHA-256 of its erased payload as stored (iterating
it gives the seqs). The record, itself chained, names the seqs in ``seqs`` and should
keep those digests in ``kept`` (same order): the chain covers an erased payload only
through the original's digest, so ``kept`` is what lets ``verify`` find an erased
payload whose remaining structure was edited after the erasure."""

DROP_SNAPSHOTS = (
    "WITH RECURSIVE d(s) AS (SELECT {p} UNION SELECT l.stream_id FROM stream_links AS l "
    "JOIN d ON l.parent_stream_id = d.s) DELETE FROM snapshots WHERE stream_id IN (SELECT s FROM d)")
"""Deletes the snapshots of a stream and of every fork of it (``{p}``: the placeholder)."""


COPIES = (("replay_reports", "conversation_id"),)
"""Tables other layers keep in the journal's file whose rows copy a conversation's content
(``replay_reports``: a divergence's recorded and re-run events and its request diff), with
the column naming the conversation: an erasure deletes the rows of the stream and of every
fork of it (where the table exists), in the same transaction."""


def drop_copies(table: str, column: str, placeholder: str) -> str:
    """Deletes ``table``'s rows of a stream and of every fork of it (see :data:`COPIES`)."""
    return DROP_SNAPSHOTS.replace("DELETE FROM snapshots WHERE stream_id",
                                  f"DELETE FROM {table} WHERE {column}").format(p=placeholder)


def check_head(stream_id: str, expected_seq: int | None, last: int) -> None:
    """Refuse the erasure when the stream's last seq is no longer ``expected_seq`` (what the
    caller decided on: ``prune`` read no legal hold up to it), inside the transaction."""
    if expected_seq is not None and last != expected_seq:
        raise ConcurrencyError(
            f"erase in stream {stream_id!r}: expected its last seq to be {expected_seq}, but it "
            f"is {last} (another writer appended meanwhile, a legal hold say); nothing was "
            "erased: read the stream again before erasing", stream_id=stream_id,
            expected_seq=expected_seq, actual_seq=last)


def check_chain(path: str, chain: int, stream_id: str) -> None:
    """Refuse erasing in a journal whose chain hashes the payloads themselves."""
    if chain < 2:
        raise NotErasableError(
            f"cannot erase in conversation {stream_id!r}: {path} was written under hash chain "
            "version 1, whose hashes cover the payloads themselves, so erasing would break "
            "every hash and proof after it. Migrate it: turnlog copy --db OLD NEW writes every "
            "conversation into a new journal under chain version 2 (new hashes; sign a "
            "checkpoint of the old journal before and of the new one after, see "
            "docs/erasure-design.md), then erase there and retire the old file")


def erasures(path: str, stream_id: str, stored: Iterable[tuple[int, str, str]],
             kept: Mapping[int, str]) -> list[tuple[int, str]]:
    """``(seq, erased payload)`` for each seq of ``kept`` not erased yet, in seq order.

    ``stored`` are the stream's ``(seq, type, payload)`` at those seqs; ``kept[seq]`` is the
    JSON object the erased payload keeps besides the digest. A seq with no event is an
    :class:`EventNotFoundError`; an ``erasure_recorded`` event, a :class:`NotErasableError`.
    """
    found = {seq: (type_, payload) for seq, type_, payload in stored}
    changes = []
    for seq in sorted(kept):
        if seq not in found:
            raise EventNotFoundError(f"cannot erase conversation {stream_id!r} seq {seq}: "
                                     f"{path} has no such event")
        type_, payload = found[seq]
        if type_ == ERASURE_TYPE:
            raise NotErasableError(f"cannot erase conversation {stream_id!r} seq {seq}: it is "
                                   "the record of an erasure, which verify needs")
        if erased_digest(payload) is not None:
            continue
        try:
            new = erased_payload(sha256(payload.encode()).hexdigest(), kept[seq])
        except ValueError as exc:
            raise InvalidAppendError(f"erase conversation {stream_id!r} seq {seq}: {exc}") from None
        changes.append((seq, new))
    return changes


def recorded(changes: Iterable[tuple[int, str]]) -> dict[int, str]:
    """What :data:`Record` gets for ``changes`` (``(seq, erased payload)``): seq -> the
    hex SHA-256 of the erased payload."""
    return {seq: sha256(payload.encode()).hexdigest() for seq, payload in changes}


def parts_of(stored: Iterable[tuple[int, str, str]], seqs: Iterable[int]) -> set[str]:
    """The digests of the parts (``blobs``) the payloads at ``seqs`` reference: once those
    payloads are erased, each part no other event references is deleted with them."""
    wanted = set(seqs)
    return {digest for seq, _type, payload in stored if seq in wanted
            for digest, _size, _b64 in refs(payload)}
