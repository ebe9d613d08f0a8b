"""Eight processes on two simulated hosts append to one PostgreSQL journal at once.

Each process has its own journal handle and so its own connection pool (4 per
"host"); they race on one shared conversation and each writes its own. Every
attempt carries a unique id: an attempt either landed exactly once or raised
``ConcurrencyError`` and left nothing. Meanwhile a follower pages through
``read_all`` as ``turnlog tail`` does and must see every position, in order,
never skipping one that committed late.
"""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
from collections import Counter

from turnlog.journal import ConcurrencyError, Journal, NewEvent
from tests.pgcluster import fresh_url

HOSTS = 2
PER_HOST = 4
ROUNDS = 12


def writer(url: str, host: int, worker: int, barrier, results) -> None:
    """Append ROUNDS events to "shared" (retrying lost races) and ROUNDS to its own stream."""
    landed, refused = [], []
    with Journal.open(url, max_connections=2, timeout=60) as journal:
        own = f"own-{host}-{worker}"
        expected = journal.last_seq("shared")
        barrier.wait()
        for n in range(ROUNDS):
            while True:
                attempt = f"{host}.{worker}.{n}.{len(refused)}"
                new = NewEvent("note", 1, json.dumps({"attempt": attempt, "n": n}))
                try:
                    [stored] = journal.append("shared", [new], expected)
                except ConcurrencyError as exc:
                    refused.append(attempt)
                    expected = exc.actual_seq
                    continue
                landed.append(attempt)
                expected = stored.seq
                break
            journal.append(own, [NewEvent("note", 1, json.dumps({"n": n}))], n)
    results.put((landed, refused))


def test_eight_processes_on_two_hosts_land_every_append_once_and_tail_skips_nothing():
    url = fresh_url()
    Journal.open(url).close()
    workers = HOSTS * PER_HOST
    total = workers * ROUNDS * 2
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(workers), ctx.Queue()
    processes = [ctx.Process(target=writer, args=(url, host, w, barrier, results))
                 for host in range(HOSTS) for w in range(PER_HOST)]

    seen: list[int] = []

    def follow() -> None:
        with Journal.open(url, readonly=True) as follower:
            deadline = time.monotonic() + 600
            while len(seen) < total and time.monotonic() < deadline:
                after = seen[-1] if seen else 0
                seen.extend(e.position for e in follower.read_all(after, limit=50))

    tail = threading.Thread(target=follow)
    tail.start()
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=600) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    tail.join(timeout=600)

    assert [p.exitcode for p in processes] == [0] * workers
    landed = [a for ok, _ in outcomes for a in ok]
    refused = [a for _, no in outcomes for a in no]
    with Journal.open(url) as journal:
        shared = list(journal.read("shared"))
        stored = Counter(json.loads(e.payload)["attempt"] for e in shared)
        assert [e.seq for e in shared] == list(range(1, workers * ROUNDS + 1))  # 0 gaps, 0 dups
        assert stored == Counter(landed)  # each landed attempt once
        assert not set(refused) & set(stored)  # a refused attempt left nothing
        for host in range(HOSTS):
            for w in range(PER_HOST):
                assert [e.seq for e in journal.read(f"own-{host}-{w}")] == \
                    list(range(1, ROUNDS + 1))
        assert [e.position for e in journal.read_all()] == list(range(1, total + 1))
        assert journal.verify().ok and journal.verify().checked_events == total
        assert not any(s.parent_stream_id for s in journal.streams())  # 0 forks
    assert refused, "the first appends at the same expected_seq must collide"
    assert seen == list(range(1, total + 1))  # the follower never skipped a position
