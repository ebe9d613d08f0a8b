"""Tamper evidence: edits made behind the journal's back (triggers dropped) are found, located."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from turnlog.journal import BadEvent, CorruptEventError, Journal, StreamNotFoundError, event_hash

from .conftest import events

TRIGGERS = ("events_refuse_update", "events_refuse_delete",
            "stream_links_refuse_update", "stream_links_refuse_delete")


@pytest.fixture
def original(journal_path: Path, clock) -> Path:
    """Stream "a" (5 events), stream "b" (2), and "fork" (2 events) forked from "a" at seq 2."""
    with Journal(journal_path, clock=clock) as journal:
        journal.append("a", events(5), 0)
        journal.append("b", events(2, 10), 0)
        journal.append("fork", events(2, 20), 0, parent=("a", 2))
        assert journal.verify().ok
    return journal_path


def tampered(original: Path, *statements: str) -> Path:
    """A copy of the journal with the triggers dropped and ``statements`` run on it."""
    copy = original.with_name("tampered.db")
    source, target = sqlite3.connect(original), sqlite3.connect(copy)
    try:
        source.backup(target)
        for trigger in TRIGGERS:
            target.execute(f"DROP TRIGGER {trigger}")
        for statement in statements:
            target.execute(statement)
        target.commit()
    finally:
        source.close()
        target.close()
    return copy


def first_bad(path: Path, stream_id: str | None = None) -> BadEvent | None:
    with Journal(path) as journal:
        return journal.verify(stream_id).first_bad


def test_an_untouched_journal_verifies_every_event(original):
    with Journal(original) as journal:
        report = journal.verify()
    assert (report.ok, report.checked_events, report.first_bad) == (True, 9, None)


@pytest.mark.parametrize(
    "edit",
    [
        "payload = replace(payload, '\"n\":2', '\"n\":7')",  # one byte
        "type = 'other'",
        "version = 2",
        "recorded_at = '2030-01-01T00:00:00.000000Z'",
        "prev_hash = hash",
    ],
)
def test_an_edited_field_is_reported_at_that_exact_seq(original, edit):
    copy = tampered(original, f"UPDATE events SET {edit} WHERE stream_id = 'a' AND seq = 3")

    bad = first_bad(copy)

    assert (bad.stream_id, bad.seq) == ("a", 3)


def test_an_edited_payload_is_reported_as_a_hash_mismatch(original):
    copy = tampered(
        original,
        "UPDATE events SET payload = replace(payload, '\"n\":2', '\"n\":7') "
        "WHERE stream_id = 'a' AND seq = 3",
    )

    with Journal(copy) as journal:
        report = journal.verify()

    assert not report.ok
    assert report.first_bad.reason.startswith("hash mismatch")
    assert report.checked_events == 3


def test_a_deleted_event_is_reported_as_a_missing_seq(original):
    copy = tampered(original, "DELETE FROM events WHERE stream_id = 'a' AND seq = 3")

    assert first_bad(copy) == BadEvent("a", 3, "seq 3 missing (next stored is seq 4)")


def test_a_deleted_event_with_the_rest_renumbered_breaks_the_prev_hash_link(original):
    copy = tampered(
        original,
        "DELETE FROM events WHERE stream_id = 'a' AND seq = 3",
        "UPDATE events SET seq = seq - 1 WHERE stream_id = 'a' AND seq > 3",
    )

    bad = first_bad(copy)

    assert (bad.stream_id, bad.seq) == ("a", 3)
    assert bad.reason.startswith("prev_hash does not match the hash of seq 2")


def test_swapped_payloads_are_reported_at_the_first_of_the_two(original):
    copy = tampered(
        original,
        "UPDATE events SET payload = (SELECT payload FROM events WHERE stream_id = 'a' AND seq = 4)"
        " WHERE stream_id = 'a' AND seq = 2",
        "UPDATE events SET payload = '{\"n\":1}' WHERE stream_id = 'a' AND seq = 4",
    )

    assert (first_bad(copy).stream_id, first_bad(copy).seq) == ("a", 2)


def test_swapped_seqs_are_reported_at_the_first_of_the_two(original):
    copy = tampered(
        original,
        "UPDATE events SET seq = -1 WHERE stream_id = 'a' AND seq = 2",
        "UPDATE events SET seq = 2 WHERE stream_id = 'a' AND seq = 4",
        "UPDATE events SET seq = 4 WHERE stream_id = 'a' AND seq = -1",
    )

    assert (first_bad(copy).stream_id, first_bad(copy).seq) == ("a", 2)


def test_a_fork_link_moved_to_another_seq_is_reported_at_the_forks_first_event(original):
    copy = tampered(original, "UPDATE stream_links SET parent_seq = 1 WHERE stream_id = 'fork'")

    bad = first_bad(copy)

    assert (bad.stream_id, bad.seq) == ("fork", 1)
    assert "fork parent 'a' at seq 1" in bad.reason


def test_a_fork_link_to_a_missing_parent_event_is_reported(original):
    copy = tampered(original, "UPDATE stream_links SET parent_seq = 99 WHERE stream_id = 'fork'")

    assert first_bad(copy) == BadEvent(
        "fork", 1, "fork link points to 'a' seq 99, which does not exist"
    )


def test_a_deleted_fork_link_is_reported(original):
    copy = tampered(original, "DELETE FROM stream_links WHERE stream_id = 'fork'")

    bad = first_bad(copy)

    assert (bad.stream_id, bad.seq) == ("fork", 1)
    assert "no fork link" in bad.reason


def test_a_fork_link_whose_events_were_deleted_is_reported(original):
    copy = tampered(original, "DELETE FROM events WHERE stream_id = 'fork'")

    assert first_bad(copy) == BadEvent(
        "fork", 1, "seq 1 missing: the stream has a fork link but no events"
    )


def test_fork_links_that_loop_are_corrupt_for_lineage_and_reported_by_verify(original):
    copy = tampered(original, "INSERT INTO stream_links VALUES ('a', 'fork', 1)")

    with Journal(copy) as journal:
        with pytest.raises(CorruptEventError, match="loop"):
            list(journal.lineage("fork"))
        bad = journal.verify().first_bad
    assert (bad.stream_id, bad.seq) == ("a", 1)


def test_verify_of_one_stream_checks_only_that_stream(original):
    copy = tampered(original, "UPDATE events SET type = 'x' WHERE stream_id = 'b' AND seq = 1")

    with Journal(copy) as journal:
        assert journal.verify("a").ok
        assert journal.verify("a").checked_events == 5
        assert journal.verify("b").first_bad.stream_id == "b"
        with pytest.raises(StreamNotFoundError):
            journal.verify("nobody")


def test_check_heads_finds_a_cut_off_tail_that_verify_cannot(original):
    with Journal(original) as journal:
        saved = journal.heads()
    copy = tampered(original, "DELETE FROM events WHERE stream_id = 'a' AND seq > 3")

    with Journal(copy) as journal:
        assert journal.verify().ok
        assert journal.check_heads(saved) == [
            BadEvent("a", 5, "stream ends at seq 3, before the saved head at seq 5 "
                             "(events were cut off its end)")
        ]


def test_check_heads_finds_a_consistently_rewritten_chain_that_verify_cannot(original):
    with Journal(original) as journal:
        saved = journal.heads()
        [old] = journal.read("b", from_seq=2)
    forged = event_hash(old.prev_hash, "b", 2, old.type, old.version, old.recorded_at, '{"n":666}')
    copy = tampered(
        original,
        f"UPDATE events SET payload = '{{\"n\":666}}', hash = X'{forged}' "
        "WHERE stream_id = 'b' AND seq = 2",
    )

    with Journal(copy) as journal:
        assert journal.verify().ok
        [bad] = journal.check_heads(saved)
    assert (bad.stream_id, bad.seq) == ("b", 2)
    assert "differs from the saved head" in bad.reason


def test_check_heads_reports_a_stream_that_disappeared(original):
    with Journal(original) as journal:
        saved = journal.heads()
    copy = tampered(original, "DELETE FROM events WHERE stream_id = 'b'")

    with Journal(copy) as journal:
        assert journal.check_heads(saved) == [
            BadEvent("b", 2, "stream is missing (the saved head is at seq 2)")
        ]


# -- a fork's history: verify recomputes every ancestor segment up to the fork point ------


@pytest.fixture
def family(journal_path: Path, clock) -> Path:
    """"root" (4 events) -> "child" forked at root seq 2 (3 events) -> "grandchild" at child 2."""
    with Journal(journal_path, clock=clock) as journal:
        journal.append("root", events(4), 0)
        journal.append("child", events(3, 10), 0, parent=("root", 2))
        journal.append("grandchild", events(2, 20), 0, parent=("child", 2))
        assert journal.verify("grandchild").ok
    return journal_path


def edit(stream_id: str, seq: int) -> str:
    return (f"UPDATE events SET payload = replace(payload, '\"n\"', '\"N\"') "
            f"WHERE stream_id = '{stream_id}' AND seq = {seq}")


@pytest.mark.parametrize("stream_id, seq", [("root", 1), ("root", 2), ("child", 1), ("child", 2)])
def test_a_forks_verify_finds_an_edit_in_an_ancestors_prefix_and_names_it(family, stream_id, seq):
    copy = tampered(family, edit(stream_id, seq))

    with Journal(copy) as journal:
        report = journal.verify("grandchild")

    assert not report.ok
    assert (report.first_bad.stream_id, report.first_bad.seq) == (stream_id, seq)
    assert report.first_bad.reason.startswith("hash mismatch")


@pytest.mark.parametrize("stream_id, seq", [("root", 3), ("root", 4), ("child", 3)])
def test_an_edit_past_the_fork_point_is_not_part_of_the_forks_history(family, stream_id, seq):
    copy = tampered(family, edit(stream_id, seq))

    with Journal(copy) as journal:
        assert journal.verify("grandchild").ok
        assert journal.verify("grandchild").checked_events == 2 + 2 + 2
        assert not journal.verify(stream_id).ok


def test_a_fork_link_loop_is_reported_by_the_verify_of_one_stream(original):
    copy = tampered(original, "INSERT INTO stream_links VALUES ('a', 'fork', 1)")

    with Journal(copy) as journal:
        report = journal.verify("fork")

    assert not report.ok
    assert "loop" in report.first_bad.reason


# -- whatever SQLite type an edit stored, verify reports a bad event, never raises -------------


@pytest.mark.parametrize("column", [
    "stream_id", "seq", "type", "version", "recorded_at", "payload", "prev_hash", "hash"])
@pytest.mark.parametrize("value", [
    "CAST({c} AS BLOB)", "X'00ff'", "CAST(X'ff' AS TEXT)", "3.5", "'text'", "42", "{c} || ''"])
def test_a_column_stored_with_another_type_is_a_bad_event(original, column, value):
    copy = tampered(original,
                    "PRAGMA ignore_check_constraints = ON",
                    f"UPDATE events SET {column} = {value.format(c=column)} "
                    "WHERE stream_id = 'a' AND seq = 3")

    # the same bytes with the same type: text || '' for text (and integer) columns,
    # CAST(… AS BLOB) for the hashes, which are stored as 32-byte BLOBs
    same = "CAST({c} AS BLOB)" if column in ("prev_hash", "hash") else "{c} || ''"
    assert_reported(copy, unchanged=value == same)


@pytest.mark.parametrize("column", ["prev_hash", "hash"])
def test_a_hash_stored_as_its_hex_text_is_reported_as_stored_with_another_type(original, column):
    copy = tampered(original, f"UPDATE events SET {column} = lower(hex({column})) "
                              "WHERE stream_id = 'a' AND seq = 3")

    bad = first_bad(copy, "a")
    assert (bad.seq, bad.reason) == (
        3, f"{column} is stored as TEXT, not BLOB (the row was edited outside turnlog)")


def assert_reported(copy: Path, unchanged: bool = False) -> None:
    with Journal(copy) as journal:
        reports = [journal.verify(), journal.verify("a")]
    if unchanged:  # text || '' stores the same bytes with the same type: nothing changed
        assert all(r.ok for r in reports)
        return
    for report in reports:
        assert not report.ok
        assert isinstance(report.first_bad.stream_id, str)
        assert isinstance(report.first_bad.seq, int)
        assert isinstance(report.first_bad.reason, str) and report.first_bad.reason
    assert (reports[1].first_bad.stream_id, reports[1].first_bad.seq) == ("a", 3)


@pytest.mark.parametrize("column", [
    "stream_id", "seq", "type", "version", "recorded_at", "payload", "prev_hash", "hash"])
def test_a_null_in_any_column_is_a_bad_event(original, column):
    # NOT NULL forbids it, so the table is rebuilt without the constraint first.
    copy = tampered(original,
                    "CREATE TABLE loose AS SELECT * FROM events",
                    "DROP TABLE events",
                    "ALTER TABLE loose RENAME TO events",
                    f"UPDATE events SET {column} = NULL WHERE stream_id = 'a' AND seq = 3")

    assert_reported(copy)


def test_the_cli_repro_a_fork_whose_parent_was_edited_no_longer_verifies(tmp_path):
    """``turnlog fork ID --at 4``, parent seq 1 edited behind the journal's back:
    ``turnlog verify FORK`` exits 1 naming the parent's seq 1 (it used to exit 0)."""
    import json

    from click.testing import CliRunner

    from turnlog.engine.cli import cli

    db = str(tmp_path / "turnlog.db")

    def run(*args: str):
        return CliRunner().invoke(cli, [*args, "--db", db])

    assert run("demo").exit_code == 0
    [cid] = [c["conversation_id"] for c in json.loads(run("ls", "--json").output)]
    assert run("fork", cid, "--at", "4", "--id", "the-fork").exit_code == 0
    assert run("verify", "the-fork").exit_code == 0
    conn = sqlite3.connect(db)
    for trigger in TRIGGERS:
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute("UPDATE events SET payload = replace(payload, 'Paris', 'Parix') "
                 f"WHERE stream_id = '{cid}' AND seq = 1")
    assert conn.total_changes == 1
    conn.commit()
    conn.close()

    result = run("verify", "the-fork", "--json")

    assert result.exit_code == 1
    bad = json.loads(result.output)["first_bad"]
    assert (bad["conversation_id"], bad["seq"]) == (cid, 1)


def test_reading_an_event_whose_hash_was_stored_as_text_is_a_typed_error_naming_it(original):
    copy = tampered(original, "UPDATE events SET hash = lower(hex(hash)) "
                              "WHERE stream_id = 'a' AND seq = 3")

    with Journal(copy) as journal:
        assert [e.seq for e in journal.read("a", 1, 2)] == [1, 2]
        with pytest.raises(CorruptEventError, match="stream 'a' seq 3: its hashes are stored as"):
            list(journal.read("a"))
