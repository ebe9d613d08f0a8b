"""turnlog's exception tree. Every error turnlog raises on purpose is a ``TurnlogError``.

    TurnlogError                root: catch this to catch everything turnlog raises
    ├── JournalError            the journal file or its contents, a closed journal, I/O
    │   ├── JournalNotFoundError no journal file at that path (when only reading)
    │   ├── ReadOnlyJournalError a write through a journal opened read-only
    │   ├── NotAJournalError    not SQLite, corrupt, truncated, empty when reading, or
    │   │                       another program's database
    │   ├── SchemaTooNewError   written by a newer turnlog (core schema or an extension)
    │   ├── JournalLockedError  another connection held the write lock past busy_timeout
    │   ├── JournalConnectionError the database server cannot be reached or the connection
    │   │                       broke (PostgreSQL); an append either committed or not
    │   ├── ConcurrencyError    ``expected_seq`` was stale: another writer appended first
    │   ├── InvalidAppendError  an append refused before writing: bad stream id, type,
    │   │   │                   version, timestamp, payload JSON or arguments
    │   │   └── SeqGapError     ``expected_seq`` past the stream's end (no retry helps)
    │   ├── InvalidReadError    a read refused for its arguments (a ``limit`` below 0)
    │   ├── CorruptEventError   a stored row cannot be decoded (bad JSON, unknown type),
    │   │                       or fork links that loop
    │   ├── StreamNotFoundError no such stream / conversation
    │   ├── EventNotFoundError  no event at that (stream, seq), e.g. a fork point too far
    │   ├── NotErasableError    an erasure refused: a chain that hashes payloads (version 1),
    │   │                       an erasure record named, readers that kept the WAL
    │   ├── HeadsFileError      a saved heads file cannot be read or has the wrong shape
    │   └── CheckpointError     a key or signed checkpoint that is malformed (``tampered``
    │                           False) or does not hold (``tampered`` True)
    └── (engine and replay add their own branches: see ``engine.errors``)

sqlite3 and psycopg errors are translated where they enter turnlog's code; none escapes raw.
"""

from __future__ import annotations

__all__ = [
    "CheckpointError",
    "ConcurrencyError",
    "CorruptEventError",
    "EventNotFoundError",
    "HeadsFileError",
    "InvalidAppendError",
    "InvalidReadError",
    "JournalConnectionError",
    "JournalError",
    "JournalLockedError",
    "JournalNotFoundError",
    "NotAJournalError",
    "NotErasableError",
    "ReadOnlyJournalError",
    "SchemaTooNewError",
    "SeqGapError",
    "StreamNotFoundError",
    "TurnlogError",
]


class TurnlogError(Exception):
    """The root of every error turnlog raises on purpose."""


class JournalError(TurnlogError):
    """A problem with the journal file or what is stored in it."""


class JournalNotFoundError(JournalError):
    """No journal file at that path, and the caller only reads (nothing is created)."""


class ReadOnlyJournalError(JournalError):
    """A write was asked of a journal opened read-only; nothing was written."""


class NotAJournalError(JournalError):
    """The file is not a turnlog journal (not SQLite, corrupt, truncated, or foreign)."""


class SchemaTooNewError(JournalError):
    """The journal was written by a newer turnlog whose schema this one does not know."""


class JournalLockedError(JournalError):
    """Another connection held the journal's write lock for longer than ``busy_timeout``."""


class JournalConnectionError(JournalError):
    """The journal's database server cannot be reached, or the connection broke mid-call.

    An append interrupted so either committed completely or not at all: retrying it
    with the same ``expected_seq`` is safe (if it had committed, the retry raises
    :class:`ConcurrencyError` and the stream holds the events once).
    """


class ConcurrencyError(JournalError):
    """An append's ``expected_seq`` was stale: another writer appended to the stream first.

    ``stream_id``, ``expected_seq`` and ``actual_seq`` (the stream's last seq when the
    append was refused) let a caller retry without another query.
    """

    def __init__(
        self,
        message: str,
        *,
        stream_id: str | None = None,
        expected_seq: int | None = None,
        actual_seq: int | None = None,
    ) -> None:
        super().__init__(message)
        self.stream_id = stream_id
        self.expected_seq = expected_seq
        self.actual_seq = actual_seq


class InvalidAppendError(JournalError):
    """An append was refused before anything was written: its input is malformed."""


class InvalidReadError(JournalError):
    """A read was refused for its arguments (a ``limit`` that is not an int >= 0)."""


class SeqGapError(InvalidAppendError):
    """An append's ``expected_seq`` is past the stream's last seq: the caller is ahead.

    Nobody else appended, so retrying cannot help (unlike :class:`ConcurrencyError`).
    ``stream_id``, ``expected_seq`` and ``actual_seq`` say where the stream really ends.
    """

    def __init__(
        self, message: str, *, stream_id: str, expected_seq: int, actual_seq: int
    ) -> None:
        super().__init__(message)
        self.stream_id = stream_id
        self.expected_seq = expected_seq
        self.actual_seq = actual_seq


class CorruptEventError(JournalError):
    """A stored event cannot be decoded: invalid JSON, an unknown type, a bad version."""


class StreamNotFoundError(JournalError):
    """No stream (conversation) with that id exists in the journal."""


class EventNotFoundError(JournalError):
    """No event at that (stream, seq): the stream is missing or ends before that seq."""


class NotErasableError(JournalError):
    """An erasure refused before anything changed: the journal's chain hashes payloads
    themselves (chain version 1), or an event named is an erasure's own record."""


class HeadsFileError(JournalError):
    """A saved heads file cannot be read, is not JSON, or does not have the heads shape."""


class CheckpointError(JournalError):
    """A signer or verifier key, or a signed checkpoint, that is malformed or does not hold.

    ``tampered`` is False for bad input (not a key, not a checkpoint: the command line
    exits 2) and True when the input is well formed but does not hold (a signature
    that fails, a journal that differs from what was signed: exit 1).
    """

    def __init__(self, message: str, *, tampered: bool = False) -> None:
        super().__init__(message)
        self.tampered = tampered
