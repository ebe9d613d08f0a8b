"""The journal's contract (``JournalProtocol``), run on every implementation and every way of
opening one (see ``conftest.BACKENDS``)."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from turnlog.journal import (
    GENESIS_HASH,
    ConcurrencyError,
    EventNotFoundError,
    Head,
    CorruptEventError,
    InvalidAppendError,
    Journal,
    JournalError,
    JournalProtocol,
    NewEvent,
    SeqGapError,
    StoredEvent,
    StreamNotFoundError,
    event_hash,
)

from .conftest import event, events, raw_rows


def snapshot(journal: JournalProtocol) -> tuple:
    """Everything a journal holds, through its API (any backend)."""
    return list(journal.read_all()), journal.heads(), list(journal.streams())


def test_every_backend_implements_the_protocol(journal):
    assert isinstance(journal, JournalProtocol)


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
    before = snapshot(journal)

    with pytest.raises(ConcurrencyError, match=r"'conv'.*expected seq 1.*last seq is 3") as info:
        journal.append("conv", [event()], expected_seq=1)

    assert (info.value.stream_id, info.value.expected_seq, info.value.actual_seq) == ("conv", 1, 3)
    assert snapshot(journal) == before


def test_expected_seq_zero_on_an_existing_stream_is_a_concurrency_error(journal):
    journal.append("conv", events(2), 0)

    with pytest.raises(ConcurrencyError, match="last seq is 2"):
        journal.append("conv", [event()], expected_seq=0)


@pytest.mark.parametrize("existing", [0, 2])
def test_expected_seq_past_the_stream_end_is_a_gap_not_a_lost_race(journal, existing):
    if existing:
        journal.append("conv", events(existing), 0)
    before = snapshot(journal)

    with pytest.raises(SeqGapError, match=rf"expected_seq 5 is past the stream's last seq {existing}"
                       ) as info:
        journal.append("conv", [event()], expected_seq=5)

    assert not isinstance(info.value, ConcurrencyError)
    assert isinstance(info.value, InvalidAppendError)
    assert (info.value.stream_id, info.value.expected_seq, info.value.actual_seq) == (
        "conv", 5, existing)
    assert snapshot(journal) == before
    journal.append("conv", [event()], expected_seq=existing)  # the stream is still appendable


def test_a_second_handle_on_the_same_file_is_caught_by_the_unique_key(file_journal):
    journal = file_journal
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
    before = snapshot(journal)

    with pytest.raises(EventNotFoundError, match=r"'fork' from 'parent' at seq 3"):
        journal.append("fork", [event()], 0, parent=("parent", 3))

    assert snapshot(journal) == before
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
def test_the_database_itself_refuses_to_rewrite_history(file_journal, statement):
    journal = file_journal
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


def test_closing_from_another_thread_is_safe_and_closes_the_journal(journal):
    journal.append("conv", [event()], 0)
    errors: list[BaseException] = []

    def close() -> None:
        try:
            journal.close()
            journal.close()
        except BaseException as exc:  # noqa: BLE001 - the test reports whatever escaped
            errors.append(exc)

    worker = threading.Thread(target=close)
    worker.start()
    worker.join()

    assert errors == []
    with pytest.raises(JournalError, match="closed"):
        journal.last_seq("conv")
    journal.close()


def test_reading_from_another_thread_is_a_journal_error(file_journal):
    errors: list[BaseException] = []
    worker = threading.Thread(
        target=lambda: errors.append(pytest.raises(JournalError, file_journal.last_seq, "x")))
    worker.start()
    worker.join()
    assert len(errors) == 1


def test_read_from_seq_zero_or_below_is_the_whole_stream(journal):
    stored = journal.append("conv", events(3), 0)

    assert list(journal.read("conv", 0)) == stored
    assert list(journal.read("conv", -5, 2)) == stored[:2]
    assert list(journal.read("conv", 3, 2)) == []


@pytest.mark.parametrize("stream_id", ["", "a\x00b", "line\nbreak", 7, None])
def test_a_bad_stream_id_is_refused(journal, stream_id):
    with pytest.raises(InvalidAppendError, match="stream id"):
        journal.append(stream_id, [event()], 0)
    assert snapshot(journal) == ([], [], [])


@pytest.mark.parametrize("payload", ["", "{", "not json", "{'a': 1}", "[1,]"])
def test_a_payload_that_is_not_json_is_refused(journal, payload):
    journal.append("conv", [event()], 0)
    before = snapshot(journal)

    with pytest.raises(InvalidAppendError, match="JSON"):
        journal.append("conv", [event(1), NewEvent("note", 1, payload)], 1)

    assert snapshot(journal) == before


def test_no_events_is_refused(journal):
    with pytest.raises(InvalidAppendError, match="no events"):
        journal.append("conv", [], 0)


def test_ancestry_is_the_segments_root_first(journal):
    journal.append("root", events(3), 0)
    journal.append("child", events(2), 0, parent=("root", 2))
    journal.append("grandchild", events(1), 0, parent=("child", 1))

    assert journal.ancestry("grandchild") == [("root", 2), ("child", 1), ("grandchild", None)]
    assert journal.ancestry("grandchild", 1) == [("root", 2), ("child", 1), ("grandchild", 1)]
    assert journal.ancestry("root") == [("root", None)]
    assert journal.ancestry("nobody") == [("nobody", None)]


def test_verify_of_a_fork_checks_its_whole_history(journal):
    journal.append("root", events(3), 0)
    journal.append("child", events(2), 0, parent=("root", 2))

    report = journal.verify("child")

    assert (report.ok, report.checked_events) == (True, 4)


def test_last_position_is_the_newest_position_or_zero(journal):
    assert journal.last_position() == 0
    journal.append("a", events(2), 0)
    [last] = journal.append("b", [event()], 0)

    assert journal.last_position() == last.position


def test_read_all_filters_by_upper_bound_and_types(journal):
    a = journal.append("a", [event(1, "x"), event(2, "y")], 0)
    b = journal.append("b", [event(3, "x"), event(4, "z")], 0)
    everything = a + b

    assert list(journal.read_all(until=a[1].position)) == a
    assert list(journal.read_all(a[0].position, until=b[0].position)) == [a[1], b[0]]
    assert list(journal.read_all(types={"x"})) == [a[0], b[0]]
    assert list(journal.read_all(types=["x", "z"], limit=2)) == [a[0], b[0]]
    assert list(journal.read_all(a[0].position, types=("x",))) == [b[0]]
    assert list(journal.read_all(types=())) == []
    assert list(journal.read_all(until=0)) == []
    assert list(journal.read_all()) == everything


def test_fork_links_that_loop_are_refused_by_the_shared_ancestry_walk():
    from turnlog.journal._lineage import walk_ancestry

    links = {"a": ("b", 1), "b": ("a", 1)}
    with pytest.raises(CorruptEventError, match="loop"):
        walk_ancestry(links.get, "a")
    assert walk_ancestry({"b": ("a", 3)}.get, "b", 2) == [("a", 3), ("b", 2)]


def test_stored_events_are_frozen(journal):
    [stored] = journal.append("conv", [event()], 0)

    assert isinstance(stored, StoredEvent)
    with pytest.raises(AttributeError):
        stored.payload = "{}"
