"""Erasure at the journal level: the payload goes, every hash, the tree, every checkpoint
and every proof stay (chain version 2), checked by the independent verifier
(tests/transparency.py); what is refused, and that a crash leaves all or nothing."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from hashlib import sha256
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.journal.conftest import events
from tests.old_journals import write_old_journal
from tests.transparency import merkle_root, open_checkpoint, verify_consistency, verify_inclusion
from turnlog.journal import (
    CHAIN_VERSION,
    EventNotFoundError,
    Journal,
    NewEvent,
    NotErasableError,
    copy_streams,
    erased_digest,
)
from turnlog.journal._note import generate_key
from turnlog.journal._proof import check_checkpoint, make_checkpoint

KEY = generate_key("erase-test")


def record(seqs):
    return NewEvent("erasure_recorded", 1, json.dumps({"by": "t", "reason": "r", "seqs": list(seqs)}))


def secret(stream: str, n: int) -> NewEvent:
    return NewEvent("note", 1, json.dumps({"text": f"SECRET-{stream}-{n}-x"}))


def _leaves(journal) -> list[bytes]:
    return [bytes.fromhex(e.hash) for e in journal.read_all()]


def _grow(journal, plan):
    for stream, count in plan:
        sid = f"s{stream}"
        have = journal.last_seq(sid)
        parent = None
        if have == 0 and stream > 2 and journal.last_seq("s0"):
            parent = ("s0", journal.last_seq("s0"))
        journal.append(sid, [secret(sid, have + i + 1) for i in range(count)], have, parent=parent)


def _proofs_hold(journal, leaves: list[bytes], m: int) -> None:
    n = len(leaves)
    with journal.log_tree() as tree:
        assert tree.size() == n and tree.root() == merkle_root(leaves)
        for size in (m, n):
            root = merkle_root(leaves[:size])
            for index in range(size):
                assert verify_inclusion(leaves[index], index, size, tree.inclusion(index, size), root)
        assert verify_consistency(m, n, merkle_root(leaves[:m]), merkle_root(leaves),
                                  tree.consistency(m, n))


PLANS = st.lists(st.tuples(st.integers(0, 4), st.integers(1, 4)), min_size=1, max_size=10)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=PLANS, data=st.data())
def test_erasing_random_events_keeps_verify_checkpoints_and_every_proof(plan, data):
    with Journal(":memory:") as journal:
        _grow(journal, plan)
        before = _leaves(journal)
        with journal.log_tree() as tree:
            old = make_checkpoint(tree, KEY).note
        streams = sorted({e.stream_id for e in journal.read_all()})
        chosen = data.draw(st.lists(st.sampled_from(streams), min_size=1, max_size=3), label="s")
        erased: dict[str, set[int]] = {}
        for sid in chosen:
            own = [e.seq for e in journal.read(sid) if e.type == "note"]
            seqs = data.draw(st.lists(st.sampled_from(own), min_size=1, unique=True), label="seqs")
            done = journal.erase(sid, {s: '{"text":"erased"}' for s in seqs}, record)
            assert set(done) == set(seqs) - erased.get(sid, set())
            erased.setdefault(sid, set()).update(seqs)

        assert journal.verify().ok
        after = _leaves(journal)
        assert after[:len(before)] == before  # every hash as it was; the records appended
        assert len(after) == len(before) + sum(1 for _ in journal.read_all(types=["erasure_recorded"]))
        with journal.log_tree() as tree:
            assert check_checkpoint(tree, old, KEY.verifier()).ok
        _proofs_hold(journal, after, data.draw(st.integers(1, len(after)), label="m"))
        for e in journal.read_all(types=["note"]):
            gone = e.seq in erased.get(e.stream_id, set())
            assert e.erased is gone and ("SECRET" in e.payload) is not gone
            if gone:
                assert erased_digest(e.payload) is not None


def test_every_backend_erases_keeping_hashes_and_records_it(journal):
    journal.append("a", [secret("a", 1), secret("a", 2), secret("a", 3)], 0)
    journal.append("b", [secret("b", 1)], 0, parent=("a", 2))
    hashes = [e.hash for e in journal.read_all()]
    assert journal.chain_version == CHAIN_VERSION

    assert journal.erase("a", {1: "{}", 2: '{"kept":true}'}, record) == [1, 2]
    assert journal.erase("a", {1: "{}"}, record) == []  # erased already: nothing written

    rows = list(journal.read("a"))
    assert [e.hash for e in journal.read_all()][:4] == hashes
    assert [e.erased for e in rows] == [True, True, False, False]
    assert rows[1].payload.endswith(',"kept":true}') and "SECRET" not in rows[1].payload
    assert json.loads(rows[-1].payload)["seqs"] == [1, 2] and rows[-1].type == "erasure_recorded"
    assert journal.verify().ok and journal.verify("b").ok  # the fork reads the erased prefix
    assert [e.erased for e in journal.lineage("b")] == [True, True, False]


def test_erasing_a_missing_event_or_an_erasure_record_changes_nothing(journal):
    journal.append("a", [secret("a", 1)], 0)
    journal.erase("a", {1: "{}"}, record)
    before = list(journal.read_all())
    with pytest.raises(EventNotFoundError, match="seq 9"):
        journal.erase("a", {9: "{}"}, record)
    with pytest.raises(NotErasableError, match="record of an erasure"):
        journal.erase("a", {2: "{}"}, record)
    assert list(journal.read_all()) == before


def test_erasing_with_other_streams_is_one_transaction_each_recording_its_own(journal):
    """``also`` erases other streams (a fork's copy of its parent's content) with the
    stream, all or nothing: one refused stream leaves every stream as it was."""
    journal.append("a", [secret("a", 1), secret("a", 2)], 0)
    journal.append("b", [secret("b", 1), secret("b", 2)], 0, parent=("a", 2))
    before = list(journal.read_all())
    with pytest.raises(EventNotFoundError, match="'b' seq 7"):
        journal.erase("a", {1: "{}"}, record, also={"b": ({1: "{}", 7: "{}"}, record)})
    assert list(journal.read_all()) == before
    assert journal.erase("a", {1: "{}"}, record, also={"b": ({1: "{}"}, record)}) == [1]
    assert [(e.stream_id, e.seq, e.erased) for e in journal.read_all()
            if e.erased or e.type == "erasure_recorded"] == [
        ("a", 1, True), ("b", 1, True), ("a", 3, False), ("b", 3, False)]
    assert journal.erase("a", {}, record, also={"b": ({1: "{}"}, record)}) == []
    assert len(list(journal.read_all())) == 6 and journal.verify().ok


def test_an_erased_payload_without_its_record_is_reported_as_tampering(journal_path):
    with Journal(journal_path) as journal:
        journal.append("a", [secret("a", 1), secret("a", 2)], 0)
        original = next(journal.read("a", 2)).payload
    conn = sqlite3.connect(journal_path)
    forged = '{"turnlog:erased":"%s"}' % sha256(original.encode()).hexdigest()
    conn.execute("DROP TRIGGER events_refuse_update")
    conn.execute("UPDATE events SET payload = ? WHERE seq = 2", (forged,))
    conn.commit()
    conn.close()
    with Journal(journal_path) as journal:  # the open puts the guard back
        report = journal.verify()
    assert not report.ok and (report.first_bad.stream_id, report.first_bad.seq) == ("a", 2)
    assert "no later erasure_recorded" in report.first_bad.reason


def test_the_erased_text_is_in_neither_the_file_nor_the_wal(journal_path):
    with Journal(journal_path) as journal:
        journal.append("a", [secret("a", n) for n in range(1, 40)], 0)
        journal.append("b", [secret("b", 1)], 0)
        reader = Journal(journal_path, readonly=True)  # a reader that has seen the content
        assert "SECRET-a-7-x" in next(reader.read("a", 7)).payload
        reader.close()
        journal.erase("a", {n: "{}" for n in range(1, 40)}, record)
        files = [p for p in journal_path.parent.iterdir() if p.name.startswith(journal_path.name)]
        blob = b"".join(p.read_bytes() for p in files)
    assert any(p.name.endswith("-wal") for p in files)  # still open: the WAL is there (empty)
    assert b"SECRET-a-" not in blob
    assert b"SECRET-b-1-x" in blob  # the search would find what is kept


_CRASH = """
import json, os, sys
from turnlog.journal import Extension, Journal, NewEvent

def hook(db, events):
    if any(e.type == "erasure_recorded" for e in events):
        os._exit(9)  # the process dies inside the erase's transaction

ext = Extension(name="crash", version=1, migrate=lambda db, v: None, on_append=hook)
with Journal(sys.argv[1], extensions=[ext]) as j:
    j.erase("a", {1: "{}", 2: "{}"}, lambda seqs: NewEvent(
        "erasure_recorded", 1, json.dumps({"seqs": list(seqs)})))
"""


def test_a_process_killed_inside_the_erase_leaves_the_journal_as_it_was(journal_path):
    with Journal(journal_path) as journal:
        journal.append("a", [secret("a", 1), secret("a", 2)], 0)
        before = list(journal.read_all())
    done = subprocess.run([sys.executable, "-c", _CRASH, str(journal_path)], timeout=60)
    assert done.returncode == 9
    with Journal(journal_path) as journal:
        assert list(journal.read_all()) == before
        assert journal.verify().ok and journal.restored_guards == ()


def test_a_chain_version_1_journal_refuses_to_erase_and_copy_migrates_it(tmp_path):
    old, new = tmp_path / "old.db", tmp_path / "new.db"
    write_old_journal(old, 2, [("a", [secret("a", 1), secret("a", 2)], None),
                               ("b", events(2), ("a", 1))])
    with Journal(old) as journal:
        assert journal.chain_version == 1
        before = list(journal.read_all())
        with pytest.raises(NotErasableError, match="chain version 1.*turnlog copy"):
            journal.erase("a", {1: "{}"}, record)
        assert list(journal.read_all()) == before and journal.verify().ok
        with Journal(new) as target:
            copy_streams(journal, target)
            assert target.chain_version == 2 and target.verify().ok
            assert [(e.stream_id, e.seq, e.payload) for e in target.read_all()] == [
                (e.stream_id, e.seq, e.payload) for e in before]
            assert target.erase("a", {1: "{}"}, record) == [1] and target.verify().ok


def test_a_whole_copy_of_an_erased_journal_keeps_its_hashes_and_checkpoints(tmp_path):
    with Journal(tmp_path / "a.db") as source, Journal(tmp_path / "b.db") as target:
        for n in range(3):  # interleaved streams and a fork: the copy keeps position order
            source.append("z", [secret("z", n + 1)], n)
            source.append("a", [secret("a", n + 1)], n)
        source.append("f", [secret("f", 1)], 0, parent=("z", 2))
        source.erase("a", {1: "{}"}, record)
        with source.log_tree() as tree:
            note = make_checkpoint(tree, KEY).note
        copy_streams(source, target)
        assert [e.hash for e in target.read_all()] == [e.hash for e in source.read_all()]
        assert target.verify().ok and next(target.read("a")).erased
        with target.log_tree() as tree:
            assert check_checkpoint(tree, note, KEY.verifier()).ok
        _, size, root = open_checkpoint(note, KEY.verifier().text())
        assert size == 8 and root == merkle_root(_leaves(target))
        assert [(e.stream_id, e.seq) for e in target.read_all()] == [
            (e.stream_id, e.seq) for e in source.read_all()]
        copy_streams(source, target)  # again: nothing more
        assert target.last_position() == 8


def test_a_large_part_kept_in_blobs_is_erased_with_its_event(journal_path):
    big = "ZQBIG" + "y" * 6000  # above the 4 KiB threshold: stored once in blobs
    with Journal(journal_path) as journal:
        journal.append("a", [NewEvent("note", 1, json.dumps({"text": big})),
                             NewEvent("note", 1, json.dumps({"text": big}))], 0)
        journal.append("b", [NewEvent("note", 1, json.dumps({"text": "ZQSMALL" + "z" * 5000}))], 0)
        journal.erase("a", {1: "{}"}, record)  # seq 2 still references the part: it stays
        assert next(journal.read("a", 2)).payload == json.dumps({"text": big})
        journal.erase("a", {2: "{}"}, record)
        assert journal.verify().ok
        blob = b"".join(p.read_bytes() for p in journal_path.parent.iterdir()
                        if p.name.startswith(journal_path.name))
    assert b"ZQBIG" not in blob and b"ZQSMALL" in blob
