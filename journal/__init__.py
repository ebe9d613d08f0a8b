"""turnlog"s journal: typed, hash-chained event envelopes in one append-only SQLite file
(or a PostgreSQL database, for many hosts: :class:`PostgresJournal`, opened by
``Journal.open("postgresql://...")``; only that imports psycopg).

Storage only: the journal knows streams, seqs, types, versions and JSON payloads,
nothing about conversations. See ``DESIGN.md``, section "The journal". Every journal
also keeps an RFC 6962 log tree over its events (``log_tree()``), signed as C2SP
checkpoints (:func:`make_checkpoint`, checked by :func:`check_checkpoint`).
"""

from turnlog._lazy import export

#: What this package re-exports, by the module that defines it (imported on first use).
_EXPORTS = {
    "._copy": ("CopyResult", "copy_streams"),
    "._dialect": (
        "POSTGRES", "SQLITE", "Dialect", "PgConnection", "ReadConnection", "connect_sql",
        "dialect_for", "dialect_of",
    ),
    "._hashing": ("GENESIS_HASH", "event_hash"),
    "._heads": ("dump_heads", "load_heads"),
    "._journal": ("Journal", "connect_readonly"),
    "._lineage": ("walk_ancestry",),
    "._logtree": ("LogTree", "StoredCheckpoint", "TreeMismatch"),
    "._note": (
        "Checkpoint", "SignerKey", "VerifierKey", "generate_key", "parse_checkpoint",
        "signer_key", "verifier_key",
    ),
    "._open": ("journal_file", "shown_url"),
    "._postgres": ("PostgresJournal",),
    "._proof": ("CheckpointReport", "check_checkpoint", "last_signed", "make_checkpoint"),
    "._protocol": ("JournalProtocol",),
    "._rows": ("format_timestamp",),
    "._schema": ("APPLICATION_ID", "Extension", "SCHEMA_VERSION"),
    "._sqlite": ("check_existing",),
    "._types": (
        "BadEvent", "Head", "NewEvent", "ProjectionMismatch", "Snapshot", "StoredEvent",
        "StreamAppend", "StreamInfo", "VerifyReport",
    ),
    ".errors": (
        "CheckpointError", "ConcurrencyError", "CorruptEventError", "EventNotFoundError", "HeadsFileError",
        "InvalidAppendError", "InvalidReadError", "JournalConnectionError", "JournalError",
        "JournalLockedError", "JournalNotFoundError", "NotAJournalError",
        "ReadOnlyJournalError", "SchemaTooNewError", "SeqGapError", "StreamNotFoundError",
        "TurnlogError",
    ),
}

__all__ = export(__name__, _EXPORTS)

