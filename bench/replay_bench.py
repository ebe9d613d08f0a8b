"""Replay costs beside the plain fold of the same events, measured in the same run.

Not a test. Run: ``PYTHONPATH=. python bench/replay_bench.py [--turns N] [--events N]``.

1. Deterministic replay of an N-turn conversation (default 1,000; each turn
   one tool call and its result), recorded with the agent loop and the
   scripted provider: ``replay()`` re-runs the loop over it with recorded
   responses and tool results, comparing every event in memory as it is
   appended (``RerunJournal``: no database). Baseline: the fold of the lineage (read + decode + fold, no snapshot) of the same
   conversation. Target: replay within 3x of the fold.
2. Rebuild of a fork at seq 1,000 of a 100,000-event conversation: folds the
   parent's first 1,000 events, then the fork's own. Baselines: the plain fold
   of the same 1,000 parent events, and the fold of the whole parent (to show
   that a fork's cost does not depend on how long its parent grew).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.fold_bench import build  # noqa: E402
from turnlog.engine.model.state import fold_stored  # noqa: E402
from turnlog.journal import Journal  # noqa: E402
from turnlog.replay import fork, rebuild  # noqa: E402
from turnlog.replay.deterministic import replay  # noqa: E402


def best(fn, repeat: int = 5, clock=time.perf_counter) -> float:
    """The best of ``repeat`` timings (seconds): the least disturbed by other processes."""
    times = []
    for _ in range(repeat):
        start = clock()
        fn()
        times.append(clock() - start)
    return min(times)


def interleaved(first, second, repeat: int = 9, clock=time.process_time) -> tuple[float, float]:
    """The best of ``repeat`` timings of each, taken in turns: a burst of load from other
    processes then hits both figures of a pair, not only one of them."""
    a, b = [], []
    for _ in range(repeat):
        for fn, times in ((first, a), (second, b)):
            start = clock()
            fn()
            times.append(clock() - start)
    return min(a), min(b)


def record_turns(journal: Journal, turns: int, driver: str) -> str:
    """A conversation of ``turns`` turns, each one ``add`` call, recorded live."""
    script = [{"tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}}]}
              for i in range(turns - 1)] + [{"text": "done"}]
    if driver == "mini":
        from turnlog.engine.model.events import ConversationStarted, ToolSpec
        from turnlog.engine.providers.scripted import ScriptedProvider
        from tests.replay import miniloop
        started = ConversationStarted(conversation_id="long", provider="scripted", model="m",
                                      max_turns=turns + 1, tools=(ToolSpec(name="add"),))
        return miniloop.record(journal, started, ["go"], ScriptedProvider(script))
    from turnlog.replay.driver import record_scripted
    return record_scripted(journal, "long", ["go"], script, max_turns=turns + 1)


def bench_replay(tmp: Path, turns: int, driver_name: str) -> None:
    with Journal(tmp / "replay.db", synchronous="NORMAL") as journal:
        cid = record_turns(journal, turns, driver_name)
        events = journal.last_seq(cid)
        driver = None
        if driver_name == "mini":
            from tests.replay import miniloop
            driver = miniloop.driver
        result = replay(journal, cid, driver=driver)
        assert result.ok and result.checked == events
        # the events folded, never a snapshot (load_state would read one after the first call)
        fold_s = best(lambda: fold_stored(journal.lineage(cid)).state())
        replay_s = best(lambda: replay(journal, cid, driver=driver), repeat=3)
        fast_s = best(lambda: replay(journal, cid, driver=driver, check_digest=False), repeat=3)
        # CPU time too: on a shared, loaded machine wall-clock figures swing by 2-3x (and
        # CPU time by up to 2x: both are taken in turns, the best of each kept)
        fold_cpu, replay_cpu = interleaved(lambda: fold_stored(journal.lineage(cid)).state(),
                                           lambda: replay(journal, cid, driver=driver))
    print(f"deterministic replay, {turns} turns ({events} events, driver={driver_name}):")
    print(f"  plain fold (read + decode + fold)  {fold_s * 1e3:9.1f} ms")
    print(f"  replay (digest re-checked)         {replay_s * 1e3:9.1f} ms   "
          f"{replay_s / fold_s:5.1f}x the fold")
    print(f"  replay (check_digest=False)        {fast_s * 1e3:9.1f} ms   "
          f"{fast_s / fold_s:5.1f}x the fold   (target <= 3x)")
    print(f"  CPU time: fold {fold_cpu * 1e3:.1f} ms, replay {replay_cpu * 1e3:.1f} ms   "
          f"{replay_cpu / fold_cpu:5.1f}x the fold   (target <= 3x; best of 9, in turns)")


def bench_fork(tmp: Path, n_events: int, at: int) -> None:
    path = tmp / "fork.db"
    build(path, n_events)
    with Journal(path) as journal:
        fid = fork(journal, "big", at, new_id="f")
        assert rebuild(journal, fid).seq == 1
        prefix_s = best(lambda: fold_stored(journal.read("big", 1, at)).state())
        fork_s = best(lambda: rebuild(journal, fid))
        whole_s = best(lambda: fold_stored(journal.read("big")).state(), repeat=2)
        parent_events = journal.last_seq("big")
    print(f"rebuild of a fork at seq {at} of a {parent_events}-event conversation:")
    print(f"  plain fold of the same {at} events   {prefix_s * 1e3:9.2f} ms")
    print(f"  rebuild(fork)                      {fork_s * 1e3:9.2f} ms   "
          f"{fork_s / prefix_s:5.2f}x the plain fold")
    print(f"  fold of the whole parent           {whole_s * 1e3:9.2f} ms   "
          f"(the fork costs {fork_s / whole_s:.3f}x of it)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--at", type=int, default=1000)
    parser.add_argument("--driver", choices=["loop", "mini"], default="loop",
                        help="record and replay with engine's loop (default) or the tests' "
                             "minimal loop")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench_replay(Path(tmp), args.turns, args.driver)
        bench_fork(Path(tmp), args.events, args.at)


if __name__ == "__main__":
    main()
