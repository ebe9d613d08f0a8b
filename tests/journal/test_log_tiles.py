"""The log tree stored as 256-event tiles (schema 8): no node below level 8 is kept,
yet every root and proof is the RFC 6962 one (checked by the independent verifier,
tests/transparency.py) at sizes on and across tile boundaries, on every backend;
edits of a stored node or of an event hash are still found by ``verify --checkpoint``;
a journal of schema 6 (every node stored) loses its lower rows, not its proofs.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnlog.journal import Journal, NewEvent
from turnlog.journal._merkle import TILE_LEVEL, node_at, node_id
from tests.journal.conftest import events
from tests.journal.test_log_tree import _rebuild_tree
from tests.transparency import merkle_root, verify_consistency, verify_inclusion

TURNLOG = str(Path(sys.executable).with_name("turnlog"))
EDGES = [1, 2, 255, 256, 257, 511, 512, 513, 767, 768, 769, 1024, 1025, 1100]


def _leaves(journal) -> list[bytes]:
    return [bytes.fromhex(e.hash) for e in journal.read_all()]


def _fill(journal, total: int, batch: int = 97) -> None:
    """``total`` events in batches of ``batch`` over three streams (boundaries fall mid-batch)."""
    written = 0
    while written < total:
        sid = f"s{written % 3}"
        n = min(batch, total - written)
        have = journal.last_seq(sid)
        journal.append(sid, events(n, have), have)
        written += n


def _stored_ids(path: Path) -> list[int]:
    conn = sqlite3.connect(path)
    try:
        return [i for (i,) in conn.execute("SELECT id FROM tree ORDER BY id")]
    finally:
        conn.close()


def _tiles(size: int) -> list[int]:
    """The ids of every complete subtree of 256 leaves and up of a tree of ``size``."""
    return sorted(node_id(level, index) for level in range(TILE_LEVEL, size.bit_length())
                  for index in range(size >> level))


@pytest.mark.parametrize("batch", [1, 97, 256, 700])
def test_the_stored_tree_keeps_only_tiles_and_their_tree(journal_path, batch):
    with Journal(journal_path) as journal:
        _fill(journal, 1100, batch)
        leaves = _leaves(journal)
    ids = _stored_ids(journal_path)
    assert ids == _tiles(1100) and len(ids) == 4 + 2 + 1  # levels 8, 9, 10
    assert all(node_at(i)[0] >= TILE_LEVEL for i in ids)
    conn = sqlite3.connect(journal_path)
    stored = dict(conn.execute("SELECT id, hash FROM tree"))
    conn.close()
    for level, index in map(node_at, ids):  # each is the independent verifier's subtree root
        assert stored[node_id(level, index)] == merkle_root(
            leaves[index << level:(index + 1) << level])


def _check_proofs(journal, sizes: list[int], leaves: list[bytes], pick) -> None:
    with journal.log_tree() as tree:
        assert tree.size() == len(leaves) and tree.check()[0] is None
        for size in sizes:
            root = merkle_root(leaves[:size])
            assert tree.root(size) == root
            for index in {0, size - 1, min(255, size - 1), min(256, size - 1), pick(size)}:
                proof = tree.inclusion(index, size)
                assert verify_inclusion(leaves[index], index, size, proof, root)
        for old in sizes:
            for new in sizes:
                if old <= new:
                    proof = tree.consistency(old, new)
                    assert verify_consistency(old, new, merkle_root(leaves[:old]),
                                              merkle_root(leaves[:new]), proof)


def test_proofs_across_tile_boundaries_verify_independently_on_every_backend(journal):
    import random

    _fill(journal, 1100)
    rng = random.Random(5)
    _check_proofs(journal, EDGES, _leaves(journal), lambda size: rng.randrange(size))


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(total=st.integers(1, 1400), data=st.data())
def test_proofs_at_any_size_verify_independently(tmp_path_factory, total, data):
    path = tmp_path_factory.mktemp("t") / "j.db"
    with Journal(path) as journal:
        _fill(journal, total, data.draw(st.integers(1, 300), label="batch"))
        leaves = _leaves(journal)
        sizes = sorted(set(data.draw(st.lists(st.integers(1, total), min_size=1, max_size=4),
                                     label="sizes")))
        _check_proofs(journal, sizes, leaves,
                      lambda size: data.draw(st.integers(0, size - 1), label="index"))
    assert _stored_ids(path) == _tiles(total)


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([TURNLOG, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def _edit(path: Path, sql: str, params: tuple) -> None:
    conn = sqlite3.connect(path)
    for table in ("events", "tree"):
        conn.execute(f"DROP TRIGGER IF EXISTS {table}_refuse_update")
    conn.execute(sql, params)
    conn.commit()
    conn.close()


def _chats(path: Path, total: int) -> None:
    """Conversations the engine reads (``turnlog verify`` decodes them): ``total`` events."""
    from turnlog.engine.model.conversation import Conversation
    from turnlog.engine.model.events import (
        ConversationStarted,
        ModelRequested,
        ModelResponded,
        UserMessage,
    )
    from turnlog.engine.model.messages import Text

    with Journal(path) as journal:
        written, i = 0, 0
        while written < total:
            conv = Conversation.start(journal, ConversationStarted(
                conversation_id=f"c{i}", provider="acme", model="m1"))
            turns = []
            for turn in range(1, 60):
                turns += [UserMessage.of(f"question {turn}"),
                          ModelRequested(turn=turn, digest="d" * 64, provider="acme", model="m1"),
                          ModelResponded(turn=turn, parts=(Text(text=f"answer {turn}"),),
                                         provider="acme", model="m1")]
            turns = turns[:total - written - 1]
            if turns:
                conv.append(*turns)
            written, i = written + 1 + len(turns), i + 1


def _flip(value: bytes, at: int) -> bytes:
    return value[:at] + bytes([value[at] ^ 0x01]) + value[at + 1:]


@pytest.mark.parametrize("table, row", [
    ("tree", 0), ("tree", 1), ("tree", 2),  # tiles 1..256 and 257..512, their parent
    ("events", 1), ("events", 256), ("events", 257), ("events", 512), ("events", 600)])
def test_a_single_byte_edit_of_a_stored_node_or_an_event_hash_fails_verify_checkpoint(
        tmp_path, table, row):
    _chats(tmp_path / "j.db", 600)
    vkey = _run("keygen", "acme", "-o", "acme.key", cwd=tmp_path).stdout.strip()
    made = _run("checkpoint", "--key", "acme.key", "-o", "c.cp", "--db", "j.db", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    held = _run("verify", "--checkpoint", "c.cp", "--key", vkey, "--db", "j.db", cwd=tmp_path)
    assert held.returncode == 0, held.stdout + held.stderr
    path = tmp_path / "j.db"
    conn = sqlite3.connect(path)
    if table == "tree":
        node, value = conn.execute("SELECT id, hash FROM tree ORDER BY id LIMIT 1 OFFSET ?",
                                   (row,)).fetchone()
        sql, params = "UPDATE tree SET hash = ? WHERE id = ?", (_flip(value, 17), node)
    else:
        (value,) = conn.execute("SELECT hash FROM events WHERE position = ?", (row,)).fetchone()
        sql, params = "UPDATE events SET hash = ? WHERE position = ?", (_flip(value, 3), row)
    conn.close()
    _edit(path, sql, params)
    found = _run("verify", "--checkpoint", "c.cp", "--key", vkey, "--db", "j.db", cwd=tmp_path)
    assert found.returncode == 1, found.stdout + found.stderr
    with Journal(path, readonly=True) as journal, journal.log_tree() as tree:
        mismatch, _ = tree.check()
    if table == "tree":  # the tree check names the node
        assert mismatch is not None and mismatch.level >= TILE_LEVEL
    elif row <= 512:  # an event inside a stored tile: the tile differs
        assert mismatch is not None and mismatch.position == (row - 1) // 256 * 256 + 1


def _as_schema_7(path: Path) -> None:
    """The journal as schema 7 stored it: the same tables, every node in ``tree``."""
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER tree_refuse_delete")
    _rebuild_tree(conn)  # every node, numbered as appends complete them
    conn.execute(_REFUSE_DELETE)
    conn.execute("UPDATE _turnlog_meta SET value = '7' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()


_REFUSE_DELETE = ("CREATE TRIGGER tree_refuse_delete BEFORE DELETE ON tree BEGIN SELECT "
                  "RAISE(ABORT, 'turnlog journal is append-only: DELETE on tree is not allowed'); END")


def test_a_journal_of_schema_7_keeps_its_proofs_and_loses_the_rows_below_a_tile(journal_path):
    with Journal(journal_path) as journal:
        _fill(journal, 776)
    _as_schema_7(journal_path)
    assert len(_stored_ids(journal_path)) == 2 * 776 - bin(776).count("1")
    sizes = [1, 255, 256, 257, 511, 512, 513, 700, 776]

    def figures(journal) -> list[object]:
        with journal.log_tree() as tree:
            return [tree.check()[0], *(tree.root(s) for s in sizes),
                    *(tree.inclusion(i, s) for s in sizes for i in (0, s // 2, s - 1)),
                    *(tree.consistency(a, b) for a in sizes for b in sizes if a <= b)]

    with Journal(journal_path, readonly=True) as reader:  # read as it is: every node stored
        before = figures(reader)
        leaves = _leaves(reader)
    assert before[0] is None and before[len(sizes)] == merkle_root(leaves)
    with Journal(journal_path) as journal:  # opened to write: migrated
        assert figures(journal) == before
        have = journal.last_seq("s0")
        journal.append("s0", events(300, have), have)
        leaves = _leaves(journal)
        with journal.log_tree() as tree:
            assert tree.root() == merkle_root(leaves) and tree.check()[0] is None
    assert _stored_ids(journal_path) == _tiles(1076)
    conn = sqlite3.connect(journal_path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):  # the guard is back
        conn.execute("DELETE FROM tree")
    conn.close()


def test_a_journal_of_schema_6_read_as_it_is_checks_every_stored_node(journal_path):
    with Journal(journal_path) as journal:
        _fill(journal, 40)
    _as_schema_7(journal_path)
    conn = sqlite3.connect(journal_path)
    conn.execute("DROP TRIGGER tree_refuse_update")
    conn.execute("UPDATE tree SET hash = zeroblob(32) WHERE id = 5")  # node (1, 1)
    conn.commit()
    conn.close()
    with Journal(journal_path, readonly=True) as reader, reader.log_tree() as tree:
        mismatch, _ = tree.check()
    assert mismatch is not None and (mismatch.level, mismatch.index) == node_at(5)


def test_a_tree_edited_past_its_last_tile_refuses_appends_and_proofs(journal_path):
    with Journal(journal_path) as journal:
        _fill(journal, 300)
    conn = sqlite3.connect(journal_path)
    conn.execute("INSERT INTO tree VALUES (?, zeroblob(32))", (node_id(8, 1),))
    conn.commit()
    conn.close()
    from turnlog.journal import JournalError

    with Journal(journal_path) as journal:
        with pytest.raises(JournalError, match="log tree"):
            journal.append("s0", [NewEvent("note", 1, "{}")], journal.last_seq("s0"))
        with journal.log_tree() as tree, pytest.raises(JournalError, match="edited outside"):
            tree.root()
        with journal.log_tree() as tree:
            assert "beyond" in tree.check()[0].reason


def test_a_postgres_journal_of_schema_6_loses_the_rows_below_a_tile_not_its_proofs():
    import psycopg

    from tests.pgcluster import fresh_url
    from turnlog.journal._merkle import Frontier

    url = fresh_url()
    with Journal.open(url) as journal:
        _fill(journal, 600)
        leaves = _leaves(journal)
    frontier = Frontier(0, lambda *_: b"")
    every = [(node_id(level, index), h) for level, index, h in frontier.add(leaves)]
    with psycopg.connect(url, autocommit=True) as conn:  # as schema 6 stored it: every node
        conn.execute("ALTER TABLE tree DISABLE TRIGGER USER")
        conn.execute("DELETE FROM tree")
        conn.cursor().executemany("INSERT INTO tree (id, hash) VALUES (%s, %s)", every)
        conn.execute("ALTER TABLE tree ENABLE TRIGGER USER")
        conn.execute("UPDATE _turnlog_meta SET value = '7' WHERE key = 'schema_version'")
    with Journal.open(url) as journal:
        with journal.log_tree() as tree:
            assert tree.check()[0] is None
            for size in (255, 256, 257, 511, 512, 513, 600):
                root = merkle_root(leaves[:size])
                assert tree.root(size) == root
                for index in (0, min(255, size - 1), size - 1):
                    assert verify_inclusion(leaves[index], index, size,
                                            tree.inclusion(index, size), root)
    with psycopg.connect(url, autocommit=True) as conn:
        ids = [i for (i,) in conn.execute("SELECT id FROM tree ORDER BY id")]
        assert ids == _tiles(600)
        with pytest.raises(psycopg.errors.IntegrityConstraintViolation):  # the guard is back
            conn.execute("DELETE FROM tree")
