"""Tamper evidence on PostgreSQL: a superuser drops the triggers and edits rows behind the
journal's back; ``verify`` names the exact stream and seq, as on SQLite (``test_tampering``)."""

from __future__ import annotations

import psycopg
import pytest

from turnlog.journal import BadEvent, CorruptEventError, Journal, StreamNotFoundError, event_hash
from tests.pgcluster import fresh_url

from .conftest import FakeClock, events

TRIGGERS = [f"DROP TRIGGER {table}_refuse_{op} ON {table}"
            for table in ("events", "stream_links") for op in ("update", "delete", "truncate")]


@pytest.fixture
def original() -> str:
    """Stream "a" (5 events), stream "b" (2), and "fork" (2 events) forked from "a" at seq 2."""
    url = fresh_url()
    with Journal.open(url, clock=FakeClock()) as journal:
        journal.append("a", events(5), 0)
        journal.append("b", events(2, 10), 0)
        journal.append("fork", events(2, 20), 0, parent=("a", 2))
        assert journal.verify().ok
    return url


def tamper(url: str, *statements: str) -> None:
    """As a superuser: drop the triggers, then run ``statements``."""
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        for statement in (*TRIGGERS, *statements):
            conn.execute(statement)


def first_bad(url: str, stream_id: str | None = None) -> BadEvent | None:
    with Journal.open(url) as journal:
        return journal.verify(stream_id).first_bad


def test_an_untouched_journal_verifies_every_event(original):
    with Journal.open(original) as journal:
        report = journal.verify()
    assert (report.ok, report.checked_events, report.first_bad) == (True, 9, None)


@pytest.mark.parametrize("edit", [
    "payload = replace(payload, '\"n\":2', '\"n\":7')",  # one byte
    "type = 'other'",
    "version = 2",
    "recorded_at = '2030-01-01T00:00:00.000000Z'",
    "prev_hash = hash",
    "hash = overlay(hash placing 'f' from 64)",
])
def test_an_edited_field_is_reported_at_that_exact_seq(original, edit):
    tamper(original, f"UPDATE events SET {edit} WHERE stream_id = 'a' AND seq = 3")

    bad = first_bad(original)

    assert (bad.stream_id, bad.seq) == ("a", 3)


def test_a_single_byte_edit_of_a_payload_is_a_hash_mismatch(original):
    tamper(original, "UPDATE events SET payload = replace(payload, '2', '7') "
                     "WHERE stream_id = 'a' AND seq = 3")

    with Journal.open(original) as journal:
        report = journal.verify()
    assert report.first_bad.reason.startswith("hash mismatch")
    assert (report.ok, report.checked_events) == (False, 3)


def test_a_null_where_the_schema_said_not_null_is_reported_not_raised(original):
    tamper(original, "ALTER TABLE events ALTER COLUMN type DROP NOT NULL",
           "UPDATE events SET type = NULL WHERE stream_id = 'a' AND seq = 4")

    bad = first_bad(original)

    assert (bad.stream_id, bad.seq) == ("a", 4)
    assert "type is stored as NULL" in bad.reason


def test_a_deleted_event_is_reported_as_a_missing_seq(original):
    tamper(original, "DELETE FROM events WHERE stream_id = 'a' AND seq = 3")

    assert first_bad(original) == BadEvent("a", 3, "seq 3 missing (next stored is seq 4)")


def test_a_deleted_event_with_the_rest_renumbered_breaks_the_prev_hash_link(original):
    tamper(original, "ALTER TABLE events DROP CONSTRAINT events_stream_id_seq_key",
           "DELETE FROM events WHERE stream_id = 'a' AND seq = 3",
           "UPDATE events SET seq = seq - 1 WHERE stream_id = 'a' AND seq > 3")

    bad = first_bad(original)

    assert (bad.stream_id, bad.seq) == ("a", 3)
    assert bad.reason.startswith("prev_hash does not match the hash of seq 2")


def test_swapped_seqs_are_reported_at_the_first_of_the_two(original):
    tamper(original,
           "UPDATE events SET seq = -1 WHERE stream_id = 'a' AND seq = 2",
           "UPDATE events SET seq = 2 WHERE stream_id = 'a' AND seq = 4",
           "UPDATE events SET seq = 4 WHERE stream_id = 'a' AND seq = -1")

    assert (first_bad(original).stream_id, first_bad(original).seq) == ("a", 2)


def test_a_truncated_journal_is_caught_by_saved_heads(original):
    with Journal.open(original) as journal:
        saved = journal.heads()
    tamper(original, "TRUNCATE events, stream_links")

    with Journal.open(original) as journal:
        assert journal.verify().ok and journal.verify().checked_events == 0
        assert len(journal.check_heads(saved)) == 3


def test_fork_link_edits_are_reported_at_the_forks_first_event(original):
    tamper(original, "UPDATE stream_links SET parent_seq = 99 WHERE stream_id = 'fork'")

    assert first_bad(original) == BadEvent(
        "fork", 1, "fork link points to 'a' seq 99, which does not exist")


def test_a_fork_link_whose_events_were_deleted_is_reported(original):
    tamper(original, "DELETE FROM events WHERE stream_id = 'fork'")

    assert first_bad(original) == BadEvent(
        "fork", 1, "seq 1 missing: the stream has a fork link but no events")


def test_fork_links_that_loop_are_corrupt_for_lineage_and_reported_by_verify(original):
    tamper(original, "INSERT INTO stream_links VALUES ('a', 'fork', 1)")

    with Journal.open(original) as journal:
        with pytest.raises(CorruptEventError, match="loop"):
            list(journal.lineage("fork"))
        bad = journal.verify().first_bad
    assert (bad.stream_id, bad.seq) == ("a", 1)


def test_verify_of_one_stream_checks_its_history_only(original):
    tamper(original, "UPDATE events SET type = 'x' WHERE stream_id = 'b' AND seq = 1",
           "UPDATE events SET type = 'x' WHERE stream_id = 'a' AND seq = 2")

    with Journal.open(original) as journal:
        assert journal.verify("b").first_bad.stream_id == "b"
        assert journal.verify("fork").first_bad == journal.verify("a").first_bad
        with pytest.raises(StreamNotFoundError):
            journal.verify("nobody")


def test_check_heads_finds_a_consistently_rewritten_chain_that_verify_cannot(original):
    with Journal.open(original) as journal:
        saved = journal.heads()
        [old] = journal.read("b", from_seq=2)
    forged = event_hash(old.prev_hash, "b", 2, old.type, old.version, old.recorded_at, '{"n":666}')
    tamper(original, f"UPDATE events SET payload = '{{\"n\":666}}', hash = '{forged}' "
                     "WHERE stream_id = 'b' AND seq = 2")

    with Journal.open(original) as journal:
        assert journal.verify().ok
        [bad] = journal.check_heads(saved)
    assert (bad.stream_id, bad.seq) == ("b", 2)
    assert "differs from the saved head" in bad.reason
