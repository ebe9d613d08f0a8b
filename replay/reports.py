"""``replay_all``: replay every conversation of a journal and keep the report.

Each run of ``replay_all`` writes one row per conversation to the
``replay_reports`` table of the journal file (created on first use; a
projection, never a source of truth: ``events`` stays the only record of
conversations)::

    replay_reports(run_id TEXT, run_at TEXT, conversation_id TEXT, ok INTEGER,
                   skipped TEXT, divergence_seq INTEGER, reason TEXT, divergence TEXT /* JSON */)

The audit reads the latest run (``max(run_at)``) if the table exists.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec

from journal import Journal

from .deterministic import Driver, ReplayResult, replay
from .errors import ReplayError

__all__ = ["REPORTS_TABLE", "ReplayReport", "latest_report", "replay_all"]

REPORTS_TABLE = "replay_reports"
_CREATE = f"""CREATE TABLE IF NOT EXISTS {REPORTS_TABLE} (
    run_id TEXT NOT NULL,
    run_at TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    ok INTEGER NOT NULL,
    skipped TEXT,
    divergence_seq INTEGER,
    reason TEXT,
    divergence TEXT CHECK (divergence IS NULL OR json_valid(divergence)),
    PRIMARY KEY (run_id, conversation_id)
)"""


class ReplayReport(msgspec.Struct, kw_only=True):
    """Every conversation's ``ReplayResult`` from one ``replay_all`` run."""

    run_id: str
    run_at: str
    results: list[ReplayResult]

    @property
    def ok(self) -> bool:
        """Whether no conversation diverged."""
        return all(r.ok for r in self.results)

    @property
    def divergences(self) -> list[ReplayResult]:
        """The results that diverged."""
        return [r for r in self.results if not r.ok]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``ok``, ``run_id``, ``checked``, ``results``."""
        return {"ok": self.ok, "run_id": self.run_id, "run_at": self.run_at,
                "conversations": len(self.results),
                "diverged": [r.conversation_id for r in self.divergences],
                "results": [r.to_dict() for r in self.results]}


def replay_all(journal: Journal, *, driver: Driver | None = None, record: bool = True,
               check_digest: bool = True,
               on_result: Callable[[ReplayResult], None] | None = None) -> ReplayReport:
    """Replay every conversation in ``journal`` (collecting divergences) and report.

    With ``record`` (default) the report is written to the ``replay_reports``
    table of the journal's file (not for ``:memory:`` journals). ``on_result``
    is called with each conversation's result as it is known (progress).
    """
    ids = sorted(info.stream_id for info in journal.streams())
    results = []
    for cid in ids:
        results.append(replay(journal, cid, collect=True, driver=driver,
                              check_digest=check_digest))
        if on_result is not None:
            on_result(results[-1])
    report = ReplayReport(run_id=uuid.uuid4().hex,
                          run_at=datetime.now(UTC).isoformat(timespec="microseconds"),
                          results=results)
    if record and journal.path != ":memory:":
        _write(journal.path, report)
    return report


def _write(path: str, report: ReplayReport) -> None:
    rows = [(report.run_id, report.run_at, r.conversation_id, int(r.ok), r.skipped,
             r.divergence.seq if r.divergence else None,
             r.divergence.reason if r.divergence else None,
             json.dumps(r.divergence.to_dict(), ensure_ascii=False) if r.divergence else None)
            for r in report.results]
    try:
        with sqlite3.connect(path, timeout=10) as db:
            db.execute(_CREATE)
            db.executemany(f"INSERT INTO {REPORTS_TABLE} VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        db.close()
    except sqlite3.Error as exc:
        raise ReplayError(f"cannot record the replay report in {path}: {exc}") from None


def latest_report(path: str) -> list[dict[str, Any]]:
    """The rows of the latest ``replay_all`` run recorded in the journal at ``path`` ([] if none)."""
    try:
        with sqlite3.connect(path, timeout=10) as db:
            db.row_factory = sqlite3.Row
            exists = db.execute("SELECT 1 FROM sqlite_master WHERE name = ?",
                                (REPORTS_TABLE,)).fetchone()
            if not exists:
                return []
            rows = db.execute(
                f"SELECT * FROM {REPORTS_TABLE} WHERE run_id = (SELECT run_id FROM "
                f"{REPORTS_TABLE} ORDER BY run_at DESC LIMIT 1) ORDER BY conversation_id")
            out = [dict(r) for r in rows]
        db.close()
        return out
    except sqlite3.Error as exc:
        raise ReplayError(f"cannot read replay reports from {path}: {exc}") from None
