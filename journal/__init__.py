"""turnlog"s journal: typed, hash-chained event envelopes in one append-only SQLite file
(or a PostgreSQL database, for many hosts: :class:`PostgresJournal`, opened by
``Journal.open("postgresql://...")``; only that imports psycopg).

Storage only: the journal knows streams, seqs, types, versions and JSON payloads,
nothing about conversations. See ``DESIGN.md``, section "The journal".
"""

from turnlog._lazy import export

#: What this package re-exports, by the module that defines it (imported on first use).
_EXPORTS = {
    "._hashing": ("GENESIS_HASH", "event_hash"),
    "._heads": ("dump_heads", "load_heads"),
    "._journal": ("Journal", "connect_readonly"),
    "._lineage": ("walk_ancestry",),
    "._open": ("shown_url",),
    "._postgres": ("PostgresJournal",),
    "._protocol": ("JournalProtocol",),
    "._schema": ("APPLICATION_ID", "Extension", "SCHEMA_VERSION"),
    "._types": (
        "BadEvent", "Head", "NewEvent", "ProjectionMismatch", "Snapshot", "StoredEvent",
        "StreamAppend", "StreamInfo", "VerifyReport",
    ),
    ".errors": (
        "ConcurrencyError", "CorruptEventError", "EventNotFoundError", "HeadsFileError",
        "InvalidAppendError", "InvalidReadError", "JournalConnectionError", "JournalError",
        "JournalLockedError", "JournalNotFoundError", "NotAJournalError",
        "ReadOnlyJournalError", "SchemaTooNewError", "SeqGapError", "StreamNotFoundError",
        "TurnlogError",
    ),
}

__all__ = export(__name__, _EXPORTS)

