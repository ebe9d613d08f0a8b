"""``tool_progressed``: news of a running call, written while it runs (``ToolContext.progress``),
served again by replay, and handed back on resume to a tool that picks the call up."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnlog.engine.errors import InvalidTransition
from turnlog.engine.model.conversation import Conversation
from turnlog.engine.model.events import (
    ConversationStarted,
    ModelRequested,
    ModelResponded,
    ToolCompleted,
    ToolProgressed,
    ToolStarted,
    UserMessage,
)
from turnlog.engine.loop import Loop
from turnlog.engine.model.messages import ToolCall
from turnlog.engine.model.state import fold, reduce
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.engine.tools import Tool
from turnlog.replay import replay


def events(journal, cid):
    return [(e.type, json.loads(e.payload)) for e in journal.read(cid)]


def calls(*names_args):
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in names_args]}


class Reporting(Tool):
    """A tool that reports two steps while it runs, then answers."""

    def __init__(self, name: str = "work", effect: str = "read_only") -> None:
        def work(n: int) -> dict:
            """Work on ``n``."""
            return {"n": n}

        super().__init__(work, name=name, effect=effect)
        self.seen: list[tuple] = []

    def invoke(self, arguments, context):
        self.seen.append(context.resumed)
        for step in (1, 2):
            context.progress({"kind": "step", "n": arguments["n"], "step": step})
            time.sleep(0.05)
        return {"n": arguments["n"]}


@pytest.mark.usefixtures("both_loops")
def test_news_of_each_call_lands_between_its_start_and_its_result_and_replays(journal):
    script = [calls(("work", {"n": 1}), ("work", {"n": 2})), {"text": "done"}]
    result = Loop(journal, ScriptedProvider(script), [Reporting()]).start(
        "go", conversation_id="p")
    assert result.status == "completed"
    recorded = events(journal, "p")
    for call_id, n in [(c.id, c.arguments["n"]) for c in result.messages[1].parts]:
        kinds = [(k, p.get("data")) for k, p in recorded if p.get("call_id") == call_id]
        assert kinds == [("tool_started", None),
                         ("tool_progressed", {"kind": "step", "n": n, "step": 1}),
                         ("tool_progressed", {"kind": "step", "n": n, "step": 2}),
                         ("tool_completed", {"n": n})]
    assert journal.verify().ok
    outcome = replay(journal, "p")
    assert outcome.ok, outcome.divergence and outcome.divergence.render()


def test_news_of_a_call_that_is_not_running_is_refused_and_nothing_is_written(journal):
    Loop(journal, ScriptedProvider([calls(("work", {"n": 1})), {"text": "ok"}]),
         [Reporting()]).start("go", conversation_id="r")
    before = journal.last_seq("r")
    conv = Conversation.open(journal, "r")
    with pytest.raises(InvalidTransition, match="tool_progressed"):
        conv.append(ToolProgressed(call_id="call_1_1", name="work", data={"kind": "late"}))
    assert journal.last_seq("r") == before


class PicksUp(Reporting):
    """A side-effecting tool that can pick a call up from the news it recorded."""

    def picks_up(self, progress):
        return any(p.get("step") == 1 for p in progress)


class Dies(Reporting):
    """Records its first step, then the process "dies"."""

    def invoke(self, arguments, context):
        context.progress({"kind": "step", "n": arguments["n"], "step": 1})
        raise KeyboardInterrupt


def test_resume_hands_the_recorded_news_to_a_tool_that_picks_the_call_up(journal):
    script = [calls(("work", {"n": 7})), {"text": "done"}]
    with pytest.raises(KeyboardInterrupt):
        Loop(journal, ScriptedProvider(script), [Dies(effect="side_effecting")]).start(
            "go", conversation_id="k")
    again = PicksUp(effect="side_effecting")
    result = Loop(journal, ScriptedProvider(script), [again]).resume("k")
    assert result.status == "completed"
    assert again.seen == [({"kind": "step", "n": 7, "step": 1},)]
    (done,) = [p for k, p in events(journal, "k") if k == "tool_completed"]
    assert done["success"] is True and done.get("source", "live") == "live"


def test_a_side_effecting_tool_that_cannot_pick_up_is_answered_as_interrupted(journal):
    script = [calls(("work", {"n": 7})), {"text": "done"}]
    with pytest.raises(KeyboardInterrupt):
        Loop(journal, ScriptedProvider(script), [Dies(effect="side_effecting")]).start(
            "go", conversation_id="i")
    plain = Reporting(effect="side_effecting")
    assert plain.picks_up(({"kind": "step", "step": 1},)) is False
    result = Loop(journal, ScriptedProvider(script), [plain]).resume("i")
    assert result.status == "completed" and plain.seen == []
    (done,) = [p for k, p in events(journal, "i") if k == "tool_completed"]
    assert done["source"] == "interrupted"


# --- the law: news is accepted exactly while its call runs, and never changes the state -------

_CALLS = [ToolCall(id=f"c{i}", name="t", arguments={"i": i}) for i in range(3)]
_BASE = [ConversationStarted(conversation_id="c", provider="scripted", model="m"),
         UserMessage.of("hi"), ModelRequested(turn=1, digest="d", provider="p", model="m"),
         ModelResponded(turn=1, parts=tuple(_CALLS), stop_reason="tool_use")]


@st.composite
def runs(draw):
    """The calls started and answered in some order, news for some call at random points."""
    order = draw(st.permutations(range(3)))
    steps = [ToolStarted(call_id=f"c{i}", name="t") for i in order]
    ends = draw(st.permutations(range(3)))
    steps += [ToolCompleted(call_id=f"c{i}", name="t", success=True, content="ok") for i in ends]
    news = draw(st.lists(st.tuples(st.integers(0, len(steps)), st.integers(0, 3)), max_size=6))
    return steps, news


@given(runs())
def test_news_is_accepted_exactly_while_its_call_runs_and_changes_nothing(run):
    steps, news = run
    plain = fold(_BASE + steps)
    state = fold(_BASE)
    where = sorted(news)
    taken = 0
    for position in range(len(steps) + 1):
        for at, which in where:
            if at != position:
                continue
            event = ToolProgressed(call_id=f"c{which}", name="t", data={"n": which})
            running = (any(c.id == f"c{which}" for c in state.pending_calls)
                       and f"c{which}" in state.started_calls)
            if running:
                state = reduce(state, event)
                taken += 1
            else:
                with pytest.raises(InvalidTransition):
                    reduce(state, event)
        if position < len(steps):
            state = reduce(state, steps[position])
    # the fold with news equals the fold without it, but for the seq
    assert state.seq == plain.seq + taken
    assert (state.messages, state.lifecycle, state.tool_execution_results) == (
        plain.messages, plain.lifecycle, plain.tool_execution_results)
