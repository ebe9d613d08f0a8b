"""Parallel tool calls: a response's read-only/idempotent calls run at once, the journal stays
deterministic (starts in call order before any runs), replay holds, resume re-runs the unfinished."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from turnlog.engine.errors import EngineError
from turnlog.engine.loop import Loop
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.engine.tools import tool
from turnlog.replay import replay

# every test runs on Loop and on AsyncLoop (tests/engine/conftest.py)
pytestmark = pytest.mark.usefixtures("both_loops")

NAP = 0.5


def types(journal, cid):
    return [e.type for e in journal.read(cid)]


def payloads(journal, cid, kind):
    return [json.loads(e.payload) for e in journal.read(cid) if e.type == kind]


def calls(*names_args):
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in names_args]}


def test_four_read_only_calls_of_one_response_run_at_once(journal):
    spans: list[tuple[float, float]] = []

    @tool(effect="read_only")
    def slow(n: int) -> dict:
        t = time.perf_counter()
        time.sleep(NAP)
        spans.append((t, time.perf_counter()))
        return {"n": n}

    @tool(effect="idempotent")
    async def aslow(n: int) -> dict:  # awaited natively by AsyncLoop, run to its end by Loop
        t = time.perf_counter()
        await asyncio.sleep(NAP)
        spans.append((t, time.perf_counter()))
        return {"n": n}

    script = [calls(("slow", {"n": 1}), ("aslow", {"n": 2}), ("slow", {"n": 3}),
                    ("aslow", {"n": 4})), {"text": "done"}]
    result = Loop(journal, ScriptedProvider(script), [slow, aslow]).start("go", conversation_id="p")
    assert result.status == "completed"
    first_end = min(end for _, end in spans)
    assert all(start < first_end for start, _ in spans), "the calls did not overlap"
    elapsed = max(end for _, end in spans) - min(start for start, _ in spans)
    assert elapsed < 1.5, f"four {NAP}s read-only calls took {elapsed:.2f}s: not concurrent"
    kinds = types(journal, "p")
    i = kinds.index("tool_started")
    assert kinds[i:i + 8] == ["tool_started"] * 4 + ["tool_completed"] * 4
    started = [p["call_id"] for p in payloads(journal, "p", "tool_started")]
    assert started == [c.id for c in result.messages[1].parts]  # in call order
    assert sorted(p["data"]["n"] for p in payloads(journal, "p", "tool_completed")) == [1, 2, 3, 4]
    assert journal.verify().ok
    outcome = replay(journal, "p")
    assert outcome.ok, outcome.divergence and outcome.divergence.render()


def test_results_are_recorded_as_they_complete_and_replay_reproduces_the_order(journal):
    recorded = {name: threading.Event() for name in "abc"}

    @tool(effect="read_only")
    def step(name: str, after: str = "") -> str:
        if after:
            assert recorded[after].wait(10)
        return name

    names = {"call_1_1": "a", "call_1_2": "b", "call_1_3": "c"}  # the script's call ids

    def observe(event, payload):
        if event == "tool_executed":
            recorded[names[payload["call_id"]]].set()

    script = [calls(("step", {"name": "a", "after": "c"}), ("step", {"name": "b"}),
                    ("step", {"name": "c", "after": "b"})), {"text": "ok"}]
    Loop(journal, ScriptedProvider(script), [step], observers=[observe]).start(
        "go", conversation_id="o")
    done = [p["data"] for p in payloads(journal, "o", "tool_completed")]
    assert done == ["b", "c", "a"]  # completion order, not call order
    outcome = replay(journal, "o")
    assert outcome.ok, outcome.divergence and outcome.divergence.render()


def test_side_effecting_calls_run_one_at_a_time_in_call_order(journal):
    log: list[str] = []

    @tool  # side_effecting by default
    def write(x: str) -> str:
        log.append(f"start {x}")
        time.sleep(0.05)
        log.append(f"end {x}")
        return x

    @tool(effect="read_only")
    def look(x: str) -> str:
        return x

    script = [calls(("look", {"x": "a"}), ("look", {"x": "b"}), ("write", {"x": "1"}),
                    ("write", {"x": "2"}), ("look", {"x": "c"})), {"text": "ok"}]
    Loop(journal, ScriptedProvider(script), [write, look]).start("go", conversation_id="s")
    assert log == ["start 1", "end 1", "start 2", "end 2"]
    kinds = [k for k in types(journal, "s") if k.startswith("tool_")]
    assert kinds == ["tool_started", "tool_started", "tool_completed", "tool_completed",
                     "tool_started", "tool_completed", "tool_started", "tool_completed",
                     "tool_started", "tool_completed"]
    names = [(p["name"], p["arguments"]["x"]) for p in payloads(journal, "s", "tool_started")]
    assert names == [("look", "a"), ("look", "b"), ("write", "1"), ("write", "2"), ("look", "c")]
    assert replay(journal, "s").ok


def test_a_side_effecting_tool_may_opt_in_and_max_parallel_tools_bounds_the_batch(journal):
    running, peak = [0], [0]
    lock = threading.Lock()

    @tool(parallel_safe=True)
    def send(n: int) -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.1)
        with lock:
            running[0] -= 1
        return n

    script = [calls(*[("send", {"n": n}) for n in range(6)]), {"text": "ok"}]
    loop = Loop(journal, ScriptedProvider(script), [send], max_parallel_tools=2)
    assert loop.start("go", conversation_id="b").status == "completed"
    assert peak[0] == 2
    assert types(journal, "b")[4:10] == ["tool_started"] * 6
    assert replay(journal, "b").ok


def test_max_parallel_tools_one_keeps_the_one_call_at_a_time_journal(journal):
    @tool(effect="read_only")
    def look(x: str) -> str:
        return x

    script = [calls(("look", {"x": "a"}), ("look", {"x": "b"})), {"text": "ok"}]
    Loop(journal, ScriptedProvider(script), [look], max_parallel_tools=1).start(
        "go", conversation_id="one")
    kinds = [k for k in types(journal, "one") if k.startswith("tool_")]
    assert kinds == ["tool_started", "tool_completed"] * 2
    assert replay(journal, "one").ok


@pytest.mark.parametrize("bad", [0, -1, 1.5, "8"])
def test_a_bad_max_parallel_tools_is_refused(journal, bad):
    with pytest.raises(EngineError, match="max_parallel_tools"):
        Loop(journal, ScriptedProvider([]), max_parallel_tools=bad)


def test_rejected_calls_inside_a_batch_keep_their_place_and_duplicates_are_still_caught(journal):
    @tool(effect="read_only")
    def look(x: str) -> str:
        return x

    script = [calls(("look", {"x": "a"}), ("look", {"x": "a"}), ("nope", {}),
                    ("look", {"x": "b"})), {"text": "ok"}]
    Loop(journal, ScriptedProvider(script), [look]).start("go", conversation_id="r")
    kinds = [k for k in types(journal, "r") if k.startswith("tool_")]
    assert kinds[:4] == ["tool_started", "tool_call_rejected", "tool_call_rejected",
                         "tool_started"]
    reasons = [p["reason"] for p in payloads(journal, "r", "tool_call_rejected")]
    assert reasons == ["duplicate", "unknown"]
    assert replay(journal, "r").ok


def test_a_crash_mid_batch_then_resume_reruns_only_the_unfinished_safe_calls(journal):
    runs: dict[str, int] = {}
    first_done = threading.Event()
    crashed = [False]

    def count(name):
        runs[name] = runs.get(name, 0) + 1

    @tool(effect="read_only")
    def fast() -> str:
        count("fast")
        return "fast"

    @tool(effect="read_only")
    def boom() -> str:
        count("boom")
        if not crashed[0]:
            first_done.wait(5)
            crashed[0] = True
            raise KeyboardInterrupt  # the process is stopped while the batch runs
        return "boom"

    @tool(effect="idempotent")
    def slow() -> str:
        count("slow")
        time.sleep(0.3)
        return "slow"

    @tool
    def pay() -> str:  # side-effecting, after the batch: not started before the crash
        count("pay")
        return "paid"

    def observe(event, payload):
        if event == "tool_executed" and payload["name"] == "fast":
            first_done.set()

    script = [calls(("fast", {}), ("boom", {}), ("slow", {}), ("pay", {})), {"text": "ok"}]
    loop = Loop(journal, ScriptedProvider(script), [fast, boom, slow, pay], observers=[observe])
    with pytest.raises(KeyboardInterrupt):
        loop.start("go", conversation_id="k")
    done = [p["name"] for p in payloads(journal, "k", "tool_completed")]
    assert done == ["fast"]  # recorded as it completed, before the crash
    assert [p["name"] for p in payloads(journal, "k", "tool_started")] == ["fast", "boom", "slow"]
    time.sleep(0.35)  # let the abandoned slow call end (its result is never recorded)
    before = dict(runs)
    result = Loop(journal, ScriptedProvider(script), [fast, boom, slow, pay]).resume("k")
    assert result.status == "completed"
    rerun = {k: runs.get(k, 0) - before.get(k, 0) for k in ("fast", "boom", "slow", "pay")}
    assert rerun == {"fast": 0, "boom": 1, "slow": 1, "pay": 1}
    started = [p["name"] for p in payloads(journal, "k", "tool_started")]
    assert started == ["fast", "boom", "slow", "pay"]  # the re-run calls keep their one start
    assert len(payloads(journal, "k", "tool_completed")) == 4
    assert journal.verify().ok
    assert replay(journal, "k").ok
