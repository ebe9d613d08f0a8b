"""The journal's contract, run against every way of opening a journal (see ``conftest.journal``)."""

from __future__ import annotations

import sqlite3

import pytest

from journal import (
    GENESIS_HASH,
    ConcurrencyError,
    EventNotFoundError,
    Head,
    InvalidAppendError,
    Journal,
    JournalError,
    NewEvent,
    StoredEvent,
    StreamNotFoundError,
    event_hash,
)

from .conftest import event, events, raw_rows


def test_append_returns_gapless_seqs_chained_from_genesis(journal):
    stored = journal.append("conv", events(3), expected_seq=0)

    assert [e.seq for e in stored] == [1, 2, 3]
    assert stored[0].prev_hash == GENESIS_HASH
    assert [e.prev_hash for e in stored[1:]] == [e.hash for e in stored[:-1]]
    for e in stored:
        assert e.hash == event_hash(
            e.prev_hash, e.stream_id, e.seq, e.type, e.version, e.recorded_at, e.payload
        )


def test_next_append_continues_the_chain_of_the_last(journal):
    first = journal.append("conv", events(2), expected_seq=0)
    [third] = journal.append("conv", [event(2)], expected_seq=2)

    assert third.seq == 3
    assert third.prev_hash == first[-1].hash


def test_read_returns_exactly_what_append_returned(journal):
    stored = journal.append("conv", events(2), 0) + journal.append("conv", events(3, 2), 2)

    assert list(journal.read("conv")) == stored


def test_read_is_an_iterator_limited_to_the_seq_range(journal):
    stored = journal.append("conv", events(5), 0)

    reader = journal.read("conv", from_seq=2, to_seq=4)

    assert iter(reader) is reader
    assert list(reader) == stored[1:4]


def test_read_of_an_unknown_stream_is_empty(journal):
    assert list(journal.read("nobody")) == []


def test_payload_is_stored_byte_for_byte(journal):
    payload = '{"b": 1, "a": "é\\u00e9 ✓", "list": [1.50, null]}'
    journal.append("conv", [NewEvent("note", 2, payload)], 0)

    [stored] = journal.read("conv")
    assert (stored.payload, stored.type, stored.version) == (payload, "note", 2)


def test_a_batch_gets_consecutive_positions_and_one_clock_reading(journal):
    journal.append("other", [event()], 0)
    stored = journal.append("conv", events(4), 0)

    assert [e.position for e in stored] == list(range(stored[0].position, stored[0].position + 4))
    assert len({e.recorded_at for e in stored}) == 1


def test_recorded_at_comes_from_the_clock_in_utc_with_microseconds(journal):
    [stored] = journal.append("conv", [event()], 0)

    assert stored.recorded_at == "2025-01-01T00:00:00.001000Z"


def test_recorded_at_of_an_event_overrides_the_clock(journal):
    imported = NewEvent("note", 1, "{}", recorded_at="2019-05-06T07:08:09.123456Z")

    stored = journal.append("conv", [imported, event()], 0)

    assert stored[0].recorded_at == "2019-05-06T07:08:09.123456Z"
    assert stored[1].recorded_at == "2025-01-01T00:00:00.001000Z"


def test_stale_expected_seq_is_a_concurrency_error_naming_stream_and_seqs(journal):
    journal.append("conv", events(3), 0)
    before = raw_rows(journal.path)

    with pytest.raises(ConcurrencyError, match=r"'conv'.*expected seq 1.*last seq is 3") as info:
        journal.append("conv", [event()], expected_seq=1)

    assert (info.value.stream_id, info.value.expected_seq, info.value.actual_seq) == ("conv", 1, 3)
    assert raw_rows(journal.path) == before


def test_expected_seq_zero_on_an_existing_stream_is_a_concurrency_error(journal):
    journal.append("conv", events(2), 0)

    with pytest.raises(ConcurrencyError, match="last seq is 2"):
        journal.append("conv", [event()], expected_seq=0)


def test_expected_seq_past_the_stream_end_is_a_concurrency_error(journal):
    journal.append("conv", events(2), 0)

    with pytest.raises(ConcurrencyError, match="expected seq 5"):
        journal.append("conv", [event()], expected_seq=5)


def test_a_second_handle_on_the_same_file_is_caught_by_the_unique_key(journal):
    journal.append("conv", events(2), 0)
    with Journal(journal.path) as other:
        other.append("conv", [event(2)], expected_seq=2)

    # This handle's cached head (seq 2) is stale now: the UNIQUE key refuses seq 3.
    with pytest.raises(ConcurrencyError) as info:
        journal.append("conv", [event(9)], expected_seq=2)
    assert info.value.actual_seq == 3

    [fourth] = journal.append("conv", [event(3)], expected_seq=3)
    assert fourth.prev_hash == journal.hash_at("conv", 3)
    assert journal.verify().ok


def test_last_seq_is_zero_for_an_unknown_stream(journal):
    journal.append("conv", events(4), 0)

    assert journal.last_seq("conv") == 4
    assert journal.last_seq("nobody") == 0


def test_hash_at_returns_the_stored_hash_or_raises(journal):
    stored = journal.append("conv", events(2), 0)

    assert journal.hash_at("conv", 2) == stored[1].hash
    with pytest.raises(EventNotFoundError, match=r"'conv' seq 3"):
        journal.hash_at("conv", 3)


def test_streams_lists_the_most_recently_appended_first(journal):
    journal.append("b", events(1), 0)
    journal.append("a", events(2), 0)
    journal.append("c", events(1), 0)
    journal.append("a", [event(2)], 2)

    infos = list(journal.streams())

    assert [(i.stream_id, i.last_seq, i.events) for i in infos] == [
        ("a", 3, 3),
        ("c", 1, 1),
        ("b", 1, 1),
    ]
    a = infos[0]
    assert a.head_hash == journal.hash_at("a", 3)
    assert a.first_recorded_at < a.last_recorded_at
    assert (a.parent_stream_id, a.parent_seq) == (None, None)


def test_stream_returns_one_summary_or_raises(journal):
    journal.append("a", events(2), 0)

    assert journal.stream("a").last_seq == 2
    with pytest.raises(StreamNotFoundError, match="'nobody'"):
        journal.stream("nobody")


def test_read_all_is_global_order_after_a_position_with_a_limit(journal):
    a1 = journal.append("a", [event(1)], 0)
    b1 = journal.append("b", [event(2)], 0)
    a2 = journal.append("a", [event(3)], 1)
    everything = a1 + b1 + a2

    assert list(journal.read_all()) == everything
    assert list(journal.read_all(after_position=a1[0].position)) == b1 + a2
    assert list(journal.read_all(limit=2)) == a1 + b1


def test_a_fork_chains_its_first_event_to_the_parent_hash_at_the_fork_point(journal):
    parent = journal.append("parent", events(3), 0)

    [first] = journal.append("fork", [event(9)], 0, parent=("parent", 2))

    assert first.seq == 1
    assert first.prev_hash == parent[1].hash
    info = journal.stream("fork")
    assert (info.parent_stream_id, info.parent_seq) == ("parent", 2)
    assert journal.verify().ok


def test_lineage_of_a_fork_of_a_fork_is_the_ancestors_prefix_then_its_own(journal):
    root = journal.append("root", events(3), 0)
    child = journal.append("child", events(2), 0, parent=("root", 2))
    child += journal.append("child", [event(7)], 2)
    grandchild = journal.append("grandchild", events(2), 0, parent=("child", 2))

    assert list(journal.lineage("grandchild")) == root[:2] + child[:2] + grandchild
    assert list(journal.lineage("grandchild", to_seq=1)) == root[:2] + child[:2] + grandchild[:1]
    assert list(journal.lineage("root")) == root


def test_a_fork_from_a_missing_event_is_refused_and_writes_nothing(journal):
    journal.append("parent", events(2), 0)
    before = raw_rows(journal.path)

    with pytest.raises(EventNotFoundError, match=r"'fork' from 'parent' at seq 3"):
        journal.append("fork", [event()], 0, parent=("parent", 3))

    assert raw_rows(journal.path) == before
    assert journal.last_seq("fork") == 0


def test_a_parent_is_only_allowed_on_the_first_append(journal):
    journal.append("parent", events(2), 0)
    journal.append("fork", [event()], 0, parent=("parent", 1))

    with pytest.raises(InvalidAppendError, match="first append"):
        journal.append("fork", [event()], 1, parent=("parent", 1))


def test_heads_are_every_streams_last_seq_and_hash_by_stream_id(journal):
    b = journal.append("b", events(2), 0)
    a = journal.append("a", events(3), 0)

    assert journal.heads() == [Head("a", 3, a[-1].hash), Head("b", 2, b[-1].hash)]
    assert journal.check_heads(journal.heads()) == []


def test_a_stream_that_grew_since_its_head_was_saved_is_fine(journal):
    journal.append("a", events(2), 0)
    saved = journal.heads()
    journal.append("a", events(2, 2), 2)

    assert journal.check_heads(saved) == []


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE events SET payload = '{\"n\":99}' WHERE seq = 1",
        "DELETE FROM events WHERE seq = 2",
        "UPDATE stream_links SET parent_seq = 2",
        "DELETE FROM stream_links",
    ],
)
def test_the_database_itself_refuses_to_rewrite_history(journal, statement):
    journal.append("parent", events(2), 0)
    journal.append("fork", [event()], 0, parent=("parent", 1))
    before = raw_rows(journal.path)

    conn = sqlite3.connect(journal.path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(statement)
    finally:
        conn.close()

    assert raw_rows(journal.path) == before


def test_a_closed_journal_raises_a_journal_error_naming_the_file(journal):
    journal.close()

    with pytest.raises(JournalError, match="closed") as info:
        journal.append("conv", [event()], 0)
    assert journal.path in str(info.value)
    with pytest.raises(JournalError, match="closed"):
        list(journal.read("conv"))


def test_stored_events_are_frozen(journal):
    [stored] = journal.append("conv", [event()], 0)

    assert isinstance(stored, StoredEvent)
    with pytest.raises(AttributeError):
        stored.payload = "{}"
