"""The journal's contract as a test class a backend subclasses: ``turnlog.testing.JournalContract``.

Every implementation of :class:`~turnlog.journal.JournalProtocol` must pass it, the
built-in SQLite and PostgreSQL journals as much as a third-party backend (the way
eventsourcing ships its recorder test cases). Subclass it in a test module, say how to
open a fresh, empty journal, and pytest runs every clause of the contract on it::

    from turnlog.testing import JournalContract

    class TestMyJournal(JournalContract):
        def open_journal(self, folder, clock):
            return MyJournal(folder / "events.db", clock=clock)

``folder`` is an empty directory of the test's own; ``clock`` is a fake clock (a
callable returning an aware ``datetime``: 2025-01-01T00:00:00.001Z, then one millisecond
later per reading) the journal must read ``recorded_at`` from. Imported by
``turnlog.testing`` on first use (it needs pytest).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from turnlog.journal import (
    GENESIS_HASH,
    ConcurrencyError,
    EventNotFoundError,
    Head,
    InvalidAppendError,
    InvalidReadError,
    JournalError,
    JournalProtocol,
    NewEvent,
    SeqGapError,
    StoredEvent,
    StreamAppend,
    StreamNotFoundError,
    TurnlogError,
    event_hash,
)

__all__ = ["ContractClock", "JournalContract"]


class ContractClock:
    """Starts at 2025-01-01T00:00:00Z and moves one millisecond per reading."""

    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


def event(n: int = 0, type: str = "note") -> NewEvent:
    """A one-field event ``{"n": n}``."""
    return NewEvent(type, 1, f'{{"n":{n}}}')


def events(count: int, start: int = 0) -> list[NewEvent]:
    """``count`` events numbered from ``start``."""
    return [event(n) for n in range(start, start + count)]


def snapshot(journal: JournalProtocol) -> tuple[Any, ...]:
    """Everything a journal holds, through its API (any backend)."""
    return list(journal.read_all()), journal.heads(), list(journal.streams())


class JournalContract:
    """The clauses every :class:`~turnlog.journal.JournalProtocol` implementation keeps.

    Subclass it as ``Test…`` and define :meth:`open_journal`; each test gets a fresh
    journal (the ``journal`` fixture), closed after the test.
    """

    def open_journal(self, folder: Path, clock: Callable[[], datetime]) -> JournalProtocol:
        """A fresh, empty journal that stores its data under ``folder`` (if anywhere) and
        reads the time from ``clock``. Subclasses define it."""
        raise NotImplementedError(f"{type(self).__name__} must define open_journal(folder, clock)")

    @pytest.fixture
    def journal(self, tmp_path: Path) -> Iterator[JournalProtocol]:
        """A fresh journal from :meth:`open_journal`, closed after the test."""
        with self.open_journal(tmp_path, ContractClock()) as opened:
            yield opened

    def test_every_backend_implements_the_protocol(self, journal):
        assert isinstance(journal, JournalProtocol)

    def test_append_returns_gapless_seqs_chained_from_genesis(self, journal):
        stored = journal.append("conv", events(3), expected_seq=0)

        assert [e.seq for e in stored] == [1, 2, 3]
        assert stored[0].prev_hash == GENESIS_HASH
        assert [e.prev_hash for e in stored[1:]] == [e.hash for e in stored[:-1]]
        for e in stored:
            assert e.hash == event_hash(
                e.prev_hash, e.stream_id, e.seq, e.type, e.version, e.recorded_at, e.payload
            )

    def test_next_append_continues_the_chain_of_the_last(self, journal):
        first = journal.append("conv", events(2), expected_seq=0)
        [third] = journal.append("conv", [event(2)], expected_seq=2)

        assert third.seq == 3
        assert third.prev_hash == first[-1].hash

    def test_read_returns_exactly_what_append_returned(self, journal):
        stored = journal.append("conv", events(2), 0) + journal.append("conv", events(3, 2), 2)

        assert list(journal.read("conv")) == stored

    def test_read_is_an_iterator_limited_to_the_seq_range(self, journal):
        stored = journal.append("conv", events(5), 0)

        reader = journal.read("conv", from_seq=2, to_seq=4)

        assert iter(reader) is reader
        assert list(reader) == stored[1:4]

    def test_read_of_an_unknown_stream_is_empty(self, journal):
        assert list(journal.read("nobody")) == []

    def test_payload_is_stored_byte_for_byte(self, journal):
        payload = '{"b": 1, "a": "é\\u00e9 ✓", "list": [1.50, null]}'
        journal.append("conv", [NewEvent("note", 2, payload)], 0)

        [stored] = journal.read("conv")
        assert (stored.payload, stored.type, stored.version) == (payload, "note", 2)

    def test_a_batch_gets_consecutive_positions_and_one_clock_reading(self, journal):
        journal.append("other", [event()], 0)
        stored = journal.append("conv", events(4), 0)

        assert [e.position for e in stored] == list(range(stored[0].position, stored[0].position + 4))
        assert len({e.recorded_at for e in stored}) == 1

    def test_recorded_at_comes_from_the_clock_in_utc_with_microseconds(self, journal):
        [stored] = journal.append("conv", [event()], 0)

        assert stored.recorded_at == "2025-01-01T00:00:00.001000Z"

    def test_recorded_at_of_an_event_overrides_the_clock(self, journal):
        imported = NewEvent("note", 1, "{}", recorded_at="2019-05-06T07:08:09.123456Z")

        stored = journal.append("conv", [imported, event()], 0)

        assert stored[0].recorded_at == "2019-05-06T07:08:09.123456Z"
        assert stored[1].recorded_at == "2025-01-01T00:00:00.001000Z"

    def test_stale_expected_seq_is_a_concurrency_error_naming_stream_and_seqs(self, journal):
        journal.append("conv", events(3), 0)
        before = snapshot(journal)

        with pytest.raises(ConcurrencyError, match=r"'conv'.*expected seq 1.*last seq is 3") as info:
            journal.append("conv", [event()], expected_seq=1)

        assert (info.value.stream_id, info.value.expected_seq, info.value.actual_seq) == ("conv", 1, 3)
        assert snapshot(journal) == before

    def test_expected_seq_zero_on_an_existing_stream_is_a_concurrency_error(self, journal):
        journal.append("conv", events(2), 0)

        with pytest.raises(ConcurrencyError, match="last seq is 2"):
            journal.append("conv", [event()], expected_seq=0)

    @pytest.mark.parametrize("existing", [0, 2])
    def test_expected_seq_past_the_stream_end_is_a_gap_not_a_lost_race(self, journal, existing):
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

    def test_last_seq_is_zero_for_an_unknown_stream(self, journal):
        journal.append("conv", events(4), 0)

        assert journal.last_seq("conv") == 4
        assert journal.last_seq("nobody") == 0

    def test_hash_at_returns_the_stored_hash_or_raises(self, journal):
        stored = journal.append("conv", events(2), 0)

        assert journal.hash_at("conv", 2) == stored[1].hash
        with pytest.raises(EventNotFoundError, match=r"'conv' seq 3"):
            journal.hash_at("conv", 3)

    def test_streams_lists_the_most_recently_appended_first(self, journal):
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

    def test_stream_returns_one_summary_or_raises(self, journal):
        journal.append("a", events(2), 0)

        assert journal.stream("a").last_seq == 2
        with pytest.raises(StreamNotFoundError, match="'nobody'"):
            journal.stream("nobody")

    def test_read_all_is_global_order_after_a_position_with_a_limit(self, journal):
        a1 = journal.append("a", [event(1)], 0)
        b1 = journal.append("b", [event(2)], 0)
        a2 = journal.append("a", [event(3)], 1)
        everything = a1 + b1 + a2

        assert list(journal.read_all()) == everything
        assert list(journal.read_all(after_position=a1[0].position)) == b1 + a2
        assert list(journal.read_all(limit=2)) == a1 + b1

    def test_a_fork_chains_its_first_event_to_the_parent_hash_at_the_fork_point(self, journal):
        parent = journal.append("parent", events(3), 0)

        [first] = journal.append("fork", [event(9)], 0, parent=("parent", 2))

        assert first.seq == 1
        assert first.prev_hash == parent[1].hash
        info = journal.stream("fork")
        assert (info.parent_stream_id, info.parent_seq) == ("parent", 2)
        assert journal.verify().ok

    def test_lineage_of_a_fork_of_a_fork_is_the_ancestors_prefix_then_its_own(self, journal):
        root = journal.append("root", events(3), 0)
        child = journal.append("child", events(2), 0, parent=("root", 2))
        child += journal.append("child", [event(7)], 2)
        grandchild = journal.append("grandchild", events(2), 0, parent=("child", 2))

        assert list(journal.lineage("grandchild")) == root[:2] + child[:2] + grandchild
        assert list(journal.lineage("grandchild", to_seq=1)) == root[:2] + child[:2] + grandchild[:1]
        assert list(journal.lineage("root")) == root

    def test_a_fork_from_a_missing_event_is_refused_and_writes_nothing(self, journal):
        journal.append("parent", events(2), 0)
        before = snapshot(journal)

        with pytest.raises(EventNotFoundError, match=r"'fork' from 'parent' at seq 3"):
            journal.append("fork", [event()], 0, parent=("parent", 3))

        assert snapshot(journal) == before
        assert journal.last_seq("fork") == 0

    def test_a_parent_is_only_allowed_on_the_first_append(self, journal):
        journal.append("parent", events(2), 0)
        journal.append("fork", [event()], 0, parent=("parent", 1))

        with pytest.raises(InvalidAppendError, match="first append"):
            journal.append("fork", [event()], 1, parent=("parent", 1))

    def test_heads_are_every_streams_last_seq_and_hash_by_stream_id(self, journal):
        b = journal.append("b", events(2), 0)
        a = journal.append("a", events(3), 0)

        assert journal.heads() == [Head("a", 3, a[-1].hash), Head("b", 2, b[-1].hash)]
        assert journal.check_heads(journal.heads()) == []

    def test_a_stream_that_grew_since_its_head_was_saved_is_fine(self, journal):
        journal.append("a", events(2), 0)
        saved = journal.heads()
        journal.append("a", events(2, 2), 2)

        assert journal.check_heads(saved) == []

    def test_a_closed_journal_raises_a_journal_error_naming_the_file(self, journal):
        journal.close()

        with pytest.raises(JournalError, match="closed") as info:
            journal.append("conv", [event()], 0)
        assert journal.path in str(info.value)
        with pytest.raises(JournalError, match="closed"):
            list(journal.read("conv"))

    def test_closing_from_another_thread_is_safe_and_closes_the_journal(self, journal):
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

    def test_read_from_seq_zero_or_below_is_the_whole_stream(self, journal):
        stored = journal.append("conv", events(3), 0)

        assert list(journal.read("conv", 0)) == stored
        assert list(journal.read("conv", -5, 2)) == stored[:2]
        assert list(journal.read("conv", 3, 2)) == []

    @pytest.mark.parametrize("stream_id", ["", "a\x00b", "line\nbreak", 7, None])
    def test_a_bad_stream_id_is_refused(self, journal, stream_id):
        with pytest.raises(InvalidAppendError, match="stream id"):
            journal.append(stream_id, [event()], 0)
        assert snapshot(journal) == ([], [], [])

    @pytest.mark.parametrize("payload", ["", "{", "not json", "{'a': 1}", "[1,]"])
    def test_a_payload_that_is_not_json_is_refused(self, journal, payload):
        journal.append("conv", [event()], 0)
        before = snapshot(journal)

        with pytest.raises(InvalidAppendError, match="JSON"):
            journal.append("conv", [event(1), NewEvent("note", 1, payload)], 1)

        assert snapshot(journal) == before

    def test_no_events_is_refused(self, journal):
        with pytest.raises(InvalidAppendError, match="no events"):
            journal.append("conv", [], 0)

    def test_ancestry_is_the_segments_root_first(self, journal):
        journal.append("root", events(3), 0)
        journal.append("child", events(2), 0, parent=("root", 2))
        journal.append("grandchild", events(1), 0, parent=("child", 1))

        assert journal.ancestry("grandchild") == [("root", 2), ("child", 1), ("grandchild", None)]
        assert journal.ancestry("grandchild", 1) == [("root", 2), ("child", 1), ("grandchild", 1)]
        assert journal.ancestry("root") == [("root", None)]
        assert journal.ancestry("nobody") == [("nobody", None)]

    def test_verify_of_a_fork_checks_its_whole_history(self, journal):
        journal.append("root", events(3), 0)
        journal.append("child", events(2), 0, parent=("root", 2))

        report = journal.verify("child")

        assert (report.ok, report.checked_events) == (True, 4)

    def test_last_position_is_the_newest_position_or_zero(self, journal):
        assert journal.last_position() == 0
        journal.append("a", events(2), 0)
        [last] = journal.append("b", [event()], 0)

        assert journal.last_position() == last.position

    def test_read_all_filters_by_upper_bound_and_types(self, journal):
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

    def test_stored_events_are_frozen(self, journal):
        [stored] = journal.append("conv", [event()], 0)

        assert isinstance(stored, StoredEvent)
        with pytest.raises(AttributeError):
            stored.payload = "{}"

    def test_read_reverse_is_newest_first_within_the_range(self, journal):
        stored = journal.append("conv", events(5), 0)

        assert list(journal.read("conv", reverse=True)) == stored[::-1]
        assert list(journal.read("conv", 2, 4, reverse=True)) == stored[3:0:-1]

    def test_read_limit_counts_from_the_start_of_the_chosen_order(self, journal):
        stored = journal.append("conv", events(5), 0)

        assert list(journal.read("conv", limit=2)) == stored[:2]
        assert list(journal.read("conv", 2, limit=2)) == stored[1:3]
        assert list(journal.read("conv", reverse=True, limit=2)) == [stored[4], stored[3]]
        assert list(journal.read("conv", 1, 3, reverse=True, limit=10)) == stored[2::-1]
        assert list(journal.read("conv", limit=0)) == []

    def test_read_with_limit_and_reverse_is_an_iterator(self, journal):
        journal.append("conv", events(3), 0)

        reader = journal.read("conv", reverse=True, limit=1)

        assert iter(reader) is reader
        assert [e.seq for e in reader] == [3]

    def test_read_of_an_unknown_stream_is_empty_in_either_order(self, journal):
        assert list(journal.read("nobody", reverse=True, limit=3)) == []

    @pytest.mark.parametrize("limit", [-1, 1.5, "2", True])
    def test_a_bad_limit_is_refused_naming_it(self, journal, limit):
        journal.append("conv", events(2), 0)

        with pytest.raises(InvalidReadError, match=r"'conv'.*limit must be None or an int >= 0"):
            journal.read("conv", limit=limit)
        with pytest.raises(InvalidReadError, match="limit"):
            journal.read_all(limit=limit)
        assert isinstance(InvalidReadError("x"), JournalError)

    def test_last_event_is_the_newest_event_or_none(self, journal):
        assert journal.last_event("conv") is None
        journal.append("conv", events(2), 0)
        journal.append("other", events(1), 0)
        [third] = journal.append("conv", [event(9, "last")], 2)

        assert journal.last_event("conv") == third
        assert journal.last_event("nobody") is None

    def test_last_event_of_a_fork_is_its_own_newest_event_not_the_parents(self, journal):
        journal.append("parent", events(3), 0)
        [first] = journal.append("fork", [event(7)], 0, parent=("parent", 2))

        assert journal.last_event("fork") == first

    def test_append_many_writes_every_stream_and_returns_what_append_returns(self, journal):
        journal.append("a", events(2), 0)

        a, b = journal.append_many([("a", events(2, 2), 2), StreamAppend("b", events(1), 0)])

        assert [e.seq for e in a] == [3, 4] and [e.seq for e in b] == [1]
        assert a[0].prev_hash == journal.hash_at("a", 2)
        assert list(journal.read("a", 3)) == a
        assert list(journal.read("b")) == b
        assert journal.verify().ok

    def test_append_many_positions_are_consecutive_in_item_order_with_one_clock_reading(self, journal):
        journal.append("z", events(1), 0)

        written = journal.append_many([("b", events(2), 0), ("a", events(3), 0)])

        flat = written[0] + written[1]
        assert [e.position for e in flat] == list(range(flat[0].position, flat[0].position + 5))
        assert len({e.recorded_at for e in flat}) == 1
        assert list(journal.read_all(after_position=flat[0].position - 1)) == flat

    def test_append_is_append_many_of_one_stream(self, journal):
        [single] = journal.append_many([("conv", events(2), 0)])

        assert single == list(journal.read("conv"))
        assert journal.append("conv", [event(5)], 2) == list(journal.read("conv", 3))

    @pytest.mark.parametrize("stale", ["first", "second"])
    def test_a_stale_stream_in_append_many_refuses_all_and_names_it(self, journal, stale):
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

    def test_a_gap_in_append_many_refuses_all_and_names_the_stream(self, journal):
        journal.append("a", events(2), 0)
        before = snapshot(journal)

        with pytest.raises(SeqGapError, match=r"'new'.*expected_seq 4 is past the stream's last seq 0"
                           ) as info:
            journal.append_many([("a", [event()], 2), ("new", [event()], 4)])

        assert (info.value.stream_id, info.value.actual_seq) == ("new", 0)
        assert snapshot(journal) == before

    def test_a_bad_event_in_a_later_stream_refuses_the_earlier_ones_too(self, journal):
        journal.append("a", events(1), 0)
        before = snapshot(journal)

        with pytest.raises(InvalidAppendError, match=r"'b'.*event 1.*not valid JSON"):
            journal.append_many([("a", [event()], 1), ("b", [event(), NewEvent("n", 1, "{")], 0)])

        assert snapshot(journal) == before
        assert journal.last_seq("a") == 1

    def test_a_fork_and_its_first_events_are_written_with_the_parents_new_events(self, journal):
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

    def test_a_fork_from_a_missing_event_in_append_many_writes_nothing(self, journal):
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
    def test_malformed_append_many_is_refused_before_anything_is_written(self, journal, appends, match):
        journal.append("x", events(1), 0)
        before = snapshot(journal)

        with pytest.raises(InvalidAppendError, match=match) as info:
            journal.append_many(appends)

        assert isinstance(info.value, TurnlogError)
        assert snapshot(journal) == before

    def test_a_closed_journal_refuses_append_many(self, journal):
        journal.close()

        with pytest.raises(JournalError, match="closed"):
            journal.append_many([("a", [event()], 0)])
        with pytest.raises(JournalError, match="closed"):
            journal.last_event("a")

    def test_verify_reports_progress_that_adds_up_to_the_events_checked(self, journal):
        journal.append("a", events(1500), 0)
        journal.append("fork", events(3), 0, parent=("a", 10))
        ticks: list[int] = []

        report = journal.verify(progress=ticks.append)

        assert report.ok and sum(ticks) == report.checked_events == journal.last_position()
        assert len(ticks) >= 2  # told along the way, not only at the end
        one: list[int] = []
        assert journal.verify("fork", progress=one.append).checked_events == sum(one) == 13
