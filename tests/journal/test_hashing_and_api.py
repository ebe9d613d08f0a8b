"""The hash chain's exact definition, and the package's public surface."""

from __future__ import annotations

import hashlib
import inspect

from turnlog import journal
from turnlog.journal import GENESIS_HASH, event_hash

FIELDS = ("0" * 64, "conv-1", 1, "user_message", 1, "2025-01-01T00:00:00.000000Z", '{"text":"hé"}')


def _framed(parts: list[str]) -> str:
    encoded = [part.encode("utf-8") for part in parts]
    return hashlib.sha256(b"".join(len(b).to_bytes(8, "big") + b for b in encoded)).hexdigest()


def test_event_hash_is_sha256_over_length_prefixed_utf8_fields():
    prev_hash, stream_id, seq, type_, version, recorded_at, payload = FIELDS
    parts = [prev_hash, stream_id, str(seq), type_, str(version), recorded_at, payload]

    assert event_hash(*FIELDS, chain=1) == _framed(parts)


def test_chain_version_2_hashes_the_payloads_sha256_instead_of_the_payload():
    prev_hash, stream_id, seq, type_, version, recorded_at, payload = FIELDS
    digest = hashlib.sha256(payload.encode()).hexdigest()
    parts = [prev_hash, stream_id, str(seq), type_, str(version), recorded_at, digest]

    assert event_hash(*FIELDS) == event_hash(*FIELDS, chain=2) == _framed(parts)
    assert journal.CHAIN_VERSION == 2


def test_an_erased_payload_hashes_as_the_payload_it_replaced():
    *fields, payload = FIELDS
    erased = journal.erased_payload(hashlib.sha256(payload.encode()).hexdigest(),
                                    '{"type":"user_message"}')

    assert erased.startswith('{"turnlog:erased":"') and erased.endswith(',"type":"user_message"}')
    assert journal.erased_digest(erased) == hashlib.sha256(payload.encode()).hexdigest()
    assert event_hash(*fields, erased) == event_hash(*FIELDS)
    assert journal.erased_digest(payload) is None
    assert event_hash(*fields, erased, chain=1) != event_hash(*FIELDS, chain=1)


def test_event_hash_matches_a_pinned_vector():
    # Computed outside Python (sha256sum over the framed bytes): other programs rely on it.
    assert event_hash(*FIELDS, chain=1) == (
        "72d07dfdb89eb1625aa50c288677f6448768547bf51dcc105f873dde69aa1426")


def test_length_prefixes_keep_field_boundaries_apart():
    assert event_hash(GENESIS_HASH, "ab", 1, "c", 1, "t", "{}") != event_hash(
        GENESIS_HASH, "a", 1, "bc", 1, "t", "{}"
    )


def test_genesis_hash_is_64_zeros():
    assert GENESIS_HASH == "0" * 64


def test_public_names_are_documented():
    # the order of __all__ is checked for every package in tests/test_public_api.py
    for name in journal.__all__:
        value = getattr(journal, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"{name} has no docstring"


def test_every_public_journal_method_is_documented():
    for name, member in inspect.getmembers(journal.Journal, inspect.isfunction):
        if not name.startswith("_"):
            assert inspect.getdoc(member), f"Journal.{name} has no docstring"


def test_every_journal_error_is_a_turnlog_error_and_drawn_in_the_tree():
    tree = journal.errors.__doc__
    for name in journal.errors.__all__:
        error = getattr(journal.errors, name)
        assert issubclass(error, journal.TurnlogError)
        assert name in tree


def test_the_protocols_examples_hold():
    import doctest

    from turnlog.journal import _protocol

    result = doctest.testmod(_protocol)
    assert result.attempted >= 10 and result.failed == 0


def test_the_protocol_names_every_public_method_of_the_sqlite_journal():
    own = {name for name, member in inspect.getmembers(journal.Journal, inspect.isfunction)
           if not name.startswith("_")
           and not isinstance(inspect.getattr_static(journal.Journal, name), staticmethod)}
    declared = {name for name in vars(journal.JournalProtocol) if not name.startswith("_")}
    assert own == declared - {"path", "readonly", "chain_version"}


def test_open_is_a_constructor_not_a_journal_operation():
    assert isinstance(inspect.getattr_static(journal.Journal, "open"), staticmethod)
    assert "open" not in vars(journal.JournalProtocol)
