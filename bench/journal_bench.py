"""Journal throughput against raw sqlite3 on the same file system, pragmas and table.

    python bench/journal_bench.py [--quick] [--synchronous FULL|NORMAL]

Not a test: it prints figures. Targets: single-event appends >= 0.70 of raw
INSERT + commit per row; 1000-event batches >= 0.50 of raw executemany in one
transaction. The read figure is a fold-ready ``Journal.read()`` of one long stream,
with peak RSS before and after to show that reading does not grow with the stream.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable

from turnlog.journal import Journal, NewEvent
from turnlog.journal._schema import MIGRATIONS
from sqlite_utils import Database

PAYLOAD = '{"role":"assistant","text":"The weather in Paris is sunny, 21 degrees.","turn":3}'
EVENT = NewEvent("model_responded", 1, PAYLOAD)
HASH = "a" * 64
STAMP = "2025-01-01T00:00:00.000000Z"
RAW_INSERT = (
    "INSERT INTO events (stream_id, seq, type, version, recorded_at, payload, prev_hash, hash) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def raw_connection(path: str, synchronous: str) -> sqlite3.Connection:
    """A plain sqlite3 connection on the journal's own table definition and pragmas."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("PRAGMA busy_timeout = 5000")
    for _, step in MIGRATIONS:
        step(Database(conn))
    conn.commit()
    return conn


def raw_row(seq: int) -> tuple:
    return ("s", seq, "model_responded", 1, STAMP, PAYLOAD, HASH, HASH)


def bench_single(workdir: str, n: int, sync: str) -> tuple[float, float]:
    raw = raw_connection(os.path.join(workdir, f"raw-single-{time.monotonic_ns()}.db"), sync)
    rows = [raw_row(seq) for seq in range(1, n + 1)]
    start = time.perf_counter()
    for row in rows:
        raw.execute(RAW_INSERT, row)
        raw.commit()
    raw_rate = n / (time.perf_counter() - start)
    raw.close()

    path = os.path.join(workdir, f"j-single-{time.monotonic_ns()}.db")
    with Journal(path, synchronous=sync) as j:
        events = [EVENT]
        start = time.perf_counter()
        for seq in range(n):
            j.append("s", events, seq)
        journal_rate = n / (time.perf_counter() - start)
    return journal_rate, raw_rate


def bench_batch(workdir: str, batches: int, size: int, sync: str) -> tuple[float, float]:
    raw = raw_connection(os.path.join(workdir, f"raw-batch-{time.monotonic_ns()}.db"), sync)
    start = time.perf_counter()
    for b in range(batches):
        raw.executemany(RAW_INSERT, [raw_row(b * size + i) for i in range(1, size + 1)])
        raw.commit()
    raw_rate = batches * size / (time.perf_counter() - start)
    raw.close()

    path = os.path.join(workdir, f"j-batch-{time.monotonic_ns()}.db")
    with Journal(path, synchronous=sync) as j:
        events = [EVENT] * size
        start = time.perf_counter()
        for b in range(batches):
            j.append("s", events, b * size)
        journal_rate = batches * size / (time.perf_counter() - start)
    return journal_rate, raw_rate


def build_stream(path: str, n: int) -> None:
    """Runs in a child process, so building the stream does not raise this process's peak RSS."""
    with Journal(path, synchronous="NORMAL") as j:
        for start in range(0, n, 1000):
            j.append("long", [EVENT] * min(1000, n - start), start)


def bench_read(workdir: str, n: int) -> tuple[float, float, int, int]:
    path = os.path.join(workdir, "read.db")
    child = multiprocessing.get_context("spawn").Process(target=build_stream, args=(path, n))
    child.start()
    child.join()
    assert child.exitcode == 0, "building the stream failed"

    raw = sqlite3.connect(path)
    query = "SELECT * FROM events WHERE stream_id = 'long' ORDER BY seq"
    for _ in raw.execute(query):  # warm the OS page cache for both readers
        pass
    start = time.perf_counter()
    count = sum(1 for _ in raw.execute(query))
    raw_rate = count / (time.perf_counter() - start)
    raw.close()

    with Journal(path) as j:
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        count = 0
        for _ in j.read("long"):
            count += 1
        rate = count / (time.perf_counter() - start)
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert count == n
    return rate, raw_rate, rss_before, rss_after


def best_of(rounds: int, measure: Callable[[], tuple[float, float]]) -> tuple[float, float]:
    """Best journal and best raw rate over alternating rounds (disk timing is noisy)."""
    results = [measure() for _ in range(rounds)]
    return max(r[0] for r in results), max(r[1] for r in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer events, for a smoke run")
    parser.add_argument("--synchronous", default="FULL", choices=["FULL", "NORMAL"])
    args = parser.parse_args()
    sync = args.synchronous
    if args.quick:
        single_n, batches, read_n, rounds = 300, 5, 20_000, 2
    else:
        single_n, batches, read_n, rounds = 2000, 20, 100_000, 3

    with tempfile.TemporaryDirectory() as workdir:
        single = best_of(rounds, lambda: bench_single(workdir, single_n, sync))
        batch = best_of(rounds, lambda: bench_batch(workdir, batches, 1000, sync))
        read_rate, raw_read_rate, rss_before, rss_after = bench_read(workdir, read_n)

    print(f"turnlog journal benchmark: tempdir {tempfile.gettempdir()}, WAL, synchronous={sync}, "
          f"SQLite {sqlite3.sqlite_version}, Python {sys.version.split()[0]}")
    print(f"{'measure':<44}{'journal ev/s':>14}{'raw ev/s':>12}{'ratio':>8}{'target':>8}")
    for name, (mine, raw), target in (
        (f"single-event appends ({single_n} commits)", single, 0.70),
        (f"1000-event batches ({batches} commits)", batch, 0.50),
    ):
        ratio = mine / raw
        mark = "ok" if ratio >= target else "MISSED"
        print(f"{name:<44}{mine:>14,.0f}{raw:>12,.0f}{ratio:>8.2f}{'>= ' + str(target):>8}  {mark}")
    print(f"{f'read() of a {read_n:,}-event stream':<44}{read_rate:>14,.0f}{raw_read_rate:>12,.0f}"
          f"{read_rate / raw_read_rate:>8.2f}{'-':>8}")
    print(f"peak RSS before/after the read: {rss_before / 1024:.1f} MiB / "
          f"{rss_after / 1024:.1f} MiB (+{(rss_after - rss_before) / 1024:.1f} MiB)")


if __name__ == "__main__":
    main()
