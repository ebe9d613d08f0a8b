"""The psycopg boundary: the connection pool and error translation.

Only the PostgreSQL journal imports this module (and so psycopg): opening a
SQLite journal never does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import psycopg_pool
from psycopg import errors as pg_errors

from .errors import (
    JournalConnectionError,
    JournalError,
    JournalNotFoundError,
    ReadOnlyJournalError,
)

__all__ = ["Pool", "translate"]

def translate(exc: psycopg.Error | psycopg_pool.PoolTimeout, where: str,
              action: str) -> JournalError:
    """The :class:`JournalError` for a psycopg error met while doing ``action``."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if isinstance(exc, pg_errors.InvalidCatalogName):
        return JournalNotFoundError(f"{action}: no journal at {where}: {first}")
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
        return ReadOnlyJournalError(f"{action}: {where} is open read-only")
    if isinstance(exc, psycopg_pool.PoolTimeout):
        return JournalConnectionError(
            f"{action}: no connection to {where} became available in time "
            "(the server is down, unreachable or out of connections)")
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return JournalConnectionError(f"{action}: cannot reach the journal at {where}: {first}")
    return JournalError(f"{action} in {where}: {first}")


class Pool:
    """A psycopg connection pool (autocommit connections) that speaks turnlog's errors.

    The first connection is made at once, so an unreachable server or a missing
    database is reported when the journal is opened, with the server's own words.
    A connection that broke is discarded when returned; the next call gets a new one.
    """

    def __init__(self, url: str, where: str, *, max_size: int, timeout: float,
                 readonly: bool) -> None:
        self.where = where
        self.timeout = timeout
        self._readonly = readonly
        try:
            psycopg.connect(url, connect_timeout=max(1, int(timeout)), autocommit=True).close()
        except psycopg.Error as exc:
            raise translate(exc, where, "opening the journal") from exc
        self._pool: psycopg_pool.ConnectionPool | None = psycopg_pool.ConnectionPool(
            url, min_size=1, max_size=max(1, max_size), open=False, timeout=timeout,
            kwargs={"autocommit": True, "connect_timeout": max(1, int(timeout))},
            configure=self._configure, name=f"turnlog {where}")
        try:
            self._pool.open(wait=True, timeout=timeout)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            self._pool.close()
            raise translate(exc, where, "opening the journal") from exc

    def _configure(self, conn: psycopg.Connection) -> None:
        if self._readonly:
            conn.execute("SET default_transaction_read_only = on")

    @contextmanager
    def connection(self, action: str) -> Iterator[psycopg.Connection]:
        """A pooled connection for ``action``; psycopg errors leave as :class:`JournalError`."""
        pool = self._pool
        if pool is None:
            raise JournalError(f"{action}: the journal at {self.where} is closed")
        try:
            with pool.connection(timeout=self.timeout) as conn:
                yield conn
        except psycopg_pool.PoolClosed:
            raise JournalError(f"{action}: the journal at {self.where} is closed") from None
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise translate(exc, self.where, action) from exc

    def close(self) -> None:
        """Close every connection; safe twice and from any thread."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close(timeout=5)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._pool is None
