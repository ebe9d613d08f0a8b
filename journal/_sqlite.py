"""The sqlite3 boundary: opening a connection, checking a file's header, translating errors."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from .errors import (
    JournalError,
    JournalLockedError,
    JournalNotFoundError,
    NotAJournalError,
    ReadOnlyJournalError,
)

__all__ = [
    "BUSY_TIMEOUT_MS",
    "check_existing",
    "check_header",
    "connect",
    "connect_readonly",
    "is_constraint",
    "translate",
    "unwritable",
]

BUSY_TIMEOUT_MS = 5000

_MAGIC = b"SQLite format 3\x00"
_HEADER_SIZE = 100
_WAL_HEADER_SIZE = 32

_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_READONLY = 8
_SQLITE_CORRUPT = 11
_SQLITE_CANTOPEN = 14
_SQLITE_AUTH = 23
_SQLITE_NOTADB = 26
SQLITE_CONSTRAINT_CHECK = 275
SQLITE_CONSTRAINT_PRIMARYKEY = 1555
SQLITE_CONSTRAINT_UNIQUE = 2067


def check_header(path: str) -> None:
    """Refuse a non-empty file that is not SQLite or that is shorter than its header says.

    Runs before SQLite touches the file, so a foreign file is never written to.
    A missing or empty file passes: it becomes a new journal.
    """
    try:
        size = os.stat(path).st_size
        if size == 0:
            return
        with open(path, "rb") as f:
            header = f.read(_HEADER_SIZE)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise JournalError(f"cannot read journal file {path}: {exc.strerror or exc}") from exc
    if len(header) < _HEADER_SIZE or not header.startswith(_MAGIC):
        raise NotAJournalError(f"{path} is not a SQLite database, so not a turnlog journal")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The page count is only meaningful when the header says so (bytes 92-95 match
    # the change counter); a WAL with frames may legitimately hold pages the main
    # file does not have yet, and SQLite will recover it.
    count_is_valid = header[92:96] == header[24:28]
    if count_is_valid and pages and size < pages * page_size and not _wal_has_frames(path):
        raise NotAJournalError(
            f"{path} is truncated: its header declares {pages} pages of {page_size} bytes "
            f"({pages * page_size} bytes) but the file has {size} bytes"
        )


def check_existing(path: str) -> None:
    """Refuse, before SQLite opens anything, a path that holds no journal to read.

    Missing: :class:`JournalNotFoundError`. Empty (0 bytes): :class:`NotAJournalError`
    (a writer would turn it into a journal; a reader must not). Then :func:`check_header`.
    """
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        raise JournalNotFoundError(f"no journal at {path}: the file does not exist") from None
    except OSError as exc:
        raise JournalError(f"cannot read journal file {path}: {exc.strerror or exc}") from exc
    if size == 0:
        raise NotAJournalError(f"{path} is an empty file, not a turnlog journal")
    check_header(path)


def connect_readonly(path: str, *, check_same_thread: bool = True) -> sqlite3.Connection:
    """A connection to an existing journal that never creates, writes or deletes a file.

    Every statement that would change the file is refused (an authorizer; temporary
    tables and views stay allowed), as :class:`ReadOnlyJournalError`.

    - File and directory writable (a live journal; a writer may be appending): opened
      read-write without create, so reads go through SQLite's WAL index like any
      reader's, and SQLite removes the ``-wal``/``-shm`` it needed when it closes.
    - Otherwise (a 0444 file, a read-only directory or mount), with a ``-wal`` present:
      ``mode=ro``. Where that cannot work (no ``-shm`` and none can be created) and the
      ``-wal`` holds no frames, or without a ``-wal`` at all: ``immutable=1`` (nobody
      can write such a file, so it cannot change under the reader).
    """
    uri = Path(path).resolve().as_uri()
    directory = os.path.dirname(os.path.abspath(path))
    if os.access(path, os.W_OK) and os.access(directory, os.W_OK):
        return _open_uri(path, f"{uri}?mode=rw", check_same_thread)
    if os.path.exists(path + "-wal"):
        try:
            return _open_uri(path, f"{uri}?mode=ro", check_same_thread)
        except JournalError:
            if _wal_has_frames(path):
                raise JournalError(
                    f"{path}: its -wal file holds committed events, and SQLite cannot read "
                    "them without creating a -shm file, which this read-only location forbids"
                ) from None
    return _open_uri(path, f"{uri}?immutable=1", check_same_thread)


_WRITES = frozenset(
    getattr(sqlite3, name)
    for name in (
        "SQLITE_ALTER_TABLE", "SQLITE_ANALYZE", "SQLITE_CREATE_INDEX", "SQLITE_CREATE_TABLE",
        "SQLITE_CREATE_TRIGGER", "SQLITE_CREATE_VIEW", "SQLITE_CREATE_VTABLE", "SQLITE_DELETE",
        "SQLITE_DROP_INDEX", "SQLITE_DROP_TABLE", "SQLITE_DROP_TRIGGER", "SQLITE_DROP_VIEW",
        "SQLITE_DROP_VTABLE", "SQLITE_INSERT", "SQLITE_REINDEX", "SQLITE_UPDATE",
    )
)
# connection settings only (sqlite-utils sets recursive_triggers on every connection)
_READ_PRAGMAS = frozenset({"busy_timeout", "temp_store", "cache_size", "recursive_triggers"})


def _read_only(action: int, arg1: str | None, arg2: str | None, db: str | None,
               trigger: str | None) -> int:
    """The authorizer of a read-only connection: only the temp schema may change."""
    if action == sqlite3.SQLITE_UPDATE and arg1 == "sqlite_master" and db == "main":
        # SQLite reports a virtual table's declaration (the first json_each of a connection)
        # this way; a real UPDATE of sqlite_master needs PRAGMA writable_schema, refused below
        return sqlite3.SQLITE_OK
    if action in _WRITES and db != "temp":
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_ATTACH:  # an attached file could be created or written
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA and arg2 is not None and arg1 not in _READ_PRAGMAS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _open_uri(path: str, uri: str, check_same_thread: bool) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None,
                               timeout=BUSY_TIMEOUT_MS / 1000,
                               check_same_thread=check_same_thread)
    except sqlite3.Error as exc:
        raise translate(exc, path, "cannot open the journal for reading") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.set_authorizer(_read_only)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # reads the header now
    except sqlite3.Error as exc:
        conn.close()
        raise translate(exc, path, "cannot open the journal for reading") from exc
    return conn


def _wal_has_frames(path: str) -> bool:
    try:
        return os.stat(path + "-wal").st_size > _WAL_HEADER_SIZE
    except OSError:
        return False


def connect(path: str) -> sqlite3.Connection:
    """Open ``path`` with driver autocommit (we issue BEGIN/COMMIT ourselves) and a busy timeout."""
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        raise translate(exc, path, "cannot open the journal") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    except sqlite3.Error as exc:
        conn.close()
        raise translate(exc, path, "cannot open the journal") from exc
    return conn


def unwritable(path: str) -> str | None:
    """Why a writer cannot write the journal at ``path`` (a read-only file system, file or
    directory: SQLite creates ``-wal`` and ``-shm`` files beside the journal), or ``None``."""
    directory = os.path.dirname(os.path.abspath(path)) or "."
    exists = os.path.exists(path)
    if not os.path.isdir(directory):
        return None  # SQLite's own words say it: no such directory
    try:
        mount_ro = bool(os.statvfs(path if exists else directory).f_flag & os.ST_RDONLY)
    except OSError:
        mount_ro = False
    if mount_ro:
        return (f"{directory} is on a read-only file system (a read-only mount): nothing can "
                "be written there (read commands still read a journal there)")
    if exists and not os.access(path, os.W_OK):
        return (f"the file {path} is read-only (its permissions); read commands still work, "
                "or make it writable (chmod u+w) to write")
    if not os.access(directory, os.W_OK):
        what = "journal" if exists else "new journal"
        return (f"its directory {directory} is read-only, and SQLite must create the {what} "
                f"and its -wal and -shm files there; make the directory writable or use "
                "another path")
    return None


def is_constraint(exc: sqlite3.Error, *codes: int) -> bool:
    """True when ``exc`` carries one of the extended SQLite result ``codes``."""
    return getattr(exc, "sqlite_errorcode", None) in codes


def translate(exc: sqlite3.Error, path: str, action: str) -> JournalError:
    """Turn a sqlite3 error into the journal error it means, naming the file and what failed."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    if primary in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return JournalLockedError(
            f"{path}: {action}: another connection kept the journal locked for more than "
            f"{BUSY_TIMEOUT_MS} ms ({exc})"
        )
    if primary == _SQLITE_AUTH:
        return ReadOnlyJournalError(f"{path}: {action}: the journal is open read-only ({exc})")
    if primary in (_SQLITE_READONLY, _SQLITE_CANTOPEN) and path != ":memory:":
        where = unwritable(path)
        if where is not None:
            return ReadOnlyJournalError(f"{path}: {action}: cannot write here: {where}")
    if primary == _SQLITE_READONLY:
        return ReadOnlyJournalError(
            f"{path}: {action}: the file or its directory cannot be written ({exc})"
        )
    if primary in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return NotAJournalError(f"{path} is corrupt or not a SQLite database ({action}: {exc})")
    if isinstance(exc, sqlite3.ProgrammingError) and "closed" in str(exc):
        return JournalError(f"{path}: {action}: the journal is closed")
    return JournalError(f"{path}: {action}: {exc}")
