"""turnlog's journal: typed, hash-chained event envelopes in one append-only SQLite file
(or a PostgreSQL database, for many hosts: :class:`PostgresJournal`, opened by
``Journal.open("postgresql://...")``; only that imports psycopg).

Storage only: the journal knows streams, seqs, types, versions and JSON payloads,
nothing about conversations. See ``DESIGN.md``, section "The journal".
"""

from ._hashing import GENESIS_HASH, event_hash
from ._heads import dump_heads, load_heads
from ._journal import Journal, connect_readonly
from ._lineage import walk_ancestry
from ._open import shown_url
from ._protocol import JournalProtocol
from ._schema import APPLICATION_ID, SCHEMA_VERSION, Extension
from ._types import (
    BadEvent,
    Head,
    NewEvent,
    ProjectionMismatch,
    Snapshot,
    StoredEvent,
    StreamAppend,
    StreamInfo,
    VerifyReport,
)
from .errors import (
    ConcurrencyError,
    CorruptEventError,
    EventNotFoundError,
    HeadsFileError,
    InvalidAppendError,
    InvalidReadError,
    JournalConnectionError,
    JournalError,
    JournalLockedError,
    JournalNotFoundError,
    NotAJournalError,
    ReadOnlyJournalError,
    SchemaTooNewError,
    SeqGapError,
    StreamNotFoundError,
    TurnlogError,
)

__all__ = [
    "APPLICATION_ID",
    "GENESIS_HASH",
    "SCHEMA_VERSION",
    "BadEvent",
    "ConcurrencyError",
    "CorruptEventError",
    "EventNotFoundError",
    "Extension",
    "Head",
    "HeadsFileError",
    "InvalidAppendError",
    "InvalidReadError",
    "Journal",
    "JournalConnectionError",
    "JournalError",
    "JournalLockedError",
    "JournalNotFoundError",
    "JournalProtocol",
    "NewEvent",
    "NotAJournalError",
    "PostgresJournal",
    "ProjectionMismatch",
    "ReadOnlyJournalError",
    "SchemaTooNewError",
    "SeqGapError",
    "Snapshot",
    "StoredEvent",
    "StreamAppend",
    "StreamInfo",
    "StreamNotFoundError",
    "TurnlogError",
    "VerifyReport",
    "connect_readonly",
    "dump_heads",
    "event_hash",
    "load_heads",
    "shown_url",
    "walk_ancestry",
]


def __getattr__(name: str) -> object:
    """``PostgresJournal`` on first use: the SQLite path never imports psycopg."""
    if name == "PostgresJournal":
        from ._postgres import PostgresJournal

        return PostgresJournal
    raise AttributeError(f"module 'journal' has no attribute {name!r}")
