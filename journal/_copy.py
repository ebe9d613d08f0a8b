"""Copying streams between any two journals (SQLite ↔ PostgreSQL), byte for byte.

Every event keeps its type, version, ``recorded_at`` and payload, so the
destination recomputes exactly the source's hashes; forks keep their links.
Between journals of one chain version (``_hashing``) the hashes are the source's, so a
whole copy has the same leaves in the same order and the origin's checkpoints verify
in it; into a journal of another version (an old journal copied into a new one: the
migration to chain version 2) every event is re-chained under the target's version.
Erased events keep their erased payloads (and so their digests). Copying again adds nothing (a stream already there is skipped, or only its new
events are added); a destination stream whose history differs is refused, naming it.
A source whose chains do not verify is refused before anything is written: a copy
recomputes the hashes, so copying a tampered event would launder it into a journal
that verifies. Each batch is checked again against its stored hashes just before
it is written (the source may change meanwhile).

The chain hashes a payload as stored, its large parts as digests (``_blobs``): each
event is written in the form its hash was computed over — its parts taken out at the
target's threshold or the source's, or kept inline (an event written before schema 6) —
so the target's hashes are the source's whatever the two thresholds.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import msgspec

from ._blobs import split
from ._hashing import GENESIS_HASH, event_hash
from ._protocol import JournalProtocol
from ._types import NewEvent, StreamAppend
from .errors import CorruptEventError, JournalError, NotErasableError

__all__ = ["CopyResult", "check_source", "copy_streams"]

_BATCH = 1000
_INLINE = sys.maxsize  # a threshold no part is above: every part kept in the payload


class CopyResult(msgspec.Struct, frozen=True):
    """What :func:`copy_streams` did: streams ``copied`` (wholly or their new events), ``skipped``
    (already complete), and ``events`` written."""

    copied: list[str]
    skipped: list[str]
    events: int


def check_source(source: JournalProtocol) -> None:
    """Refuse a journal to copy from whose chains do not verify (:class:`CorruptEventError`
    naming the first bad event): a copy recomputes every hash and would launder it."""
    bad = source.verify().first_bad
    if bad is not None:
        raise CorruptEventError(
            f"cannot copy from {source.path}: it does not verify (conversation "
            f"{bad.stream_id!r} seq {bad.seq}: {bad.reason}); nothing was copied")


def copy_streams(source: JournalProtocol, target: JournalProtocol,
                 progress: Callable[[str, int], None] | None = None, *,
                 checked: bool = False) -> CopyResult:
    """Copy every stream of ``source`` into ``target``; parents before their forks.

    Into an empty ``target`` (a whole copy) the events are written in the source's
    position order, so the copy has the same leaves in the same order and every
    checkpoint of the source verifies against it (same chain version). Into a target that
    holds events, stream after stream: the copied events' positions differ, so the
    source's checkpoints do not apply to the target's tree (each event's hash still does).

    Raises :class:`JournalError` naming the first stream whose events in ``target``
    differ from ``source``'s (nothing of that stream is written), and
    :class:`CorruptEventError` naming the first event of ``source`` whose chain does
    not verify (:func:`check_source`, skipped when ``checked``: the caller ran it; nothing
    at all is written). ``progress(stream, events)`` hears each stream copied.
    """
    heads = {h.stream_id: (h.seq, h.hash) for h in source.heads()}  # before the check
    if not checked:
        check_source(source)
    streams = list(source.streams())
    if streams and target.last_position() == 0:
        return _copy_whole(source, target, streams, heads, progress)
    depth = {s.stream_id: len(source.ancestry(s.stream_id)) for s in streams}
    streams.sort(key=lambda s: (depth[s.stream_id], s.first_recorded_at, s.stream_id))
    copied, skipped, written = [], [], 0
    for info in streams:
        sid = info.stream_id
        have = target.last_seq(sid)
        if have:
            if have > info.last_seq or (_chain(source) == _chain(target)
                                        and target.hash_at(sid, have) != source.hash_at(sid, have)):
                raise JournalError(
                    f"cannot copy stream {sid!r} from {source.path} to {target.path}: the "
                    f"target's stream differs from the source's at or before seq {have}")
            if have == info.last_seq:
                skipped.append(sid)
                continue
        parent = None if have or info.parent_stream_id is None or info.parent_seq is None else (
            info.parent_stream_id, info.parent_seq)
        count = _copy_one(source, target, sid, have, parent, heads.get(sid))
        written += count
        copied.append(sid)
        if progress is not None:
            progress(sid, count)
    return CopyResult(copied, skipped, written)


def _copy_one(source: JournalProtocol, target: JournalProtocol, sid: str, have: int,
              parent: tuple[str, int] | None, head: tuple[int, str] | None) -> int:
    """Copy the stream's events after ``have``. They are read whole and checked before any is
    written: each links to the one before it (from the target's own last hash), and the
    stream ends at the head verified before the copy began (``head``: seq, hash), so a stream
    edited, even rehashed to its end, while being copied is refused with nothing written."""
    events = list(source.read(sid, have + 1))
    if not events:
        return 0
    chain = _chain(source)
    same = chain == _chain(target)
    forms = _check_chain(sid, events, _link(target if same else source, sid, events[0].seq,
                                            parent), _thresholds(source, target), chain)
    if _chain(target) < 2 and any(e.erased for e in events):
        raise NotErasableError(
            f"cannot copy stream {sid!r} into {target.path}: it holds erased events, and the "
            "target's hash chain (version 1) covers payloads themselves; copy into a new "
            "journal instead; nothing of it was written")
    last = events[-1]
    if head is not None and head[0] == last.seq and head[1] != last.hash:
        raise CorruptEventError(
            f"cannot copy stream {sid!r}: its events changed after the source was verified "
            f"(seq {last.seq} has another hash); nothing of it was written")
    count, start = 0, 0
    while start < len(events):
        end = start + 1  # a batch: up to _BATCH events stored at one threshold
        while end < len(events) and end - start < _BATCH and forms[end] == forms[start]:
            end += 1
        count += _write(target, sid, events[start:end], parent if not start else None,
                        forms[start], same)
        start = end
    return count


def _thresholds(source: JournalProtocol, target: JournalProtocol) -> list[int]:
    """The forms an event may have been stored in, the target's own first."""
    found = [getattr(target, "blob_threshold", _INLINE), getattr(source, "blob_threshold", _INLINE),
             _INLINE]
    return list(dict.fromkeys(found))


def _link(target: JournalProtocol, sid: str, seq: int, parent: tuple[str, int] | None) -> str:
    """The hash the event at ``seq`` must chain to in ``target``."""
    if seq > 1:
        return target.hash_at(sid, seq - 1)
    return target.hash_at(*parent) if parent is not None else GENESIS_HASH


def _chain(journal: JournalProtocol) -> int:
    """The journal's chain version (1 for a backend that does not say)."""
    return getattr(journal, "chain_version", 1)


def _check_chain(sid: str, events: list[Any], link: str, thresholds: list[int],
                 chain: int = 1) -> list[int]:
    """Each event's threshold: the one at which its payload as stored hashes to its hash."""
    forms = []
    prev = link
    for e in events:
        found = None if e.prev_hash != prev else next(
            (t for t in thresholds if event_hash(prev, sid, e.seq, e.type, e.version,
                                                 e.recorded_at, split(e.payload, t)[0],
                                                 chain=chain) == e.hash),
            None)
        if found is None:
            raise CorruptEventError(
                f"cannot copy stream {sid!r}: its event at seq {e.seq} no longer matches "
                "its stored hash (edited while being copied); nothing of it was written")
        forms.append(found)
        prev = e.hash
    return forms


def _write(target: JournalProtocol, sid: str, batch: list[Any], parent: tuple[str, int] | None,
           threshold: int, same: bool = True) -> int:
    new = [NewEvent(e.type, e.version, e.payload, recorded_at=e.recorded_at) for e in batch]
    own = getattr(target, "blob_threshold", None)
    if own is not None:
        target.blob_threshold = threshold  # type: ignore[attr-defined]
    try:
        stored = target.append(sid, new, batch[0].seq - 1, parent=parent)
    finally:
        if own is not None:
            target.blob_threshold = own  # type: ignore[attr-defined]
    if not same:
        return len(stored)  # re-chained under the target's version: new hashes (a migration)
    if [e.hash for e in stored] != [e.hash for e in batch]:  # cannot happen: checked before
        raise JournalError(f"copying stream {sid!r}: the target computed other hashes")
    return len(stored)


def _copy_whole(source: JournalProtocol, target: JournalProtocol, streams: list[Any],
                heads: dict[str, tuple[int, str]],
                progress: Callable[[str, int], None] | None) -> CopyResult:
    """Copy every event into an empty ``target`` in position order, all read and checked
    (each chained to the one before, each stream ending at its verified head) before any
    is written; consecutive events of one stream stored in one form go as one item of an
    ``append_many``."""
    chain, into = _chain(source), _chain(target)
    rows = sorted((e for info in streams for e in source.read(info.stream_id)),
                  key=lambda e: e.position)
    if into < 2 and any(e.erased for e in rows):
        raise NotErasableError(
            f"cannot copy into {target.path}: the source holds erased events, and the "
            "target's hash chain (version 1) covers payloads themselves; nothing was written")
    parents = {s.stream_id: (s.parent_stream_id, s.parent_seq) for s in streams
               if s.parent_stream_id is not None and s.parent_seq is not None}
    points = set(parents.values())
    thresholds = _thresholds(source, target)
    last: dict[str, str] = {}
    ends: dict[str, int] = {}
    kept: dict[tuple[str, int], str] = {}
    runs: list[tuple[list[Any], int]] = []
    for event in rows:  # consecutive events of one stream
        if runs and runs[-1][0][-1].stream_id == event.stream_id:
            runs[-1][0].append(event)
        else:
            runs.append(([event], 0))
    split_runs: list[tuple[list[Any], int]] = []
    for run, _ in runs:
        sid = run[0].stream_id
        if run[0].seq > 1:
            link = last[sid]
        else:
            parent = parents.get(sid)
            link = GENESIS_HASH if parent is None else kept[parent]
        forms = _check_chain(sid, run, link, thresholds, chain)
        start = 0
        for i in range(1, len(run) + 1):  # one form per item
            if i == len(run) or forms[i] != forms[start]:
                split_runs.append((run[start:i], forms[start]))
                start = i
        last[sid], ends[sid] = run[-1].hash, run[-1].seq
        kept.update(((sid, e.seq), e.hash) for e in run if (sid, e.seq) in points)
    for sid, (seq, hash_) in heads.items():
        if ends.get(sid) == seq and last[sid] != hash_:
            raise CorruptEventError(
                f"cannot copy stream {sid!r}: its events changed after the source was "
                f"verified (seq {seq} has another hash); nothing was written")
    counts: dict[str, int] = {}
    batch: list[list[Any]] = []
    form, size = 0, 0
    for run, run_form in split_runs:
        sid = run[0].stream_id
        if batch and (run_form != form or any(other[0].stream_id == sid for other in batch)):
            _write_many(target, batch, parents, form, chain == into)
            batch, size = [], 0
        batch.append(run)
        form = run_form
        counts[sid] = counts.get(sid, 0) + len(run)
        size += len(run)
        if size >= _BATCH:
            _write_many(target, batch, parents, form, chain == into)
            batch, size = [], 0
    if batch:
        _write_many(target, batch, parents, form, chain == into)
    if progress is not None:
        for sid, count in counts.items():
            progress(sid, count)
    return CopyResult(list(counts), [], len(rows))


def _write_many(target: JournalProtocol, runs: list[list[Any]],
                parents: dict[str, tuple[str, int]], threshold: int, same: bool) -> None:
    """Append ``runs`` (each consecutive events of one stream, all stored at ``threshold``)
    in one transaction."""
    own = getattr(target, "blob_threshold", None)
    if own is not None:
        target.blob_threshold = threshold  # type: ignore[attr-defined]
    try:
        stored = target.append_many([
            StreamAppend(run[0].stream_id,
                         [NewEvent(e.type, e.version, e.payload, recorded_at=e.recorded_at)
                          for e in run],
                         run[0].seq - 1,
                         parents.get(run[0].stream_id) if run[0].seq == 1 else None)
            for run in runs])
    finally:
        if own is not None:
            target.blob_threshold = own  # type: ignore[attr-defined]
    if same and [e.hash for w in stored for e in w] != [e.hash for r in runs for e in r]:
        raise JournalError("copying: the target computed other hashes")  # checked before
