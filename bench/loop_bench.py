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
- the durable-commit floor: raw ``sqlite3`` on a WAL file with
  ``synchronous=FULL`` writing turnlog's own event rows (copied from its run, into
  a table of the same DDL, no triggers or projections) as two
  ``BEGIN IMMEDIATE … COMMIT`` per turn — the two durable commits a tool turn
  needs (before the model call, before the tool runs); turnlog's per-turn time
  over it (target <= 1.5x);
- baselines, when importable: LangGraph ``StateGraph`` with an
  ``add_messages`` list and ``SqliteSaver`` on a file, ``durability="sync"``
  (each step's checkpoint written before the next step, as turnlog does), the same turns; its
  per-turn times and size, and the ratios (targets: turnlog >= 20x faster per
  turn, >= 100x smaller at 1,000 turns); and the same graph with the list as
  ``Annotated[list, DeltaChannel(reducer)]`` (LangGraph's best mode: it stores the
  writes, not the whole list; the reducer is LangGraph's own batch reducer for
  messages), targets turnlog >= 10x faster per turn and >= 10x smaller.
- the async loop (``AsyncLoop``, the same step driven by the async shell) on
  the same turns: its mean per-turn time as a ratio to the sync loop's
  (target <= 1.2x);
- aggregate throughput of 20 conversations run at once on one journal by one
  ``AsyncLoop`` (``asyncio.gather``), in turns per second, and the same 20
  run one after another by the sync loop.
- streaming (``streaming_main``): the same loop with ``stream=True``, each
  answer as 20 text deltas to an observer, against it unstreamed; the ratio
  of per-turn times (target < 1.05).

``--profile FILE`` writes a cProfile of the turnlog run to ``FILE`` (read it with
``python -m pstats FILE``) and prints its top functions by cumulative and own time.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import json
import pstats
import os
import statistics
import sqlite3
import tempfile
import time
from pathlib import Path

from turnlog.engine.loop.aloop import AsyncLoop
from turnlog.engine.loop import Loop
from turnlog.engine.model.messages import Text, ToolCall, Usage
from turnlog.engine.providers._stream import StreamDelta
from turnlog.engine.providers.base import ModelRequest, ModelResponse
from turnlog.engine.tools import tool
from turnlog.journal import Journal


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


def run_turnlog(path: Path, turns: int, profile: str | None = None) -> dict:
    model = FakeModel(turns)
    profiler = cProfile.Profile() if profile else None
    start = time.perf_counter()
    if profiler:
        profiler.enable()
    with Journal(str(path)) as journal:
        result = Loop(journal, model, [add]).start("go", conversation_id="bench",
                                                  max_turns=turns + 1)
    if profiler:
        profiler.disable()
    total = time.perf_counter() - start
    if profiler:
        profiler.dump_stats(profile)
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




def run_floor(source: Path, path: Path, turns: int) -> dict:
    """The durable-commit floor: ``source``'s event rows, two per ``BEGIN IMMEDIATE … COMMIT``."""
    from turnlog.journal._schema import _EVENTS_V1

    with sqlite3.connect(str(source)) as src:
        rows = src.execute("SELECT * FROM events ORDER BY position").fetchall()
    src.close()
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute(_EVENTS_V1)
    marks = ",".join("?" * len(rows[0]))
    insert = f"INSERT INTO events VALUES ({marks})"
    start = time.perf_counter()
    for i in range(0, len(rows), 2):  # 4 rows a turn: two commits of two rows
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(insert, rows[i:i + 2])
        conn.execute("COMMIT")
    total = time.perf_counter() - start
    conn.close()
    return {"mean": total / (turns + 1), "commits": (len(rows) + 1) // 2, "bytes": size(path)}


def run_langgraph(path: Path, turns: int, delta: bool = False) -> dict | None:
    try:
        from typing import Annotated, TypedDict

        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, StateGraph
        from langgraph.graph.message import add_messages
    except ImportError:
        return None

    if delta:
        try:
            from langgraph.channels import DeltaChannel
        except ImportError:
            return None
        try:  # LangGraph's own batch reducer for messages (experimental in 1.2)
            from langgraph.graph.message import _messages_delta_reducer as reducer
        except ImportError:
            def reducer(state: list, writes: list) -> list:
                return functools.reduce(add_messages, writes, state)
        channel = Annotated[list, DeltaChannel(reducer)]
    else:
        channel = Annotated[list, add_messages]
    # the functional form: class syntax would see a string annotation (postponed evaluation)
    State = TypedDict("State", {"messages": channel})  # noqa: UP013

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
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of the turnlog run")
    args = parser.parse_args()
    n = args.turns
    with tempfile.TemporaryDirectory() as tmp:
        ours = run_turnlog(Path(tmp) / "turnlog.db", n, args.profile)
        floor = run_floor(Path(tmp) / "turnlog.db", Path(tmp) / "floor.db", n)
        aio = run_async(Path(tmp) / "async.db", n)
        many = run_concurrent(Path(tmp) / "many.db", max(1, n // 20))
        base = run_langgraph(Path(tmp) / "langgraph.db", n)
        best = run_langgraph(Path(tmp) / "delta.db", n, delta=True)
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
    print(f"floor      per turn: mean {floor['mean'] * ms:.3f} ms ({floor['commits']:,} commits "
          f"of turnlog's rows, two a turn; raw sqlite3, WAL, synchronous=FULL)")
    print(f"floor      on disk: {floor['bytes']:,} bytes = {floor['bytes'] / n:,.0f} bytes/turn")
    print(f"\nratio turnlog / floor: per turn (mean) {ours['mean'] / floor['mean']:.2f}x "
          f"(target <= 1.5x)")
    if args.profile:
        stats = pstats.Stats(args.profile)
        print(f"\nprofile of the turnlog run written to {args.profile}; top 25 by own time:")
        stats.sort_stats("tottime").print_stats(25)
    if base is None:
        print("\nLangGraph baselines skipped: pip install -e '.[bench]' to run them")
        return
    for label, lg, speed, smaller in (("LangGraph", base, 20, 100), ("DeltaChan", best, 10, 10)):
        if lg is None:
            print(f"\n{label} skipped: this langgraph has no langgraph.channels.DeltaChannel")
            continue
        print(f"\n{label}  per turn: first tenth {lg['first'] * ms:.3f} ms, last tenth "
              f"{lg['last'] * ms:.3f} ms, mean {lg['mean'] * ms:.3f} ms; "
              f"last/first = {lg['last'] / lg['first']:.2f}")
        print(f"{label}  on disk: {lg['bytes']:,} bytes = {lg['bytes'] / n:,.0f} bytes/turn")
        print(f"ratios ({label} / turnlog): per turn (mean) {lg['mean'] / ours['mean']:.1f}x, "
              f"last tenth {lg['last'] / ours['last']:.1f}x (target >= {speed}x); "
              f"size {lg['bytes'] / ours['bytes']:.1f}x (target >= {smaller}x)")


# --- streaming: the loop's cost of streaming a turn (kept apart from main) ----------


class _Handle:
    """A streamed answer of ``FakeModel``: ``pieces`` text deltas, then the response."""

    def __init__(self, response: ModelResponse, pieces: int) -> None:
        self.response, self.pieces = response, pieces

    def __iter__(self):
        for i in range(self.pieces):
            yield StreamDelta(kind="text", text="tok ", index=0)

    def partial(self) -> ModelResponse:
        return self.response


class StreamingFakeModel(FakeModel):
    """``FakeModel`` that also streams: each answer arrives as ``pieces`` text deltas."""

    pieces = 20

    def stream(self, request: ModelRequest) -> _Handle:
        return _Handle(self.complete(request), self.pieces)


def run_streaming(path: Path, turns: int, stream: bool) -> float:
    """Mean per-turn seconds of a run, streamed (with a delta observer) or not."""
    model = StreamingFakeModel(turns)
    seen = []
    with Journal(path) as journal:
        Loop(journal, model, [add], stream=stream,
             observers=[lambda e, p: seen.append(p) if e == "model_delta" else None]).start(
            "go", max_turns=turns + 1)
    return statistics.mean(b - a for a, b in zip(model.times, model.times[1:]))


def streaming_main() -> None:
    """Print streaming's per-turn overhead against the same run unstreamed (target < 5%)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1000)
    n = min(parser.parse_known_args()[0].turns, 300)
    with tempfile.TemporaryDirectory() as tmp:
        plain = run_streaming(Path(tmp) / "plain.db", n, stream=False)
        streamed = run_streaming(Path(tmp) / "streamed.db", n, stream=True)
    print(f"\nstreaming  per turn ({n} turns, {StreamingFakeModel.pieces} deltas a turn): "
          f"unstreamed {plain * 1000:.3f} ms, streamed {streamed * 1000:.3f} ms; "
          f"streamed/unstreamed = {streamed / plain:.3f} (target < 1.05)")


if __name__ == "__main__":
    main()
    streaming_main()
