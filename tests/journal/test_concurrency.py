"""Several processes appending to one stream: optimistic concurrency holds across processes."""

from __future__ import annotations

import json
import multiprocessing

from turnlog.journal import ConcurrencyError, Journal, NewEvent

WORKERS = 4
EVENTS_PER_WORKER = 25


def append_with_retries(path: str, worker: int, barrier, results) -> None:
    """Append this worker's events one by one, retrying on ConcurrencyError; report retries."""
    retries = 0
    with Journal(path) as journal:
        expected = journal.last_seq("shared")
        # Every worker has read the same expected_seq: the first appends must collide.
        barrier.wait()
        for n in range(EVENTS_PER_WORKER):
            new = NewEvent("note", 1, json.dumps({"worker": worker, "n": n}))
            while True:
                try:
                    [stored] = journal.append("shared", [new], expected)
                    break
                except ConcurrencyError as exc:
                    retries += 1
                    expected = exc.actual_seq
            expected = stored.seq
    results.put(retries)


def test_processes_racing_on_one_stream_land_every_event_exactly_once(tmp_path):
    path = str(tmp_path / "turnlog.db")
    Journal(path).close()
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(WORKERS), ctx.Queue()
    workers = [
        ctx.Process(target=append_with_retries, args=(path, w, barrier, results))
        for w in range(WORKERS)
    ]
    for worker in workers:
        worker.start()
    retries = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)

    assert [w.exitcode for w in workers] == [0] * WORKERS
    # Only one of the first appends at expected_seq 0 can win.
    assert sum(retries) >= WORKERS - 1
    with Journal(path) as journal:
        stored = list(journal.read("shared"))
        report = journal.verify()
    assert [e.seq for e in stored] == list(range(1, WORKERS * EVENTS_PER_WORKER + 1))
    landed = sorted((p["worker"], p["n"]) for p in (json.loads(e.payload) for e in stored))
    assert landed == [(w, n) for w in range(WORKERS) for n in range(EVENTS_PER_WORKER)]
    assert report.ok and report.checked_events == WORKERS * EVENTS_PER_WORKER
