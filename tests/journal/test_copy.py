"""``copy_streams``: any journal to any other, byte-identical, idempotent, conflicts refused."""

from __future__ import annotations

import pytest

from turnlog.journal import Journal, JournalError, NewEvent
from turnlog.journal._copy import copy_streams
from tests.pgcluster import fresh_url

from .conftest import FakeClock, event, events, raw_rows


def fill(journal) -> None:
    journal.append("a", [NewEvent("note", 1, '{"t": "é ✓"}'), *events(3)], 0)
    journal.append("b", events(2, 10), 0)
    journal.append("fork", [event(20)], 0, parent=("a", 2))
    journal.append("grand", [event(30)], 0, parent=("fork", 1))


def test_sqlite_to_postgres_to_sqlite_gives_byte_identical_rows(tmp_path):
    first, last = tmp_path / "first.db", tmp_path / "last.db"
    with Journal(first, clock=FakeClock()) as src:
        fill(src)
    with Journal(first) as src, Journal.open(fresh_url()) as pg, Journal(last) as back:
        assert copy_streams(src, pg).events == 8
        assert pg.heads() == src.heads() and pg.verify().ok
        assert copy_streams(pg, back).events == 8
        again = copy_streams(src, pg)
        assert (again.copied, again.events) == ([], 0) and len(again.skipped) == 4
        assert back.heads() == src.heads()
    assert raw_rows(last) == raw_rows(first)


def test_new_events_are_added_and_a_conflicting_stream_is_refused_by_name(tmp_path):
    with Journal(tmp_path / "s.db", clock=FakeClock()) as src, \
            Journal(tmp_path / "t.db", clock=FakeClock()) as dst:
        fill(src)
        copy_streams(src, dst)
        src.append("b", events(1, 40), 2)
        assert copy_streams(src, dst).copied == ["b"]
        assert dst.heads() == src.heads()
        dst.append("c", [event(1)], 0)
        src.append("c", [event(2)], 0)
        before = dst.heads()
        with pytest.raises(JournalError, match="stream 'c'"):
            copy_streams(src, dst)
        assert dst.heads() == before
