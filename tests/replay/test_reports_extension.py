"""``replay_reports`` is the journal extension ``replay.reports``: migrated, written and read
through the journal's Extension path and sqlite-utils."""

from __future__ import annotations

import hashlib
import sqlite3

from turnlog.engine.model.events import ConversationStarted
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.journal import Journal
from turnlog.replay.reports import REPORTS_EXTENSION, REPORTS_TABLE, latest_report, replay_all
from tests.replay import miniloop


def record(path) -> None:
    with Journal(path) as journal:
        miniloop.record(journal, ConversationStarted(conversation_id="c1", provider="scripted",
                                                     model="m"),
                        ["hi"], ScriptedProvider([{"text": "hello"}]))


def meta(path) -> dict[str, str]:
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute("SELECT key, value FROM _turnlog_meta"))
    finally:
        conn.close()


def test_the_first_recorded_run_installs_the_extension(tmp_path):
    path = tmp_path / "turnlog.db"
    record(path)
    assert "ext:replay.reports" not in meta(path)

    with Journal(path) as journal:
        report = replay_all(journal, driver=miniloop.driver)

    assert meta(path)["ext:replay.reports"] == str(REPORTS_EXTENSION.version)
    [row] = latest_report(str(path))
    assert (row["run_id"], row["conversation_id"], row["ok"]) == (report.run_id, "c1", 1)


def test_a_table_recorded_before_the_extension_existed_is_kept(tmp_path):
    path = tmp_path / "turnlog.db"
    record(path)
    conn = sqlite3.connect(path)
    conn.execute(f"CREATE TABLE {REPORTS_TABLE} (run_id TEXT NOT NULL, run_at TEXT NOT NULL, "
                 "conversation_id TEXT NOT NULL, ok INTEGER NOT NULL, skipped TEXT, "
                 "divergence_seq INTEGER, reason TEXT, divergence TEXT, "
                 "PRIMARY KEY (run_id, conversation_id))")
    conn.execute(f"INSERT INTO {REPORTS_TABLE} VALUES ('old', '2020', 'c1', 0, NULL, 3, 'x', NULL)")
    conn.commit()
    conn.close()

    with Journal(path) as journal:
        replay_all(journal, driver=miniloop.driver)

    conn = sqlite3.connect(path)
    assert conn.execute(f"SELECT count(*) FROM {REPORTS_TABLE}").fetchone()[0] == 2
    conn.close()
    assert latest_report(str(path))[0]["run_id"] != "old"


def test_reading_the_latest_report_changes_no_file(tmp_path):
    path = tmp_path / "turnlog.db"
    record(path)

    def state() -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()}

    before = state()
    assert latest_report(str(path)) == []
    assert state() == before
