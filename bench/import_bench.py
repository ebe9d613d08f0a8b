"""What it costs to start turnlog: ``import turnlog``, ``turnlog --help`` and an export. Not a test.

Run: ``python bench/import_bench.py [--runs 9]``.

Each figure is the median wall time of fresh processes, run in turn with its baseline
(A B A B ...), so a machine whose speed drifts moves both:
- ``import turnlog`` against ``python -c pass`` (target, issue 30: <= 150 ms);
- ``turnlog --help`` against ``python -c pass`` (target: <= 1.5x it plus 100 ms);
- ``turnlog export --format anthropic`` against ``--format jsonl`` on the demo's journal
  (target: <= 1.5x).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY = sys.executable
TURNLOG = [PY, "-m", "turnlog.engine.cli"]


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def paired(a: list[str], b: list[str], runs: int) -> tuple[float, float]:
    """Median seconds of ``a`` and of ``b``, run alternately after one warm-up each."""
    wall(a), wall(b)
    times_a, times_b = [], []
    for _ in range(runs):
        times_a.append(wall(a))
        times_b.append(wall(b))
    return statistics.median(times_a), statistics.median(times_b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    runs = parser.parse_args().runs
    bare = [PY, "-c", "pass"]

    imp, base = paired([PY, "-c", "import turnlog"], bare, runs)
    print(f"import turnlog      {imp * 1000:7.1f} ms   python -c pass {base * 1000:6.1f} ms"
          f"   import alone {max(imp - base, 0) * 1000:6.1f} ms (target <= 150 ms)")

    hlp, base = paired([*TURNLOG, "--help"], bare, runs)
    print(f"turnlog --help      {hlp * 1000:7.1f} ms   python -c pass {base * 1000:6.1f} ms"
          f"   ratio {hlp / (1.5 * base + 0.1):5.2f} of the target (1.5x pass + 100 ms)")

    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "demo.db")
        subprocess.run([*TURNLOG, "demo", "--db", db], check=True, stdout=subprocess.DEVNULL)
        [cid] = [line.split()[0] for line in subprocess.run(
            [*TURNLOG, "ls", "--db", db], check=True, capture_output=True, text=True
        ).stdout.splitlines()[1:2]]
        out = str(Path(tmp) / "out")
        anth, jsonl = paired([*TURNLOG, "export", cid, "--format", "anthropic", "--db", db, "-o", out],
                             [*TURNLOG, "export", cid, "--format", "jsonl", "--db", db, "-o", out], runs)
    print(f"export anthropic    {anth * 1000:7.1f} ms   --format jsonl {jsonl * 1000:6.1f} ms"
          f"   ratio {anth / jsonl:5.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
