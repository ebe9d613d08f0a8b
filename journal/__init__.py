"""turnlog"s journal: typed, hash-chained event envelopes in one append-only SQLite file
(or a PostgreSQL database, for many hosts: :class:`PostgresJournal`, opened by
``Journal.open("postgresql://...")``; only that imports psycopg).

Storage only: the journal knows streams, seqs, types, versions and JSON payloads,
nothing about conversations. See ``DESIGN.md``, section "The journal". Every journal
also keeps an RFC 6962 log tree over its events (``log_tree()``), signed as C2SP
checkpoints (:func:`make_checkpoint`, checked by :func:`check_checkpoint`).
"""

from typing import TYPE_CHECKING

from turnlog._lazy import export

#: What this package re-exports, by the module that defines it (imported on first use).
_EXPORTS = {
    "._blobs": ("DEFAULT_BLOB_THRESHOLD", "whole_payload"),
    "._copy": ("CopyResult", "check_source", "copy_streams"),
    "._dialect": (
        "POSTGRES", "SQLITE", "Dialect", "PgConnection", "ReadConnection", "connect_sql",
        "dialect_for", "dialect_of",
    ),
    "._hashing": (
        "CHAIN_VERSION", "ERASED_KEY", "GENESIS_HASH", "erased_digest", "erased_payload",
        "event_hash",
    ),
    "._heads": ("dump_heads", "load_heads"),
    "._journal": ("Journal", "connect_readonly", "sqlite_database"),
    "._lineage": ("walk_ancestry",),
    "._logtree": ("LogTree", "StoredCheckpoint", "TreeMismatch"),
    "._note": (
        "Checkpoint", "SignerKey", "VerifierKey", "generate_key", "parse_checkpoint",
        "signer_key", "verifier_key",
    ),
    "._urls": ("journal_file", "shown_url"),
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
        "JournalLockedError", "JournalNotFoundError", "NotAJournalError", "NotErasableError",
        "ReadOnlyJournalError", "SchemaTooNewError", "SeqGapError", "StreamNotFoundError",
        "TurnlogError",
    ),
}

if TYPE_CHECKING:  # the names as type checkers see them (tests/packaging/test_types.py
    # checks that they are _EXPORTS, exactly)
    from ._blobs import DEFAULT_BLOB_THRESHOLD, whole_payload
    from ._copy import CopyResult, check_source, copy_streams
    from ._dialect import (
        POSTGRES, SQLITE, Dialect, PgConnection, ReadConnection, connect_sql, dialect_for,
        dialect_of,
    )
    from ._hashing import (
        CHAIN_VERSION, ERASED_KEY, GENESIS_HASH, erased_digest, erased_payload, event_hash,
    )
    from ._heads import dump_heads, load_heads
    from ._journal import Journal, connect_readonly, sqlite_database
    from ._lineage import walk_ancestry
    from ._logtree import LogTree, StoredCheckpoint, TreeMismatch
    from ._note import (
        Checkpoint, SignerKey, VerifierKey, generate_key, parse_checkpoint, signer_key,
        verifier_key,
    )
    from ._urls import journal_file, shown_url
    from ._postgres import PostgresJournal
    from ._proof import CheckpointReport, check_checkpoint, last_signed, make_checkpoint
    from ._protocol import JournalProtocol
    from ._rows import format_timestamp
    from ._schema import APPLICATION_ID, SCHEMA_VERSION, Extension
    from ._sqlite import check_existing
    from ._types import (
        BadEvent, Head, NewEvent, ProjectionMismatch, Snapshot, StoredEvent, StreamAppend,
        StreamInfo, VerifyReport,
    )
    from .errors import (
        CheckpointError, ConcurrencyError, CorruptEventError, EventNotFoundError, HeadsFileError,
        InvalidAppendError, InvalidReadError, JournalConnectionError, JournalError,
        JournalLockedError, JournalNotFoundError, NotAJournalError, NotErasableError,
        ReadOnlyJournalError,
        SchemaTooNewError, SeqGapError, StreamNotFoundError, TurnlogError,
    )

__all__ = export(__name__, _EXPORTS)

