"""The proxy recorder's CPU per exchange, by conversation length (no network, no proxy).

Not a test. Run: ``PYTHONPATH=. .venv/bin/python bench/recorder_bench.py [--turns T]
[--conversations C] [--profile]``.

C conversations of T turns each are recorded exchange by exchange, interleaved
(turn 1 of every conversation, then turn 2 ...), each exchange an OpenAI Chat
Completions request that resends the whole history (a system prompt, the user's
messages, the answers with a tool call and the tool results) and its answer, as
a client does. Reported: the recorder thread's CPU (``time.thread_time``) per
exchange over the first and the last quarter of the turns: a recorder whose work
follows what is new in an exchange keeps the two alike. ``--slow``: the recorder's
slow paths (``Recorder.fast = False``: every history read whole, every request
digested whole), the baseline to run beside it.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fakeapi import reply  # noqa: E402

from turnlog.replay.proxy.recorder import Exchange, Recorder  # noqa: E402
from turnlog.replay.proxy.wires import WIRES  # noqa: E402

KEY = "sk-bench-key-000000"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--sort", default="cumulative", help="the profile's order (pstats)")
    parser.add_argument("--slow", action="store_true",
                        help="the recorder's slow paths (Recorder.fast = False): the baseline")
    args = parser.parse_args()
    histories = [[{"role": "system", "content": f"agent {c}: " + "be brief. " * 40}]
                 for c in range(args.conversations)]
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}}}}]
    per_turn: list[list[float]] = [[] for _ in range(args.turns)]
    profile = cProfile.Profile() if args.profile else None
    spent: list[float] = []

    class Timed(Recorder):
        def record_all(self, exchanges: list[Exchange]) -> None:  # the writer thread's work
            start = time.thread_time()
            if profile is not None:
                profile.enable()
            super().record_all(exchanges)
            if profile is not None:
                profile.disable()
            spent.append(time.thread_time() - start)

    with tempfile.TemporaryDirectory() as tmp:
        recorder = Timed(str(Path(tmp) / "bench.db"))
        recorder.fast = not args.slow
        recorder.start()
        for turn in range(args.turns):
            for c, history in enumerate(histories):
                if turn % 2 == 0:
                    history.append({"role": "user", "content": f"question {turn} " * 20})
                    body = reply("openai", text=None, tool_calls=[("lookup", {"q": f"t{turn}"})])
                else:
                    body = reply("openai", text=f"answer {turn} " * 30)
                raw = json.dumps({"model": "m", "messages": history, "tools": tools}).encode()
                exchange = Exchange(wire=WIRES["openai"], path="/v1/chat/completions",
                                    client="bench", secrets=(KEY,), started=time.monotonic(),
                                    raw_request=raw, status=200,
                                    raw_response=json.dumps(body).encode())
                recorder.submit(exchange)
                recorder.drain()  # one exchange per transaction, as a quiet proxy records
                per_turn[turn].append(spent.pop())
                message = body["choices"][0]["message"]
                history.append(message)
                for call in message.get("tool_calls") or []:
                    history.append({"role": "tool", "tool_call_id": call["id"],
                                    "content": f"result of {call['id']} " * 10})
        assert recorder.lost == 0, recorder.lost
        recorder.close()
    quarter = max(1, args.turns // 4)
    first = [t for row in per_turn[:quarter] for t in row]
    last = [t for row in per_turn[-quarter:] for t in row]
    mean = lambda xs: sum(xs) / len(xs) * 1000  # noqa: E731
    print(f"{'slow' if args.slow else 'fast'} paths, {args.conversations} conversations x {args.turns} turns: recorder CPU per exchange "
          f"{mean([t for row in per_turn for t in row]):.3f} ms; first quarter "
          f"{mean(first):.3f} ms, last quarter {mean(last):.3f} ms "
          f"(history of {len(histories[0])} messages at the end)")
    if profile is not None:
        pstats.Stats(profile).sort_stats(args.sort).print_stats(35)


if __name__ == "__main__":
    main()
