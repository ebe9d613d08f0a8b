"""``replay_all``: replay every conversation of a journal and keep the report.

Each run of ``replay_all`` writes one row per conversation to the
``replay_reports`` table of the journal file (a projection, never a source of
truth: ``events`` stays the only record of conversations)::

    replay_reports(run_id TEXT, run_at TEXT, conversation_id TEXT, ok INTEGER,
                   skipped TEXT, divergence_seq INTEGER, reason TEXT, divergence TEXT /* JSON */)

The table is the journal extension ``replay.reports`` (:data:`REPORTS_EXTENSION`),
created through the journal's migration path on the first recorded run, on
SQLite (written and read with sqlite-utils) and on PostgreSQL alike (the same
columns, written in one transaction). The audit reads the latest run
(``max(run_at)``) if the table exists.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec

from turnlog.engine.audit.erasure import first_erased
from turnlog.journal import (
    Extension,
    Journal,
    JournalError,
    JournalProtocol,
    connect_readonly,
    connect_sql,
    shown_url,
    sqlite_database,
)

from .deterministic import Driver, ReplayResult, replay
from .errors import ReplayError

if TYPE_CHECKING:
    from sqlite_utils import Database

__all__ = ["REPORTS_EXTENSION", "REPORTS_TABLE", "ReplayReport", "latest_report", "replay_all"]

REPORTS_TABLE = "replay_reports"
_COLUMNS = {"run_id": str, "run_at": str, "conversation_id": str, "ok": int, "skipped": str,
            "divergence_seq": int, "reason": str, "divergence": str}


def _migrate(db: Database, from_version: int) -> None:
    # journals recorded before the extension existed already have the same table
    if from_version == 0 and not db[REPORTS_TABLE].exists():
        db[REPORTS_TABLE].create(_COLUMNS, pk=("run_id", "conversation_id"),
                                 not_null={"run_id", "run_at", "conversation_id", "ok"})


_PG_DDL = (f"CREATE TABLE IF NOT EXISTS {REPORTS_TABLE} (run_id TEXT NOT NULL, "
           "run_at TEXT NOT NULL, conversation_id TEXT NOT NULL, ok INTEGER NOT NULL, "
           "skipped TEXT, divergence_seq INTEGER, reason TEXT, divergence TEXT, "
           "PRIMARY KEY (run_id, conversation_id))")


def _migrate_postgres(conn: Any, from_version: int) -> None:
    if from_version == 0:
        conn.execute(_PG_DDL)


#: The ``replay_reports`` table as a journal extension (bump ``version`` to change it).
REPORTS_EXTENSION = Extension(name="replay.reports", version=1, migrate=_migrate,
                              migrate_postgres=_migrate_postgres)


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


def replay_all(journal: JournalProtocol, *, driver: Driver | None = None, record: bool = True,
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
        erased = first_erased(journal, cid)
        results.append(
            ReplayResult(conversation_id=cid, ok=True,
                         skipped=f"its content was erased (seq {erased.seq} of {erased.stream_id})")
            if erased is not None else
            replay(journal, cid, collect=True, driver=driver, check_digest=check_digest))
        if on_result is not None:
            on_result(results[-1])
    report = ReplayReport(run_id=uuid.uuid4().hex,
                          run_at=datetime.now(UTC).isoformat(timespec="microseconds"),
                          results=results)
    if record and journal.path != ":memory:":
        _write(getattr(journal, "url", journal.path), report)
    return report


def _write(path: str, report: ReplayReport) -> None:
    """Insert the report's rows into ``replay_reports`` of the journal at ``path`` (a file or
    a URL), in one transaction (the table is installed through the journal's migration
    path first)."""
    rows = [{"run_id": report.run_id, "run_at": report.run_at,
             "conversation_id": r.conversation_id, "ok": int(r.ok), "skipped": r.skipped,
             "divergence_seq": r.divergence.seq if r.divergence else None,
             "reason": r.divergence.reason if r.divergence else None,
             "divergence": json.dumps(r.divergence.to_dict(), ensure_ascii=False)
             if r.divergence else None}
            for r in report.results]
    columns = list(_COLUMNS)
    insert = (f"INSERT INTO {REPORTS_TABLE} ({', '.join(columns)}) "
              f"VALUES ({', '.join('?' * len(columns))})")
    try:
        Journal.open(path, extensions=[REPORTS_EXTENSION]).close()  # installs the table
        conn = connect_sql(path, readonly=False)
        try:
            conn.execute("BEGIN")
            try:
                for row in rows:
                    conn.execute(insert, [row[c] for c in columns])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        finally:
            conn.close()
    except (sqlite3.Error, JournalError) as exc:
        raise ReplayError(f"cannot record the replay report in {shown_url(path)}: {exc}") from None


def latest_report(path: str) -> list[dict[str, Any]]:
    """The rows of the latest ``replay_all`` run recorded in the journal at ``path`` ([] if none).

    Reads only: nothing is created or written (a read-only journal works).
    """
    try:
        db = sqlite_database(connect_readonly(path))
    except JournalError as exc:
        raise ReplayError(f"cannot read replay reports from {shown_url(path)}: {exc}") from None
    try:
        table = db[REPORTS_TABLE]
        if not table.exists():
            return []
        latest = list(table.rows_where(select="run_id", order_by="run_at DESC", limit=1))
        if not latest:
            return []
        return list(table.rows_where("run_id = ?", [latest[0]["run_id"]],
                                     order_by="conversation_id"))
    except sqlite3.Error as exc:
        raise ReplayError(f"cannot read replay reports from {shown_url(path)}: {exc}") from None
    finally:
        db.conn.close()

