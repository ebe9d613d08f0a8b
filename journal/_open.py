"""Opening a journal by path or URL: the one place that picks the backend.

A plain path (or ``:memory:``) or ``sqlite:///path`` opens the SQLite journal;
``postgresql://…`` (or ``postgres://…``) opens the PostgreSQL journal, importing
psycopg only then. The CLI's ``--db`` and ``TURNLOG_DB`` go through here.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit
from typing import TYPE_CHECKING, Any

from .errors import JournalError

if TYPE_CHECKING:
    from ._protocol import JournalProtocol

__all__ = ["is_postgres", "journal_file", "open_journal", "shown_url", "sqlite_path"]

_POSTGRES = ("postgresql://", "postgres://")
_SQLITE = "sqlite:///"


def is_postgres(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` is a PostgreSQL URL (``postgresql://`` or ``postgres://``)."""
    return isinstance(target, str) and target.startswith(_POSTGRES)


def shown_url(url: str) -> str:
    """``url`` as messages show it: any password replaced by ``***``."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    if password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def sqlite_path(target: str | os.PathLike[str]) -> str:
    """The file path a SQLite target names: ``sqlite:///x.db`` is ``x.db``, ``sqlite:////tmp/x.db``
    is ``/tmp/x.db``; a plain path is itself. Any other ``scheme://`` is refused."""
    text = os.fspath(target)
    if text.startswith(_SQLITE):
        return text[len(_SQLITE):]
    scheme, sep, _ = text.partition("://")
    if sep and scheme.isascii() and scheme.replace("+", "").isalpha():
        raise JournalError(
            f"{text}: unknown journal URL scheme {scheme!r} (use a file path, "
            "sqlite:///path or postgresql://user@host/database)")
    return text


def journal_file(target: str | os.PathLike[str]) -> str | None:
    """The file the journal at ``target`` is stored in (``:memory:`` for an in-memory one),
    or None when ``target`` names a database server (a PostgreSQL URL).

    >>> journal_file("sqlite:///x.db"), journal_file("postgresql://host/db")
    ('x.db', None)
    """
    return None if is_postgres(target) else sqlite_path(target)


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
    if is_postgres(target):
        from ._postgres import PostgresJournal

        return PostgresJournal(os.fspath(target), **options)
    from ._journal import Journal

    return Journal(sqlite_path(target), **options)
