"""What pricing a model call costs: genai-prices against an override table. Not a test.

Run: ``python bench/cost_bench.py [--calls 2000] [--runs 5]``.

Figures (medians of ``--runs``, each pricing ``--calls`` varied usages, in turn A B A B so
a drifting machine moves both):
- a call priced by genai-prices (``Prices.default()``), against the same call priced by an
  override table (``--prices``), the baseline;
- loading genai-prices' database once per process (the first charge of a live run).
A response recorded with its charge costs the audit nothing of this: it is read back.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from turnlog.engine.audit.prices import Prices, PriceTable
from turnlog.engine.model.messages import Usage

TABLE = PriceTable.parse('[[prices]]\nprovider="anthropic"\nmodel="claude-sonnet-4-5"\n'
                         'since=2025-01-01\ninput=3\ncached_input=0.3\ncache_write=3.75\n'
                         'output=15\n', "bench")


def seconds(prices: Prices, usages: list[Usage]) -> float:
    start = time.perf_counter()
    for usage in usages:
        prices.charge("anthropic", "claude-sonnet-4-5", "2025-06-01T10:00:00Z", usage)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    usages = [Usage(input_tokens=1000 + i, output_tokens=100 + i % 50, cached_input_tokens=500,
                    cache_write_tokens=i % 100) for i in range(args.calls)]
    database, table = Prices.default(), Prices.of(TABLE)
    seconds(database, usages[:1])  # load the database before timing calls
    a, b = [], []
    for _ in range(args.runs):
        a.append(seconds(database, usages))
        b.append(seconds(table, usages))
    per_a, per_b = statistics.median(a) / args.calls, statistics.median(b) / args.calls
    print(f"genai-prices: {per_a * 1e6:,.0f} us/call   override table: {per_b * 1e6:,.1f} us/call"
          f"   ratio {per_a / per_b:,.0f}x")
    load = [load_seconds() for _ in range(3)]
    print(f"loading genai-prices' database in a fresh process: {statistics.median(load):.2f} s")


def load_seconds() -> float:
    code = ("import time; t = time.perf_counter(); "
            "from turnlog.engine.audit.prices import Prices; from turnlog.engine.model.messages import Usage; "
            "Prices.default().charge('openai', 'gpt-4o', '2025-06-01', Usage(input_tokens=1)); "
            "print(time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout)


if __name__ == "__main__":
    main()
