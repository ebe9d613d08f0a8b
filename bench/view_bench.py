"""Benchmark: `turnlog view` pages over large journals.

Two journals, generated through the library (``bench/audit_bench.py``'s
generator: ``Conversation.start`` then one batched append per conversation,
``synchronous=NORMAL``) and cached in /tmp:

- 10,000 conversations (20 events each by default): the conversation list's
  first page, sorted by last update (the default), by tokens, filtered by
  status and by a text search; target: the first page under 300 ms;
- one conversation of 1,000 turns (~4,000 events): its page (the first 50
  turns; the timeline is paginated) and its last page; target under 1 s;
  and, for scale, the whole 1,000-turn report file.

Each figure is the median of several warm requests through Starlette's test
client (in-process: routing, the read-only journal handles, the queries and
the Jinja2 rendering; no network).

    PYTHONPATH=. python bench/view_bench.py
    PYTHONPATH=. python bench/view_bench.py --conversations 1000   # a quick run
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

from starlette.testclient import TestClient

from bench.audit_bench import _conversation, generate
from turnlog.engine.model.conversation import Conversation
from turnlog.engine.audit.views import EXTENSIONS
from turnlog.journal import Journal
from turnlog.replay.view import create_app, render_report


def long_conversation(path: Path, turns: int) -> str:
    """One conversation of about ``turns`` turns (4 events each)."""
    started, events = _conversation(random.Random(11), 0, 4 * turns + 6)
    cid = "long-1000"
    started = type(started)(**{**{f: getattr(started, f) for f in started.__struct_fields__},
                               "conversation_id": cid})
    with Journal(str(path), synchronous="NORMAL", extensions=EXTENSIONS) as journal:
        conv = Conversation.start(journal, started)
        conv.append(*events)
    return cid


def median_ms(fn, runs: int) -> tuple[float, float]:
    """Median wall-clock and process CPU milliseconds (CPU time stays meaningful on a
    machine other work keeps busy, where wall time mostly measures the wait for a core)."""
    fn()  # warm
    wall, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall) * 1000, statistics.median(cpu) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--events-per-conversation", type=int, default=20)
    parser.add_argument("--turns", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=5)
    a = parser.parse_args()
    many = Path(f"/tmp/turnlog-view-bench-{a.conversations}x{a.events_per_conversation}.db")
    if not many.exists():
        took = generate(many, a.conversations, a.events_per_conversation, charged=True)
        print(f"generated {many} in {took:.1f} s", file=sys.stderr)
    long = Path(f"/tmp/turnlog-view-bench-long-{a.turns}.db")
    if not long.exists():
        long_conversation(long, a.turns)
    client = TestClient(create_app(str(many)), base_url="http://127.0.0.1")
    one = TestClient(create_app(str(long)), base_url="http://127.0.0.1")

    def get(c: TestClient, url: str):
        def run() -> None:
            r = c.get(url)
            assert r.status_code == 200, (url, r.status_code, r.text[:300])
        return run

    rows = [
        (f"list of {a.conversations:,}: first page", get(client, "/"), 300),
        ("list sorted by tokens", get(client, "/?sort=tokens"), None),
        ("list filtered: status=failed", get(client, "/?status=failed"), None),
        ("list filtered: provider + tool", get(client, "/?provider=openai&tool=search"), None),
        ("list: text search", get(client, "/?q=topic%2049"), None),
        ("list: page 100", get(client, "/?page=100"), None),
        ("audit dashboard", get(client, "/audit"), None),
        (f"{a.turns:,}-turn conversation: first page", get(one, "/conversation?id=long-1000"),
         1000),
        (f"{a.turns:,}-turn conversation: last page",
         get(one, f"/conversation?id=long-1000&page={-(-a.turns // 50)}"), 1000),
        (f"{a.turns:,}-turn report (whole file)", lambda: render_report(str(long), "long-1000"),
         None),
    ]
    print(f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} cores")
    print(f"{'page':<44}{'wall ms':>10}{'cpu ms':>10}  target (wall)")
    for name, fn, target in rows:
        runs = 1 if name.startswith(("list: text", "audit")) else a.runs
        wall, cpu = median_ms(fn, runs)
        verdict = "" if target is None else f"< {target} ms {'ok' if wall < target else 'MISSED'}"
        print(f"{name:<44}{wall:>10.1f}{cpu:>10.1f}  {verdict}")


if __name__ == "__main__":
    main()
