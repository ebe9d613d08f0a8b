"""Random valid conversations through the writer and the reducer keep every invariant;
random invalid events are refused and leave the journal unchanged."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from turnlog import testing as shipped

from turnlog.engine.model.conversation import Conversation, load_state
from turnlog.engine.errors import InvalidTransition
from turnlog.engine.model.events import (
    ConversationCompleted,
    ConversationFailed,
    ConversationStarted,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ToolCallRejected,
    ToolCompleted,
    ToolStarted,
    TurnLimitReached,
    UserMessage,
)
from turnlog.engine.model.machine import Lifecycle
from turnlog.engine.model.messages import Text, ToolCall
from turnlog.engine.model.state import StateBuilder, fold_stored, reduce
from turnlog.journal import Journal

arguments = shipped.arguments(max_size=5)
events = shipped.events()

L = Lifecycle


class ConversationRules(RuleBasedStateMachine):
    @initialize(mode=st.sampled_from(["chat", "pipeline"]))
    def start(self, mode):
        self.journal = Journal(":memory:")
        self.conv = Conversation.start(self.journal, ConversationStarted(
            conversation_id="c", provider="scripted", model="m", mode=mode))
        self.state = self.conv.state
        self.ids = itertools.count(1)
        self.responses = 0
        self.answers: dict[str, int] = {}
        self.calls: set[str] = set()

    def _append(self, *events):
        self.conv.append(*events)
        for e in events:
            self.state = reduce(self.state, e)  # the pure reducer, step by step

    @property
    def life(self):
        return self.conv.builder.lifecycle

    @precondition(lambda self: self.life in (L.READY, L.AWAITING_MODEL, L.ANSWERED)
                  or (self.life in (L.COMPLETED, L.FAILED, L.HALTED) and self.conv.builder.mode == "chat"))
    @rule(text=st.text(max_size=20))
    def user_says(self, text):
        self._append(UserMessage.of(text))

    @precondition(lambda self: self.life is L.AWAITING_MODEL)
    @rule(n_calls=st.integers(0, 3), args=arguments, fail=st.booleans())
    def model_turn(self, n_calls, args, fail):
        turn = self.conv.builder.turn_count + 1
        self._append(ModelRequested(turn=turn, digest="d", provider="scripted", model="m"))
        if fail:
            self._append(ModelFailed(turn=turn, error_type="ServerError", message="boom"))
            return
        calls = [ToolCall(id=f"call_{next(self.ids)}", name="t", arguments=args) for _ in range(n_calls)]
        self.calls.update(c.id for c in calls)
        self._append(ModelResponded(turn=turn, parts=(Text(text="ok"), *calls)))
        self.responses += 1

    @precondition(lambda self: self.life is L.AWAITING_TOOLS)
    @rule(how=st.sampled_from(["run", "fail", "reject", "start_only"]))
    def answer_a_call(self, how):
        call_id = next(iter(self.conv.builder.pending))
        if how == "reject":
            self._append(ToolCallRejected(call_id=call_id, name="t", reason="duplicate", content="no"))
        elif how == "start_only":
            if call_id not in self.conv.builder.started:
                self._append(ToolStarted(call_id=call_id, name="t"))
            return
        else:
            if call_id not in self.conv.builder.started:
                self._append(ToolStarted(call_id=call_id, name="t"))
            self._append(ToolCompleted(call_id=call_id, name="t", success=how == "run", content="r"))
        self.answers[call_id] = self.answers.get(call_id, 0) + 1

    @precondition(lambda self: self.life is L.ANSWERED)
    @rule()
    def complete(self):
        self._append(ConversationCompleted(final_content="done"))

    @precondition(lambda self: self.life is L.AWAITING_MODEL)
    @rule(halt=st.booleans())
    def stop(self, halt):
        if halt:
            self._append(TurnLimitReached(turn_count=self.conv.builder.turn_count, max_turns=8))
        else:
            self._append(ConversationFailed(error="provider down"))

    @rule(event=events)
    def random_event_is_refused_unless_the_machine_accepts_it(self, event):
        if self.conv.builder.accepts(event):
            return
        before = [r.hash for r in self.journal.read("c")]
        try:
            self.conv.append(event)
        except InvalidTransition:
            pass
        else:
            raise AssertionError(f"{event!r} was appended in state {self.life}")
        assert [r.hash for r in self.journal.read("c")] == before

    @invariant()
    def seq_is_gapless(self):
        seqs = [r.seq for r in self.journal.read("c")]
        assert seqs == list(range(1, len(seqs) + 1))
        assert self.conv.last_seq == len(seqs)

    @invariant()
    def turn_count_counts_model_responses(self):
        assert self.conv.builder.turn_count == self.responses

    @invariant()
    def every_call_is_answered_at_most_once_and_pending_ones_not_yet(self):
        assert all(n == 1 for n in self.answers.values())
        assert set(self.conv.builder.pending) == self.calls - set(self.answers)

    @invariant()
    def reducer_writer_and_journal_agree(self):
        folded = fold_stored(self.journal.read("c"), StateBuilder()).state()
        assert folded == self.conv.state == self.state == load_state(self.journal, "c")
        assert self.journal.verify().ok


TestConversationRules = ConversationRules.TestCase
TestConversationRules.settings = settings(max_examples=40, stateful_step_count=25, deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
