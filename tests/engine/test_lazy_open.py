"""Opening from a snapshot of the state's head (issue 28, item 3): the open reads the head and
the events after it; bodies and gates are folded from the events when first needed, and a
conversation opened that way behaves exactly as one folded from its first event."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnlog.engine.model.conversation import Conversation
from turnlog.engine.model.events import (
    ApprovalDecided,
    ApprovalRequested,
    ConversationStarted,
    ForkRef,
    ModelRequested,
    ModelResponded,
    ToolCallRejected,
    ToolCompleted,
    ToolStarted,
    UserMessage,
)
from turnlog.engine.model.messages import Text, ToolCall
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.engine.model.snapshots import open_builder, save_snapshot, snapshot_kind
from turnlog.engine.model.state import DEFERRED, fold_stored
from turnlog.engine.tools import ToolRegistry, tool
from turnlog.journal import Journal

from .test_snapshots import _full_fold, histories

_SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _journal_of(events, upto: int) -> tuple[Journal, list]:
    journal = Journal(":memory:")
    Conversation.start(journal, events[0], rest=events[1:upto])
    return journal, events[upto:]


@_SETTINGS
@given(histories(), st.data())
def test_a_writer_opened_from_a_snapshot_continues_as_the_full_fold_does(events, data):
    """Snapshot at any seq, open, append the rest live: the same state, the same verdicts."""
    upto = data.draw(st.integers(1, len(events)), label="events in the journal")
    journal, rest = _journal_of(events, upto)
    at = data.draw(st.integers(1, upto), label="snapshot seq")
    save_snapshot(journal, "c", fold_stored(journal.lineage("c", at)))

    conv = Conversation.open(journal, "c")
    if at == upto:
        assert set(conv.builder.unset()) == set(DEFERRED)  # nothing of the bodies read yet
    if rest:
        conv.append(*rest)
    folded = fold_stored(journal.lineage("c"))
    assert conv.state == folded.state()
    for name, arguments in data.draw(st.lists(st.tuples(
            st.sampled_from(["add", "get"]), st.dictionaries(st.sampled_from("ab"),
                                                            st.integers(0, 2), max_size=2)),
            max_size=3), label="calls asked about"):
        assert conv.builder.is_duplicate(name, arguments) == folded.is_duplicate(name, arguments)


@_SETTINGS
@given(histories(), st.data())
def test_a_fork_of_a_snapshotted_parent_opens_as_its_full_fold(events, data):
    journal = Journal(":memory:")
    Conversation.start(journal, events[0], rest=events[1:])
    at = data.draw(st.integers(1, len(events)), label="parent snapshot seq")
    save_snapshot(journal, "c", fold_stored(journal.lineage("c", at)))
    point = data.draw(st.integers(1, len(events)), label="fork point")
    parent = open_builder(journal, "c", point)
    fork = ConversationStarted(conversation_id="f", provider="scripted", model="m",
                               max_turns=1000,
                               fork=ForkRef(conversation_id="c", seq=point,
                                            hash=journal.hash_at("c", point)))
    if not parent.accepts(fork):
        return  # a fork point the lifecycle does not restart from
    child = Conversation.start(journal, fork)
    if child.builder.accepts(UserMessage.of("x")):
        child.append(UserMessage.of("and then?"))
    save_snapshot(journal, "f", open_builder(journal, "f"))
    assert Conversation.open(journal, "f").state == _full_fold(journal, "f")
    assert open_builder(journal, "f", 1).state() == _full_fold(journal, "f", 1)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Recording(ScriptedProvider):
    """A scripted provider that keeps every request it was sent."""

    def __init__(self, script) -> None:
        super().__init__(script)
        self.requests: list = []

    def complete(self, request):
        self.requests.append(request)
        return super().complete(request)


def _history(path, turns: int) -> None:
    with Journal(path) as journal:
        conv = Conversation.start(journal, ConversationStarted(
            conversation_id="c", provider="scripted", model="m", max_turns=1000))
        conv.append(UserMessage.of("go"))
        for t in range(1, turns + 1):
            call = ToolCall(id=f"call_{t}", name="add", arguments={"a": t, "b": 1})
            conv.append(ModelRequested(turn=t, digest="d", provider="scripted", model="m"),
                        ModelResponded(turn=t, parts=(Text(text=f"step {t}"), call),
                                       stop_reason="tool_use"),
                        ToolStarted(call_id=call.id, name="add", arguments=call.arguments),
                        ToolCompleted(call_id=call.id, name="add", success=True,
                                      content=str(t + 1)))
        conv.append(ModelRequested(turn=turns + 1, digest="d", provider="scripted", model="m"),
                    ModelResponded(turn=turns + 1, parts=(Text(text="done"),),
                                   stop_reason="end_turn"))


def _timeless(payload: str) -> dict:
    """An event's payload without its measured times (they differ run to run)."""
    return {k: v for k, v in json.loads(payload).items() if k not in ("latency_ms", "duration_ms")}


def test_lazy_bodies_send_the_same_requests_and_write_the_same_events(tmp_path):
    """The same continuation of the same history, opened with and without a snapshot:
    identical requests (every message, byte for byte) and identical events."""
    from turnlog.engine.loop import Loop

    runs = {}
    for name in ("folded", "from-snapshot"):
        path = tmp_path / f"{name}.db"
        _history(path, 30)
        with Journal(path) as journal:
            if name == "from-snapshot":
                assert save_snapshot(journal, "c", open_builder(journal, "c")) is not None
            provider = Recording([{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 1}}]},
                                  {"tool_calls": [{"name": "add", "arguments": {"a": 30, "b": 1}}]},
                                  {"text": "two"}])
            result = Loop(journal, provider, ToolRegistry([add])).send("c", "again")
            rows = [(e.type, _timeless(e.payload)) for e in journal.read("c", 125)]
            runs[name] = (provider.requests, result.status, rows,
                          journal.read_snapshot("c", snapshot_kind()) is not None)
    folded, lazy = runs["folded"], runs["from-snapshot"]
    assert lazy[3]  # the lazy run really opened from a snapshot
    assert lazy[:3] == folded[:3]
    assert len(lazy[0][0].messages) == 1 + 30 * 2 + 1 + 1  # every message of the history, and more


def test_a_journal_with_whole_state_snapshots_opens_from_its_events_then_saves_a_head(
        tmp_path, monkeypatch):
    """A journal written before heads (its snapshots hold whole states under the old kind):
    they are never read, and the next long open saves a head the open after it uses."""
    import zlib

    import msgspec

    import turnlog.engine.model.snapshots as snapshots

    path = tmp_path / "old.db"
    _history(path, 20)
    with Journal(path) as journal:
        whole = fold_stored(journal.lineage("c")).state()
        old_kind = "engine.state+zlib/" + snapshot_kind().rsplit("/", 1)[1]
        journal.write_snapshot("c", old_kind, whole.seq,
                               zlib.compress(msgspec.msgpack.encode(whole), 1))
        monkeypatch.setattr(snapshots, "SNAPSHOT_AFTER", 50)
        assert journal.read_snapshot("c", snapshot_kind()) is None
        assert Conversation.open(journal, "c").state == whole  # folded: 83 events
        head = journal.read_snapshot("c", snapshot_kind())
        assert head.seq == whole.seq and len(head.data) < 1000
        conv = Conversation.open(journal, "c")
        assert conv.builder.unset() == DEFERRED and conv.state == whole


class _Counting:
    """A journal whose ``lineage`` and ``read`` calls are counted (what an open reads)."""

    def __init__(self, journal: Journal) -> None:
        self.journal, self.lineages, self.rows = journal, 0, 0

    def lineage(self, *args, **kwargs):
        self.lineages += 1
        return self.journal.lineage(*args, **kwargs)

    def read(self, *args, **kwargs):
        for row in self.journal.read(*args, **kwargs):
            self.rows += 1
            yield row

    def __getattr__(self, name):
        return getattr(self.journal, name)


@_SETTINGS
@given(histories(), st.data())
def test_events_past_the_snapshot_are_folded_without_reading_the_history(events, data):
    """An open reads the snapshot, the events after it and those of the snapshot's own turn
    (since its last model response): no lineage, nothing of the bodies or gates held; the
    head is the full fold's, and what is read later is too."""
    journal = _journal_of(events, len(events))[0]
    at = data.draw(st.integers(1, len(events)), label="snapshot seq")
    save_snapshot(journal, "c", fold_stored(journal.lineage("c", at)))
    counting = _Counting(journal)
    builder = open_builder(counting, "c")  # type: ignore[arg-type]
    full = fold_stored(journal.lineage("c"))
    assert builder.head() == full.head()
    responded = [i + 1 for i, e in enumerate(events[:at]) if isinstance(e, ModelResponded)]
    if responded or at == len(events):  # else the tail's facts start before any response
        assert counting.lineages == 0 and set(builder.unset()) == set(DEFERRED)
        turn = at - responded[-1] + 1 if responded and at < len(events) else 0
        assert counting.rows == len(events) - at + turn  # the tail and the snapshot's turn
    assert builder.state() == full.state()


def test_a_tail_its_turn_cannot_gate_is_folded_with_every_fact_read():
    """A response that reuses a call id asked for approval in an earlier turn: the decision
    past the snapshot answers that earlier request, which the snapshot's turn does not hold;
    the open folds with the whole history instead, as the full fold does."""
    call = ToolCall(id="x", name="add", arguments={"a": 1, "b": 2})
    asked = ApprovalRequested(call_id="x", name="add", arguments_hash="h", spec_hash="s")
    events = [ConversationStarted(conversation_id="c", provider="scripted", model="m",
                                  max_turns=10), UserMessage.of("go"),
              ModelRequested(turn=1, digest="d", provider="scripted", model="m"),
              ModelResponded(turn=1, parts=(call,), stop_reason="tool_use"), asked,
              ToolCallRejected(call_id="x", name="add", reason="disabled", content="not now"),
              ModelRequested(turn=2, digest="d", provider="scripted", model="m"),
              ModelResponded(turn=2, parts=(call,), stop_reason="tool_use"),
              ApprovalDecided(call_id="x", decision="approve", approver="ann",
                              decided_at="2025-01-01T00:00:00Z", arguments_hash="h"),
              ToolStarted(call_id="x", name="add", arguments=call.arguments),
              ToolCompleted(call_id="x", name="add", success=True, content="3")]
    journal = _journal_of(events, len(events))[0]
    save_snapshot(journal, "c", fold_stored(journal.lineage("c", 8)))
    assert Conversation.open(journal, "c").state == fold_stored(journal.lineage("c")).state()
