"""The live loop over a 1,000-turn conversation: per-turn cost stays flat, disk grows linearly.

Not a test. Run: ``python bench/loop_bench.py [--turns N]`` (with the ``bench``
extra installed, LangGraph runs the same loop as the baseline).

Each turn the model calls one tool (``add``) and the result goes back, so a
turn is model_requested, model_responded, tool_started, tool_completed — four
journal commits at the journal's default durability (``synchronous=FULL``).
The model is an O(1) in-process fake, so the time between two model calls
is the engine's own per-turn overhead: building the request, digesting it,
appending and folding the events, running the tool.

Figures printed:
- turnlog per-turn time over the first and last tenth of turns, and their
  ratio (target <= 1.25: no growth with the conversation);
- bytes on disk per turn (file size / turns);
- baseline, when importable: LangGraph ``StateGraph`` with an
  ``add_messages`` list and ``SqliteSaver`` on a file, ``durability="sync"``
  (each step's checkpoint written before the next step, as turnlog does), the same turns; its
  per-turn times and size, and the ratios (targets: turnlog >= 20x faster per
  turn, >= 100x smaller at 1,000 turns).
- the async loop (``AsyncLoop``, the same step driven by the async shell) on
  the same turns: its mean per-turn time as a ratio to the sync loop's
  (target <= 1.2x);
- aggregate throughput of 20 conversations run at once on one journal by one
  ``AsyncLoop`` (``asyncio.gather``), in turns per second, and the same 20
  run one after another by the sync loop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sqlite3
import tempfile
import time
from pathlib import Path

from engine.aloop import AsyncLoop
from engine.loop import Loop
from engine.messages import Text, ToolCall, Usage
from engine.providers.base import ModelRequest, ModelResponse
from engine.tools import tool
from journal import Journal


@tool(effect="read_only")
def add(a: float, b: float) -> dict:
    """Add two numbers."""
    return {"sum": a + b}


class FakeModel:
    """Calls ``add`` once per turn for ``turns`` turns, then answers; O(1) per call."""

    name = "bench"
    model = "bench-model"

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.times: list[float] = []

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.times.append(time.perf_counter())
        k = (len(request.messages) - 1) // 2  # user, then (assistant, tool) per turn
        if k >= self.turns:
            return ModelResponse(parts=(Text(text="done"),), usage=Usage(input_tokens=1))
        call = ToolCall(id=f"c{k}", name="add", arguments={"a": k, "b": 1},
                        raw_arguments=json.dumps({"a": k, "b": 1}))
        return ModelResponse(parts=(call,), stop_reason="tool_use",
                             usage=Usage(input_tokens=10, output_tokens=5))


def size(path: Path) -> int:
    """The database's bytes on disk, WAL and shared-memory files included."""
    return sum(os.path.getsize(p) for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm"))
               if p.exists())


def tenths(times: list[float], turns: int) -> tuple[float, float]:
    """Mean per-turn seconds over the first and last tenth of the ``turns`` tool turns."""
    per_turn = [b - a for a, b in zip(times, times[1:])][:turns]
    tenth = max(1, len(per_turn) // 10)
    return statistics.fmean(per_turn[:tenth]), statistics.fmean(per_turn[-tenth:])


def run_turnlog(path: Path, turns: int) -> dict:
    model = FakeModel(turns)
    start = time.perf_counter()
    with Journal(str(path)) as journal:
        result = Loop(journal, model, [add]).start("go", conversation_id="bench",
                                                  max_turns=turns + 1)
    total = time.perf_counter() - start
    assert result.status == "completed" and result.turn_count == turns + 1, result
    first, last = tenths(model.times, turns)
    return {"first": first, "last": last, "mean": total / (turns + 1), "bytes": size(path)}


class AsyncFakeModel(FakeModel):
    """``FakeModel`` with the async provider method."""

    async def acomplete(self, request: ModelRequest) -> ModelResponse:
        return self.complete(request)


def run_async(path: Path, turns: int) -> dict:
    """The same conversation with ``AsyncLoop``."""
    model = AsyncFakeModel(turns)
    start = time.perf_counter()
    with Journal(str(path)) as journal:
        result = asyncio.run(AsyncLoop(journal, model, [add]).start(
            "go", conversation_id="bench", max_turns=turns + 1))
    total = time.perf_counter() - start
    assert result.status == "completed" and result.turn_count == turns + 1, result
    return {"mean": total / (turns + 1)}


def run_concurrent(path: Path, turns: int, n: int = 20) -> dict:
    """``n`` conversations of ``turns`` tool turns: at once (AsyncLoop) and one by one (Loop)."""
    with Journal(str(path)) as journal:
        loop = AsyncLoop(journal, AsyncFakeModel(turns), [add])

        async def many() -> list:
            return await asyncio.gather(*(loop.start("go", conversation_id=f"a{i}",
                                                     max_turns=turns + 1) for i in range(n)))

        start = time.perf_counter()
        results = asyncio.run(many())
        concurrent = time.perf_counter() - start
        assert all(r.status == "completed" for r in results)
        sync = Loop(journal, FakeModel(turns), [add])
        start = time.perf_counter()
        for i in range(n):
            sync.start("go", conversation_id=f"s{i}", max_turns=turns + 1)
        serial = time.perf_counter() - start
        assert journal.verify().ok
    total_turns = n * (turns + 1)
    return {"async": total_turns / concurrent, "sync": total_turns / serial, "n": n}


def run_langgraph(path: Path, turns: int) -> dict | None:
    try:
        from typing import Annotated, TypedDict

        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, StateGraph
        from langgraph.graph.message import add_messages
    except ImportError:
        return None

    # the functional form: class syntax would see a string annotation (postponed evaluation)
    State = TypedDict("State", {"messages": Annotated[list, add_messages]})  # noqa: UP013

    times: list[float] = []

    def model(state: dict) -> dict:
        times.append(time.perf_counter())
        k = (len(state["messages"]) - 1) // 2
        if k >= turns:
            return {"messages": [AIMessage(content="done")]}
        return {"messages": [AIMessage(content="", tool_calls=[
            {"name": "add", "args": {"a": k, "b": 1}, "id": f"c{k}"}])]}

    def tools(state: dict) -> dict:
        call = state["messages"][-1].tool_calls[0]
        data = add(**call["args"])
        return {"messages": [ToolMessage(content=json.dumps(data), tool_call_id=call["id"])]}

    def route(state: dict) -> str:
        return "tools" if state["messages"][-1].tool_calls else END

    graph = StateGraph(State)
    graph.add_node("model", model)
    graph.add_node("tools", tools)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    conn = sqlite3.connect(str(path), check_same_thread=False)
    app = graph.compile(checkpointer=SqliteSaver(conn))
    start = time.perf_counter()
    out = app.invoke({"messages": [HumanMessage(content="go")]},
                     {"configurable": {"thread_id": "bench"}, "recursion_limit": 3 * turns + 10},
                     durability="sync")  # like turnlog: each step durable before the next
    total = time.perf_counter() - start
    conn.close()
    assert out["messages"][-1].content == "done"
    first, last = tenths(times, turns)
    return {"first": first, "last": last, "mean": total / (turns + 1), "bytes": size(path)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    args = parser.parse_args()
    n = args.turns
    with tempfile.TemporaryDirectory() as tmp:
        ours = run_turnlog(Path(tmp) / "turnlog.db", n)
        aio = run_async(Path(tmp) / "async.db", n)
        many = run_concurrent(Path(tmp) / "many.db", max(1, n // 20))
        base = run_langgraph(Path(tmp) / "langgraph.db", n)
    ms = 1000
    print(f"{n} tool turns (+1 final answer), one tool call and result per turn\n")
    print(f"turnlog    per turn: first tenth {ours['first'] * ms:.3f} ms, last tenth "
          f"{ours['last'] * ms:.3f} ms, mean {ours['mean'] * ms:.3f} ms; "
          f"last/first = {ours['last'] / ours['first']:.2f} (target <= 1.25)")
    print(f"turnlog    on disk: {ours['bytes']:,} bytes = {ours['bytes'] / n:,.0f} bytes/turn")
    print(f"AsyncLoop  per turn: mean {aio['mean'] * ms:.3f} ms; async/sync = "
          f"{aio['mean'] / ours['mean']:.2f}x (target <= 1.2x)")
    print(f"{many['n']} conversations at once (AsyncLoop, one journal): {many['async']:,.0f} "
          f"turns/s; one after another (Loop): {many['sync']:,.0f} turns/s")
    if base is None:
        print("\nLangGraph baseline skipped: pip install -e '.[bench]' to run it")
        return
    print(f"LangGraph  per turn: first tenth {base['first'] * ms:.3f} ms, last tenth "
          f"{base['last'] * ms:.3f} ms, mean {base['mean'] * ms:.3f} ms; "
          f"last/first = {base['last'] / base['first']:.2f}")
    print(f"LangGraph  on disk: {base['bytes']:,} bytes = {base['bytes'] / n:,.0f} bytes/turn")
    print(f"\nratios (LangGraph / turnlog): per turn (mean) {base['mean'] / ours['mean']:.1f}x, "
          f"last tenth {base['last'] / ours['last']:.1f}x (target >= 20x); "
          f"size {base['bytes'] / ours['bytes']:.1f}x (target >= 100x)")


if __name__ == "__main__":
    main()
