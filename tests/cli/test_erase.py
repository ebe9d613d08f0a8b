"""``turnlog erase``, ``prune`` and ``hold`` through the installed console script, on SQLite
and PostgreSQL: the content leaves every file and every read path, while verify, verify
--checkpoint and every proof (checked by tests/transparency.py) still pass."""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import psycopg
import pytest
from starlette.testclient import TestClient

from tests.pgcluster import fresh_url, shared_cluster
from tests.transparency import merkle_root, open_checkpoint, verify_consistency, verify_inclusion
from turnlog.journal import Journal
from turnlog.replay.view import create_app, render_report

from .conftest import write_script

TURNLOG = str(Path(sys.executable).with_name("turnlog"))
FORMATS = ["anthropic", "openai", "openai-responses", "gemini", "bedrock", "jsonl",
           "datamachine", "markdown", "otlp"]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([TURNLOG, *args], cwd=cwd, capture_output=True, text=True, timeout=180)


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path: Path) -> str:
    return str(tmp_path / "j.db") if request.param == "sqlite" else fresh_url()


def converse(tmp_path: Path, db: str, cid: str, tag: str) -> None:
    """A conversation whose user text, tool argument, tool result and answer hold ``tag``."""
    script = write_script(
        tmp_path / f"{cid}.json",
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": f"{tag}-CITY"}}]},
        {"text": f"{tag}-ANSWER"})
    done = run("run", f"{tag}-USER wants the weather", "--script", str(script), "--tools",
               "demo", "--id", cid, "--db", db, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def stored_bytes(db: str) -> bytes:
    """Every byte the journal keeps on disk: the SQLite file and its WAL, or the PostgreSQL
    heap and TOAST files of its tables (after the erase's VACUUM FULL and CHECKPOINT)."""
    if not db.startswith("postgresql"):
        return b"".join(p.read_bytes() for p in Path(db).parent.iterdir()
                        if p.name.startswith(Path(db).name))
    data = shared_cluster().data
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        paths = [path for (path,) in conn.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c WHERE c.oid IN "
            "('events'::regclass, 'snapshots'::regclass) UNION SELECT pg_relation_filepath("
            "c.reltoastrelid) FROM pg_class c WHERE c.oid IN ('events'::regclass, "
            "'snapshots'::regclass) AND c.reltoastrelid <> 0") if path]
    assert paths
    return b"".join(f.read_bytes() for path in paths for f in (data / path).parent.glob(
        Path(path).name + "*"))


def leaves(db: str) -> list[bytes]:
    with Journal.open(db, readonly=True) as journal:
        return [bytes.fromhex(e.hash) for e in journal.read_all()]


def proofs_hold(tmp_path: Path, db: str, old: str, new: str, vkey: str) -> None:
    """Every event's inclusion proof against ``new`` and the consistency proof old -> new,
    each checked by the independent verifier; verify --checkpoint for both."""
    _, old_size, old_root = open_checkpoint((tmp_path / old).read_text(), vkey)
    _, size, root = open_checkpoint((tmp_path / new).read_text(), vkey)
    all_leaves = leaves(db)
    assert root == merkle_root(all_leaves[:size]) and old_root == merkle_root(all_leaves[:old_size])
    with Journal.open(db, readonly=True) as journal:
        rows = list(journal.read_all(until=size))
    for row in rows:
        proved = run("prove", row.stream_id, str(row.seq), "--checkpoint", new, "--json",
                     "--db", db, cwd=tmp_path)
        assert proved.returncode == 0, proved.stderr
        found = json.loads(proved.stdout)
        assert verify_inclusion(bytes.fromhex(found["hash"]), found["index"], size,
                                [base64.b64decode(p) for p in found["proof"]], root)
    consistent = json.loads(run("prove", "--consistency", old, new, "--json", "--db", db,
                                cwd=tmp_path).stdout)
    assert verify_consistency(old_size, size, old_root, root,
                              [base64.b64decode(p) for p in consistent["proof"]])
    for note in (old, new):
        checked = run("verify", "--checkpoint", note, "--key", vkey, "--db", db, cwd=tmp_path)
        assert checked.returncode == 0, checked.stderr


def test_erase_removes_the_content_everywhere_and_keeps_every_proof(tmp_path, db):
    converse(tmp_path, db, "c1", "ZQSECRET1")
    converse(tmp_path, db, "c2", "ZQKEPT2")
    vkey = run("keygen", "acme", "-o", "acme.key", cwd=tmp_path).stdout.strip()
    assert run("checkpoint", "--key", "acme.key", "-o", "old.cp", "--db", db,
               cwd=tmp_path).returncode == 0
    assert b"ZQSECRET1-CITY" in stored_bytes(db)

    erased = run("erase", "c1", "--reason", "GDPR request 17", "--by", "dpo@acme", "--json",
                 "--db", db, cwd=tmp_path)
    assert erased.returncode == 0, erased.stderr
    seqs = json.loads(erased.stdout)["erased"]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) >= 6
    again = run("erase", "c1", "--reason", "again", "--db", db, cwd=tmp_path)
    assert again.returncode == 0 and "erased already" in again.stdout

    assert run("verify", "--db", db, cwd=tmp_path).returncode == 0
    assert run("checkpoint", "--key", "acme.key", "-o", "new.cp", "--db", db,
               cwd=tmp_path).returncode == 0
    proofs_hold(tmp_path, db, "old.cp", "new.cp", vkey)

    kept = stored_bytes(db)
    assert b"ZQSECRET1" not in kept and b"ZQKEPT2-CITY" in kept

    shown = run("show", "c1", "--db", db, cwd=tmp_path)
    assert shown.returncode == 0 and "ZQSECRET1" not in shown.stdout
    assert "[erased] user: erased" in shown.stdout
    assert "ERASED by dpo@acme (erase)" in shown.stdout and "GDPR request 17" in shown.stdout
    for fmt in FORMATS:
        out = run("export", "c1", "--format", fmt, "--content", "--db", db, cwd=tmp_path) \
            if fmt == "otlp" else run("export", "c1", "--format", fmt, "--db", db, cwd=tmp_path)
        assert out.returncode == 0, (fmt, out.stderr)
        assert "ZQSECRET1" not in out.stdout and "erased" in out.stdout, fmt
    listed = json.loads(run("ls", "--json", "--db", db, cwd=tmp_path).stdout)
    assert {c["conversation_id"]: c["status"] for c in listed} == {
        "c1": "completed", "c2": "completed"}  # the erasure record changes no status
    audited = json.loads(run("audit", "--json", "--db", db, cwd=tmp_path).stdout)
    assert audited["erasure"]["erased_conversations"] == {"c1": len(seqs)}
    assert "erased: " in run("audit", "--db", db, cwd=tmp_path).stdout

    client = TestClient(create_app(db), base_url="http://127.0.0.1")
    for url in ("/", "/conversation?id=c1", "/audit", "/diff?a=c1&b=c2", "/report?id=c1"):
        page = client.get(url)
        assert page.status_code == 200 and "ZQSECRET1" not in page.text, url
    assert "erased" in client.get("/conversation?id=c1").text
    report = render_report(db, "c1")
    assert "erased" in report and "ZQSECRET1" not in report

    for refused in (run("replay", "c1", "--db", db, cwd=tmp_path),
                    run("fork", "c1", "--at", "2", "--db", db, cwd=tmp_path)):
        assert refused.returncode == 2
        assert "c1" in refused.stderr and "erased" in refused.stderr
        assert "Traceback" not in refused.stderr


def test_erase_one_seq_and_bad_input(tmp_path, db):
    converse(tmp_path, db, "c1", "ZQONE")
    with Journal.open(db, readonly=True) as journal:
        before = list(journal.read_all())
    for args, said in ((["c9", "--reason", "x"], "no conversation 'c9'"),
                       (["c1", "--seq", "99", "--reason", "x"], "not 99"),
                       (["c1", "--reason", " "], "needs a reason"),
                       (["c1"], "--reason")):
        bad = run("erase", *args, "--db", db, cwd=tmp_path)
        assert bad.returncode == 2 and said in bad.stderr, bad.stderr
    with Journal.open(db, readonly=True) as journal:
        assert list(journal.read_all()) == before
    done = run("erase", "c1", "--seq", "2", "--reason", "user asked", "--db", db, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with Journal.open(db, readonly=True) as journal:
        rows = list(journal.read("c1"))
    assert [r.seq for r in rows if r.erased] == [2]
    assert "ZQONE-USER" not in rows[1].payload and "ZQONE-CITY" in rows[3].payload
    record = run("erase", "c1", "--seq", str(rows[-1].seq), "--reason", "x", "--db", db,
                 cwd=tmp_path)
    assert record.returncode == 2 and "erasure_recorded record" in record.stderr


def test_hold_blocks_prune_and_prune_erases_the_rest(tmp_path, db):
    for cid in ("old1", "old2", "old3"):
        converse(tmp_path, db, cid, f"ZQ{cid.upper()}")
    vkey = run("keygen", "acme", "-o", "acme.key", cwd=tmp_path).stdout.strip()
    run("checkpoint", "--key", "acme.key", "-o", "old.cp", "--db", db, cwd=tmp_path)
    held = run("hold", "old1", "--reason", "litigation 2025-4", "--by", "legal", "--db", db,
               cwd=tmp_path)
    assert held.returncode == 0, held.stderr
    assert "LEGAL HOLD placed by legal: litigation 2025-4" in run(
        "show", "old1", "--db", db, cwd=tmp_path).stdout
    assert run("hold", "old1", "--db", db, cwd=tmp_path).returncode == 2  # no reason

    dry = json.loads(run("prune", "--before", "2999-01-01", "--dry-run", "--json", "--db", db,
                         cwd=tmp_path).stdout)
    assert sorted(dry["erased"]) == ["old2", "old3"] and dry["held"] == ["old1"]
    with Journal.open(db, readonly=True) as journal:
        assert not any(e.erased for e in journal.read_all())  # a dry run changes nothing
    assert json.loads(run("prune", "--before", "2000-01-01", "--json", "--db", db,
                          cwd=tmp_path).stdout)["erased"] == {}  # nothing that old

    pruned = run("prune", "--before", "2999-01-01", "--hold", "old3", "--db", db, cwd=tmp_path)
    assert pruned.returncode == 0, pruned.stderr
    assert "erased old2" in pruned.stdout and "held old1" in pruned.stdout
    assert "held old3" in pruned.stdout
    kept = stored_bytes(db)
    assert b"ZQOLD2" not in kept and b"ZQOLD1-CITY" in kept and b"ZQOLD3-CITY" in kept
    audited = json.loads(run("audit", "--json", "--db", db, cwd=tmp_path).stdout)
    assert audited["erasure"]["held"] == ["old1"]
    assert "ERASED by" in run("show", "old2", "--db", db, cwd=tmp_path).stdout

    assert run("hold", "old1", "--release", "--db", db, cwd=tmp_path).returncode == 0
    again = json.loads(run("prune", "--before", "2999-01-01", "--json", "--db", db,
                           cwd=tmp_path).stdout)
    assert sorted(again["erased"]) == ["old1", "old3"] and again["unchanged"] == ["old2"]
    assert run("verify", "--db", db, cwd=tmp_path).returncode == 0
    run("checkpoint", "--key", "acme.key", "-o", "new.cp", "--db", db, cwd=tmp_path)
    proofs_hold(tmp_path, db, "old.cp", "new.cp", vkey)
    assert b"ZQOLD" not in stored_bytes(db)
    bad = run("prune", "--before", "yesterday-ish", "--db", db, cwd=tmp_path)
    assert bad.returncode == 2 and "--before" in bad.stderr


def test_resume_of_an_unfinished_erased_conversation_is_refused(tmp_path, db):
    script = write_script(
        tmp_path / "s.json",
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "ZQPAUSED"}}]},
        {"text": "done"})
    paused = run("run", "ZQPAUSED-USER", "--script", str(script), "--tools", "demo",
                 "--approve", "get_weather", "--id", "p1", "--db", db, "--json", cwd=tmp_path)
    assert json.loads(paused.stdout)["status"] == "awaiting_approval", paused.stderr
    assert run("erase", "p1", "--reason", "asked", "--db", db, cwd=tmp_path).returncode == 0
    with Journal.open(db, readonly=True) as journal:
        before = list(journal.read_all())
    resumed = run("resume", "p1", "--script", str(script), "--tools", "demo", "--db", db,
                  cwd=tmp_path)
    assert resumed.returncode == 2 and "cannot resume conversation 'p1'" in resumed.stderr
    with Journal.open(db, readonly=True) as journal:
        assert list(journal.read_all()) == before


def test_an_erased_payload_edited_after_the_erasure_fails_verify(tmp_path):
    """The chain covers an erased payload only through the original's digest, so what the
    erasure kept in clear (an approval, a tool's outcome, a call's name) is covered by the
    digests its erasure_recorded event keeps: an edit there, triggers restored, fails verify."""
    db = str(tmp_path / "j.db")
    converse(tmp_path, db, "c1", "ZQFORGE")
    assert run("erase", "c1", "--reason", "r", "--db", db, cwd=tmp_path).returncode == 0
    assert run("verify", "--db", db, cwd=tmp_path).returncode == 0
    conn = sqlite3.connect(db)
    guard = conn.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'events_refuse_update'").fetchone()[0]
    seq, payload = conn.execute(
        "SELECT seq, payload FROM events WHERE stream_id = 'c1' AND type = 'model_responded' "
        "AND payload LIKE '%\"name\":\"get_weather\"%'").fetchone()
    with conn:
        conn.execute("DROP TRIGGER events_refuse_update")
        conn.execute("UPDATE events SET payload = ? WHERE stream_id = 'c1' AND seq = ?",
                     (payload.replace('"name":"get_weather"', '"name":"append_note"'), seq))
        conn.execute(guard)
    conn.close()
    checked = run("verify", "--db", db, cwd=tmp_path)
    assert checked.returncode == 1, checked.stdout
    assert f"seq {seq}" in checked.stdout + checked.stderr
    assert "edited after its erasure" in checked.stdout + checked.stderr


def test_erase_deletes_the_replay_reports_that_copied_the_content(tmp_path, db):
    """A divergence recorded by ``replay --all`` keeps the recorded and re-run events (the
    tool's arguments, the request diff) in replay_reports: erasing the conversation deletes
    those rows too, from the table and from the file."""
    converse(tmp_path, db, "c1", "ZQREPORTED")
    converse(tmp_path, db, "c2", "ZQOTHER")
    (tmp_path / "strict_tools.py").write_text(
        "from turnlog.engine.tools import tool\n\n\n@tool\ndef get_weather(city: int) -> str:\n"
        "    \"\"\"Weather.\"\"\"\n    return 'x'\n\n\nTOOLS = [get_weather]\n")
    replayed = subprocess.run(
        [TURNLOG, "replay", "--all", "--tool-set", "strict_tools:TOOLS", "--db", db],
        cwd=tmp_path, capture_output=True, text=True, timeout=180,
        env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert replayed.returncode == 1, replayed.stderr

    def reports() -> dict[str, str]:
        connect = sqlite3.connect if not db.startswith("postgresql") else psycopg.connect
        with closing(connect(db)) as conn:
            return dict(conn.execute(
                "SELECT conversation_id, divergence FROM replay_reports").fetchall())

    assert "ZQREPORTED-CITY" in reports()["c1"] and "ZQOTHER-CITY" in reports()["c2"]
    assert run("erase", "c1", "--reason", "r", "--db", db, cwd=tmp_path).returncode == 0
    assert list(reports()) == ["c2"] and "ZQOTHER-CITY" in reports()["c2"]
    if not db.startswith("postgresql"):
        assert b"ZQREPORTED" not in stored_bytes(db)
    assert run("verify", "--db", db, cwd=tmp_path).returncode == 0


def test_erasing_a_parent_erases_what_its_forks_copied_and_show_them_erased(tmp_path, db):
    """A fork reads its parent's events through the parent (the same events: erased with
    it) and began with its own start, a copy of the parent's system prompt and metadata:
    erasing the parent erases that copy in every fork, forks of forks included, each fork
    recording it, in the same transaction; the forks' own later events stay theirs."""
    script = write_script(tmp_path / "p.json", {"text": "ZQPARENT-ANSWER"})
    system = "ZQPARENT-SYSTEM " * 400  # large: kept once in blobs, shared with the forks
    started = run("run", "ZQPARENT-USER hello", "--system", system, "--script",
                  str(script), "--id", "p", "--db", db, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    more = write_script(tmp_path / "f.json", {"text": "own answer"})
    assert run("fork", "p", "--at", "4", "--id", "f", "--message", "own question", "--script",
               str(more), "--db", db, cwd=tmp_path).returncode == 0
    assert run("fork", "f", "--at", "2", "--id", "g", "--db", db, cwd=tmp_path).returncode == 0
    vkey = run("keygen", "acme", "-o", "acme.key", cwd=tmp_path).stdout.strip()
    assert run("checkpoint", "--key", "acme.key", "-o", "old.cp", "--db", db,
               cwd=tmp_path).returncode == 0
    assert "ZQPARENT-SYSTEM" in run("show", "g", "--db", db, cwd=tmp_path).stdout

    erased = run("erase", "p", "--reason", "request 5", "--json", "--db", db, cwd=tmp_path)
    assert erased.returncode == 0, erased.stderr
    assert json.loads(erased.stdout)["forks"] == ["f", "g"]

    assert b"ZQPARENT" not in stored_bytes(db)
    for fork in ("f", "g"):
        shown = run("show", fork, "--db", db, cwd=tmp_path).stdout
        assert "system: erased" in shown and "ZQPARENT" not in shown, shown
        assert "copy of the start of 'p'" in shown  # the fork's own erasure record says why
        exported = run("export", fork, "--format", "jsonl", "--db", db, cwd=tmp_path).stdout
        assert "ZQPARENT" not in exported and '"text":"erased"' in exported
    assert "own question" in run("show", "f", "--db", db, cwd=tmp_path).stdout
    client = TestClient(create_app(db), base_url="http://127.0.0.1")
    for url in ("/conversation?id=f", "/conversation?id=g", "/report?id=g", "/diff?a=p&b=f"):
        page = client.get(url)
        assert page.status_code == 200 and "ZQPARENT" not in page.text, url
    assert run("verify", "--db", db, cwd=tmp_path).returncode == 0
    assert run("checkpoint", "--key", "acme.key", "-o", "new.cp", "--db", db,
               cwd=tmp_path).returncode == 0
    proofs_hold(tmp_path, db, "old.cp", "new.cp", vkey)
    again = run("erase", "p", "--reason", "again", "--db", db, cwd=tmp_path)
    assert again.returncode == 0 and "erased already" in again.stdout
    with Journal.open(db, readonly=True) as journal:  # nothing recorded twice
        assert [e.type for e in journal.read("g")][-1] == "erasure_recorded"
        assert sum(e.type == "erasure_recorded" for e in journal.read_all()) == 3


def test_a_forged_erasure_after_a_signed_checkpoint_is_listed_by_verify(tmp_path):
    """Someone who can write the file rewrites an event to the erased form (the original's
    digest kept, so its hash holds) and appends a matching erasure record: nothing in the
    journal tells that from a genuine erasure, so verify --checkpoint passes, but it lists
    every erasure recorded after the signed checkpoint, naming the signed events it
    erased, for the auditor to match against the requests; one slipped in under the
    checkpoint's size changes the signed tree and fails (exit 1)."""
    db = str(tmp_path / "j.db")
    converse(tmp_path, db, "c1", "ZQFORGE")
    vkey = run("keygen", "acme", "-o", "acme.key", cwd=tmp_path).stdout.strip()
    assert run("checkpoint", "--key", "acme.key", "-o", "old.cp", "--db", db,
               cwd=tmp_path).returncode == 0
    clean = json.loads(run("verify", "--checkpoint", "old.cp", "--key", vkey, "--json",
                           "--db", db, cwd=tmp_path).stdout)
    assert clean["ok"] and clean["checkpoint"]["erased_since"] == []

    from hashlib import sha256

    from turnlog.engine.audit.erasure import redact
    from turnlog.engine.model.events import ErasureRecorded, decode_event, encode_event
    from turnlog.journal import erased_payload

    with closing(sqlite3.connect(db)) as conn:  # the forger edits the file directly
        (payload,) = conn.execute(
            "SELECT payload FROM events WHERE stream_id = 'c1' AND seq = 2").fetchone()
        (guard,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = "
                                "'events_refuse_update'").fetchone()
        kept = encode_event(redact(decode_event("user_message", 1, payload))).payload
        forged = erased_payload(sha256(payload.encode()).hexdigest(), kept)
        conn.execute("DROP TRIGGER events_refuse_update")
        conn.execute("UPDATE events SET payload = ? WHERE stream_id = 'c1' AND seq = 2", (forged,))
        conn.execute(guard)
        conn.commit()
    with Journal.open(db) as journal:
        journal.append("c1", [encode_event(ErasureRecorded(
            by="dpo@acme", reason="GDPR request 99", seqs=(2,),
            kept=(sha256(forged.encode()).hexdigest(),)))], journal.last_seq("c1"))
    checked = run("verify", "--checkpoint", "old.cp", "--key", vkey, "--json", "--db", db,
                  cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout  # indistinguishable from a genuine one
    (since,) = json.loads(checked.stdout)["checkpoint"]["erased_since"]
    assert (since["conversation_id"], since["erased"], since["signed"], since["by"],
            since["reason"]) == ("c1", [2], [2], "dpo@acme", "GDPR request 99")
    said = run("verify", "--checkpoint", "old.cp", "--key", vkey, "--db", db, cwd=tmp_path)
    assert said.returncode == 0
    assert ("erased after the checkpoint: conversation 'c1' seq 2 (signed by it), by "
            "dpo@acme, reason 'GDPR request 99'") in said.stdout
