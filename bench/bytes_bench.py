"""Where a tool turn's bytes go: per table, per index and per column of ``events``.

Not a test. Run: ``PYTHONPATH=. python bench/bytes_bench.py [--turns N]``.

It records the same 1,000-turn loop as ``bench/loop_bench.py`` (each turn is
model_requested, model_responded, tool_started, tool_completed), checkpoints
the WAL, and prints:

- the file's bytes per turn;
- each table's and index's pages (SQLite's ``dbstat``), as bytes per turn and
  as a share of the file;
- the ``events`` columns' stored bytes per turn (``length()`` of each value,
  without SQLite's per-record header), and beside them the floor each could
  have — the stream id interned as a small integer, ``recorded_at`` as an
  integer of microseconds, the type as a code — so the gain of each compaction
  can be read off before building it. (Hashes are stored as 32-byte BLOBs
  since schema 3; as 64-character hex before, they took 256 more bytes a turn.)

The baseline is the payload itself: the bytes of the events' canonical JSON,
which no compaction of the row around it can remove.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
from pathlib import Path

from bench.loop_bench import run_turnlog, size

#: What each column could shrink to (bytes per value) if stored compactly.
COMPACT = {"hash": 32, "prev_hash": 32, "stream_id": 2, "recorded_at": 8, "type": 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    turns = parser.parse_args().turns
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bytes.db"
        run_turnlog(path, turns)
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        total = size(path)
        n = turns + 1
        print(f"{turns:,} tool turns: {total:,} bytes on disk = {total / n:,.0f} bytes/turn")
        print("\nby table and index (dbstat pages):")
        rows = conn.execute("SELECT name, sum(pgsize), sum(payload), sum(unused) FROM dbstat "
                            "GROUP BY name ORDER BY sum(pgsize) DESC").fetchall()
        print(f"  {'object':<34}{'bytes/turn':>11}{'share':>8}{'unused/turn':>13}")
        for name, pages, _payload, unused in rows:
            print(f"  {name:<34}{pages / n:>11,.0f}{pages / total:>8.1%}{unused / n:>13,.0f}")
        events = conn.execute("SELECT count(*) FROM events").fetchone()[0]
        print(f"\nevents columns ({events / n:.1f} events/turn), stored bytes per turn:")
        print(f"  {'column':<14}{'now':>8}{'compact':>9}{'saved':>8}")
        saved_all = 0.0
        for column in ("payload", "hash", "prev_hash", "stream_id", "recorded_at", "type",
                       "position", "seq", "version"):
            stored = conn.execute(f"SELECT sum(length(CAST({column} AS BLOB))) FROM events"
                                  ).fetchone()[0] / n
            compact = COMPACT.get(column, None)
            if compact is None:
                print(f"  {column:<14}{stored:>8,.0f}{'':>9}{'':>8}")
                continue
            floor = compact * events / n
            saved_all += stored - floor
            print(f"  {column:<14}{stored:>8,.0f}{floor:>9,.0f}{stored - floor:>8,.0f}")
        print("\npayload by event type (canonical JSON, the hash chain's input):")
        for kind, count, avg, example in conn.execute(
                "SELECT type, count(*), avg(length(payload)), max(payload) FROM events "
                "GROUP BY type ORDER BY sum(length(payload)) DESC"):
            print(f"  {kind:<24}{count:>7,} x {avg:>5,.0f} B   e.g. {example[:90]}")
        indexes = conn.execute("SELECT name FROM sqlite_master WHERE type='index' "
                               "AND tbl_name='events'").fetchall()
        print(f"\ncompacting stream id, timestamp and type would save about {saved_all:,.0f} "
              f"bytes/turn in the row ({saved_all / (total / n):.0%} of the file), plus the "
              f"same stream-id bytes in each of the events indexes "
              f"({', '.join(i[0] for i in indexes) or 'none'}).")
        conn.close()


if __name__ == "__main__":
    main()
