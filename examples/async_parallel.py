"""Many conversations on one event loop, each response's read-only calls at once.

Run: ``python examples/async_parallel.py [DB]`` (offline). Twenty conversations
share one journal and one ``AsyncLoop``; each model response asks for four
0.2-second lookups, which run concurrently (``read_only`` tools, up to
``max_parallel_tools``), so the whole thing takes about 0.2 s per turn, not 0.8.
"""

from __future__ import annotations

import asyncio
import sys
import time

from turnlog import AsyncLoop, Journal, ScriptedProvider, tool


@tool(effect="read_only")
async def lookup(city: str) -> dict:
    """Look up a city's weather.

    Args:
        city: the city's name
    """
    await asyncio.sleep(0.2)
    return {"city": city, "sky": "clear"}


CITIES = ["Paris", "Lima", "Oslo", "Pune"]
SCRIPT = [{"tool_calls": [{"name": "lookup", "arguments": {"city": c}} for c in CITIES]},
          {"text": "All clear."}]


async def main(db: str = "async_parallel.db", conversations: int = 20) -> None:
    with Journal(db) as journal:
        loop = AsyncLoop(journal, ScriptedProvider(SCRIPT), [lookup])
        began = time.perf_counter()
        results = await asyncio.gather(*(loop.start(f"Weather, run {n}?") for n in range(conversations)))
        took = time.perf_counter() - began
        print(f"{len(results)} conversations, {sum(r.completed for r in results)} completed "
              f"in {took:.2f} s")
        assert all(r.completed for r in results)
        report = journal.verify()
        print("journal verifies:", report.ok)
        assert report.ok


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
