"""The journal and the loop on PostgreSQL, as ratios against raw psycopg inserts of the same rows.

    python bench/postgres_bench.py [--quick] [--url postgresql://…]

Not a test: it prints figures. Without ``--url`` it starts a throwaway cluster
(``tests/pgcluster.py``, fsync on: durable commits) and talks to it over its Unix
socket. Every figure and its baseline are measured in the same run, on the same
server and socket:

- **per append**: single-event ``PostgresJournal.append`` against a raw psycopg
  ``INSERT`` + commit of the same row into the same ``events`` table
  definition (target >= 0.70 of raw);
- **per batch**: 1,000-event appends against a raw ``executemany`` of the same
  rows per transaction (target >= 0.50 of raw);
- both again with the engine's extension installed (``+ views``: every
  ``model_responded`` is also projected into ``_audit_model_calls`` by the
  trigger, in the same transaction), against the same raw baseline;
- **per turn**: a real :class:`~engine.loop.Loop` turn (model call, tool call,
  four commits) against raw inserts of exactly the rows the loop wrote, grouped
  in the same transactions;
- **fold**: one conversation of ``--fold-turns`` loop turns (four events each:
  25,000 turns are 100,000 events) recorded on SQLite and copied to PostgreSQL
  (``copy_streams``): folding it into its state (``fold_stored(lineage)``) on
  PostgreSQL against the same fold on SQLite;
- **writers**: 1, 2, 4 and 8 processes, each with its own connection pool,
  appending single events for ``--seconds`` — to their own conversations
  (aggregate events/s should grow, not collapse) and all to one conversation
  (each append at the seq it last read; a lost race is a ``ConcurrencyError``,
  counted and retried).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import tempfile
import statistics
import sys
import time
import uuid
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from turnlog.engine.loop import Loop  # noqa: E402
from turnlog.engine.model.messages import Text, ToolCall, Usage  # noqa: E402
from turnlog.engine.providers.base import ModelRequest, ModelResponse  # noqa: E402
from turnlog.engine.tools import tool  # noqa: E402
from turnlog.engine.model.state import fold_stored  # noqa: E402
from turnlog.engine.audit.views import EXTENSIONS  # noqa: E402
from turnlog.journal import ConcurrencyError, Journal, NewEvent, StoredEvent  # noqa: E402
from turnlog.journal._copy import copy_streams  # noqa: E402
from turnlog.journal._pg_schema import MIGRATIONS  # noqa: E402

PAYLOAD = '{"role":"assistant","text":"The weather in Paris is sunny, 21 degrees.","turn":3}'
EVENT = NewEvent("model_responded", 1, PAYLOAD)
HASH = "a" * 64
STAMP = "2025-01-01T00:00:00.000000Z"
_COLUMNS = "position, stream_id, seq, type, version, recorded_at, payload, prev_hash, hash"


def schema_url(base: str) -> str:
    """A new, empty schema in ``base``'s database."""
    name = f"b_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{name}"


def raw_connection(url: str) -> psycopg.Connection:
    """A plain psycopg connection on the journal's own table definition (core schema)."""
    conn = psycopg.connect(url)
    for _, step in MIGRATIONS:
        step(conn)
    conn.commit()
    return conn


def raw_inserts(conn: psycopg.Connection, batches: list[list[tuple]]) -> float:
    """Seconds to insert each batch of rows in its own transaction (one statement each)."""
    start = time.perf_counter()
    for rows in batches:
        conn.cursor().executemany(f"INSERT INTO events ({_COLUMNS}) VALUES "
                                  "(%s, %s, %s, %s, %s, %s, %s, %s, %s)", rows)
        conn.commit()
    return time.perf_counter() - start


def row(position: int, stream: str, seq: int, event: NewEvent = EVENT) -> tuple:
    return (position, stream, seq, event.type, event.version, STAMP, event.payload, HASH, HASH)


def bench_appends(base: str, n: int, batch: int, extensions: tuple = ()) -> tuple[float, float]:
    """(turnlog events/s, raw events/s) for ``n`` events in appends of ``batch``."""
    raw = raw_connection(schema_url(base))
    batches = [[row(i + k, "s", i + k) for k in range(1, batch + 1)]
               for i in range(0, n, batch)]
    raw_rate = n / raw_inserts(raw, batches)
    raw.close()
    with Journal.open(schema_url(base), extensions=extensions) as journal:
        events = [EVENT] * batch
        start = time.perf_counter()
        for i in range(0, n, batch):
            journal.append("s", events, i)
        rate = n / (time.perf_counter() - start)
    return rate, raw_rate


@tool(effect="read_only")
def add(a: float, b: float) -> dict:
    """Add two numbers."""
    return {"sum": a + b}


class FakeModel:
    """Calls ``add`` once per turn for ``turns`` turns, then answers; O(1) per call."""

    name = "bench"
    model = "bench-model"

    def __init__(self, turns: int) -> None:
        self.turns = turns

    def complete(self, request: ModelRequest) -> ModelResponse:
        k = (len(request.messages) - 1) // 2
        if k >= self.turns:
            return ModelResponse(parts=(Text(text="done"),), usage=Usage(input_tokens=1))
        call = ToolCall(id=f"c{k}", name="add", arguments={"a": k, "b": 1},
                        raw_arguments=json.dumps({"a": k, "b": 1}))
        return ModelResponse(parts=(call,), stop_reason="tool_use",
                             usage=Usage(input_tokens=10, output_tokens=5))


class Recording:
    """A journal that remembers every append's stored rows, grouped by transaction."""

    def __init__(self, journal) -> None:
        self._journal = journal
        self.transactions: list[list[StoredEvent]] = []

    def __getattr__(self, name: str):
        return getattr(self._journal, name)

    def append(self, stream_id, events, expected_seq, **kw):
        stored = self._journal.append(stream_id, events, expected_seq, **kw)
        self.transactions.append(stored)
        return stored

    def append_many(self, appends):
        stored = self._journal.append_many(appends)
        self.transactions.append([e for group in stored for e in group])
        return stored


def bench_turns(base: str, turns: int) -> tuple[float, float]:
    """(turnlog seconds per turn, raw seconds per turn for the same rows and transactions)."""
    with Journal.open(schema_url(base), extensions=EXTENSIONS) as journal:
        recording = Recording(journal)
        start = time.perf_counter()
        result = Loop(recording, FakeModel(turns), [add]).start(
            "go", conversation_id="bench", max_turns=turns + 1)
        per_turn = (time.perf_counter() - start) / (turns + 1)
    assert result.status == "completed", result
    raw = raw_connection(schema_url(base))
    batches = [[(e.position, e.stream_id, e.seq, e.type, e.version, e.recorded_at, e.payload,
                 e.prev_hash, e.hash) for e in stored] for stored in recording.transactions]
    raw_per_turn = raw_inserts(raw, batches) / (turns + 1)
    raw.close()
    return per_turn, raw_per_turn


def bench_fold(base: str, turns: int) -> tuple[float, float, int]:
    """(PostgreSQL fold seconds, SQLite fold seconds, events) of one ``turns``-turn conversation."""
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "fold.db")
        with Journal(path) as lite:
            Loop(lite, FakeModel(turns), [add]).start("go", conversation_id="fold",
                                                      max_turns=turns + 1)
            with Journal.open(schema_url(base)) as pg:
                copy_streams(lite, pg)
                times = {}
                for name, journal in (("pg", pg), ("sqlite", lite)):
                    runs = []
                    for _ in range(3):
                        start = time.perf_counter()
                        builder = fold_stored(journal.lineage("fold"))
                        runs.append(time.perf_counter() - start)
                    times[name] = min(runs)
                return times["pg"], times["sqlite"], builder.seq


def _writer(url: str, stream: str, seconds: float, ready, go, out) -> None:
    """One writer process: single-event appends to ``stream`` for ``seconds`` after ``go``."""
    events = retries = 0
    with Journal.open(url, max_connections=1) as journal:
        journal.last_seq(stream)  # the connection is open before the clock starts
        ready.wait()
        go.wait()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            try:
                journal.append(stream, [EVENT], journal.last_seq(stream))
                events += 1
            except ConcurrencyError:
                retries += 1
    out.put((events, retries))


def bench_writers(base: str, writers: int, shared: bool, seconds: float) -> tuple[float, int]:
    """(aggregate events/s, lost races) of ``writers`` processes appending for ``seconds``."""
    url = schema_url(base)
    Journal.open(url).close()  # the schema, before the writers race to create it
    ctx = multiprocessing.get_context("spawn")
    ready, go, out = ctx.Barrier(writers + 1), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(url, "shared" if shared else f"w{i}",
                                                seconds, ready, go, out))
             for i in range(writers)]
    for p in procs:
        p.start()
    ready.wait()
    go.set()
    done = [out.get() for _ in procs]
    for p in procs:
        p.join()
    with Journal.open(url) as journal:
        assert journal.verify().ok
    return sum(e for e, _ in done) / seconds, sum(r for _, r in done)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="Fewer events (a smoke run).")
    parser.add_argument("--url", help="A PostgreSQL database to use (default: a throwaway "
                                      "cluster with fsync on).")
    parser.add_argument("--rounds", type=int, default=3, help="Best of this many rounds.")
    parser.add_argument("--fold-turns", type=int, default=25_000,
                        help="Loop turns of the folded conversation (4 events a turn).")
    parser.add_argument("--seconds", type=float, default=3.0, help="Each writer trial's length.")
    args = parser.parse_args()
    cluster = None
    base = args.url
    if base is None:
        from tests.pgcluster import Cluster

        cluster = Cluster(fsync=True)
        base = cluster.create_database("bench")
    singles, batched, turns = (200, 5_000, 50) if args.quick else (2_000, 50_000, 300)
    fold_turns = min(args.fold_turns, 250) if args.quick else args.fold_turns
    try:
        figures = []
        for name, run, target in (
                ("single appends", lambda: bench_appends(base, singles, 1), 0.70),
                ("1,000-event batches", lambda: bench_appends(base, batched, 1000), 0.50),
                ("+ views, single", lambda: bench_appends(base, singles, 1, EXTENSIONS), 0.70),
                ("+ views, batches", lambda: bench_appends(base, batched, 1000, EXTENSIONS),
                 0.50)):
            best = max((run() for _ in range(args.rounds)), key=lambda r: r[0] / r[1])
            figures.append((name, best[0], best[1], target))
        for name, ours, raw, target in figures:
            print(f"{name:>22}: turnlog {ours:>10,.0f} ev/s   raw psycopg {raw:>10,.0f} ev/s   "
                  f"ratio {ours / raw:.2f} (target >= {target:.2f})")
        per_turn = [bench_turns(base, turns) for _ in range(args.rounds)]
        ours = statistics.median(t for t, _ in per_turn)
        raw = statistics.median(r for _, r in per_turn)
        print(f"{'loop turn':>22}: turnlog {ours * 1e3:>8.2f} ms/turn   raw inserts of its rows "
              f"{raw * 1e3:>8.2f} ms/turn   ratio (raw/turnlog) {raw / ours:.2f}")
        pg, lite, events = bench_fold(base, fold_turns)
        print(f"{'fold':>22}: {events:,} events   PostgreSQL {pg * 1e3:,.0f} ms   SQLite "
              f"{lite * 1e3:,.0f} ms   ratio (PostgreSQL/SQLite) {pg / lite:.2f}")
        for shared in (False, True):
            label = "one conversation" if shared else "own conversations"
            one = None
            for n in (1, 2, 4, 8):
                rate, lost = bench_writers(base, n, shared, args.seconds)
                one = one or rate
                print(f"{f'{n} writer(s), {label}':>34}: {rate:>8,.0f} ev/s "
                      f"({rate / one:.2f}x of 1 writer), {lost:,} lost races retried")
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
