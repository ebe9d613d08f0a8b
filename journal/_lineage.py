"""The walk up a fork's ancestry: one function for every journal and every caller.

``lineage``, ``verify`` of one stream, the replay scratch's seeding and the
scratch journal itself all need "which streams, up to which seq, make up this
stream's history". They all call :func:`walk_ancestry` with their own way of
reading a fork link, so the rule (root first, stop at a stream without a link,
refuse a loop) is written once.
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import CorruptEventError

__all__ = ["Segment", "find_loop", "walk_ancestry"]

Segment = tuple[str, int | None]
"""``(stream_id, last seq of it in the history)``; ``None`` for the whole stream."""

LinkOf = Callable[[str], "tuple[str, int] | None"]


def _walk(link_of: LinkOf, stream_id: str, to_seq: int | None) -> tuple[list[Segment], str | None]:
    segments: list[Segment] = [(stream_id, to_seq)]
    seen = {stream_id}
    while (link := link_of(segments[-1][0])) is not None:
        parent, parent_seq = link
        if parent in seen:
            culprit = segments[-1][0]  # its link closes the loop
            segments.reverse()
            return segments, culprit
        seen.add(parent)
        segments.append((parent, parent_seq))
    segments.reverse()
    return segments, None


def walk_ancestry(link_of: LinkOf, stream_id: str, to_seq: int | None = None,
                  where: str = "the journal") -> list[Segment]:
    """``[(stream, up to seq), ...]``: the root first, ``(stream_id, to_seq)`` last.

    ``link_of(stream)`` returns the stream's fork link ``(parent, parent_seq)`` or
    ``None``. Fork links that loop raise :class:`CorruptEventError` naming ``where``.
    """
    segments, loop = _walk(link_of, stream_id, to_seq)
    if loop is not None:
        raise CorruptEventError(
            f"{where}: the fork links of stream {stream_id!r} loop through {loop!r}"
        )
    return segments


def find_loop(link_of: LinkOf, stream_id: str) -> tuple[list[Segment], str | None]:
    """The ancestry as far as it goes, and the stream whose link closes a loop (or ``None``)."""
    return _walk(link_of, stream_id, None)
