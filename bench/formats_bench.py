"""Import and export cost, as ratios against writing and folding the same events directly.

Run: PYTHONPATH=. python bench/formats_bench.py [TURNS]

A transcript of TURNS tool-calling turns (user message, assistant call, tool
result, final answer per turn) is imported from each format; the baseline is
``Conversation.start`` with the same events already built (no reading,
detection or normalising). Exports are compared with the fold of the events (the
fold every export starts from). Linearity: the import of 2x the entries
should take about 2x the time.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from turnlog.engine.model.conversation import Conversation
from turnlog.engine.model.state import fold_stored
from turnlog.engine.formats.exporter import export_conversation, lineage_events
from turnlog.engine.formats.importer import import_entries, read_transcript
from turnlog.journal import Journal


def transcript(turns: int) -> list[dict]:
    out = []
    for i in range(turns):
        out += [
            {"role": "user", "content": f"question {i}", "timestamp": "2025-08-27T21:40:00Z"},
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{i}", "type": "function",
                "function": {"name": "lookup", "arguments": json.dumps({"q": f"item {i}", "n": i})}}]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": json.dumps({"hits": i})},
            {"role": "assistant", "content": f"answer {i}"},
        ]
    return out


def best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(turns: int) -> None:
    tmp = Path(tempfile.mkdtemp())
    journal = Journal(str(tmp / "bench.db"))
    entries = transcript(turns)
    counter = iter(range(10**6))

    import_entries(journal, entries, conversation_id="src")
    events = lineage_events(journal, "src")
    texts = {fmt: export_conversation(journal, "src", fmt)
             for fmt in ("openai", "anthropic", "gemini", "jsonl", "datamachine")}

    base = best(lambda: Conversation.start(journal, events[0].__class__(
        **{**{f: getattr(events[0], f) for f in events[0].__struct_fields__},
           "conversation_id": f"b{next(counter)}"}), rest=events[1:]))
    print(f"{turns} turns, {len(events)} events; baseline direct append: {base * 1e3:.1f} ms")
    for fmt, text in texts.items():
        def run(text=text):
            found, envelope = read_transcript(text.encode())
            import_entries(journal, found, conversation_id=f"i{next(counter)}", envelope=envelope)
        t = best(run)
        print(f"  import {fmt:<12} {t * 1e3:8.1f} ms  ratio {t / base:5.2f}x")
    fold = best(lambda: fold_stored(journal.lineage("src")).state())  # never a snapshot
    print(f"baseline fold: {fold * 1e3:.1f} ms")
    for fmt in ("openai", "anthropic", "gemini", "jsonl", "datamachine", "markdown"):
        t = best(lambda fmt=fmt: export_conversation(journal, "src", fmt))
        print(f"  export {fmt:<12} {t * 1e3:8.1f} ms  ratio {t / fold:5.2f}x")
    small = best(lambda: import_entries(journal, transcript(turns // 2),
                                        conversation_id=f"s{next(counter)}"))
    large = best(lambda: import_entries(journal, entries, conversation_id=f"l{next(counter)}"))
    print(f"linearity: import of {turns} vs {turns // 2} turns: {large / small:.2f}x (2.00 = linear)")
    journal.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
