"""The journal contract, continued: windowed reads, ``last_event`` and atomic ``append_many``.

Runs on every implementation in ``conftest.BACKENDS`` (the ``journal`` fixture), like
``test_contract.py``.
"""

from __future__ import annotations

import pytest

from turnlog.journal import (
    ConcurrencyError,
    EventNotFoundError,
    InvalidAppendError,
    InvalidReadError,
    JournalError,
    NewEvent,
    ReadOnlyJournalError,
    SeqGapError,
    StreamAppend,
    TurnlogError,
)

from .conftest import event, events
from .test_contract import snapshot

# -- read(limit=, reverse=) and last_event -------------------------------------------------


def test_read_reverse_is_newest_first_within_the_range(journal):
    stored = journal.append("conv", events(5), 0)

    assert list(journal.read("conv", reverse=True)) == stored[::-1]
    assert list(journal.read("conv", 2, 4, reverse=True)) == stored[3:0:-1]


def test_read_limit_counts_from_the_start_of_the_chosen_order(journal):
    stored = journal.append("conv", events(5), 0)

    assert list(journal.read("conv", limit=2)) == stored[:2]
    assert list(journal.read("conv", 2, limit=2)) == stored[1:3]
    assert list(journal.read("conv", reverse=True, limit=2)) == [stored[4], stored[3]]
    assert list(journal.read("conv", 1, 3, reverse=True, limit=10)) == stored[2::-1]
    assert list(journal.read("conv", limit=0)) == []


def test_read_with_limit_and_reverse_is_an_iterator(journal):
    journal.append("conv", events(3), 0)

    reader = journal.read("conv", reverse=True, limit=1)

    assert iter(reader) is reader
    assert [e.seq for e in reader] == [3]


def test_read_of_an_unknown_stream_is_empty_in_either_order(journal):
    assert list(journal.read("nobody", reverse=True, limit=3)) == []


@pytest.mark.parametrize("limit", [-1, 1.5, "2", True])
def test_a_bad_limit_is_refused_naming_it(journal, limit):
    journal.append("conv", events(2), 0)

    with pytest.raises(InvalidReadError, match=r"'conv'.*limit must be None or an int >= 0"):
        journal.read("conv", limit=limit)
    with pytest.raises(InvalidReadError, match="limit"):
        journal.read_all(limit=limit)
    assert isinstance(InvalidReadError("x"), JournalError)


def test_last_event_is_the_newest_event_or_none(journal):
    assert journal.last_event("conv") is None
    journal.append("conv", events(2), 0)
    journal.append("other", events(1), 0)
    [third] = journal.append("conv", [event(9, "last")], 2)

    assert journal.last_event("conv") == third
    assert journal.last_event("nobody") is None


def test_last_event_of_a_fork_is_its_own_newest_event_not_the_parents(journal):
    journal.append("parent", events(3), 0)
    [first] = journal.append("fork", [event(7)], 0, parent=("parent", 2))

    assert journal.last_event("fork") == first


# -- append_many ---------------------------------------------------------------------------


def test_append_many_writes_every_stream_and_returns_what_append_returns(journal):
    journal.append("a", events(2), 0)

    a, b = journal.append_many([("a", events(2, 2), 2), StreamAppend("b", events(1), 0)])

    assert [e.seq for e in a] == [3, 4] and [e.seq for e in b] == [1]
    assert a[0].prev_hash == journal.hash_at("a", 2)
    assert list(journal.read("a", 3)) == a
    assert list(journal.read("b")) == b
    assert journal.verify().ok


def test_append_many_positions_are_consecutive_in_item_order_with_one_clock_reading(journal):
    journal.append("z", events(1), 0)

    written = journal.append_many([("b", events(2), 0), ("a", events(3), 0)])

    flat = written[0] + written[1]
    assert [e.position for e in flat] == list(range(flat[0].position, flat[0].position + 5))
    assert len({e.recorded_at for e in flat}) == 1
    assert list(journal.read_all(after_position=flat[0].position - 1)) == flat


def test_append_is_append_many_of_one_stream(journal):
    [single] = journal.append_many([("conv", events(2), 0)])

    assert single == list(journal.read("conv"))
    assert journal.append("conv", [event(5)], 2) == list(journal.read("conv", 3))


@pytest.mark.parametrize("stale", ["first", "second"])
def test_a_stale_stream_in_append_many_refuses_all_and_names_it(journal, stale):
    journal.append("a", events(2), 0)
    journal.append("b", events(3), 0)
    before = snapshot(journal)
    a_seq, b_seq = (1, 3) if stale == "first" else (2, 1)
    stream, expected, actual = ("a", 1, 2) if stale == "first" else ("b", 1, 3)

    with pytest.raises(ConcurrencyError, match=rf"'{stream}'.*expected seq {expected}") as info:
        journal.append_many([("a", [event()], a_seq), ("b", [event()], b_seq)])

    assert (info.value.stream_id, info.value.expected_seq, info.value.actual_seq) == (
        stream, expected, actual)
    assert snapshot(journal) == before
    journal.append_many([("a", [event()], 2), ("b", [event()], 3)])  # still appendable


def test_a_gap_in_append_many_refuses_all_and_names_the_stream(journal):
    journal.append("a", events(2), 0)
    before = snapshot(journal)

    with pytest.raises(SeqGapError, match=r"'new'.*expected_seq 4 is past the stream's last seq 0"
                       ) as info:
        journal.append_many([("a", [event()], 2), ("new", [event()], 4)])

    assert (info.value.stream_id, info.value.actual_seq) == ("new", 0)
    assert snapshot(journal) == before


def test_a_bad_event_in_a_later_stream_refuses_the_earlier_ones_too(journal):
    journal.append("a", events(1), 0)
    before = snapshot(journal)

    with pytest.raises(InvalidAppendError, match=r"'b'.*event 1.*not valid JSON"):
        journal.append_many([("a", [event()], 1), ("b", [event(), NewEvent("n", 1, "{")], 0)])

    assert snapshot(journal) == before
    assert journal.last_seq("a") == 1


def test_a_fork_and_its_first_events_are_written_with_the_parents_new_events(journal):
    journal.append("parent", events(2), 0)

    parent, fork = journal.append_many([
        ("parent", [event(2)], 2),
        StreamAppend("fork", events(2), 0, parent=("parent", 3)),
    ])

    assert fork[0].prev_hash == parent[0].hash
    info = journal.stream("fork")
    assert (info.parent_stream_id, info.parent_seq) == ("parent", 3)
    assert list(journal.lineage("fork")) == list(journal.read("parent")) + fork
    assert journal.verify().ok


def test_a_fork_from_a_missing_event_in_append_many_writes_nothing(journal):
    journal.append("parent", events(2), 0)
    before = snapshot(journal)

    with pytest.raises(EventNotFoundError, match=r"'fork' from 'parent' at seq 4"):
        journal.append_many([("parent", [event()], 2), ("fork", [event()], 0, ("parent", 4))])

    assert snapshot(journal) == before
    assert journal.ancestry("fork") == [("fork", None)]


@pytest.mark.parametrize(
    ("appends", "match"),
    [
        ([], "no streams given"),
        (None, "list of"),
        ([("a", [event()])], r"item 0: expected \(stream_id, events, expected_seq"),
        ([("a", [event()], 0), "b"], "item 1"),
        ([("a", [event()], 0), ("a", [event()], 1)], "'a'.*appears twice"),
        ([("a", [event()], 0), ("", [event()], 0)], "stream id"),
        ([("a", [event()], 0), ("b", [], 0)], "'b': no events"),
        ([("a", [event()], 0), ("b", [event()], -1)], "'b': expected_seq must be"),
        ([("a", [event()], 0), ("b", [event()], 1, ("a", 1))], "'b'.*first append"),
    ],
)
def test_malformed_append_many_is_refused_before_anything_is_written(journal, appends, match):
    journal.append("x", events(1), 0)
    before = snapshot(journal)

    with pytest.raises(InvalidAppendError, match=match) as info:
        journal.append_many(appends)

    assert isinstance(info.value, TurnlogError)
    assert snapshot(journal) == before


def test_a_readonly_journal_refuses_append_many_naming_the_streams(tmp_path):
    from turnlog.journal import Journal

    path = tmp_path / "j.db"
    Journal(path).close()
    with Journal(path, readonly=True) as journal:
        with pytest.raises(ReadOnlyJournalError, match=r"streams 'a', 'b': .* read-only"):
            journal.append_many([("a", [event()], 0), ("b", [event()], 0)])
        with pytest.raises(ReadOnlyJournalError, match=r"stream 'a': .* read-only"):
            journal.append("a", [event()], 0)


def test_a_closed_journal_refuses_append_many(journal):
    journal.close()

    with pytest.raises(JournalError, match="closed"):
        journal.append_many([("a", [event()], 0)])
    with pytest.raises(JournalError, match="closed"):
        journal.last_event("a")


# -- verify(progress=) -----------------------------------------------------------------------


def test_verify_reports_progress_that_adds_up_to_the_events_checked(journal):
    journal.append("a", events(1500), 0)
    journal.append("fork", events(3), 0, parent=("a", 10))
    ticks: list[int] = []

    report = journal.verify(progress=ticks.append)

    assert report.ok and sum(ticks) == report.checked_events == journal.last_position()
    assert len(ticks) >= 2  # told along the way, not only at the end
    one: list[int] = []
    assert journal.verify("fork", progress=one.append).checked_events == sum(one) == 13
