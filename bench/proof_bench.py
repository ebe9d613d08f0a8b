"""The log tree's cost and its proofs' speed.

    python bench/proof_bench.py [--events N] [--turns N] [--synchronous FULL|NORMAL]

Not a test: it prints figures. Targets:

- a loop turn (bench/loop_bench.py's engine loop: one tool call a turn, four
  durable commits) with the tree kept <= 1.15x the same turn without it (the
  baseline: the same code with the tree growth switched off, measured in the same
  run, alternating rounds); also one 4-event append alone, at the chosen
  ``--synchronous`` (with NORMAL, no fsync hides the tree's extra page per commit);
- an inclusion or consistency proof on a journal of 1,000,000 events <= 5 ms;
- ``checkpoint`` (root, Ed25519 signature, kept in the journal) <= 50 ms;
- an append under chain version 2 (hashing each payload's SHA-256, so content can be
  erased) not measurably slower than under version 1 (the payload itself), same run.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time

from turnlog.journal import Journal, NewEvent
from turnlog.journal._note import generate_key
from turnlog.journal._proof import make_checkpoint

TURN = [NewEvent(t, 1, '{"role":"assistant","text":"' + "x" * 300 + '","turn":3}')
        for t in ("model_requested", "model_responded", "tool_called", "tool_returned")]


def _no_tree(self, written):  # the baseline: the append without the log tree
    return self._edge


def turns(path: str, count: int, synchronous: str, tree: bool, chain: int | None = None) -> float:
    """Seconds per turn over ``count`` turns appended to fresh streams of a journal
    (``chain``: hash under that chain version instead of the journal's own)."""
    with Journal(path, synchronous=synchronous) as journal:
        if chain is not None:
            journal.chain_version = chain
        if not tree:
            journal._grow_tree = _no_tree.__get__(journal)
        seq = journal.last_seq("bench")
        start = time.perf_counter()
        for _ in range(count):
            journal.append("bench", TURN, seq)
            seq += len(TURN)
        return (time.perf_counter() - start) / count


def loop_turns(tmp: str, turns: int, rounds: int) -> tuple[float, float]:
    """The engine's own loop (bench/loop_bench.py: one tool call a turn, four durable
    commits) per turn, with the tree and with tree growth switched off, alternating."""
    import sys
    from pathlib import Path

    sys.path.insert(0, os.path.dirname(__file__))
    from loop_bench import run_turnlog

    kept = Journal._grow_tree
    with_tree, without = [], []
    try:
        for r in range(rounds):
            for tree, into in ((True, with_tree), (False, without)):
                Journal._grow_tree = kept if tree else _no_tree
                into.append(run_turnlog(Path(tmp) / f"loop{r}{tree}.db", turns)["mean"])
    finally:
        Journal._grow_tree = kept
    return statistics.median(with_tree), statistics.median(without)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--synchronous", default="FULL")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        with_tree, without = [], []
        for r in range(args.rounds):
            for tree, into in ((True, with_tree), (False, without)):
                into.append(turns(os.path.join(tmp, f"t{r}{tree}.db"), args.turns,
                                  args.synchronous, tree))
        a, b = statistics.median(with_tree), statistics.median(without)
        print(f"loop turn append ({len(TURN)} events, synchronous={args.synchronous}): "
              f"with tree {a * 1e3:.3f} ms, without {b * 1e3:.3f} ms, ratio {a / b:.3f} "
              "(target <= 1.15)")

        v2, v1 = [], []
        for r in range(args.rounds):  # alternating which goes first
            for chain, into in ((2, v2), (1, v1))[::1 if r % 2 else -1]:
                into.append(turns(os.path.join(tmp, f"c{r}{chain}.db"), args.turns,
                                  args.synchronous, True, chain))
        a, b = statistics.median(v2), statistics.median(v1)
        print(f"loop turn append, chain version 2 {a * 1e3:.3f} ms, version 1 {b * 1e3:.3f} ms, "
              f"ratio {a / b:.3f} (target: not measurably above 1)")

        a, b = loop_turns(tmp, args.turns, args.rounds)
        print(f"engine loop turn (loop_bench: 4 durable commits): with tree {a * 1e3:.3f} ms, "
              f"without {b * 1e3:.3f} ms, ratio {a / b:.3f} (target <= 1.15)")

        path = os.path.join(tmp, "big.db")
        start = time.perf_counter()
        with Journal(path, synchronous="NORMAL") as journal:
            batch = [NewEvent("note", 1, '{"n":1}')] * 1000
            streams = [f"s{i}" for i in range(50)]
            seqs = dict.fromkeys(streams, 0)
            written = 0
            while written < args.events:
                sid = streams[(written // 1000) % len(streams)]
                n = min(1000, args.events - written)
                journal.append(sid, batch[:n], seqs[sid])
                seqs[sid] += n
                written += n
        print(f"built a journal of {args.events} events in {time.perf_counter() - start:.1f} s")
        key = generate_key("bench")
        rng = random.Random(7)
        with Journal(path, readonly=True) as journal, journal.log_tree() as tree:
            n = tree.size()
            times = []
            for _ in range(200):
                index = rng.randrange(n)
                size = rng.randrange(index + 1, n + 1)
                start = time.perf_counter()
                tree.inclusion(index, size)
                times.append(time.perf_counter() - start)
            print(f"inclusion proof, {n} events: median {statistics.median(times) * 1e3:.3f} ms, "
                  f"max {max(times) * 1e3:.3f} ms (target <= 5)")
            times = []
            for _ in range(200):
                old = rng.randrange(1, n + 1)
                new = rng.randrange(old, n + 1)
                start = time.perf_counter()
                tree.consistency(old, new)
                times.append(time.perf_counter() - start)
            print(f"consistency proof, {n} events: median {statistics.median(times) * 1e3:.3f} "
                  f"ms, max {max(times) * 1e3:.3f} ms (target <= 5)")
        times = []
        with Journal(path) as journal:
            for _ in range(20):
                start = time.perf_counter()
                with journal.log_tree() as tree:
                    make_checkpoint(tree, key)
                times.append(time.perf_counter() - start)
        print(f"checkpoint (root, sign, keep), {n} events: median "
              f"{statistics.median(times) * 1e3:.3f} ms (target <= 50)")


if __name__ == "__main__":
    main()
