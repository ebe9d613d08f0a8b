"""Copying streams between any two journals (SQLite ↔ PostgreSQL), byte for byte.

Every event keeps its type, version, ``recorded_at`` and payload, so the
destination recomputes exactly the source's hashes; forks keep their links.
Copying again adds nothing (a stream already there is skipped, or only its new
events are added); a destination stream whose history differs is refused, naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from ._protocol import JournalProtocol
from ._types import NewEvent
from .errors import JournalError

__all__ = ["CopyResult", "copy_streams"]

_BATCH = 1000


class CopyResult(msgspec.Struct, frozen=True):
    """What :func:`copy_streams` did: streams ``copied`` (wholly or their new events), ``skipped``
    (already complete), and ``events`` written."""

    copied: list[str]
    skipped: list[str]
    events: int


def copy_streams(source: JournalProtocol, target: JournalProtocol,
                 progress: Callable[[str, int], None] | None = None) -> CopyResult:
    """Copy every stream of ``source`` into ``target``; parents before their forks.

    Raises :class:`JournalError` naming the first stream whose events in ``target``
    differ from ``source``'s (nothing of that stream is written). ``progress(stream,
    events)`` hears each stream copied.
    """
    streams = list(source.streams())
    depth = {s.stream_id: len(source.ancestry(s.stream_id)) for s in streams}
    streams.sort(key=lambda s: (depth[s.stream_id], s.first_recorded_at, s.stream_id))
    copied, skipped, written = [], [], 0
    for info in streams:
        sid = info.stream_id
        have = target.last_seq(sid)
        if have:
            if have > info.last_seq or target.hash_at(sid, have) != source.hash_at(sid, have):
                raise JournalError(
                    f"cannot copy stream {sid!r} from {source.path} to {target.path}: the "
                    f"target's stream differs from the source's at or before seq {have}")
            if have == info.last_seq:
                skipped.append(sid)
                continue
        parent = None if have or info.parent_stream_id is None or info.parent_seq is None else (
            info.parent_stream_id, info.parent_seq)
        count = _copy_one(source, target, sid, have, parent)
        written += count
        copied.append(sid)
        if progress is not None:
            progress(sid, count)
    return CopyResult(copied, skipped, written)


def _copy_one(source: JournalProtocol, target: JournalProtocol, sid: str, have: int,
              parent: tuple[str, int] | None) -> int:
    count = 0
    batch: list[Any] = []
    for event in source.read(sid, have + 1):
        batch.append(event)
        if len(batch) == _BATCH:
            count += _write(target, sid, batch, parent)
            parent, batch = None, []
    if batch:
        count += _write(target, sid, batch, parent)
    return count


def _write(target: JournalProtocol, sid: str, batch: list[Any], parent: tuple[str, int] | None) -> int:
    new = [NewEvent(e.type, e.version, e.payload, recorded_at=e.recorded_at) for e in batch]
    stored = target.append(sid, new, batch[0].seq - 1, parent=parent)
    if [e.hash for e in stored] != [e.hash for e in batch]:  # cannot happen: same fields
        raise JournalError(f"copying stream {sid!r}: the target computed other hashes")
    return len(stored)
