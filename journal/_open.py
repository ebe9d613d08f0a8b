"""Opening a journal by path or URL: a plain path (or ``:memory:``) or ``sqlite:///path``
opens the SQLite journal; ``postgresql://…`` (or ``postgres://…``) opens the PostgreSQL
journal, importing psycopg only then. The CLI's ``--db`` and ``TURNLOG_DB`` go through here.

The backend is picked by :meth:`Journal.open <journal.Journal.open>`; the URL helpers live in
``_urls`` (re-exported here), so no backend imports this module back.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ._journal import Journal
from ._urls import is_postgres, journal_file, shown_url, sqlite_path

if TYPE_CHECKING:
    from ._protocol import JournalProtocol

__all__ = ["is_postgres", "journal_file", "open_journal", "shown_url", "sqlite_path"]


def open_journal(target: str | os.PathLike[str], **options: Any) -> JournalProtocol:
    """The journal at ``target``: a SQLite file path, ``sqlite:///path`` or ``postgresql://…``.

    ``options`` go to the backend (:class:`~journal.Journal` or
    :class:`~journal.PostgresJournal`): ``clock``, ``extensions`` and ``readonly``
    for both, ``synchronous`` for SQLite, ``max_connections`` and ``timeout`` for
    PostgreSQL.

    >>> from turnlog.journal import Journal
    >>> with Journal.open("sqlite:///:memory:") as j:
    ...     type(j).__name__, j.path
    ('Journal', ':memory:')
    """
    return Journal.open(target, **options)
