"""What the schema-3 migration (hashes as 32-byte BLOBs) costs a journal of an older schema.

Not a test. Run: ``PYTHONPATH=. python bench/migrate_bench.py [--events N] [--db PATH]``.

It writes ``N`` events (default 200,000, in 2,000 streams, through ``Journal``)
or copies the journal ``--db`` names (``bench/audit_bench.py``'s, say), turns
its hashes back into the 64-character hex text of schema 2, and times the first
writable open, which migrates it. The baseline, in the same run on a copy of
the same file: raw ``sqlite3`` rebuilding ``events`` without converting a hash
(copy the rows into a new table with its unique key, drop the old one, rename,
commit durably), the least any rebuild of the table must do. It also prints the file's size before
and after (both vacuumed) and checks that the migrated journal verifies.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
from pathlib import Path

from turnlog.engine.audit import EXTENSIONS
from turnlog.journal import Journal, NewEvent
from tests.old_journals import as_schema_2


def build(path: Path, events: int) -> None:
    """``events`` events in 2,000 streams of short JSON payloads, as the engine would."""
    streams = 2000
    per = max(1, events // streams)
    with Journal(path, synchronous="NORMAL", extensions=EXTENSIONS) as journal:
        for s in range(streams):
            batch = [NewEvent("note", 1, f'{{"n":{i},"text":"event {i} of stream {s}"}}')
                     for i in range(per)]
            journal.append(f"stream-{s:05d}", batch, 0)


def raw_rebuild(path: Path) -> float:
    """Seconds for raw sqlite3 to rebuild ``events`` as the migration does, minus the
    hashes' conversion: copy the rows into a new table with its unique key, drop the
    old one, rename, commit durably in WAL mode and close (which checkpoints)."""
    start = time.perf_counter()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("CREATE TABLE copy AS SELECT * FROM events WHERE 0")
    conn.execute("CREATE UNIQUE INDEX copy_key ON copy (stream_id, seq)")
    conn.execute("INSERT INTO copy SELECT * FROM events ORDER BY position")
    conn.execute("PRAGMA legacy_alter_table = ON")  # the views over events stay as they are
    conn.execute("DROP TABLE events")
    conn.execute("ALTER TABLE copy RENAME TO events")
    conn.execute("COMMIT")
    conn.close()
    return time.perf_counter() - start


def vacuumed_size(path: Path) -> int:
    conn = sqlite3.connect(path)
    conn.execute("VACUUM")
    conn.close()
    return os.path.getsize(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--db", type=Path, help="copy this journal instead of writing one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "old.db"
        if args.db:
            source, target = sqlite3.connect(args.db), sqlite3.connect(path)
            source.backup(target)
            source.close()
            target.close()
        else:
            build(path, args.events)
        as_schema_2(path)
        before = vacuumed_size(path)
        twin = Path(tmp) / "twin.db"
        source, target = sqlite3.connect(path), sqlite3.connect(twin)
        source.backup(target)
        source.close()
        target.close()
        baseline = raw_rebuild(twin)
        start = time.perf_counter()
        Journal(path, extensions=EXTENSIONS).close()
        migration = time.perf_counter() - start
        after = vacuumed_size(path)
        with Journal(path, readonly=True) as journal:
            report = journal.verify()
    n = report.checked_events
    print(f"{n:,} events of schema 2 ({before / 1e6:,.1f} MB)")
    print(f"  raw sqlite3 rebuild of events    {baseline:8.2f} s   1.00")
    print(f"  migration to schema 3            {migration:8.2f} s   {migration / baseline:.2f}x "
          f"({n / migration:,.0f} events/s)")
    print(f"  file after (vacuumed)            {after / 1e6:8.1f} MB  {after / before:.2f} of before; "
          f"verifies: {report.ok}")


if __name__ == "__main__":
    main()
