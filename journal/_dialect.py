"""SQL over a journal in each backend's dialect: SQLite (the embedded journal) and PostgreSQL.

Each backend provides its :class:`Dialect` (:func:`dialect_for` a path or URL,
:func:`dialect_of` a connection) and its SQL connection (:func:`connect_sql`), so
the engine's views, the audit's projections and every read query are written once, as
Python that renders SQL through a :class:`Dialect`, and nothing above the journal asks
which database it is on. Only what the two databases spell differently lives here,
side by side:

===================  ====================================  ============================================
                     SQLite                                PostgreSQL
===================  ====================================  ============================================
JSON value at a path ``json_extract(x, '$.a.b')``          ``json_extract_path_text(x::json, 'a', 'b')``
array elements       ``json_each(x, '$.parts') AS p``      ``json_array_elements(...) AS p(value)``
text aggregate       ``group_concat(x, '')``               ``string_agg(x, '')``
array of arrays      ``json_group_array(json_array(…))``   ``json_agg(json_build_array(…))::text``
substring test       ``instr(lower(h), lower(n))``         ``strpos(lower(h), lower(n)) > 0``
temporary schema     ``temp``                              ``pg_temp``
table exists         ``sqlite_master``                     ``to_regclass``
===================  ====================================  ============================================

PostgreSQL's ``json_extract_path_text`` (``#>>``, without braces that would
clash with ``str.format`` templates) returns text, so a JSON number is cast to ``numeric`` (the
read connection loads a whole numeric as ``int``, others as ``float``, as SQLite
returns them) and a JSON boolean to ``boolean``. ``json`` (not ``jsonb``) keeps
a sub-object's text as written, so ``arguments`` reads the same on both.

The SQLite rendering is exactly the SQL the engine always wrote (the views'
definitions in existing journals stay valid). Statements keep SQLite's ``?``
placeholders; :class:`PgConnection` turns them into psycopg's ``%s``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from ._urls import is_postgres, shown_url, sqlite_path

if TYPE_CHECKING:
    from ._schema import Extension

__all__ = ["POSTGRES", "SQLITE", "Dialect", "PgConnection", "ReadConnection", "connect_sql",
           "dialect_for", "dialect_of", "pg_placeholders"]

Kind = Literal["text", "number", "bool"]


class Dialect(msgspec.Struct, frozen=True):
    """How one database spells the few things the engine's SQL needs beyond the standard."""

    name: str
    temp: str
    """The schema of temporary tables (``temp.x`` / ``pg_temp.x``)."""

    def json(self, expr: str, path: str, kind: Kind = "text") -> str:
        """The value at ``path`` (``$.a.b`` or ``$[0]``) of the JSON text ``expr``."""
        if self.name == "sqlite":
            return f"json_extract({expr}, '{path}')"
        keys = ", ".join(f"'{k}'" for k in _keys(path))
        value = f"json_extract_path_text({expr}::json, {keys})"
        return {"text": value, "number": f"{value}::numeric", "bool": f"{value}::boolean"}[kind]

    def each(self, expr: str, path: str | None, alias: str) -> str:
        """A FROM item: every element of the JSON array at ``path`` of ``expr``, as
        ``alias.value``."""
        if self.name == "sqlite":
            return (f"json_each({expr}, '{path}') AS {alias}" if path is not None
                    else f"json_each({expr}) AS {alias}")
        keys = "".join(f", '{k}'" for k in _keys(path or ""))
        array = f"json_extract_path({expr}::json{keys})" if keys else f"{expr}::json"
        return f"json_array_elements({array}) AS {alias}(value)"

    def scan(self, table: str, alias: str) -> str:
        """A FROM item that reads ``table`` whole, in its stored order, and no index.

        For a query that keeps most rows of a few types: SQLite's planner would walk a
        type index and fetch each row from the table apart, several times slower than the
        scan. PostgreSQL chooses by its statistics.
        """
        if self.name == "sqlite":
            return f"{table} AS {alias} NOT INDEXED"
        return f"{table} AS {alias}"

    @property
    def sorts_as_python(self) -> bool:
        """Whether ``ORDER BY`` of a text column gives Python's ``sorted`` order (SQLite's
        BINARY collation: by code point), so rows may be ordered after they are read."""
        return self.name == "sqlite"

    def concat(self, expr: str, separator: str) -> str:
        """The aggregate joining the texts ``expr`` with ``separator`` (a SQL literal)."""
        fn = "group_concat" if self.name == "sqlite" else "string_agg"
        return f"{fn}({expr}, {separator})"

    def array_of_arrays(self, *items: str) -> str:
        """The aggregate JSON text ``[[a, b, …], …]`` (NULL or ``'[]'`` over no rows)."""
        listed = ",\n        ".join(items)
        if self.name == "sqlite":
            return f"json_group_array(json_array(\n        {listed}))"
        return f"json_agg(json_build_array(\n        {listed}))::text"

    def hex(self, column: str) -> str:
        """A hash column as its 64-character lower-case hex text (SQLite stores the 32
        bytes; an edited value that is not bytes is shown as it is)."""
        if self.name == "sqlite":
            return (f"CASE WHEN typeof({column}) = 'blob' THEN lower(hex({column})) "
                    f"ELSE {column} END")
        return column

    def flag(self, condition: str) -> str:
        """A condition as a value that mixes with 0 and 1 in a CASE."""
        return condition if self.name == "sqlite" else f"({condition})::int"

    def contains(self, haystack: str, needle: str) -> str:
        """Whether ``needle`` occurs in ``haystack``, ignoring case (a condition)."""
        if self.name == "sqlite":
            return f"instr(lower({haystack}), lower({needle}))"
        return f"strpos(lower({haystack}), lower({needle})) > 0"

    def table_exists(self) -> str:
        """A query of one row when the table or view named ``?`` exists, none otherwise."""
        if self.name == "sqlite":
            return "SELECT 1 FROM sqlite_master WHERE name = ? AND type IN ('table', 'view')"
        return "SELECT 1 WHERE to_regclass(?) IS NOT NULL"


def _keys(path: str) -> list[str]:
    """``$.a.b`` -> ``["a", "b"]``; ``$[0]`` -> ``["0"]``."""
    rest = path.removeprefix("$")
    return [k for k in rest.replace("[", ".").replace("]", "").split(".") if k]


SQLITE = Dialect(name="sqlite", temp="temp")
"""The embedded journal's dialect."""

POSTGRES = Dialect(name="postgresql", temp="pg_temp")
"""The scale-out journal's dialect."""


def dialect_of(conn: Any) -> Dialect:
    """The dialect of a connection from :func:`connect_sql` (or a plain ``sqlite3`` one)."""
    return POSTGRES if isinstance(conn, PgConnection) else SQLITE


def dialect_for(target: str | os.PathLike[str]) -> Dialect:
    """The dialect of the backend a journal path or URL names (nothing is opened)."""
    return POSTGRES if is_postgres(target) else SQLITE


def connect_sql(target: str | os.PathLike[str], *, readonly: bool = True,
                extensions: Sequence[Extension] = (),
                check_same_thread: bool = True) -> ReadConnection:
    """A connection for SQL over the existing journal at ``target`` (a path or URL), in its
    backend's dialect (:func:`dialect_of` tells which).

    ``readonly``: SQLite's is :func:`~turnlog.journal.connect_readonly` (nothing is
    created, migrated or written; ``extensions`` are the schema extensions it may find);
    otherwise a plain autocommit ``sqlite3`` connection to the file. PostgreSQL's is a
    :class:`PgConnection` (autocommit) either way. ``BEGIN``/``COMMIT`` work on both.
    """
    if is_postgres(target):
        url = os.fspath(target)
        return PgConnection.connect(url, shown_url(url))
    if readonly:
        from ._journal import connect_readonly

        return connect_readonly(target, extensions=extensions,
                                check_same_thread=check_same_thread)
    return sqlite3.connect(sqlite_path(target), timeout=10, isolation_level=None,
                           check_same_thread=check_same_thread)


def pg_placeholders(sql: str) -> str:
    """``sql`` with SQLite's ``?`` placeholders as psycopg's ``%s`` (and ``%`` escaped),
    leaving string literals alone.

    >>> pg_placeholders("SELECT '?%', x FROM t WHERE a = ? AND b LIKE '%'")
    "SELECT '?%%', x FROM t WHERE a = %s AND b LIKE '%%'"
    """
    parts = sql.replace("%", "%%").split("'")
    return "'".join(p.replace("?", "%s") if i % 2 == 0 else p for i, p in enumerate(parts))


class PgConnection:
    """A psycopg connection to a PostgreSQL journal that reads like ``sqlite3.Connection``.

    ``execute(sql, params)`` takes the engine's ``?`` placeholders and returns a
    cursor (``fetchone``, ``fetchall``, iteration); PostgreSQL's errors leave as
    :class:`~turnlog.journal.JournalError`. Numbers come back as SQLite gives them: a
    whole ``numeric`` as ``int``, any other as ``float``.
    """

    def __init__(self, conn: Any, where: str) -> None:
        import psycopg

        from turnlog.journal._pg import translate

        self._translate = translate
        self._error = psycopg.Error
        self.conn = conn
        self.where = where

    @classmethod
    def connect(cls, url: str, where: str) -> PgConnection:
        """A new autocommit connection to ``url`` (``where``: the URL as messages show it)."""
        import psycopg

        from turnlog.journal._pg import translate

        try:
            conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise translate(exc, where, "opening the journal") from exc
        return cls(conn, where)

    def execute(self, sql: str, params: Any = ()) -> Any:
        """Run one statement; its cursor."""
        cursor = self.conn.cursor()
        cursor.adapters.register_loader("numeric", _NUMERIC[0] if _NUMERIC else _numeric_loader())
        try:
            return cursor.execute(pg_placeholders(sql), tuple(params))
        except self._error as exc:
            raise self._translate(exc, self.where, "reading the journal") from exc

    def listen(self, channel: str) -> None:
        """Hear the journal's append notifications on ``channel`` (``PostgresJournal.channel``)."""
        self.execute(f'LISTEN "{channel}"')

    def wait_notified(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for an append notification (after :meth:`listen`); whether
        one came.

        psycopg keeps the notifications it reads during other queries for the next wait,
        so none is lost between a read and the wait.
        """
        heard = False
        try:
            for _ in self.conn.notifies(timeout=seconds, stop_after=1):
                heard = True
        except self._error as exc:
            raise self._translate(exc, self.where, "waiting for appends") from exc
        return heard

    def close(self) -> None:
        """Close the connection (safe twice)."""
        self.conn.close()


_NUMERIC: list[type] = []


def _numeric_loader() -> type:
    from psycopg.adapt import Loader

    class NumericLoader(Loader):
        def load(self, data: Any) -> int | float:
            text = bytes(data).decode()
            try:
                return int(text)
            except ValueError:
                return float(text)

    _NUMERIC.append(NumericLoader)
    return NumericLoader


#: What a read connection is: a SQLite connection or a :class:`PgConnection`.
ReadConnection = sqlite3.Connection | PgConnection
