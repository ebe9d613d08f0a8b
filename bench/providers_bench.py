"""Provider mapping cost: neutral history -> wire request body, and wire response -> neutral.

Not a test. Run: ``PYTHONPATH=. python bench/providers_bench.py [--turns N]``.

Baselines measured in the same run on the same data:
- request: ``msgspec.to_builtins(request)`` — one plain traversal of the same
  neutral history, the floor any mapping pays;
- response: ``json.loads`` of the response body text (parsing, which every
  provider call pays anyway).
It also prints the per-message cost at ``N`` turns against ``N/10`` turns: a
ratio near 1 means the mapping stays linear in the history's length.
"""

from __future__ import annotations

import argparse
import json
import time

import msgspec

from turnlog.engine.model.events import ToolSpec
from turnlog.engine.model.messages import Message, Text, ToolCall, ToolResult
from turnlog.engine.providers import ModelRequest, anthropic, gemini, openai, openai_responses

MODULES = {"anthropic": anthropic, "openai": openai, "gemini": gemini,
           "openai-responses": openai_responses}


def history(turns: int) -> tuple[Message, ...]:
    """A tool conversation: per turn one assistant message with text + 2 calls, 2 results."""
    out = [Message(role="user", parts=(Text(text="Plan my trip to Paris and Rome."),))]
    for t in range(turns):
        calls = [ToolCall(id=f"call_{t}_{i}", name="get_weather", arguments={"city": c},
                          raw_arguments=json.dumps({"city": c}))
                 for i, c in enumerate(("Paris", "Rome"))]
        out.append(Message(role="assistant", parts=(Text(text=f"Checking turn {t}."), *calls)))
        out.extend(Message(role="tool", parts=(ToolResult(
            call_id=c.id, name=c.name, content='{"forecast": "sunny", "temp_c": 21}'),))
            for c in calls)
    return tuple(out)


def best(fn, repeat: int) -> float:
    """Best-of-5 seconds for ``repeat`` calls of ``fn``."""
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        times.append(time.perf_counter() - start)
    return min(times) / repeat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    turns = parser.parse_args().turns
    tools = (ToolSpec(name="get_weather", parameters={
        "type": "object", "properties": {"city": {"type": "string"}}}),)
    big = ModelRequest(model="m", system="sys", messages=history(turns), tools=tools)
    small = ModelRequest(model="m", system="sys", messages=history(max(1, turns // 10)),
                         tools=tools)
    base_big = best(lambda: msgspec.to_builtins(big), 3)
    print(f"request mapping, {turns} turns ({len(big.messages)} messages); "
          f"baseline msgspec.to_builtins {base_big * 1e3:.2f} ms")
    for name, module in MODULES.items():
        t_big = best(lambda m=module: m.map_request(big), 3)
        t_small = best(lambda m=module: m.map_request(small), 10)
        per_big = t_big / len(big.messages)
        per_small = t_small / len(small.messages)
        print(f"  {name:17s} {t_big * 1e3:8.2f} ms  x{t_big / base_big:5.1f} baseline  "
              f"per-message cost {turns} vs {max(1, turns // 10)} turns: "
              f"x{per_big / per_small:.2f}")
    print("response mapping (text + 2 tool calls); baseline json.loads of the body")
    from tests.fakeapi import reply

    for name, module in MODULES.items():
        text = json.dumps(reply(name, text="Sure.", tool_calls=[
            ("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})]))
        base = best(lambda t=text: json.loads(t), 2000)
        mapped = best(lambda t=text, m=module: m.map_response(json.loads(t)), 2000)
        print(f"  {name:17s} {mapped * 1e6:7.1f} us  x{mapped / base:5.2f} json.loads alone")


if __name__ == "__main__":
    main()
