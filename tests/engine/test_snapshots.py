"""Opening from a snapshot gives exactly the state a full fold gives, and never trusts it over events."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from turnlog import testing as shipped

import turnlog.engine.model.snapshots as snapshots
from turnlog.engine.audit.views import VIEWS_EXTENSION
from turnlog.engine.model.conversation import Conversation, load_state
from turnlog.engine.model.events import (
    ApprovalDecided,
    ApprovalRequested,
    ConversationCompleted,
    ConversationStarted,
    ForkRef,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    RunInterrupted,
    ToolCallRejected,
    ToolCompleted,
    ToolStarted,
    UserMessage,
)
from turnlog.engine.model.machine import Lifecycle
from turnlog.engine.model.messages import Text, ToolCall, Usage
from turnlog.engine.model.snapshots import (
    check_snapshots,
    decode_state,
    encode_state,
    open_builder,
    save_snapshot,
    snapshot_kind,
)
from turnlog.engine.model.state import fold_stored
from turnlog.journal import Journal
from tests.pgcluster import fresh_url


@st.composite
def histories(draw):
    """A valid conversation: runs of turns with tool calls run, refused, approved, retried."""
    events = [ConversationStarted(conversation_id="c", provider="scripted", model="m",
                                  max_turns=1000)]
    turn = 0
    words = shipped.texts()
    calls: list | bool = True
    for run in range(draw(st.integers(1, 3))):
        events.append(UserMessage.of(draw(words)))
        for _ in range(draw(st.integers(0, 3))):
            turn += 1
            if draw(st.booleans()):  # a failed attempt, then its retry
                events += [ModelRequested(turn=turn, digest="d", provider="scripted", model="m"),
                           ModelFailed(turn=turn, error_type="rate_limit", message="429",
                                       retryable=True)]
                attempt = 2
            else:
                attempt = 1
            calls = [ToolCall(id=f"call_{turn}_{i}", name=draw(st.sampled_from(["add", "get"])),
                              arguments=draw(shipped.argument_dicts(max_size=2, max_leaves=3)))
                     for i in range(draw(st.integers(0, 3)))]
            usage = Usage(input_tokens=draw(st.integers(0, 99)), output_tokens=draw(st.integers(0, 9)))
            events += [ModelRequested(turn=turn, digest="d", provider="scripted", model="m",
                                      attempt=attempt),
                       ModelResponded(turn=turn, parts=(Text(text=draw(words)), *calls),
                                      stop_reason="tool_use" if calls else "end_turn", usage=usage)]
            for call in calls:
                events += _answer(call, draw(st.sampled_from(["run", "fail", "duplicate", "approved"])))
            if not calls:  # a plain answer ends the run
                break
        else:
            calls = True
        if not calls:
            if draw(st.booleans()):
                events.append(ConversationCompleted(final_content="done"))
        elif draw(st.booleans()):
            turn += 1
            events += [ModelRequested(turn=turn, digest="d", provider="scripted", model="m"),
                       ModelResponded(turn=turn, parts=(Text(text="done"),), stop_reason="end_turn"),
                       ConversationCompleted(final_content="done")]
        elif draw(st.booleans()):
            events.append(RunInterrupted())
    return events


def _answer(call: ToolCall, how: str) -> list:
    if how == "duplicate":
        return [ToolCallRejected(call_id=call.id, name=call.name, reason="duplicate",
                                 content="refused: a repeat")]
    asked = []
    if how == "approved":
        asked = [ApprovalRequested(call_id=call.id, name=call.name, arguments_hash="h", spec_hash="s"),
                 ApprovalDecided(call_id=call.id, decision="approve", approver="ann",
                                 decided_at="2025-01-01T00:00:00Z", arguments_hash="h")]
    return [*asked, ToolStarted(call_id=call.id, name=call.name, arguments=call.arguments),
            ToolCompleted(call_id=call.id, name=call.name, success=how != "fail",
                          content="ok" if how != "fail" else "boom", data={"n": 1})]


def _journal(events) -> Journal:
    journal = Journal(":memory:")
    Conversation.start(journal, events[0], rest=events[1:])
    return journal


def _full_fold(journal, conversation_id="c", to_seq=None):
    return fold_stored(journal.lineage(conversation_id, to_seq)).state()


def _full_head(journal, conversation_id="c", to_seq=None):
    """What a snapshot holds: the fold's head, without bodies or gates."""
    return fold_stored(journal.lineage(conversation_id, to_seq)).head()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.data())
def test_opening_from_a_snapshot_at_any_seq_equals_the_full_fold(events, data):
    journal = _journal(events)
    at = data.draw(st.integers(1, len(events)), label="snapshot seq")
    save_snapshot(journal, "c", fold_stored(journal.lineage("c", at)))
    assert journal.read_snapshot("c", snapshot_kind()).seq == at

    assert open_builder(journal, "c").state() == _full_fold(journal)
    upto = data.draw(st.integers(1, len(events)), label="to_seq")
    assert load_state(journal, "c", upto) == _full_fold(journal, to_seq=upto)
    assert check_snapshots(journal) == []


@settings(max_examples=60, deadline=None)
@given(histories())
def test_a_state_survives_its_snapshot_bytes_unchanged(events):
    state = _full_fold(_journal(events))
    assert decode_state(encode_state(state)) == state


def test_a_fork_opens_from_its_own_snapshot_over_its_parents_prefix():
    parent = [ConversationStarted(conversation_id="p", provider="scripted", model="m"),
              UserMessage.of("one"),
              ModelRequested(turn=1, digest="d", provider="scripted", model="m"),
              ModelResponded(turn=1, parts=(Text(text="a"),), stop_reason="end_turn"),
              ConversationCompleted(final_content="a")]
    journal = _journal(parent)
    save_snapshot(journal, "p", open_builder(journal, "p"))
    fork = Conversation.start(journal, ConversationStarted(
        conversation_id="f", provider="scripted", model="m",
        fork=ForkRef(conversation_id="p", seq=5, hash=journal.hash_at("p", 5))))
    fork.append(UserMessage.of("two"))
    save_snapshot(journal, "f", open_builder(journal, "f"))
    fork.append(ModelRequested(turn=2, digest="d", provider="scripted", model="m"))

    state = open_builder(journal, "f").state()
    assert state == _full_fold(journal, "f")
    assert [m.role for m in state.messages] == ["user", "assistant", "user"]
    assert check_snapshots(journal) == []


def _long(n_turns: int) -> list:
    events = [ConversationStarted(conversation_id="c", provider="scripted", model="m",
                                  max_turns=10**6), UserMessage.of("go")]
    for t in range(1, n_turns + 1):
        call = ToolCall(id=f"c{t}", name="add", arguments={"a": t})
        events += [ModelRequested(turn=t, digest="d", provider="scripted", model="m"),
                   ModelResponded(turn=t, parts=(call,), stop_reason="tool_use"),
                   ToolStarted(call_id=call.id, name="add", arguments=call.arguments),
                   ToolCompleted(call_id=call.id, name="add", success=True, content=str(t))]
    return events


def _no_refold(rows, builder=None):
    """``fold_stored`` that fails when asked to fold a history from its start (an open from a
    snapshot folds only the events after it; what gates tools is read, not folded)."""
    if builder is None:
        pytest.fail("refolded the history")
    return fold_stored(rows, builder)


def test_an_open_that_folds_many_events_saves_a_snapshot_the_next_open_uses(tmp_path, monkeypatch):
    path = tmp_path / "j.db"
    with Journal(path) as journal:
        Conversation.start(journal, (events := _long(80))[0], rest=events[1:])
        assert journal.read_snapshot("c", snapshot_kind()) is None
        monkeypatch.setattr(snapshots, "SNAPSHOT_AFTER", 100)
        Conversation.open(journal, "c")
        saved = journal.read_snapshot("c", snapshot_kind())
        assert saved.seq == len(events)

    with Journal(path) as journal:
        monkeypatch.setattr(snapshots, "fold_stored", _no_refold)
        conv = Conversation.open(journal, "c")  # the open folds nothing before the snapshot
        assert conv.builder.lifecycle is Lifecycle.AWAITING_MODEL
        monkeypatch.setattr(snapshots, "fold_stored", fold_stored)
        assert conv.state == _full_fold(Journal(path, readonly=True))  # bodies read on demand
        conv.append(UserMessage.of("more"))  # a writer opened from a snapshot appends on
        assert conv.last_seq == len(events) + 1

    with Journal(path) as journal:  # few events past the snapshot: folded, none saved
        Conversation.open(journal, "c")
        assert journal.read_snapshot("c", snapshot_kind()).seq == len(events)


def test_a_read_only_open_never_writes_a_snapshot(tmp_path, monkeypatch):
    path = tmp_path / "j.db"
    with Journal(path) as journal:
        Conversation.start(journal, (events := _long(10))[0], rest=events[1:])
    monkeypatch.setattr(snapshots, "SNAPSHOT_AFTER", 1)
    before = path.read_bytes()
    with Journal(path, readonly=True) as reader:
        assert load_state(reader, "c").turn_count == 10
    assert path.read_bytes() == before


@pytest.mark.parametrize("data", [b"\x00not msgpack", encode_state(
    _full_fold(_journal(_long(1))))])
def test_snapshot_bytes_that_are_not_this_state_are_ignored(data):
    journal = _journal(_long(3))
    # garbage, or a real state of another seq: either way the events decide
    journal.write_snapshot("c", snapshot_kind(), journal.last_seq("c"), data)
    assert load_state(journal, "c") == _full_fold(journal)


def test_a_snapshot_of_another_state_shape_is_not_read():
    journal = _journal(_long(3))
    journal.write_snapshot("c", "engine.state/0000000000000000", 6,
                           encode_state(_full_fold(journal, to_seq=6)))
    assert snapshots._from_snapshot(journal, "c", None) is None
    assert load_state(journal, "c") == _full_fold(journal)


def _forge(journal, conversation_id="c"):
    """Save a well-formed state that the events do not give: its turn count and answer edited."""
    real = _full_head(journal, conversation_id)
    forged = real.__class__(**{**{f: getattr(real, f) for f in real.__struct_fields__},
                               "final_content": "forged", "turn_count": 99})
    journal.write_snapshot(conversation_id, snapshot_kind(), real.seq, encode_state(forged))


def test_verify_refolds_saved_states_and_reports_a_forged_one(tmp_path):
    path = tmp_path / "j.db"
    with Journal(path, extensions=[VIEWS_EXTENSION]) as journal:
        Conversation.start(journal, (events := _long(3))[0], rest=events[1:])
        save_snapshot(journal, "c", fold_stored(journal.lineage("c", 10)))
        assert journal.verify().ok
        _forge(journal)  # a newer row: the snapshot read
        report = journal.verify()
        assert not report.ok and report.first_bad is None
        [found] = report.projections
        assert (found.extension, found.object, found.stream_id) == ("engine.state", "snapshots", "c")
        assert found.reason.endswith("seq 14 differs from the fold of its events in "
                                     "turn_count, final_content")
        assert journal.verify("c").projections == (found,)


def test_verify_reports_snapshot_bytes_that_are_no_state(tmp_path):
    with Journal(tmp_path / "j.db", extensions=[VIEWS_EXTENSION]) as journal:
        Conversation.start(journal, (events := _long(1))[0], rest=events[1:])
        journal.write_snapshot("c", snapshot_kind(), 3, b"\x93junk")
        [found] = journal.verify().projections
        assert "not a conversation state" in found.reason


def test_the_cli_verify_names_a_forged_snapshot(tmp_path):
    from click.testing import CliRunner

    from turnlog.engine.cli import cli

    path = tmp_path / "j.db"
    with Journal(path, extensions=[VIEWS_EXTENSION]) as journal:
        Conversation.start(journal, (events := _long(2))[0], rest=events[1:])
        _forge(journal)
    result = CliRunner().invoke(cli, ["verify", "--db", str(path)])
    assert result.exit_code == 1, result.output
    assert "FORGED PROJECTION: snapshots conversation 'c'" in result.output


def test_snapshots_on_postgresql_open_and_verify_alike():
    with Journal.open(fresh_url(), extensions=[VIEWS_EXTENSION]) as journal:
        Conversation.start(journal, (events := _long(5))[0], rest=events[1:])
        save_snapshot(journal, "c", fold_stored(journal.lineage("c", 10)))
        assert open_builder(journal, "c").state() == _full_fold(journal)
        assert journal.verify().ok
        _forge(journal)
        assert [m.object for m in journal.verify().projections] == ["snapshots"]


def test_a_snapshot_table_edit_that_moves_its_seq_hides_it(tmp_path):
    path = tmp_path / "j.db"
    with Journal(path) as journal:
        Conversation.start(journal, (events := _long(3))[0], rest=events[1:])
        save_snapshot(journal, "c", open_builder(journal, "c"))
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER snapshots_refuse_update")
    conn.execute("UPDATE snapshots SET seq = 5")
    conn.commit()
    conn.close()
    with Journal(path) as journal:
        assert journal.read_snapshot("c", snapshot_kind()) is None
        assert load_state(journal, "c") == _full_fold(journal)


def _script(turns: int) -> list:
    return [{"tool_calls": [{"name": "add", "arguments": {"a": t, "b": 1}}]}
            for t in range(turns)] + [{"text": "done"}]


@pytest.mark.usefixtures("both_loops")
def test_a_run_that_writes_many_events_ends_by_saving_a_snapshot(tmp_path, monkeypatch):
    import turnlog.engine.loop  # its Loop is the async one in the "async" run (both_loops)
    from turnlog.engine.demo import demo_tools
    from turnlog.engine.providers.scripted import ScriptedProvider

    monkeypatch.setattr(snapshots, "SNAPSHOT_AFTER", 40)
    with Journal(tmp_path / "j.db") as journal:
        loop = turnlog.engine.loop.Loop(journal, ScriptedProvider(_script(3)), demo_tools())
        loop.start("short", conversation_id="c", max_turns=100)
        assert journal.read_snapshot("c", snapshot_kind()) is None  # 15 events: not due

        loop.provider = ScriptedProvider(_script(12))
        result = loop.send("c", "long")  # 15 + 50 events: due
        saved = journal.read_snapshot("c", snapshot_kind())
        assert saved.seq == journal.last_seq("c") and result.status == "completed"
        assert decode_state(saved.data) == _full_head(journal)

        refolds = []

        def counted(rows, builder=None):
            if builder is None:
                refolds.append(1)
            return fold_stored(rows, builder)

        monkeypatch.setattr(snapshots, "fold_stored", counted)
        loop.provider = ScriptedProvider([{"text": "again"}])
        assert loop.send("c", "more").final_content == "again"  # opened from the snapshot
        assert refolds == [1]  # the request's messages read from the events, once


def _tool_run(journal, result, turns: int = 12):
    """A loop run of ``turns`` calls of a tool that returns ``{"v": result}``."""
    import turnlog.engine.loop
    from turnlog.engine.providers.scripted import ScriptedProvider
    from turnlog.engine.tools import ToolRegistry, tool

    @tool
    def lookup(a: int) -> object:
        """Return the value under test."""
        return {"v": result}

    script = [{"tool_calls": [{"name": "lookup", "arguments": {"a": t}}]} for t in range(turns)]
    loop = turnlog.engine.loop.Loop(journal, ScriptedProvider([*script, {"text": "done"}]),
                            ToolRegistry([lookup]))
    return loop.start("go", conversation_id="c", max_turns=100)


@pytest.mark.usefixtures("both_loops")
def test_a_result_msgpack_cannot_hold_stays_in_its_event_and_never_fails_a_run_or_an_open(
        tmp_path, monkeypatch):
    monkeypatch.setattr(snapshots, "SNAPSHOT_AFTER", 40)
    with Journal(tmp_path / "j.db", extensions=[VIEWS_EXTENSION]) as journal:
        assert _tool_run(journal, 2**64 + 1).status == "completed"  # beyond MessagePack's ints
        # the snapshot holds no result, so it saves; the result is read from its event
        assert journal.read_snapshot("c", snapshot_kind()).seq == journal.last_seq("c")
        assert Conversation.open(journal, "c").state == _full_fold(journal)
        assert load_state(journal, "c").tool_execution_results[-1].data == {"v": 2**64 + 1}
        assert journal.verify().ok


def test_a_head_msgpack_cannot_hold_is_never_saved():
    journal = _journal(_long(2))
    builder = open_builder(journal, "c")
    builder.metadata = {"n": 2**64 + 1}  # beyond MessagePack's ints
    assert save_snapshot(journal, "c", builder) is None


@pytest.mark.usefixtures("both_loops")
def test_a_run_ends_by_saving_the_fold_of_its_stored_events_not_its_live_state(
        tmp_path, monkeypatch):
    # the live state holds nan; the journal's JSON stores null, as every later open reads it
    monkeypatch.setattr(snapshots, "SNAPSHOT_AFTER", 40)
    with Journal(tmp_path / "j.db", extensions=[VIEWS_EXTENSION]) as journal:
        assert _tool_run(journal, float("nan")).status == "completed"
        saved = journal.read_snapshot("c", snapshot_kind())
        assert saved.seq == journal.last_seq("c")
        assert decode_state(saved.data) == _full_head(journal)
        assert journal.verify().ok


def test_an_open_up_to_an_earlier_seq_never_replaces_the_snapshot(monkeypatch):
    monkeypatch.setattr(snapshots, "SNAPSHOT_AFTER", 8)
    journal = _journal(_long(6))
    open_builder(journal, "c")
    head = journal.read_snapshot("c", snapshot_kind())
    assert head.seq == journal.last_seq("c")
    for upto in (head.seq - 1, 12, 3):
        assert load_state(journal, "c", upto) == _full_fold(journal, "c", upto)
        assert journal.read_snapshot("c", snapshot_kind()) == head
    Conversation.start(journal, ConversationStarted(
        conversation_id="f", provider="scripted", model="m",
        fork=ForkRef(conversation_id="c", seq=12, hash=journal.hash_at("c", 12))))
    assert journal.read_snapshot("c", snapshot_kind()) == head


def test_verify_reports_a_snapshot_whose_events_no_longer_decode_instead_of_raising(tmp_path):
    path = tmp_path / "j.db"
    with Journal(path, extensions=[VIEWS_EXTENSION]) as journal:
        Conversation.start(journal, (events := _long(3))[0], rest=events[1:])
        save_snapshot(journal, "c", open_builder(journal, "c"))
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER events_refuse_update")
    conn.execute("""UPDATE events SET payload = '{"type":"model_responded"}' WHERE seq = 4""")
    conn.commit()
    conn.close()
    with Journal(path, extensions=[VIEWS_EXTENSION]) as journal:
        report = journal.verify()
    assert not report.ok and report.first_bad.seq == 4
    [found] = [m for m in report.projections if m.object == "snapshots"]
    assert "cannot be checked: its events no longer fold" in found.reason
    assert "seq 4" in found.reason


def test_a_snapshot_copied_from_another_conversation_is_never_used(tmp_path):
    path = tmp_path / "j.db"
    with Journal(path) as journal:
        for cid in ("c", "d"):
            events = _long(3)
            events[0] = ConversationStarted(conversation_id=cid, provider="scripted", model="m",
                                            max_turns=10**6)
            events[-1] = ToolCompleted(call_id="c3", name="add", success=True, content=cid)
            Conversation.start(journal, events[0], rest=events[1:])
        save_snapshot(journal, "c", open_builder(journal, "c"))
    conn = sqlite3.connect(path)  # d's row gets c's state, with d's own seq and hash
    conn.execute("INSERT INTO snapshots SELECT 'd', s.kind, s.seq, e.hash, s.data FROM snapshots s "
                 "JOIN events e ON e.stream_id = 'd' AND e.seq = s.seq")
    conn.commit()
    conn.close()
    with Journal(path) as journal:
        assert journal.read_snapshot("d", snapshot_kind()) is not None
        assert load_state(journal, "d") == _full_fold(journal, "d")
        assert load_state(journal, "d").conversation_id == "d"


def test_a_forged_duplicate_rule_in_a_snapshot_is_neither_imported_nor_obeyed(tmp_path, monkeypatch):
    """The duplicate rule gates a side effect (a repeated call is refused): a writer's open
    takes it from the events; a forged snapshot naming any callable imports nothing."""
    from turnlog.engine.model.events import DuplicatePolicy
    from turnlog.engine.loop import Loop
    from turnlog.engine.providers.scripted import ScriptedProvider
    from turnlog.engine.tools import tool

    @tool
    def add(a: int, b: int) -> dict:
        """Add."""
        return {"sum": a + b}

    call = {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}
    with Journal(tmp_path / "j.db") as journal:
        loop = Loop(journal, ScriptedProvider([call, {"text": "5"}]), [add])
        loop.start("2 + 3?", conversation_id="c", mode="chat")
        real = _full_fold(journal, "c")
        forged = real.__class__(**{**{f: getattr(real, f) for f in real.__struct_fields__},
                                   "duplicate_policy": DuplicatePolicy(rule="custom",
                                                                       custom="builtins:print")})
        journal.write_snapshot("c", snapshot_kind(), real.seq, encode_state(forged))
        monkeypatch.setattr("builtins.print", lambda *a, **k: pytest.fail("imported the forgery"))
        loop.provider = ScriptedProvider([call, {"text": "done"}])
        loop.send("c", "again?")
        types = [row.type for row in journal.read("c")][real.seq:]
        assert "tool_call_rejected" in types and types.count("tool_started") == 0


def test_the_gates_read_from_events_are_the_folds_own(tmp_path):
    """On an untouched journal, what a writer's open reads from the events (approvals, calls
    started and pending, the duplicate rule and its record of calls) equals the fold."""
    from turnlog.engine.demo import DEMO_PROMPT, DEMO_SCRIPT, demo_tools
    from turnlog.engine.loop import Loop
    from turnlog.engine.providers.scripted import ScriptedProvider
    from turnlog.engine.model.snapshots import gates_from_events

    with Journal(tmp_path / "j.db") as journal:
        Loop(journal, ScriptedProvider(DEMO_SCRIPT), demo_tools()).start(DEMO_PROMPT,
                                                                          conversation_id="c")
        real = _full_fold(journal, "c")
        assert real.call_count > 0 and real.call_index
        assert gates_from_events(journal, real) == real
