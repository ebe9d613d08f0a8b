"""Properties: whatever the appends and forks, every chain stays gapless and verifiable."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnlog.journal import (
    ConcurrencyError,
    Head,
    Journal,
    NewEvent,
    SeqGapError,
    dump_heads,
    load_heads,
)

from turnlog.testing import json_values

from .conftest import BACKENDS, FakeClock

payloads = json_values().map(lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":")))
names = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=12)
new_events = st.builds(NewEvent, type=names, version=st.integers(1, 3), payload=payloads)

# (operation, which stream (indexing base streams then forks), argument)
batches = st.lists(new_events, min_size=1, max_size=4)
appends = st.tuples(st.just("append"), st.integers(0, 7), batches)
# a wrong expected_seq: negative is behind the stream's end (stale), positive past it (a gap)
stale_appends = st.tuples(st.just("stale"), st.integers(0, 7),
                          st.integers(-3, 3).filter(bool))
forks = st.tuples(st.just("fork"), st.integers(0, 7), st.integers(0, 10))
operations = st.lists(st.one_of(appends, appends, stale_appends, forks), max_size=20)


def own_seqs(journal: Journal, stream_id: str) -> list[int]:
    return [e.seq for e in journal.read(stream_id)]


@pytest.mark.parametrize("backend", ["sqlite-normal-sync", "sqlite-memory"])
@settings(max_examples=100, deadline=None)
@given(stream_ids=st.lists(names, min_size=4, max_size=4, unique=True), ops=operations)
def test_random_appends_and_forks_keep_every_stream_gapless_and_verifiable(
    backend, stream_ids, ops
):
    model: dict[str, list[NewEvent]] = {}
    links: dict[str, tuple[str, int]] = {}
    with tempfile.TemporaryDirectory() as tmp, BACKENDS[backend](
        Path(tmp) / "j.db", FakeClock()
    ) as journal:
        for kind, index, arg in ops:
            targets = stream_ids + list(links)
            stream_id = targets[index % len(targets)]
            known = model.get(stream_id, [])
            if kind == "append":
                journal.append(stream_id, arg, len(known))
                model[stream_id] = known + arg
            elif kind == "stale":
                wrong = len(known) + arg
                if wrong < 0:
                    continue
                error = SeqGapError if arg > 0 else ConcurrencyError
                with pytest.raises(error) as info:
                    journal.append(stream_id, [NewEvent("x", 1, "{}")], wrong)
                assert info.value.actual_seq == len(known)
                assert info.value.expected_seq == wrong
            elif known and (fork_id := f"fork {len(links)}") not in stream_ids:
                at = 1 + arg % len(known)
                journal.append(fork_id, [NewEvent("forked", 1, "{}")], 0, parent=(stream_id, at))
                model[fork_id] = [NewEvent("forked", 1, "{}")]
                links[fork_id] = (stream_id, at)

        for stream_id, expected in model.items():
            stored = list(journal.read(stream_id))
            assert [e.seq for e in stored] == list(range(1, len(expected) + 1))
            assert [(e.type, e.version, e.payload) for e in stored] == [
                (e.type, e.version, e.payload) for e in expected
            ]
            assert list(journal.lineage(stream_id)) == expected_lineage(journal, stream_id, links)
        assert {i.stream_id: i.events for i in journal.streams()} == {
            s: len(e) for s, e in model.items()
        }
        assert len(list(journal.read_all())) == sum(len(e) for e in model.values())
        report = journal.verify()
        assert report.ok and report.checked_events == sum(len(e) for e in model.values())
        for stream_id in model:
            one = journal.verify(stream_id)
            assert one.ok and one.checked_events == len(list(journal.lineage(stream_id)))
        assert journal.last_position() == max((e.position for e in journal.read_all()), default=0)
        heads_file = Path(tmp) / "heads.json"
        dump_heads(journal.heads(), heads_file)
        assert journal.check_heads(load_heads(heads_file)) == []


def expected_lineage(journal: Journal, stream_id: str, links: dict[str, tuple[str, int]]) -> list:
    own = list(journal.read(stream_id))
    if stream_id not in links:
        return own
    parent, at = links[stream_id]
    inherited = expected_lineage(journal, parent, links)
    return [e for e in inherited if e.stream_id != parent or e.seq <= at] + own


heads = st.builds(
    Head,
    stream_id=st.text(min_size=1),
    seq=st.integers(1, 2**62),
    hash=st.text("0123456789abcdef", min_size=64, max_size=64),
)


@settings(max_examples=100, deadline=None)
@given(saved=st.lists(heads, max_size=5))
def test_heads_round_trip_through_a_heads_file(saved):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "heads.json"
        dump_heads(saved, path)
        assert load_heads(path) == saved
        assert [set(item) for item in json.loads(path.read_text())] == [
            {"conversation_id", "seq", "hash"}
        ] * len(saved)


@pytest.mark.parametrize("backend", ["sqlite-memory"])
@settings(max_examples=100, deadline=None)
@given(length=st.integers(0, 8), from_seq=st.integers(-1, 9), to_seq=st.none() | st.integers(0, 9),
       limit=st.none() | st.integers(0, 9), reverse=st.booleans())
def test_a_windowed_read_is_the_slice_of_the_whole_stream(
    backend, length, from_seq, to_seq, limit, reverse
):
    with BACKENDS[backend](Path("unused"), FakeClock()) as journal:
        whole = journal.append("s", [NewEvent("x", 1, f"{n}") for n in range(length)], 0) \
            if length else []
        window = [e for e in whole if from_seq <= e.seq and (to_seq is None or e.seq <= to_seq)]
        window = window[::-1] if reverse else window
        assert list(journal.read("s", from_seq, to_seq, limit=limit, reverse=reverse)) == \
            window[:limit]
        assert journal.last_event("s") == (whole[-1] if whole else None)


# (stream index, batch size, how far off its expected_seq is: 0 is right)
items = st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3), st.sampled_from([0, 0, 0, -1, 1])),
                 min_size=1, max_size=4, unique_by=lambda item: item[0])


@pytest.mark.parametrize("backend", ["sqlite-memory"])
@settings(max_examples=100, deadline=None)
@given(rounds=st.lists(items, min_size=1, max_size=5))
def test_append_many_is_every_append_in_order_or_none_of_them(backend, rounds):
    lengths = [0, 0, 0, 0]
    with BACKENDS[backend](Path("unused"), FakeClock()) as journal:
        for batch in rounds:
            before = list(journal.read_all())
            appends = [(f"s{i}", [NewEvent("x", 1, "{}")] * size, lengths[i] + off)
                       for i, size, off in batch if lengths[i] + off >= 0]
            if not appends:
                continue
            wrong = next(((s, e) for s, _, e in appends if e != lengths[int(s[1:])]), None)
            if wrong is None:
                written = journal.append_many(appends)
                assert [[e.seq for e in w] for w in written] == [
                    list(range(e + 1, e + 1 + len(evs))) for _, evs, e in appends]
                assert list(journal.read_all(after_position=len(before))) == \
                    [e for w in written for e in w]
                for s, evs, _ in appends:
                    lengths[int(s[1:])] += len(evs)
            else:
                with pytest.raises((ConcurrencyError, SeqGapError)) as info:
                    journal.append_many(appends)
                assert (info.value.stream_id, info.value.expected_seq) == wrong
                assert list(journal.read_all()) == before
        assert [journal.last_seq(f"s{i}") for i in range(4)] == lengths
        assert journal.verify().ok
