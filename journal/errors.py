"""turnlog's exception tree. Every error turnlog raises on purpose is a ``TurnlogError``.

    TurnlogError                    root: catch this to catch everything turnlog raises
    ├── JournalError                the journal file or its contents
    │   ├── NotAJournalError        not SQLite, corrupt, truncated, or another program's database
    │   ├── SchemaTooNewError       written by a newer turnlog
    │   ├── ConcurrencyError        ``expected_seq`` was stale: another writer appended first
    │   ├── CorruptEventError       a stored row cannot be decoded (bad JSON, unknown type)
    │   └── StreamNotFoundError     no such stream / conversation
    └── (engine and replay add their own branches: see ``engine.errors``)

sqlite3 errors are translated where they enter turnlog's code; none escapes raw.
"""

from __future__ import annotations

__all__ = [
    "ConcurrencyError",
    "CorruptEventError",
    "JournalError",
    "NotAJournalError",
    "SchemaTooNewError",
    "StreamNotFoundError",
    "TurnlogError",
]


class TurnlogError(Exception):
    """The root of every error turnlog raises on purpose."""


class JournalError(TurnlogError):
    """A problem with the journal file or what is stored in it."""


class NotAJournalError(JournalError):
    """The file is not a turnlog journal (not SQLite, corrupt, truncated, or foreign)."""


class SchemaTooNewError(JournalError):
    """The journal was written by a newer turnlog whose schema this one does not know."""


class ConcurrencyError(JournalError):
    """An append's ``expected_seq`` was stale: another writer appended to the stream first."""


class CorruptEventError(JournalError):
    """A stored event cannot be decoded: invalid JSON, an unknown type, a bad version."""


class StreamNotFoundError(JournalError):
    """No stream (conversation) with that id exists in the journal."""
