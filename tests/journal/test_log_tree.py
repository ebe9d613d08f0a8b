"""The log tree, checkpoints and proofs, checked by an independent verifier (tests/transparency.py).

Every backend keeps the RFC 6962 tree in step with its appends; proofs verify with
a second implementation written from RFC 9162 and C2SP; any single-byte edit of a
stored event, hash, tree node or checkpoint is found by the check against a signed
checkpoint, even when the edited event's chain (and the tree) were recomputed.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnlog.journal import GENESIS_HASH, Journal, NewEvent, event_hash
from turnlog.journal._note import generate_key
from turnlog.journal._proof import check_checkpoint, make_checkpoint
from turnlog.journal.errors import CheckpointError
from tests.journal.conftest import events
from tests.transparency import merkle_root, open_checkpoint, verify_consistency, verify_inclusion

KEY = generate_key("test-log")


def _grow(journal, plan: list[tuple[int, int]]) -> None:
    """Append per ``plan``: (stream number, events); a new stream number past 2 forks stream 0."""
    for stream, count in plan:
        sid = f"s{stream}"
        have = journal.last_seq(sid)
        parent = None
        if have == 0 and stream > 2 and journal.last_seq("s0"):
            parent = ("s0", journal.last_seq("s0"))
        journal.append(sid, events(count, have), have, parent=parent)


def _leaves(journal) -> list[bytes]:
    return [bytes.fromhex(e.hash) for e in journal.read_all()]


PLANS = st.lists(st.tuples(st.integers(0, 4), st.integers(1, 5)), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=PLANS, data=st.data())
def test_every_inclusion_and_consistency_proof_verifies_independently(plan, data):
    with Journal(":memory:") as journal:
        _grow(journal, plan)
        leaves = _leaves(journal)
        n = len(leaves)
        m = data.draw(st.integers(1, n), label="m")
        with journal.log_tree() as tree:
            assert tree.size() == n and tree.root() == merkle_root(leaves)
            for size in (m, n):
                root = merkle_root(leaves[:size])
                assert tree.root(size) == root
                for index in range(size):
                    proof = tree.inclusion(index, size)
                    assert verify_inclusion(leaves[index], index, size, proof, root)
            proof = tree.consistency(m, n)
            assert verify_consistency(m, n, merkle_root(leaves[:m]), merkle_root(leaves), proof)
            if m < n:  # a proof is bound to its sizes and roots
                assert not verify_consistency(m, n, merkle_root(leaves[:m]),
                                              merkle_root(leaves[:n - 1]), proof)


def test_every_backend_keeps_the_same_tree_as_the_events(journal):
    _grow(journal, [(0, 3), (1, 2), (3, 4), (0, 1)])
    leaves = _leaves(journal)
    with journal.log_tree() as tree:
        assert tree.size() == 10 and tree.root() == merkle_root(leaves)
        made = make_checkpoint(tree, KEY)
    origin, size, root = open_checkpoint(made.note, KEY.verifier().text())
    assert (size, root) == (10, merkle_root(leaves)) and origin.startswith("turnlog.invalid/")
    journal.append("s1", events(2, 2), 2)
    with journal.log_tree() as tree:
        assert [c.size for c in tree.checkpoints()] == [10]
        report = check_checkpoint(tree, made.note, KEY.verifier())
        assert report.ok and report.journal_size == 12
        assert tree.check()[0] is None


def test_a_journal_of_schema_3_gains_its_tree_when_opened_to_write(journal_path):
    with Journal(journal_path) as journal:
        _grow(journal, [(0, 5), (1, 2)])
        leaves = _leaves(journal)
    conn = sqlite3.connect(journal_path)
    for name in ("tree", "checkpoints", "blobs"):
        conn.execute(f"DROP TABLE {name}")
    conn.execute("DELETE FROM _turnlog_meta WHERE key = 'origin'")
    conn.execute("UPDATE _turnlog_meta SET value = '3' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with Journal(journal_path, readonly=True) as reader, reader.log_tree() as tree:
        assert tree.check([7]) == (None, {7: merkle_root(leaves)})  # recomputed, not stored
        with pytest.raises(CheckpointError.__mro__[1], match="no log tree yet"):
            tree.root()
    with Journal(journal_path) as journal, journal.log_tree() as tree:
        assert tree.root() == merkle_root(leaves) and tree.check()[0] is None


# -- tampering --------------------------------------------------------------------------


def _signed(path: Path, tiles: int = 0) -> str:
    """A journal of 12 events (after ``tiles`` * 256 + 88 others, if any), signed."""
    with Journal(path) as journal:
        if tiles:  # so that the tree stores nodes (a 256-event tile and up)
            _grow(journal, [(2, 256)] * tiles + [(2, 88)])
        _grow(journal, [(0, 4), (1, 3), (3, 2), (0, 2), (1, 1)])
        with journal.log_tree() as tree:
            return make_checkpoint(tree, KEY).note


def _rechain(conn: sqlite3.Connection) -> None:
    """Recompute every chain hash from the stored fields, as a forger would."""
    links = dict(((s, (p, q)) for s, p, q in conn.execute("SELECT * FROM stream_links")))
    hashes: dict[tuple[str, int], bytes] = {}
    rows = conn.execute("SELECT position, stream_id, seq, type, version, recorded_at, payload "
                        "FROM events ORDER BY position").fetchall()
    for position, sid, seq, type_, version, at, payload in rows:
        if seq > 1:
            prev = hashes[(sid, seq - 1)].hex()
        elif sid in links:
            prev = hashes[links[sid]].hex()
        else:
            prev = GENESIS_HASH
        new = bytes.fromhex(event_hash(prev, sid, seq, type_, version, at, payload))
        hashes[(sid, seq)] = new
        conn.execute("UPDATE events SET prev_hash = ?, hash = ? WHERE position = ?",
                     (bytes.fromhex(prev), new, position))


def _rebuild_tree(conn: sqlite3.Connection) -> None:
    """Recompute the tree too (the forger knows RFC 6962 and the table's numbering:
    nodes in the order appends complete them)."""
    from tests.transparency import _sha

    conn.execute("DELETE FROM tree")
    stack: list[tuple[int, bytes]] = []  # (level, hash) of the right edge
    nodes = []
    for (h,) in conn.execute("SELECT hash FROM events ORDER BY position").fetchall():
        level, node = 0, _sha(b"\x00" + bytes(h))
        nodes.append(node)
        while stack and stack[-1][0] == level:
            node = _sha(b"\x01" + stack.pop()[1] + node)
            level += 1
            nodes.append(node)
        stack.append((level, node))
    conn.executemany("INSERT INTO tree VALUES (?, ?)", list(enumerate(nodes)))


def _edit(path: Path, sql: str, params: tuple) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    for table in ("events", "tree", "checkpoints"):
        for op in ("update", "delete"):
            conn.execute(f"DROP TRIGGER IF EXISTS {table}_refuse_{op}")
    conn.execute(sql, params)
    return conn


def _flip(value: bytes | str, at: int) -> bytes | str:
    raw = value.encode() if isinstance(value, str) else bytes(value)
    at %= len(raw)
    flipped = raw[:at] + bytes([raw[at] ^ 0x01]) + raw[at + 1:]
    return flipped.decode("utf-8", "replace") if isinstance(value, str) else flipped


def _found(path: Path, note: str) -> bool:
    """Whether the journal at ``path`` fails against ``note`` (chains or checkpoint)."""
    with Journal(path, readonly=True) as journal:
        if journal.verify().first_bad is not None:  # not the guards the edit dropped
            return True
        try:
            with journal.log_tree() as tree:
                return not check_checkpoint(tree, note, KEY.verifier()).ok
        except CheckpointError as exc:
            return exc.tampered


TARGETS = ["payload", "recorded_at", "type", "hash", "tree", "checkpoint"]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(TARGETS), row=st.integers(0, 5000), at=st.integers(0, 500),
       rechain=st.booleans(), retree=st.booleans(), tiles=st.integers(0, 2))
def test_any_single_byte_edit_is_found_even_with_the_chain_recomputed(
        tmp_path_factory, target, row, at, rechain, retree, tiles):
    path = tmp_path_factory.mktemp("j") / "j.db"
    note = _signed(path, max(tiles, target == "tree"))  # a tree node needs a tile
    conn = sqlite3.connect(path)
    table, key = {"tree": ("tree", "id"), "checkpoint": ("checkpoints", "id")}.get(
        target, ("events", "position"))
    column = {"tree": "hash", "checkpoint": "note"}.get(target, target)
    keys = conn.execute(f"SELECT {key}, {column} FROM {table} ORDER BY {key}").fetchall()
    conn.close()
    *where, value = keys[row % len(keys)]
    edited = _flip(value, at)
    if edited == value:
        return
    cond = " AND ".join(f"{k.strip()} = ?" for k in key.split(","))
    conn = _edit(path, f"UPDATE {table} SET {column} = ? WHERE {cond}", (edited, *where))
    if table == "events" and rechain and target != "hash":  # (rechaining undoes a hash edit)
        _rechain(conn)
        if retree:
            _rebuild_tree(conn)
    conn.commit()
    conn.close()
    assert _found(path, note)


def test_a_rewrite_with_chain_and_tree_recomputed_is_found_and_bounded_by_kept_checkpoints(
        journal_path):
    note = _signed(journal_path)
    with Journal(journal_path) as journal:  # a later checkpoint, kept in the journal
        journal.append("s0", events(3, 6), 6)
        with journal.log_tree() as tree:
            make_checkpoint(tree, KEY)
    conn = _edit(journal_path, "UPDATE events SET payload = '{\"n\":99}' WHERE position = 14", ())
    _rechain(conn)
    _rebuild_tree(conn)
    conn.commit()
    conn.close()
    with Journal(journal_path, readonly=True) as journal:
        assert journal.verify().first_bad is None  # the chains alone cannot see it
        with journal.log_tree() as tree:
            report = check_checkpoint(tree, note, KEY.verifier())
    assert not report.ok  # the later checkpoint kept in the journal no longer holds
    assert "does not hold" in report.problem or "does not match" in report.problem


def test_a_checkpoint_larger_than_the_journal_says_events_were_cut_off(journal_path):
    note = _signed(journal_path)
    conn = _edit(journal_path, "DELETE FROM events WHERE position > 10", ())
    conn.execute("DELETE FROM tree WHERE id >= 2 * 10 - 2")  # the nodes of 10 leaves: 18
    conn.execute("DELETE FROM checkpoints")
    conn.commit()
    conn.close()
    with Journal(journal_path, readonly=True) as journal, journal.log_tree() as tree:
        report = check_checkpoint(tree, note, KEY.verifier())
    assert not report.ok and "cut off" in report.problem and report.journal_size == 10


@pytest.mark.parametrize("note, tampered, message", [
    ("a\n1\nAAAA\n", False, "no blank line"),
    ("a\n1\n" + "A" * 44 + "\n\n", False, "no signature"),
    ("a\n1\n" + "A" * 43 + "=\n\n\u2014 test-log AAAAAAAA\n", True, "does not match|not signed"),
    ("a\nx\n" + "A" * 43 + "=\n\n\u2014 test-log AAAAAAAA\n", False, "not a tree size"),
    ("a\n1\n", False, "blank line"),
])
def test_a_malformed_or_unsigned_checkpoint_is_refused_with_one_line(
        journal_path, note, tampered, message):
    _signed(journal_path)
    with Journal(journal_path, readonly=True) as journal, journal.log_tree() as tree:
        with pytest.raises(CheckpointError, match=message) as caught:
            check_checkpoint(tree, note, KEY.verifier())
    assert caught.value.tampered is tampered and "\n" not in str(caught.value)


def test_a_rewrite_with_the_chain_recomputed_names_the_events_that_differ(journal_path):
    """The tree stores no leaf (only 256-event tiles and up): a rewrite whose chain was
    recomputed is named by the signed root (no tile yet) or by the first tile that differs."""
    note = _signed(journal_path)
    conn = _edit(journal_path, "UPDATE events SET payload = '{\"n\":7}' WHERE position = 5", ())
    _rechain(conn)
    conn.commit()
    conn.close()
    with Journal(journal_path, readonly=True) as journal, journal.log_tree() as tree:
        assert journal.verify().first_bad is None  # the guards the edit dropped aside
        report = check_checkpoint(tree, note, KEY.verifier())
    assert not report.ok and report.position is None and "among positions 1..12" in report.problem


def test_a_rewrite_inside_a_stored_tile_names_that_tile(journal_path):
    note = _signed(journal_path, tiles=2)  # 600 events: tiles 1..256, 257..512 and their parent
    conn = _edit(journal_path, "UPDATE events SET payload = '{\"n\":7}' WHERE position = 300", ())
    _rechain(conn)
    conn.commit()
    conn.close()
    with Journal(journal_path, readonly=True) as journal, journal.log_tree() as tree:
        assert journal.verify().first_bad is None
        report = check_checkpoint(tree, note, KEY.verifier())
    assert not report.ok and report.position == 257
    assert "node (8, 1) over events 257..512 is not their hash" in report.problem


def test_two_writers_taking_turns_keep_one_tree(journal_path):
    with Journal(journal_path) as a, Journal(journal_path) as b:
        for round_ in range(6):
            writer = (a, b)[round_ % 2]
            sid = f"w{round_ % 3}"
            writer.append(sid, events(round_ + 1), writer.last_seq(sid))
            if round_ == 2:  # a batch of streams, one of them a fork, in one transaction
                writer.append_many([("x", events(2), 0), ("y", events(1), 0, ("x", 1))])
        leaves = _leaves(a)
        for journal in (a, b):
            with journal.log_tree() as tree:
                assert tree.root() == merkle_root(leaves) and tree.check()[0] is None


def test_a_refused_append_leaves_the_tree_as_it_was(journal_path):
    from turnlog.journal import ConcurrencyError, Extension

    def refuse(db, appended):
        if any(e.stream_id == "bad" for e in appended):
            raise ValueError("no")

    hook = Extension(name="refuse", version=1, migrate=lambda db, v: None, on_append=refuse)
    with Journal(journal_path, extensions=[hook]) as journal:
        journal.append("s", events(3), 0)
        with pytest.raises(ValueError):
            journal.append_many([("t", events(2), 0), ("bad", events(1), 0)])
        with pytest.raises(ConcurrencyError):
            journal.append("s", events(1), 1)
        journal.append("s", events(2), 3)
        leaves = _leaves(journal)
        assert len(leaves) == 5
        with journal.log_tree() as tree:
            assert tree.size() == 5 and tree.root() == merkle_root(leaves)
            assert tree.check()[0] is None


def test_a_postgres_journal_of_schema_3_gains_its_tree_when_opened():
    import psycopg

    from tests.pgcluster import fresh_url

    url = fresh_url()
    with Journal.open(url) as journal:
        _grow(journal, [(0, 5), (1, 2), (3, 3)])
        leaves = _leaves(journal)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE tree, checkpoints, blobs")
        conn.execute("DELETE FROM _turnlog_meta WHERE key = 'origin'")
        conn.execute("UPDATE _turnlog_meta SET value = '3' WHERE key = 'schema_version'")
    with Journal.open(url) as journal:
        with journal.log_tree() as tree:
            assert tree.root() == merkle_root(leaves) and tree.check()[0] is None
            assert tree.origin.startswith("turnlog.invalid/")
        journal.append("s0", events(1), 5)
        with journal.log_tree() as tree:
            assert tree.root() == merkle_root(_leaves(journal))
