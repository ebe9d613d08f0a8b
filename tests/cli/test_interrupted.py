"""An interrupted run (Ctrl-C, a ``run_interrupted`` event) reads as ``interrupted`` — not
``active`` — in ``ls``, ``show``, ``audit`` and the conversation's state, until it is resumed."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from .conftest import TURNLOG, env, turnlog, write_script


def _wait_for_tool(db: Path, cid: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if db.exists():
            try:
                conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
                try:
                    if conn.execute("SELECT 1 FROM events WHERE stream_id = ? AND "
                                    "type = 'tool_started'", (cid,)).fetchone():
                        return
                finally:
                    conn.close()
            except sqlite3.OperationalError:
                pass
        time.sleep(0.1)
    raise AssertionError(f"the run of {cid} never started its tool")


def _interrupt_a_slow_run(tmp_path: Path, db: Path, cid: str) -> Path:
    """``turnlog run`` with a tool that waits a minute, stopped by SIGINT as Ctrl-C does."""
    script = write_script(tmp_path / "slow.json",
                          {"tool_calls": [{"name": "wait", "arguments": {"seconds": 60}}]},
                          {"text": "waited"})
    proc = subprocess.Popen([*TURNLOG, "run", "wait a minute", "--id", cid, "--script",
                             str(script), "--tools", "demo", "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        _wait_for_tool(db, cid)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130
    return script


def _status(db: Path, cid: str) -> str:
    rows = json.loads(turnlog("ls", "--db", db, "--json").stdout)
    return next(r["status"] for r in rows if r["conversation_id"] == cid)


def test_ls_show_and_audit_say_interrupted_until_resume_finishes_it(tmp_path, db):
    assert turnlog("demo", "--db", db).returncode == 0
    script = _interrupt_a_slow_run(tmp_path, db, "slow")

    assert _status(db, "slow") == "interrupted"
    header, *lines = turnlog("ls", "--db", db).stdout.splitlines()
    line = next(r for r in lines if r.startswith("slow"))
    assert line.split()[1] == "interrupted"
    assert line.index("20") == header.index("UPDATED")  # the columns still line up
    only = json.loads(turnlog("ls", "--db", db, "--status", "interrupted", "--json").stdout)
    assert [r["conversation_id"] for r in only] == ["slow"]
    assert json.loads(turnlog("ls", "--db", db, "--status", "active", "--json").stdout) == []
    shown = turnlog("show", "slow", "--db", db)
    assert "interrupted" in shown.stdout.splitlines()[0].lower() or \
        any("status" in s and "interrupted" in s for s in shown.stdout.splitlines()[:6])
    assert "turnlog resume slow" in shown.stdout
    report = json.loads(turnlog("audit", "--db", db, "--json").stdout)
    assert report["by_status"]["interrupted"] == 1 and report["by_status"]["active"] == 0
    assert "interrupted: 1" in turnlog("audit", "--db", db).stdout
    assert turnlog("verify", "--db", db).returncode == 0

    out = turnlog("resume", "slow", "--script", script, "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["status"] == "completed"
    assert _status(db, "slow") == "completed"


def test_the_view_and_the_state_agree_on_interrupted_also_for_a_fork(tmp_path):
    from turnlog.engine.model.conversation import Conversation, load_state
    from turnlog.engine.model.events import ConversationStarted, UserMessage
    from turnlog.engine.audit.listing import list_conversations
    from turnlog.engine.loop.resume import record_interruption
    from turnlog.engine.audit.views import EXTENSIONS, connect_readonly
    from turnlog.journal import Journal
    from turnlog.replay import fork

    path = tmp_path / "j.db"
    with Journal(path, extensions=EXTENSIONS) as journal:
        c = Conversation.start(journal, ConversationStarted(
            conversation_id="c", provider="scripted", model="m"))
        c.append(UserMessage.of("hi"))
        record_interruption(journal, "c", reason="sigint", message="stopped")
        fork(journal, "c", 3, new_id="f")  # from the interruption marker itself
        states = {cid: load_state(journal, cid).status for cid in ("c", "f")}
    conn = connect_readonly(str(path))
    try:
        listed = {r["conversation_id"]: r["status"] for r in list_conversations(conn)}
    finally:
        conn.close()
    assert states == listed == {"c": "interrupted", "f": "active"}


def test_a_journal_with_the_older_views_reads_interrupted_and_verifies_until_migrated(
        tmp_path, db):
    from turnlog.engine.audit.views import _PREVIOUS

    _interrupt_a_slow_run(tmp_path, db, "slow")
    conn = sqlite3.connect(db)  # what a journal written before this change holds
    conn.execute("DROP VIEW conversations")
    conn.execute(_PREVIOUS[1]["conversations"])
    conn.execute("DROP VIEW tool_calls")
    conn.execute(_PREVIOUS[1]["tool_calls"])
    conn.execute("DROP VIEW messages")
    conn.execute(_PREVIOUS[1]["messages"])
    conn.execute("UPDATE _turnlog_meta SET value = '1' WHERE key = 'ext:engine.views'")
    conn.commit()
    conn.close()
    before = db.read_bytes()

    assert _status(db, "slow") == "interrupted"  # read commands use the current view
    out = turnlog("verify", "--db", db)
    assert out.returncode == 0 and "FORGED" not in out.stdout + out.stderr
    assert db.read_bytes() == before  # and write nothing
    conn = sqlite3.connect(db)
    conn.execute("DROP VIEW conversations")
    conn.execute(_PREVIOUS[1]["conversations"].replace("'active'", "'busy'"))
    conn.commit()
    conn.close()
    out = turnlog("verify", "--db", db)
    assert out.returncode == 1 and "conversations" in out.stdout  # a real redefinition is seen
