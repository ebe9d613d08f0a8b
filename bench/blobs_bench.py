"""Bytes on disk of an image-heavy agent run, against the unique content it holds.

Not a test. Run: ``python bench/blobs_bench.py [--turns N] [--text-turns N]`` (with the
``bench`` extra installed, LangGraph's DeltaChannel runs the same turns for reference).

The run (issue 28's storage row): ``--turns`` turns (200); each turn the user sends a
200 KiB screenshot (PNG-like random bytes, base64 in the message, 50 distinct ones
cycling), the model asks for one of 2 large files (64 KiB of text each, read again and
again), the tool returns it, and the model answers. The whole history is sent with every
request (turnlog records each request as a digest; its messages are the events already
written). Each turn is written as it happens: one append per event, as the loop does.

Figures, each a ratio measured in this run:

- turnlog's bytes on disk (the SQLite file after a WAL checkpoint) over the sum of the
  unique content bytes: the 50 screenshots' bytes, the 2 files' and every message's
  text once (target <= 1.15x);
- LangGraph (``StateGraph`` + ``SqliteSaver``, the message list as
  ``Annotated[list, DeltaChannel(reducer)]``, ``durability="sync"``) on the same turns,
  the screenshot as a data URL in an ``image_url`` block: its bytes over the same sum,
  and over turnlog's;
- the text-only tool turn of ``bench/loop_bench.py`` (``--text-turns``, 1,000): DeltaChannel's
  bytes over turnlog's (target >= 5x).
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import random
import sqlite3
import tempfile
import time
from pathlib import Path

from bench.loop_bench import run_langgraph, run_turnlog, size
from turnlog.engine.model.conversation import Conversation
from turnlog.engine.model.events import (
    ConversationStarted,
    ModelRequested,
    ModelResponded,
    ToolCompleted,
    ToolStarted,
    UserMessage,
)
from turnlog.engine.model.messages import Image, Text, ToolCall, Usage
from turnlog.journal import Journal

SHOT = 200 * 1024
DISTINCT = 50
FILE = 64 * 1024


class Run:
    """The run's content, made once (seeded): screenshots, files and per-turn texts."""

    def __init__(self, turns: int) -> None:
        rng = random.Random(28)
        self.turns = turns
        self.shots = [rng.randbytes(SHOT) for _ in range(DISTINCT)]
        self.shots64 = [base64.b64encode(s).decode("ascii") for s in self.shots]
        words = ["def", "return", "import", "class", "self", "value", "for", "in", "if", "x"]
        self.files = {f"src/module_{i}.py": "\n".join(
            " ".join(rng.choice(words) for _ in range(8)) for _ in range(FILE // 40))[:FILE]
            for i in range(2)}
        self.paths = sorted(self.files)

    def turn(self, k: int) -> tuple[str, str, str, str]:
        """Turn ``k``'s user text, screenshot (base64), file path and answer."""
        return (f"step {k}: here is the screen, what next?", self.shots64[k % DISTINCT],
                self.paths[k % 2], f"Clicked the button at step {k}.")

    def unique_bytes(self) -> int:
        """Every distinct piece of content once: screenshots, files, texts, call arguments."""
        texts = set()
        for k in range(self.turns):
            user, _, path, answer = self.turn(k)
            texts.update((user, answer, json.dumps({"path": path})))
        shots = self.shots[:min(self.turns, DISTINCT)]
        files = [self.files[p] for p in self.paths[:min(self.turns, 2)]]
        return (sum(map(len, shots)) + sum(len(f.encode()) for f in files)
                + sum(len(t.encode()) for t in texts))


def run_turnlog_images(path: Path, run: Run) -> dict:
    start = time.perf_counter()
    with Journal(str(path)) as journal:
        conv = Conversation.start(journal, ConversationStarted(
            conversation_id="shots", provider="bench", model="bench-model", max_turns=10**6))
        for k in range(run.turns):
            user, shot, file_path, answer = run.turn(k)
            turn = 2 * k + 1
            call = ToolCall(id=f"c{k}", name="read_file", arguments={"path": file_path},
                            raw_arguments=json.dumps({"path": file_path}))
            for event in (
                    UserMessage(parts=(Text(text=user), Image(media_type="image/png", data=shot))),
                    ModelRequested(turn=turn, digest=f"{k:064x}", provider="bench",
                                   model="bench-model"),
                    ModelResponded(turn=turn, parts=(call,), stop_reason="tool_use",
                                   usage=Usage(input_tokens=10, output_tokens=5)),
                    ToolStarted(call_id=call.id, name="read_file", arguments=call.arguments),
                    ToolCompleted(call_id=call.id, name="read_file", success=True,
                                  content=run.files[file_path]),
                    ModelRequested(turn=turn + 1, digest=f"{k + 1:064x}", provider="bench",
                                   model="bench-model"),
                    ModelResponded(turn=turn + 1, parts=(Text(text=answer),),
                                   usage=Usage(input_tokens=10, output_tokens=5))):
                conv.append(event)
        assert journal.verify().ok
    seconds = time.perf_counter() - start
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    blobs = conn.execute("SELECT count(*), sum(length(data)) FROM blobs").fetchone()
    conn.close()
    return {"bytes": size(path), "seconds": seconds, "blobs": blobs}


def run_langgraph_images(path: Path, run: Run) -> dict | None:
    """The same turns through LangGraph with its DeltaChannel message list."""
    try:
        from typing import Annotated, TypedDict

        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        from langgraph.channels import DeltaChannel
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, StateGraph
        from langgraph.graph.message import add_messages
    except ImportError:
        return None
    try:
        from langgraph.graph.message import _messages_delta_reducer as reducer
    except ImportError:
        def reducer(state: list, writes: list) -> list:
            return functools.reduce(add_messages, writes, state)
    State = TypedDict("State", {"messages": Annotated[list, DeltaChannel(reducer)]})  # noqa: UP013

    def user(state: dict) -> dict:
        k = sum(1 for m in state["messages"] if isinstance(m, HumanMessage))
        text, shot, _, _ = run.turn(k)
        return {"messages": [HumanMessage(content=[
            {"type": "text", "text": text},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{shot}"}}])]}

    def model(state: dict) -> dict:
        last = state["messages"][-1]
        k = sum(1 for m in state["messages"] if isinstance(m, HumanMessage)) - 1
        _, _, file_path, answer = run.turn(k)
        if isinstance(last, ToolMessage):
            return {"messages": [AIMessage(content=answer)]}
        return {"messages": [AIMessage(content="", tool_calls=[
            {"name": "read_file", "args": {"path": file_path}, "id": f"c{k}"}])]}

    def tools(state: dict) -> dict:
        call = state["messages"][-1].tool_calls[0]
        return {"messages": [ToolMessage(content=run.files[call["args"]["path"]],
                                         tool_call_id=call["id"])]}

    def after_model(state: dict) -> str:
        if state["messages"][-1].tool_calls:
            return "tools"
        done = sum(1 for m in state["messages"] if isinstance(m, HumanMessage))
        return END if done >= run.turns else "user"

    graph = StateGraph(State)
    graph.add_node("user", user)
    graph.add_node("model", model)
    graph.add_node("tools", tools)
    graph.add_edge(START, "user")
    graph.add_edge("user", "model")
    graph.add_conditional_edges("model", after_model, ["tools", "user", END])
    graph.add_edge("tools", "model")
    conn = sqlite3.connect(str(path), check_same_thread=False)
    app = graph.compile(checkpointer=SqliteSaver(conn))
    start = time.perf_counter()
    out = app.invoke({"messages": []}, {"configurable": {"thread_id": "shots"},
                                        "recursion_limit": 5 * run.turns + 10}, durability="sync")
    seconds = time.perf_counter() - start
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert sum(1 for m in out["messages"] if isinstance(m, HumanMessage)) == run.turns
    return {"bytes": size(path), "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--text-turns", type=int, default=1000)
    args = parser.parse_args()
    run = Run(args.turns)
    unique = run.unique_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        ours = run_turnlog_images(Path(tmp) / "turnlog.db", run)
        theirs = run_langgraph_images(Path(tmp) / "delta.db", run)
        text_ours = run_turnlog(Path(tmp) / "text.db", args.text_turns)
        text_theirs = run_langgraph(Path(tmp) / "text-delta.db", args.text_turns, delta=True)
    sent = args.turns * SHOT + args.turns * FILE
    print(f"image-heavy run: {args.turns} turns, a {SHOT // 1024} KiB screenshot each "
          f"({DISTINCT} distinct), 2 files of {FILE // 1024} KiB read in turn, history re-sent")
    print(f"  unique content: {unique:,} bytes (of {sent:,} sent as screenshots and files)")
    print(f"  turnlog on disk: {ours['bytes']:,} bytes in {ours['seconds']:.2f} s; "
          f"{ours['blobs'][0]} parts, {ours['blobs'][1]:,} bytes")
    print(f"  ratio turnlog / unique content: {ours['bytes'] / unique:.3f}x (target <= 1.15x)")
    if theirs is None:
        print("  LangGraph DeltaChannel skipped: pip install -e '.[bench]' to run it")
    else:
        print(f"  DeltaChannel on disk: {theirs['bytes']:,} bytes in {theirs['seconds']:.2f} s")
        print(f"  ratio DeltaChannel / unique content: {theirs['bytes'] / unique:.2f}x; "
              f"DeltaChannel / turnlog: {theirs['bytes'] / ours['bytes']:.1f}x")
    print(f"\ntext-only tool turns ({args.text_turns}, as bench/loop_bench.py): turnlog "
          f"{text_ours['bytes']:,} bytes")
    if text_theirs is not None:
        print(f"  DeltaChannel {text_theirs['bytes']:,} bytes; ratio DeltaChannel / turnlog: "
              f"{text_theirs['bytes'] / text_ours['bytes']:.2f}x (target >= 5x)")


if __name__ == "__main__":
    main()
