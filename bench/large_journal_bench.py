"""Benchmark: the viewer and the readers (`show`, `export`, `report`) on a very large journal.

Issue 28, item 5. The journal: 1,000,000 events in 10,000 conversations, one of
which holds 100,000 events (``--long``); the others share the rest evenly. It
is built with the journal's own bulk path, ``Journal.append_many`` (every
stream's events chained and inserted with ``executemany``, many conversations
in one transaction, the engine's view extension installed), so every hash chain
and the log tree verify as if the conversations had been run. The events are
``bench/audit_bench.py``'s synthetic tool-using agent runs, each response with
the charge the loop records on it. It is cached at
``--path`` (default in the temporary directory, keyed by its sizes).

In one run it measures, against baselines measured in the same run:

  baseline scan   ``SELECT count(*), sum(length(payload)) FROM events`` (raw sqlite3)
  baseline page   ``SELECT … FROM events WHERE stream_id = ? ORDER BY seq LIMIT 200``
  list page       ``GET /`` through a served viewer (uvicorn, in a subprocess); target 100 ms
  long page       ``GET /conversation?id=LONG`` of the 100,000-event conversation, time to
                  its first screen (the body up to the page's flush mark: header and first
                  turns; the turns are counted after it) and to the whole page; target 300 ms;
                  and the viewer's CPU time per request (/proc/PID/stat), which a busy
                  machine inflates less than wall time
  RSS             the peak resident set (``VmHWM`` in /proc/PID/status) of the viewer after
                  those pages and the long conversation's ``/report``; of ``turnlog ls``,
                  ``show LONG`` (and ``--json``), ``export LONG`` as ``jsonl``, ``markdown``
                  and ``openai`` (built whole, for comparison) and ``report LONG``, run as
                  subprocesses (their wall time too); target 200 MB

    PYTHONPATH=. .venv/bin/python bench/large_journal_bench.py               # 1M events
    PYTHONPATH=. .venv/bin/python bench/large_journal_bench.py --small       # a quick run
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from bench.audit_bench import _conversation
from turnlog.engine.audit import Prices
from turnlog.engine.audit.views import EXTENSIONS
from turnlog.engine.model.events import ConversationStarted, ModelResponded, encode_event
from turnlog.journal import Journal, StreamAppend
from turnlog.replay.view.app import FLUSH

ROOT = Path(__file__).resolve().parents[1]
TURNLOG = str(Path(sys.executable).with_name("turnlog"))

#: the id of the one long conversation
LONG = "long-000000"


def _stamps(day: str, first: int, count: int) -> list[str]:
    return [f"{day}T{(k // 3600) % 24:02d}:{(k // 60) % 60:02d}:{k % 60:02d}.000000Z"
            for k in range(first, first + count)]


class _Charger:
    """Each response's ``charge``, recorded with it as the loop records it (``Prices.charge``
    at its time); the bench's responses repeat, so each distinct one is priced once."""

    def __init__(self) -> None:
        self.prices, self.seen = Prices(), {}

    def __call__(self, events: list, provider: str, model: str, day: str) -> list:
        out = []
        for e in events:
            if type(e) is ModelResponded:
                key = (provider, model, day, e.usage)
                if key not in self.seen:
                    self.seen[key] = self.prices.charge(provider, model, day, e.usage)
                e = msgspec.structs.replace(e, charge=self.seen[key])
            out.append(e)
        return out


def generate(path: Path, conversations: int, events: int, long: int,
             batch_events: int = 20_000) -> float:
    """Write the journal at ``path``: ``conversations`` (one of ``long`` events), ``events`` in
    all, through ``Journal.append_many`` in transactions of about ``batch_events`` events."""
    rng = random.Random(7)
    charged = _Charger()
    per = max(8, (events - long) // max(1, conversations - 1))
    t0 = time.perf_counter()
    with Journal(str(path), synchronous="NORMAL", extensions=EXTENSIONS) as journal:
        # the long conversation first, in slices (one transaction each): a stream's appends
        started, body = _conversation(rng, 0, long)
        started = ConversationStarted(**{**{f: getattr(started, f)
                                            for f in started.__struct_fields__},
                                         "conversation_id": LONG})
        body = charged(body, started.provider, started.model, "2025-07-01")
        rows = [encode_event(e, at) for e, at in
                zip([started, *body], _stamps("2025-07-01", 0, len(body) + 1), strict=True)]
        for at in range(0, len(rows), batch_events):
            journal.append(LONG, rows[at:at + batch_events], at)
        pending: list[StreamAppend] = []
        size = 0
        for i in range(1, conversations):
            started, body = _conversation(rng, i, per)
            day = f"2025-{7 + i * 6 // conversations:02d}-{1 + i % 28:02d}"
            body = charged(body, started.provider, started.model, day)
            new = [encode_event(e, at) for e, at in
                   zip([started, *body], _stamps(day, i % 3000, len(body) + 1), strict=True)]
            pending.append(StreamAppend(started.conversation_id, new, 0))
            size += len(new)
            if size >= batch_events or i == conversations - 1:
                journal.append_many(pending)
                pending, size = [], 0
                print(f"  {i + 1:,} conversations in {time.perf_counter() - t0:.0f} s",
                      file=sys.stderr)
    return time.perf_counter() - t0


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (``VmHWM``), in MB, read from /proc."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.M).group(1)) / 1024


def rss_mb(pid: int) -> float:
    """The process's resident set now (``VmRSS``), in MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.M).group(1)) / 1024


def median(fn, runs: int) -> float:
    fn()  # warm
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def run_measured(args: list[str]) -> tuple[float, float, int]:
    """Run a command, its stdout to /dev/null; ``(wall ms, peak RSS MB, exit code)``.

    The peak is the last ``VmHWM`` (a high-water mark: it only grows) read from
    /proc/PID/status every 5 ms while the command runs.
    """
    t0 = time.perf_counter()
    child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0.0
    while child.poll() is None:
        try:
            peak = max(peak, peak_rss_mb(child.pid))
        except (OSError, AttributeError):  # exiting: its memory is already gone
            pass
        time.sleep(0.005)
    took = (time.perf_counter() - t0) * 1000
    if child.returncode:
        print(f"  {' '.join(args[:3])}… failed: {child.stderr.read().decode()[-500:]}",
              file=sys.stderr)
    return took, peak, child.returncode


class Viewer:
    """``turnlog view`` over the journal, in a subprocess on a free port."""

    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen([TURNLOG, "view", "--db", str(db), "--port", "0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.proc.stdout.readline().decode()
        match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if match is None:
            raise SystemExit(f"the viewer did not start: {line}{self.proc.stderr.read().decode()}")
        self.port = int(match.group(1))

    def cpu_ms(self) -> float:
        """The viewer's CPU time so far (user + system, /proc/PID/stat), in ms."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")

    def get(self, url: str, mark: bytes | None = None) -> tuple[float, float, int, float]:
        """``(ms until ``mark`` arrived — the end of the first screen —, ms until the whole
        body did, body bytes, the viewer's CPU ms for the request)``."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        cpu = self.cpu_ms()
        t0 = time.perf_counter()
        conn.request("GET", url)
        response = conn.getresponse()
        if response.status != 200:
            raise SystemExit(f"GET {url}: {response.status} {response.read()[:300]!r}")
        body, t_first = b"", None
        while chunk := response.read1(65536):
            body += chunk
            if t_first is None and mark is not None and mark in body:
                t_first = time.perf_counter() - t0
        t_all = time.perf_counter() - t0
        conn.close()
        return (t_first or t_all) * 1000, t_all * 1000, len(body), self.cpu_ms() - cpu

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def viewer_pages(path: Path, runs: int, long_events: int, row: Any, list_only: bool) -> None:
    """The served viewer's figures: the list page, the long conversation's pages, its
    ``/report`` and the viewer's peak RSS (only the list page with ``list_only``)."""
    viewer = Viewer(path)
    try:
        lists = [viewer.get("/") for _ in range(runs + 1)][1:]
        ms = statistics.median(x[1] for x in lists)
        row("viewer: list page", ms, f"<= 100 ms {'ok' if ms <= 100 else 'MISSED'}")
        row("  its CPU time in the viewer", statistics.median(x[3] for x in lists))
        if list_only:
            return
        pages = [viewer.get(f"/conversation?id={LONG}", mark=FLUSH.encode())
                 for _ in range(runs + 1)][1:]
        ms = statistics.median(x[0] for x in pages)
        row(f"viewer: {long_events:,}-event page, first screen", ms,
            f"<= 300 ms {'ok' if ms <= 300 else 'MISSED'}")
        row(f"viewer: same page, whole ({pages[0][2] / 1024:.0f} KiB, turns counted)",
            statistics.median(x[1] for x in pages))
        row("  its CPU time in the viewer", statistics.median(x[3] for x in pages))
        page_50 = [viewer.get(f"/conversation?id={LONG}&page=50", mark=FLUSH.encode())
                   for _ in range(runs)]
        row("viewer: same, turns page 50, first screen",
            statistics.median(x[0] for x in page_50))
        t_first, t_all, size, _ = viewer.get(f"/report?id={LONG}")
        row(f"viewer: /report of it ({size / 1e6:.0f} MB, streamed)", t_all)
        viewer_peak = peak_rss_mb(viewer.proc.pid)
    finally:
        viewer.close()
    print(f"\n{'turnlog view (after the pages above)':<46}{'':>10}{viewer_peak:>13.0f}  "
          f"<= 200 MB {'ok' if viewer_peak <= 200 else 'MISSED'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--long", type=int, default=100_000,
                        help="events of the one long conversation")
    parser.add_argument("--small", action="store_true",
                        help="a quick run: 500 conversations, 50,000 events, a 10,000-event one")
    parser.add_argument("--path", type=Path, help="where the journal is (built if missing)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", choices=("list", "viewer", "cli"),
                        help="measure only the list page, the viewer's pages, or the commands")
    a = parser.parse_args()
    if a.small:
        a.conversations, a.events, a.long = 500, 50_000, 10_000
    path = a.path or Path(tempfile.gettempdir()) / (
        f"turnlog-large-{a.conversations}c-{a.events}e-{a.long}l.db")
    if not path.exists():
        try:
            took = generate(path, a.conversations, a.events, a.long)
        except BaseException:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            raise
        print(f"built {path} in {took:.0f} s (Journal.append_many)")
    con = sqlite3.connect(path)
    total, long_events = con.execute(
        "SELECT count(*), sum(stream_id = ?) FROM events", (LONG,)).fetchone()
    con.close()
    print(f"journal: {a.conversations:,} conversations, {total:,} events "
          f"({long_events:,} in {LONG}), {path.stat().st_size / 1e6:.0f} MB, {path}")
    print(f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} cores")

    def scan() -> None:
        c = sqlite3.connect(path)
        c.execute("SELECT count(*), sum(length(payload)) FROM events").fetchone()
        c.close()

    def raw_page() -> None:
        c = sqlite3.connect(path)
        c.execute("SELECT seq, type, recorded_at, payload FROM events WHERE stream_id = ? "
                  "ORDER BY seq LIMIT 200", (LONG,)).fetchall()
        c.close()

    base_scan, base_page = median(scan, a.runs), median(raw_page, a.runs)
    print(f"\n{'what':<46}{'ms':>10}{'x scan':>9}{'x page':>9}  target")

    def row(name: str, ms: float, target: str = "") -> None:
        print(f"{name:<46}{ms:>10.1f}{ms / base_scan:>9.2f}{ms / base_page:>9.1f}  {target}")

    row("baseline: raw full scan (sqlite3)", base_scan)
    row("baseline: raw 200-event page (sqlite3)", base_page)
    if a.only != "cli":
        viewer_pages(path, a.runs, long_events, row, list_only=a.only == "list")
    if a.only in ("list", "viewer"):
        return
    print(f"\n{'process':<46}{'ms':>10}{'peak RSS MB':>13}  target")
    db = ["--db", str(path)]
    for name, args in [
            ("turnlog ls", ["ls", *db]),
            (f"turnlog show {LONG}", ["show", LONG, *db]),
            (f"turnlog show {LONG} --json", ["show", LONG, "--json", *db]),
            (f"turnlog export {LONG} --format jsonl", ["export", LONG, "--format", "jsonl", *db]),
            (f"turnlog export {LONG} --format markdown",
             ["export", LONG, "--format", "markdown", *db]),
            (f"turnlog export {LONG} --format openai", ["export", LONG, "--format", "openai", *db]),
            (f"turnlog report {LONG}", ["report", LONG, *db])]:
        took, peak, code = run_measured([TURNLOG, *args])
        verdict = "FAILED" if code else f"<= 200 MB {'ok' if peak <= 200 else 'MISSED'}"
        print(f"{name:<46}{took:>10.0f}{peak:>13.0f}  {verdict}")


if __name__ == "__main__":
    main()
