"""Whole conversations through the real ``Loop`` against a naive model of the duplicate law.

A scripted model emits random calls (several per response, repeats in other forms, reordered
keys, unparsable arguments, unknown tools); runs crash at a model request and are resumed by
a fresh loop; conversations are forked at any point a user message may follow. After every
step each answer in the journal must be what a backward scan over every earlier call
(``turnlog.testing.same_arguments``, written apart from ``engine.canonical``) says it is.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from turnlog.engine.model.events import DuplicatePolicy
from turnlog.engine.loop import Loop
from turnlog.engine.model.messages import Text, ToolCall
from turnlog.engine.providers.base import ModelResponse
from turnlog.engine.tools import tool
from turnlog.journal import Journal
from turnlog.replay.fork import fork, message_fork_points
from turnlog.testing import equivalent_forms, same_arguments


class Crash(Exception):
    """Not a ProviderError: the loop lets it out and the journal stops at the request."""


class Model:
    """A scripted model fed one run at a time."""

    name = "naive"
    model = "naive"

    def __init__(self) -> None:
        self.queue: list[Any] = []

    def complete(self, request: Any) -> ModelResponse:
        item = self.queue.pop(0)
        if isinstance(item, Crash):
            raise item
        return item


@tool(effect="read_only")
def search(q: Any = None, n: Any = None, opts: Any = None, nonce: Any = None) -> dict:
    """Search."""
    return {"ok": True}


@tool
def add(q: Any = None, n: Any = None, opts: Any = None, nonce: Any = None) -> dict:
    """Add."""
    return {"ok": True}


PARAMS = {"q", "n", "opts", "nonce"}
VALUES = [1, 1.0, True, 0, -0.0, False, None, "\u00e9", "e\u0301", "\ufb01", "fi", "\uff11",
          [1, "\u00e9"], [1.0, "e\u0301"], ["\u00e9", 1], {"\u00e9": 0}, {"e\u0301": -0.0},
          {"a": [True]}, {"a": [1]}]
arguments = st.dictionaries(st.sampled_from(["q", "n", "opts", "nonce", "bad"]),
                            st.sampled_from(VALUES), max_size=3)
calls = st.one_of(
    st.tuples(st.sampled_from(["search", "add", "ghost"]), arguments, st.none()),
    st.tuples(st.sampled_from(["search", "add"]), st.just({}),
              st.sampled_from(["{bad", "[1]", '{"q": 1'])))
responses = st.lists(st.lists(calls, min_size=1, max_size=4), min_size=1, max_size=3)
policies = st.builds(
    DuplicatePolicy, rule=st.sampled_from(["previous", "window", "anywhere", "off"]),
    window=st.integers(1, 3), exempt=st.sampled_from([(), ("add",)]),
    volatile=st.sampled_from([{}, {"search": ("nonce",)}, {"add": ("q", "nonce")}]),
    observe_only=st.booleans() | st.just(False), max_refusals=st.none() | st.integers(1, 4))


class Conversations(RuleBasedStateMachine):
    """The loop's answers against the naive law, conversation by conversation."""

    @initialize(policy=policies)
    def start(self, policy: DuplicatePolicy) -> None:
        self.journal = Journal(":memory:")
        self.model = Model()
        self.policy = policy
        self.cid = "c"
        self.turn = 0
        Loop(self.journal, self.model, [search, add]).start(
            None, conversation_id="c", max_turns=50, duplicate_policy=policy)
        #: per conversation: ((conversation, seq) of the answer, name, arguments, raw text if unparsable)
        self.history: dict[str, list[tuple[tuple[str, int], str, dict, str | None]]] = {"c": []}
        self.checked = {"c": 0}
        self.runs = 0

    def _responses(self, batches: list, data: Any) -> list[ModelResponse]:
        out = []
        for batch in batches:
            self.turn += 1
            parts = []
            for i, (name, args, raw) in enumerate(batch):
                if data.draw(st.integers(0, 3)) == 0 and self.history[self.cid]:
                    # the model repeats an earlier call, written otherwise
                    _, name, args, raw = data.draw(st.sampled_from(self.history[self.cid]))
                    args = data.draw(equivalent_forms(args))
                call = ToolCall(id=f"m{self.turn}_{i}", name=name, arguments=args,
                                raw_arguments=raw if raw is not None else json.dumps(args),
                                invalid="arguments are not a JSON object" if raw else None)
                parts.append(call)
            out.append(ModelResponse(parts=tuple(parts), stop_reason="tool_use"))
        return out

    def _final(self) -> ModelResponse:
        return ModelResponse(parts=(Text(text="done"),))

    @rule(batches=responses, data=st.data())
    def run(self, batches: list, data: Any) -> None:
        self.model.queue = [*self._responses(batches, data), self._final()]
        Loop(self.journal, self.model, [search, add]).send(self.cid, "go")
        self.model.queue = []
        self.runs += 1

    @rule(batches=responses, data=st.data(), at=st.integers(0, 3))
    def crash_then_resume(self, batches: list, data: Any, at: int) -> None:
        queue = self._responses(batches, data)
        at = min(at, len(queue))
        self.model.queue = [*queue[:at], Crash(), *queue[at:], self._final()]
        try:
            Loop(self.journal, self.model, [search, add]).send(self.cid, "go")
        except Crash:
            Loop(self.journal, self.model, [search, add]).resume(self.cid)  # a fresh process
        self.model.queue = []
        self.runs += 1

    @precondition(lambda self: self.runs)
    @rule(data=st.data())
    def fork_and_continue(self, data: Any) -> None:
        at = data.draw(st.sampled_from(message_fork_points(self.journal, self.cid)))
        new = fork(self.journal, self.cid, at, new_id=f"{self.cid}.{at}", message="forked")
        # a fork's own seqs count from 1: keep what its parent had at ``at``
        self.history[new] = [h for h in self.history[self.cid]
                             if h[0][0] != self.cid or h[0][1] <= at]
        self.checked[new] = 0
        self.cid = new

    # --- the naive law ----------------------------------------------------------------

    def _same(self, a: tuple, b: tuple) -> bool:
        (_, name, args, raw), (_, other_name, other_args, other_raw) = a, b
        if name != other_name or (raw is None) != (other_raw is None):
            return False
        if raw is not None:
            return raw == other_raw
        return same_arguments(args, other_args, ignore=self.policy.volatile.get(name, ()))

    def _duplicate(self, history: list, call: tuple) -> bool:
        p = self.policy
        if p.rule == "off" or call[1] in p.exempt:
            return False
        earlier = {"previous": history[-1:], "window": history[-p.window:],
                   "anywhere": history}[p.rule]
        return any(self._same(call, h) for h in earlier)

    @invariant()
    def every_answer_is_what_the_naive_law_says(self) -> None:
        if not hasattr(self, "journal"):
            return
        p, history, calls = self.policy, self.history[self.cid], {}
        refusals, decided = 0, set()
        rows = list(self.journal.read(self.cid, self.checked[self.cid] + 1))
        for row in rows:
            event = json.loads(row.payload)
            if row.type == "user_message":
                refusals = 0
            elif row.type == "model_responded":
                calls.update((c["id"], c) for c in event["parts"] if c["type"] == "tool_call")
            elif row.type in ("tool_started", "tool_call_rejected") and (
                    event["call_id"] not in decided):
                # a call is decided in call order when it starts or is refused; its answer may
                # come later (parallel batches answer as their calls complete)
                decided.add(event["call_id"])
                c = calls[event["call_id"]]
                raw = c.get("raw_arguments", "") if c.get("invalid") else None
                call = ((self.cid, row.seq), c["name"], c.get("arguments", {}), raw)
                duplicate = self._duplicate(history, call)
                if p.max_refusals is not None and refusals >= p.max_refusals:
                    want = "halted"
                elif raw is not None:
                    want = "invalid_arguments"
                elif c["name"] not in ("search", "add"):
                    want = "unknown"
                elif not set(call[2]) <= PARAMS:
                    want = "invalid_arguments"
                elif duplicate and not p.observe_only:
                    want = "duplicate"
                else:
                    want = None
                got = event.get("reason") if row.type == "tool_call_rejected" else None
                assert got == want, (call, [h[1:] for h in history], p)
                if want is None:
                    assert event.get("duplicate", False) == duplicate, (call, p)
                refusals += want == "duplicate"
                history.append(call)
            elif row.type == "conversation_halted":
                assert p.max_refusals is not None and event["refusals"] == refusals == p.max_refusals
            elif row.type == "conversation_completed":
                assert p.max_refusals is None or refusals < p.max_refusals
        if rows:
            self.checked[self.cid] = rows[-1].seq

    def teardown(self) -> None:
        if hasattr(self, "journal"):
            self.journal.close()


# 30 conversations of up to 8 steps (fewer under a smaller profile, as bench/mutation.py's)
Conversations.TestCase.settings = settings(max_examples=min(30, settings.default.max_examples),
                                           stateful_step_count=8, deadline=None)
TestConversations = Conversations.TestCase


def test_the_escalation_counts_refusals_since_the_users_last_message():
    # found by the state machine under bench/mutation.py's profile: a fork whose message joins
    # the parent's run (after a refused duplicate) carried that refusal into the new count
    from turnlog.engine.providers.scripted import ScriptedProvider

    journal = Journal(":memory:")
    call = {"tool_calls": [{"name": "search", "arguments": {}}]}
    policy = DuplicatePolicy(rule="previous", max_refusals=2)
    Loop(journal, ScriptedProvider([call, call, {"text": "done"}]), [search]).start(
        "go", conversation_id="c", duplicate_policy=policy)
    refused = [r.seq for r in journal.read("c") if r.type == "tool_call_rejected"]
    assert len(refused) == 1 and refused[0] in message_fork_points(journal, "c")
    fork(journal, "c", refused[0], new_id="f", message="try again")  # mid-run, one refusal
    Loop(journal, ScriptedProvider([call, call, call]), [search]).send("f", "go")
    kinds = [r.type for r in journal.read("f")]
    assert kinds.count("tool_call_rejected") == 2 and kinds[-1] == "conversation_halted"
    halted = json.loads(list(journal.read("f"))[-1].payload)
    assert halted["refusals"] == 2
