"""Turning an append's input into rows: input checks, ``recorded_at`` text and the hash chain."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from functools import lru_cache

from ._hashing import CHAIN_VERSION, event_hash
from ._types import NewEvent, StreamAppend
from .errors import ConcurrencyError, InvalidAppendError, InvalidReadError, SeqGapError

__all__ = [
    "chain_rows",
    "check_appends",
    "check_stream_id",
    "clock_stamp",
    "format_timestamp",
    "sql_limit",
    "stale_error",
    "system_stamp",
]

# C0 and C1 controls, DEL, and lone surrogates (which cannot be stored as UTF-8).
_BAD_NAME_CHAR = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")

Row = tuple[str, int, str, int, str, str, str, str]
"""``(stream_id, seq, type, version, recorded_at, payload, prev_hash, hash)``."""


def format_timestamp(moment: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS.ffffffZ`` for an aware datetime, converted to UTC."""
    if moment.tzinfo is not UTC:
        offset = moment.utcoffset()
        if offset is None:
            raise ValueError(f"the journal's clock must return an aware datetime, got {moment!r}")
        if offset:
            moment = moment.astimezone(UTC)
    return moment.isoformat(timespec="microseconds")[:26] + "Z"


def clock_stamp(clock: Callable[[], datetime]) -> str:
    """The current ``recorded_at`` text from an injected clock."""
    return format_timestamp(clock())


def system_stamp() -> str:
    """The current ``recorded_at`` text from the system clock: ``datetime.now(UTC)``, faster."""
    second, micro = divmod(time.time_ns() // 1000, 1_000_000)
    return f"{_second_text(second)}.{micro:06d}Z"


@lru_cache(maxsize=4)
def _second_text(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))


@lru_cache(maxsize=4096)
def _is_name(value: str) -> bool:
    return bool(value) and _BAD_NAME_CHAR.search(value) is None


def _is_timestamp(value: object) -> bool:
    if type(value) is not str or not _TIMESTAMP.fullmatch(value):
        return False
    try:
        datetime.fromisoformat(value[:-1])
    except ValueError:
        return False
    return True


def check_stream_id(stream_id: object) -> None:
    """Refuse a stream id that is not a non-empty str free of control characters."""
    if type(stream_id) is not str or not _is_name(stream_id):
        raise InvalidAppendError(
            f"append to stream {stream_id!r}: the stream id must be a non-empty str "
            "without control characters"
        )


def check_appends(appends: Iterable[StreamAppend]) -> list[StreamAppend]:
    """Check every stream's share of an append before anything is written.

    Each must be a :class:`StreamAppend` or a ``(stream_id, events, expected_seq[,
    parent])`` tuple with a valid stream id, an ``expected_seq`` >= 0, at least one
    event, and a parent only on a first append; no stream may appear twice (give
    its events as one batch). The events themselves are checked by :func:`chain_rows`.
    """
    try:
        items = list(appends)
    except TypeError:
        raise InvalidAppendError(
            f"append_many takes a list of (stream_id, events, expected_seq), got {appends!r}"
        ) from None
    if not items:
        raise InvalidAppendError("append_many: no streams given")
    checked: list[StreamAppend] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        if not isinstance(item, tuple) or len(item) not in (3, 4):
            raise InvalidAppendError(
                f"append_many, item {index}: expected (stream_id, events, expected_seq"
                f"[, parent]), got {item!r}"
            )
        batch = StreamAppend(*item)
        stream_id, events, expected_seq, parent = batch
        check_stream_id(stream_id)
        if type(expected_seq) is not int or expected_seq < 0:
            raise InvalidAppendError(
                f"append to stream {stream_id!r}: expected_seq must be an int >= 0, "
                f"got {expected_seq!r}"
            )
        if not events:
            raise InvalidAppendError(f"append to stream {stream_id!r}: no events given")
        if parent is not None:
            _check_parent(parent, expected_seq, stream_id)
        if stream_id in seen:
            raise InvalidAppendError(
                f"append to stream {stream_id!r}: the stream appears twice in one append_many "
                "(give all its events in one batch)"
            )
        seen.add(stream_id)
        checked.append(batch)
    return checked


def _check_parent(parent: object, expected_seq: int, stream_id: str) -> None:
    where = f"append to stream {stream_id!r}"
    if expected_seq != 0:
        raise InvalidAppendError(
            f"{where}: a fork parent is only allowed on the stream's first append "
            f"(expected_seq=0), got expected_seq={expected_seq}"
        )
    if (
        not isinstance(parent, tuple)
        or len(parent) != 2
        or type(parent[0]) is not str
        or type(parent[1]) is not int
        or parent[1] < 1
    ):
        raise InvalidAppendError(f"{where}: parent must be (stream_id, seq >= 1), got {parent!r}")


def chain_rows(
    prev_hash: str, stream_id: str, expected_seq: int, events: Sequence[NewEvent], now: str,
    chain: int = CHAIN_VERSION,
) -> list[Row]:
    """Check each event and chain it to the one before, under chain version ``chain``.

    Events without their own ``recorded_at`` get ``now``: one append, one moment.
    """
    rows: list[Row] = []
    for index, event in enumerate(events):
        recorded_at = _checked_recorded_at(event, stream_id, index, now)
        seq = expected_seq + 1 + index
        try:
            digest = event_hash(
                prev_hash, stream_id, seq, event.type, event.version, recorded_at, event.payload,
                chain=chain)
        except UnicodeEncodeError:
            raise _invalid(stream_id, index, "the payload is not valid Unicode text") from None
        rows.append(
            (stream_id, seq, event.type, event.version, recorded_at, event.payload, prev_hash, digest)
        )
        prev_hash = digest
    return rows


def _checked_recorded_at(event: object, stream_id: str, index: int, now: str) -> str:
    if not isinstance(event, NewEvent):
        raise _invalid(stream_id, index, f"expected a NewEvent, got {type(event).__name__}")
    if type(event.type) is not str or not _is_name(event.type):
        raise _invalid(
            stream_id, index,
            f"type must be a non-empty str without control characters, got {event.type!r}",
        )
    if type(event.version) is not int or event.version < 1:
        raise _invalid(stream_id, index, f"version must be an int >= 1, got {event.version!r}")
    if type(event.payload) is not str:
        raise _invalid(
            stream_id, index,
            f"payload must be JSON text (str), got {type(event.payload).__name__}",
        )
    if event.recorded_at is None:
        return now
    if not _is_timestamp(event.recorded_at):
        raise _invalid(
            stream_id, index,
            f"recorded_at must look like 2025-01-31T23:59:59.123456Z, got {event.recorded_at!r}",
        )
    return event.recorded_at


def _invalid(stream_id: str, index: int, problem: str) -> InvalidAppendError:
    return InvalidAppendError(f"append to stream {stream_id!r}, event {index}: {problem}")


def stale_error(
    where: str, stream_id: str, expected_seq: int, actual: int
) -> ConcurrencyError | SeqGapError:
    """The error for a wrong ``expected_seq`` when the stream really ends at ``actual``.

    Behind the stream's end: another writer appended first (:class:`ConcurrencyError`).
    Past it: the caller is ahead of the stream (:class:`SeqGapError`, no retry helps).
    """
    if expected_seq > actual:
        return SeqGapError(
            f"append to stream {stream_id!r} in {where}: expected_seq {expected_seq} "
            f"is past the stream's last seq {actual} (seqs are gapless)",
            stream_id=stream_id,
            expected_seq=expected_seq,
            actual_seq=actual,
        )
    return ConcurrencyError(
        f"append to stream {stream_id!r} in {where}: expected seq {expected_seq}, "
        f"but the stream's last seq is {actual} (another writer appended first)",
        stream_id=stream_id,
        expected_seq=expected_seq,
        actual_seq=actual,
    )


def sql_limit(limit: object, action: str) -> int:
    """``limit`` as SQL's LIMIT (-1: none); :class:`InvalidReadError` unless None or an int >= 0."""
    if limit is None:
        return -1
    if type(limit) is not int or limit < 0:
        raise InvalidReadError(f"{action}: limit must be None or an int >= 0, got {limit!r}")
    return limit
