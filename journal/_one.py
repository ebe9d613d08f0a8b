"""The one row an aggregate query returns (``max``, ``count``, ``RETURNING`` …), typed."""

from __future__ import annotations

from typing import Any

from .errors import JournalError

__all__ = ["Row", "one_row"]

#: A database row as the drivers return it.
Row = tuple[Any, ...]


def one_row(row: Row | None, where: str) -> Row:
    """``row``, which a query that always yields one row returned; a :class:`JournalError`
    naming ``where`` if the database returned none."""
    if row is None:
        raise JournalError(f"{where}: the database returned no row where one was certain")
    return row
