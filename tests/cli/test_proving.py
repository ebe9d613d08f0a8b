"""keygen, checkpoint, prove and verify --checkpoint through the installed console script,
their output checked by the independent verifier (tests/transparency.py)."""

from __future__ import annotations

import base64
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.transparency import merkle_root, open_checkpoint, verify_consistency, verify_inclusion

TURNLOG = str(Path(sys.executable).with_name("turnlog"))


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([TURNLOG, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_keygen_checkpoint_prove_and_verify_speak_the_standard_formats(tmp_path):
    db = ["--db", "j.db"]
    assert run("demo", *db, cwd=tmp_path).returncode == 0
    made = run("keygen", "acme.example/audit", "-o", "acme.key", cwd=tmp_path)
    assert made.returncode == 0
    vkey = made.stdout.strip()
    assert made.stdout == vkey + "\n" and vkey.startswith("acme.example/audit+")
    assert (tmp_path / "acme.key").read_text().startswith("PRIVATE+KEY+acme.example/audit+")
    assert (tmp_path / "acme.key").stat().st_mode & 0o077 == 0
    assert run("keygen", "acme", "-o", "acme.key", cwd=tmp_path).returncode == 2  # never overwrites

    first = run("checkpoint", "--key", "acme.key", "-o", "old.cp", *db, cwd=tmp_path)
    assert first.returncode == 0 and first.stdout == (tmp_path / "old.cp").read_text()
    conn = sqlite3.connect(tmp_path / "j.db")
    leaves = [bytes(h) for (h,) in conn.execute("SELECT hash FROM events ORDER BY position")]
    conv, seq, position = conn.execute(
        "SELECT stream_id, seq, position FROM events ORDER BY position LIMIT 1 OFFSET 3").fetchone()
    conn.close()
    origin, size, root = open_checkpoint(first.stdout, vkey)
    assert size == len(leaves) and root == merkle_root(leaves)

    assert run("demo", *db, cwd=tmp_path).returncode == 0
    assert run("checkpoint", "--key", "acme.key", "-o", "new.cp", *db, cwd=tmp_path).returncode == 0
    _, new_size, new_root = open_checkpoint((tmp_path / "new.cp").read_text(), vkey)

    proved = run("prove", conv, str(seq), "--checkpoint", "old.cp", "--json", *db, cwd=tmp_path)
    assert proved.returncode == 0, proved.stderr
    inclusion = json.loads(proved.stdout)
    assert (inclusion["index"], inclusion["size"]) == (position - 1, size)
    assert inclusion["hash"] == leaves[position - 1].hex()
    assert verify_inclusion(bytes.fromhex(inclusion["hash"]), inclusion["index"], size,
                            [base64.b64decode(p) for p in inclusion["proof"]], root)

    consistent = run("prove", "--consistency", "old.cp", "new.cp", "--json", *db, cwd=tmp_path)
    found = json.loads(consistent.stdout)
    assert (found["old"], found["new"]) == (size, new_size)
    assert verify_consistency(size, new_size, root, new_root,
                              [base64.b64decode(p) for p in found["proof"]])

    audited = json.loads(run("audit", "--json", *db, cwd=tmp_path).stdout)
    assert audited["last_checkpoint"] == {"size": new_size, "events": new_size}

    ok = run("verify", "--checkpoint", "old.cp", "--key", vkey, *db, cwd=tmp_path)
    assert ok.returncode == 0 and f"checkpoint of {size} events holds" in ok.stdout
    (tmp_path / "acme.pub").write_text(vkey + "\n")
    assert run("verify", "--checkpoint", "new.cp", "--key", "acme.pub", *db,
               cwd=tmp_path).returncode == 0


def test_verify_checkpoint_exits_1_when_tampered_and_2_on_bad_input(tmp_path):
    db = ["--db", "j.db"]
    run("demo", *db, cwd=tmp_path)
    vkey = run("keygen", "acme", "-o", "acme.key", cwd=tmp_path).stdout.strip()
    other = run("keygen", "acme", "-o", "other.key", cwd=tmp_path).stdout.strip()
    run("checkpoint", "--key", "acme.key", "-o", "c.cp", *db, cwd=tmp_path)
    note = (tmp_path / "c.cp").read_text()

    wrong_key = run("verify", "--checkpoint", "c.cp", "--key", other, *db, cwd=tmp_path)
    assert wrong_key.returncode == 1 and "not signed by key acme+" in wrong_key.stderr
    lines = note.split("\n")
    (tmp_path / "reordered.cp").write_text("\n".join([lines[1], lines[0], *lines[2:]]))
    reordered = run("verify", "--checkpoint", "reordered.cp", "--key", vkey, *db, cwd=tmp_path)
    assert reordered.returncode == 2 and "not a tree size" in reordered.stderr
    assert len(reordered.stderr.strip().splitlines()) == 1
    (tmp_path / "cut.cp").write_text(note[:len(note) // 2])
    truncated = run("verify", "--checkpoint", "cut.cp", "--key", vkey, *db, cwd=tmp_path)
    assert truncated.returncode == 2 and len(truncated.stderr.strip().splitlines()) == 1
    assert run("verify", "--checkpoint", "c.cp", "--key", "nonsense", *db,
               cwd=tmp_path).returncode == 2

    conn = sqlite3.connect(tmp_path / "j.db")
    conn.execute("DROP TRIGGER events_refuse_delete")
    last = conn.execute("SELECT max(position) FROM events").fetchone()[0]
    conn.execute("DELETE FROM events WHERE position = ?", (last,))
    conn.commit()
    conn.close()
    cut = run("verify", "--checkpoint", "c.cp", "--key", vkey, *db, cwd=tmp_path)
    assert cut.returncode == 1 and "cut off" in cut.stdout


def test_the_viewer_audit_page_shows_the_last_signed_checkpoint(tmp_path):
    from starlette.testclient import TestClient

    from turnlog.replay.view.app import create_app

    db = ["--db", "j.db"]
    run("demo", *db, cwd=tmp_path)
    run("keygen", "acme", "-o", "acme.key", cwd=tmp_path)
    with TestClient(create_app(str(tmp_path / "j.db")), base_url="http://127.0.0.1") as client:
        assert 'id="signed"' not in client.get("/audit").text  # none kept yet
    run("checkpoint", "--key", "acme.key", *db, cwd=tmp_path)
    run("demo", *db, cwd=tmp_path)
    conn = sqlite3.connect(tmp_path / "j.db")
    signed, events = conn.execute(
        "SELECT (SELECT size FROM checkpoints), (SELECT max(position) FROM events)").fetchone()
    conn.close()
    with TestClient(create_app(str(tmp_path / "j.db")), base_url="http://127.0.0.1") as client:
        page = client.get("/audit").text
    assert f"last signed checkpoint: {signed} of {events} events" in page and signed < events


def test_verify_checkpoint_of_another_journal_says_so_and_names_no_event(tmp_path):
    run("demo", "--db", "a.db", cwd=tmp_path)
    run("demo", "--db", "b.db", cwd=tmp_path)
    vkey = run("keygen", "acme", "-o", "acme.key", cwd=tmp_path).stdout.strip()
    run("checkpoint", "--key", "acme.key", "-o", "a.cp", "--db", "a.db", cwd=tmp_path)
    found = run("verify", "--checkpoint", "a.cp", "--key", vkey, "--db", "b.db", "--json",
                cwd=tmp_path)
    report = json.loads(found.stdout)
    assert found.returncode == 1 and report["ok"] is False and report["first_bad"] is None
    assert "is not this journal's" in report["checkpoint"]["problem"]
