"""Benchmark: `turnlog audit` on a journal of 10,000 conversations and ~1,000,000 events.

The journal is generated through the library (``Conversation.start`` then one
batched ``Conversation.append`` per conversation, every event checked by the
lifecycle) with ``synchronous=NORMAL`` to make generation quicker (durability
is not what this measures). It is cached in /tmp, keyed by the conversation
count and the views' version, so later runs skip generation; when only an older
version's cache exists, a copy of it is migrated by a writer's open (timed).

Two journals of the same events are measured, each against its own scan:
``charged``, written the way the loop writes it (each ``model_responded``
carries the ``Charge`` the loop's prices gave it at its recording time, so the
audit reads the amounts), and ``uncharged``, a journal from before charges
were recorded (the audit prices every response at today's prices).

In the same run it times, warm, the median of several runs of:
  baseline   SELECT count(*), sum(length(payload)) FROM events  (a full scan)
  audit      `turnlog audit --json`, in-process and as a subprocess
  filtered   `turnlog audit --json --provider anthropic --since 2025-10-01 --tool search`
  ls         `turnlog ls --json`, in-process
and prints each as a ratio to the baseline. Target (issue 28): audit within 2x
of the baseline. The journal is opened with the engine's extension from
the start, so generation pays for the projection triggers the audit reads.

    PYTHONPATH=. python bench/audit_bench.py                      # 10,000 conversations
    PYTHONPATH=. python bench/audit_bench.py --conversations 1000  # a quick run
    PYTHONPATH=. python bench/audit_bench.py --journal charged     # one of the two
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

import msgspec
from click.testing import CliRunner

from turnlog.engine.cli import cli
from turnlog.engine.model.conversation import Conversation
from turnlog.engine.model.events import (
    ConversationCompleted,
    ConversationFailed,
    ConversationStarted,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ToolCallRejected,
    ToolCompleted,
    ToolStarted,
    TurnLimitReached,
    UserMessage,
)
from turnlog.engine.model.messages import Text, ToolCall, Usage
from turnlog.engine.audit.prices import Prices
from turnlog.engine.audit.views import EXTENSIONS, VIEWS_EXTENSION
from turnlog.journal import Journal

ROOT = Path(__file__).resolve().parents[1]
MODELS = [("openai", "gpt-4o"), ("anthropic", "claude-sonnet-4-20250514"),
          ("gemini", "gemini-2.5-flash"), ("acme", "unpriced-1")]
TOOLS = ["get_weather", "search", "add", "read_file"]
CITIES = ["Paris", "Lima", "Oslo", "Tokyo", "Cairo", "Quito"]


def _conversation(rng: random.Random, i: int, target: int) -> tuple[ConversationStarted, list]:
    provider, model = MODELS[i % len(MODELS)]
    started = ConversationStarted(conversation_id=f"conv-{i:06d}", provider=provider, model=model,
                                  system="You are a careful assistant.")
    events: list = [UserMessage.of(f"Task {i}: look things up and summarise.")]
    turn, call = 0, 0
    fate = rng.random()
    end = "completed" if fate < 0.7 else "failed" if fate < 0.8 else "halted" if fate < 0.9 else "active"
    while len(events) < target - 4:
        turn += 1
        if rng.random() < 0.03:
            events += [ModelRequested(turn=turn, digest="d" * 64, provider=provider, model=model),
                       ModelFailed(turn=turn, error_type=rng.choice(["RateLimitError", "ServerError"]),
                                   message="try again", provider=provider, model=model)]
        name = rng.choice(TOOLS)
        call += 1
        cid = f"call_{call}"
        args = {"city": rng.choice(CITIES)} if name == "get_weather" else {"q": f"topic {call % 50}"}
        events += [ModelRequested(turn=turn, digest="d" * 64, provider=provider, model=model),
                   ModelResponded(turn=turn, parts=(Text(text=f"Step {turn}: calling {name}."),
                                                    ToolCall(id=cid, name=name, arguments=args)),
                                  stop_reason="tool_use", provider=provider, model=model,
                                  usage=Usage(input_tokens=800 + 60 * turn, output_tokens=40,
                                              cached_input_tokens=500 if turn > 1 else 0),
                                  latency_ms=rng.uniform(200, 2000), response_id=f"resp_{call}")]
        roll = rng.random()
        if roll < 0.05:
            events.append(ToolCallRejected(call_id=cid, name=name, reason="duplicate",
                                           content="You already called this tool with these arguments."))
        else:
            ok = roll > 0.12
            events += [ToolStarted(call_id=cid, name=name, arguments=args),
                       ToolCompleted(call_id=cid, name=name, success=ok,
                                     content='{"result": "fine"}' if ok else "tool error: timeout",
                                     error=None if ok else "timeout",
                                     duration_ms=round(rng.lognormvariate(3, 1), 3))]
    turn += 1
    if end == "failed":
        events.append(ConversationFailed(error="ServerError: overloaded", error_type="ServerError"))
    elif end == "halted":
        events.append(TurnLimitReached(turn_count=turn - 1, max_turns=turn - 1))
    elif end == "completed":
        events += [ModelRequested(turn=turn, digest="d" * 64, provider=provider, model=model),
                   ModelResponded(turn=turn, parts=(Text(text="All done: here is the summary."),),
                                  provider=provider, model=model,
                                  usage=Usage(input_tokens=900 + 60 * turn, output_tokens=200)),
                   ConversationCompleted(final_content="All done: here is the summary.")]
    return started, events


def generate(path: Path, conversations: int, per: int, charged: bool) -> float:
    """Write the bench journal; ``charged``: each response carries the charge the loop records
    (``Prices.charge`` at its recording time, as ``engine.loop.step`` prices it)."""
    rng = random.Random(7)
    prices = Prices.default()
    t0 = time.perf_counter()
    journal = Journal(str(path), synchronous="NORMAL", extensions=EXTENSIONS)
    for i in range(conversations):
        started, events = _conversation(rng, i, per)
        day = f"2025-{7 + i * 6 // conversations:02d}-{1 + i % 28:02d}"
        stamps = [f"{day}T12:{(k // 60) % 60:02d}:{k % 60:02d}.000000Z" for k in range(len(events) + 1)]
        if charged:
            events = [msgspec.structs.replace(e, charge=prices.charge(e.provider, e.model, at, e.usage))
                      if type(e) is ModelResponded else e for e, at in zip(events, stamps[1:])]
        conv = Conversation.start(journal, started, recorded_at=stamps[0])
        conv.append(*events, recorded_at=stamps[1:])
        if (i + 1) % 1000 == 0:
            print(f"  generated {i + 1:,} conversations in {time.perf_counter() - t0:.0f} s",
                  file=sys.stderr)
    journal.close()
    return time.perf_counter() - t0


def best(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(path: Path, runs: int) -> tuple[list[tuple[str, float]], dict[str, dict]]:
    """Time the baseline scan and the audits of the journal at ``path``; the rows and reports."""

    def baseline() -> None:
        c = sqlite3.connect(path)
        c.execute("SELECT count(*), sum(length(payload)) FROM events").fetchone()
        c.close()

    runner = CliRunner()
    reports: dict[str, dict] = {}

    def cli_json(name: str, *args: str):
        def run() -> None:
            result = runner.invoke(cli, [*args, "--db", str(path), "--json"])
            assert result.exit_code == 0, result.output
            reports[name] = json.loads(result.output)
        return run

    def subprocess_audit() -> None:
        subprocess.run([sys.executable, "-m", "turnlog.engine.cli", "audit", "--db", str(path), "--json"],
                       check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})

    baseline()  # warm the page cache for everyone alike
    base = best(baseline, runs)
    steps = profile(path, runs)
    rows = [("baseline full scan", base),
            ("audit (in-process)", best(cli_json("audit", "audit"), runs)),
            ("audit (subprocess, incl. start-up)", best(subprocess_audit, runs)),
            ("filtered audit", best(cli_json("filtered", "audit", "--provider", "anthropic",
                                             "--since", "2025-10-01", "--tool", "search"), runs)),
            ("ls", best(cli_json("ls", "ls"), runs))]
    rows += [(f"  audit step: {name}", t) for name, t in steps]
    return rows, reports


STEPS = ("scope", "conversations", "turns", "tokens", "model failures", "tools (+ pending)",
         "server tools, approvals, cost, divergences")


def profile(path: Path, runs: int) -> list[tuple[str, float]]:
    """The median time of each of ``audit``'s steps (its ``progress`` calls), in-process."""
    from turnlog.engine.audit.figures import AuditQuery, audit
    from turnlog.engine.audit.views import connect_readonly

    conn = connect_readonly(str(path))
    prices = Prices.default()
    per: list[list[float]] = [[] for _ in STEPS]
    try:
        for _ in range(runs):
            marks = [time.perf_counter()]
            audit(conn, AuditQuery(), prices, progress=lambda _n: marks.append(time.perf_counter()))
            for i, (a, b) in enumerate(zip(marks, marks[1:])):
                per[i].append(b - a)
    finally:
        conn.close()
    return [(name, statistics.median(times)) for name, times in zip(STEPS, per)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--events-per-conversation", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--journal", choices=("both", "charged", "uncharged"), default="both")
    parser.add_argument("--regenerate", action="store_true")
    a = parser.parse_args()
    kinds = ("charged", "uncharged") if a.journal == "both" else (a.journal,)
    for kind in kinds:
        suffix = "-charged" if kind == "charged" else ""  # the uncharged one keeps its old name
        # keyed by the views' version too: a journal cached before a projection changed is
        # not migrated in place (its file may be another checkout's cache)
        path = Path(f"/tmp/turnlog-audit-bench-{a.conversations}x{a.events_per_conversation}"
                    f"{suffix}-views{VIEWS_EXTENSION.version}.db")
        older = [Path(str(path).replace(f"-views{VIEWS_EXTENSION.version}.db", f"-views{v}.db"))
                 for v in range(VIEWS_EXTENSION.version - 1, 7, -1)]
        older = [p for p in older if p.exists()]
        if not a.regenerate and not path.exists() and older:
            # the same events as the newest older cache: a copy of it, migrated by a writer's open
            migrated = Path(f"{path}.part")
            shutil.copyfile(older[0], migrated)
            t0 = time.perf_counter()
            Journal(str(migrated), extensions=EXTENSIONS).close()
            migrated.rename(path)
            print(f"migrated a copy of {older[0]} to views v{VIEWS_EXTENSION.version} "
                  f"in {time.perf_counter() - t0:.1f} s")
        if a.regenerate or not path.exists():
            for tail in ("", "-wal", "-shm"):
                Path(f"{path}{tail}").unlink(missing_ok=True)
            took = generate(path, a.conversations, a.events_per_conversation, kind == "charged")
            print(f"generated {path} in {took:.1f} s (synchronous=NORMAL, through Conversation.append)")
        con = sqlite3.connect(path)
        events, payload_bytes = con.execute("SELECT count(*), sum(length(payload)) FROM events").fetchone()
        con.close()
        size = os.path.getsize(path)
        print(f"\n== {kind} journal: {a.conversations:,} conversations, {events:,} events, "
              f"{size / 1e6:.0f} MB on disk, {payload_bytes / 1e6:.0f} M payload chars")
        rows, reports = measure(path, a.runs)
        base = rows[0][1]
        print(f"{'what':<36}{'seconds':>9}{'x baseline':>12}")
        for name, t in rows:
            print(f"{name:<36}{t:>9.3f}{t / base:>12.2f}")
        r = reports["audit"]
        print("figures:", json.dumps({k: r[k] for k in ("conversations", "by_status", "turns")}))
        print("tokens:", json.dumps({k: r["tokens"][k] for k in ("input", "output", "cached_input")}))
        print("tools:", json.dumps({n: {k: t[k] for k in ("calls", "failures", "duplicates_prevented",
                                                          "median_ms", "p95_ms")}
                                    for n, t in r["tools"].items()}))
        print("model failures:", json.dumps(r["model_failures"]))
        print(f"cost: {r['cost']['total']:.2f} {r['cost']['currency']} (complete={r['cost']['complete']}, "
              f"unpriced={r['cost']['unpriced']}, recorded={r['cost']['recorded']})")
        f = reports["filtered"]
        print(f"filtered: {f['conversations']} conversations, {f['turns']} turns")


if __name__ == "__main__":
    main()
