"""Open a conversation from its snapshot: flat in length? Not a test.

Run: ``python bench/open_bench.py [--sizes 1000,100000]``.

For each length, one conversation of that many events (turns of 4 events, as
``bench/fold_bench.py`` builds them), measured in the same run:
- full fold: ``load_state`` on a read-only handle (no snapshot read or saved);
- first open: ``Conversation.open`` on a writable handle with no snapshot yet
  (the fold, then the snapshot of the state's head saved);
- writer open: ``Conversation.open`` from the snapshot (median of 5): read the head,
  check it against the chain, fold the events after it (none here). The bodies and
  the gates stay unread (``engine.model.state.DEFERRED``);
- first request: that open, then ``builder.message_list`` (what a request sends: every
  message, folded from the events with every gate);
- show: ``load_state`` from the snapshot (the whole state, every body read);
- after 100 more events: an open with 100 events to fold past the snapshot (tool
  turns: their lifecycle reads the calls pending as of the snapshot, folded from the
  snapshot's own turn; the bodies and the rest of the gates stay unread).
Then the ratio of each open at the largest size to the smallest.
Target (issue 28): an open <= 5 ms at 100,000 events and <= 1.5x the 1,000-event one.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from fold_bench import build

from turnlog.engine.model.conversation import Conversation, load_state
from turnlog.engine.model.events import ModelRequested, ModelResponded, ToolCompleted, ToolStarted
from turnlog.engine.model.messages import Text, ToolCall
from turnlog.engine.model.snapshots import snapshot_kind
from turnlog.journal import Journal


def median_ms(fn, repeat: int = 5, clock=time.perf_counter) -> float:
    times = []
    for _ in range(repeat):
        start = clock()
        fn()
        times.append((clock() - start) * 1000)
    return statistics.median(times)


def grow(path: Path, turns: int) -> None:
    with Journal(str(path), synchronous="NORMAL") as journal:
        conv = Conversation.open(journal, "big")
        base = conv.state.turn_count
        for t in range(base + 1, base + turns + 1):
            call = ToolCall(id=f"more_{t}", name="add", arguments={"a": t, "b": 1})
            conv.append(
                ModelRequested(turn=t, digest="0" * 64, provider="scripted", model="m"),
                ModelResponded(turn=t, parts=(Text(text=f"step {t}"), call), stop_reason="tool_use"),
                ToolStarted(call_id=call.id, name="add", arguments=call.arguments),
                ToolCompleted(call_id=call.id, name="add", success=True, content="ok"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000")
    args = parser.parse_args()
    print(f"{'events':>8}{'full fold ms':>14}{'first open ms':>15}{'writer open ms':>16}"
          f"{'first request ms':>18}{'show ms':>10}{'+100 events ms':>16}{'snapshot B':>12}"
          f"{'fold/open':>11}")
    opens, afters, afters_cpu = {}, {}, {}
    for n in (int(x) for x in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "open.db"
            build(path, n)
            with Journal(str(path), readonly=True) as reader:
                full = median_ms(lambda: load_state(reader, "big"), repeat=3)
            with Journal(str(path)) as writer:
                start = time.perf_counter()
                Conversation.open(writer, "big")
                first = (time.perf_counter() - start) * 1000
                size = len(writer.read_snapshot("big", snapshot_kind()).data)
            with Journal(str(path)) as writer:
                wopen = opens[n] = median_ms(lambda: Conversation.open(writer, "big"), repeat=9)
                request = median_ms(lambda: Conversation.open(writer, "big").builder.message_list,
                                    repeat=3)
            with Journal(str(path), readonly=True) as reader:
                show = median_ms(lambda: load_state(reader, "big"), repeat=3)
            grow(path, 25)
            with Journal(str(path), readonly=True) as reader:
                after = afters[n] = median_ms(lambda: Conversation.open(reader, "big"), repeat=15)
                # its CPU time too: a loaded machine's waits for a core blur sub-ms wall times
                afters_cpu[n] = median_ms(lambda: Conversation.open(reader, "big"), repeat=15,
                                          clock=time.process_time)
            print(f"{n:>8,}{full:>14.1f}{first:>15.1f}{wopen:>16.3f}{request:>18.1f}"
                  f"{show:>10.1f}{after:>16.1f}{size:>12,}{full / wopen:>11.0f}")
    small, large = min(opens), max(opens)
    print(f"\nwriter open, {large:,} events / {small:,} events: "
          f"{opens[large] / opens[small]:.2f}x ({opens[large]:.3f} ms / {opens[small]:.3f} ms)")
    print(f"open with 100 events past the snapshot, {large:,} / {small:,} events: "
          f"{afters[large] / afters[small]:.2f}x ({afters[large]:.2f} ms / {afters[small]:.2f} ms)"
          f"; CPU {afters_cpu[large] / afters_cpu[small]:.2f}x "
          f"({afters_cpu[large]:.2f} ms / {afters_cpu[small]:.2f} ms); target <= 1.5x and <= 5 ms")


if __name__ == "__main__":
    main()
