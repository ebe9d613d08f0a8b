"""Journal targets as paths and URLs: which backend a target names, the file it names, and
how a URL is shown (its secrets masked). Pure string functions, imported by every backend
and by the one place that opens a journal (``_open``), and importing none of them.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote

from .errors import JournalError

__all__ = ["is_postgres", "journal_file", "shown_url", "sqlite_path"]

_POSTGRES = ("postgresql://", "postgres://")
_SQLITE = "sqlite:///"


def is_postgres(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` is a PostgreSQL URL (``postgresql://`` or ``postgres://``)."""
    return isinstance(target, str) and target.startswith(_POSTGRES)


#: query parameters whose values are secrets (libpq's ``password``/``sslpassword``, tokens, keys)
_SECRET_KEYS = re.compile(r"pass|pwd|secret|token|key|auth|sig|credential", re.IGNORECASE)
_MASK = "***"


def shown_url(url: str | os.PathLike[str]) -> str:
    """``url`` as output shows it: its password and secret query values as ``***``.

    The one masking function for every database URL and endpoint turnlog
    prints, in messages, hints, the viewer and reports. A file path is shown
    as it is. The userinfo ends at the last ``@`` before the query, so a
    password written with a raw ``@``, ``/`` or ``#`` is still masked whole.

    >>> shown_url("postgresql://me:sekret@db.example:5432/turnlog?sslmode=require")
    'postgresql://me:***@db.example:5432/turnlog?sslmode=require'
    >>> shown_url("http://user:secret@collector:4318/v1/traces?api_key=k1&x=1")
    'http://user:***@collector:4318/v1/traces?api_key=***&x=1'
    >>> shown_url("postgresql:///turnlog?host=/run/pg&password=sekret")
    'postgresql:///turnlog?host=/run/pg&password=***'
    >>> shown_url("runs/turnlog.db")
    'runs/turnlog.db'
    """
    text = os.fspath(url)
    scheme, sep, rest = text.partition("://")
    if not sep:
        return text
    head, mark, query = rest.partition("?")
    userinfo, at, host = head.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    if at and colon:
        head = f"{user}:{_MASK}@{host}"
    if mark:
        query, hash_, fragment = query.partition("#")
        pairs = [pair.partition("=") for pair in query.split("&")]
        query = "&".join(k + eq + (_MASK if eq and v and _SECRET_KEYS.search(unquote(k)) else v)
                         for k, eq, v in pairs) + hash_ + fragment
    return f"{scheme}://{head}{mark}{query}"


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
