"""Open a conversation's state from its snapshot: flat in length? Not a test.

Run: ``python bench/open_bench.py [--sizes 1000,10000,100000]``.

For each length, one conversation of that many events (turns of 4 events, as
``bench/fold_bench.py`` builds them), measured in the same run:
- full fold: ``load_state`` on a read-only handle (no snapshot read or saved);
- first open: ``Conversation.open`` on a writable handle with no snapshot yet
  (the fold, then the snapshot saved);
- open from snapshot: ``load_state`` again (median of 5): read the snapshot,
  check it against the chain, decode it, fold the events after it (none here);
- writer open: ``Conversation.open`` from the snapshot (median of 5), which also
  reads what gates tool calls from the events (every row, parsing only the tool and
  approval events' call ids: ``engine.snapshots.gates_from_events``);
- after 100 more events: the same with 100 events to fold past the snapshot.
Target (issue 16): open from snapshot <= 5 ms at 100,000 events, flat in length.
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


def median_ms(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
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
    print(f"{'events':>8}{'full fold ms':>14}{'first open ms':>15}{'from snapshot ms':>18}"
          f"{'writer open ms':>16}{'+100 events ms':>16}{'snapshot KiB':>14}"
          f"{'fold/snapshot':>15}{'fold/writer':>13}")
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
            with Journal(str(path), readonly=True) as reader:
                snap = median_ms(lambda: load_state(reader, "big"))
            with Journal(str(path)) as writer:
                wopen = median_ms(lambda: Conversation.open(writer, "big"))
            grow(path, 25)
            with Journal(str(path), readonly=True) as reader:
                after = median_ms(lambda: load_state(reader, "big"))
            print(f"{n:>8,}{full:>14.1f}{first:>15.1f}{snap:>18.2f}{wopen:>16.2f}"
                  f"{after:>16.2f}{size / 1024:>14,.0f}{full / snap:>15.1f}"
                  f"{full / wopen:>13.1f}")


if __name__ == "__main__":
    main()
