"""Deterministic replay's machinery (recorded provider, recorded tools, event checks, forks),
driven by a minimal loop so it is tested apart from engine's loop."""

from __future__ import annotations

import msgspec
import pytest

from turnlog.engine.model.events import ConversationStarted, DuplicatePolicy, ToolSpec
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.journal import Journal
from turnlog.replay import Divergence, fork
from turnlog.replay.deterministic import replay
from turnlog.replay.recorded import RecordedTools
from tests.conftest import FixedClock
from tests.replay import miniloop

TURNS = [
    {"text": "Checking.", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}},
                                         {"name": "get_weather", "arguments": {"city": "Oslo"}}]},
    {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
    {"tool_calls": [{"name": "add", "arguments": {"b": 3, "a": 2.0}}]},  # a duplicate
    {"text": "Paris is sunny and 2 + 3 = 5."},
]


def started(cid="c1", **kw) -> ConversationStarted:
    return ConversationStarted(conversation_id=cid, provider="scripted", model="m",
                               system="Be brief.", tools=(ToolSpec(name="get_weather"),
                                                          ToolSpec(name="add")), **kw)


@pytest.fixture
def recorded(journal):
    miniloop.record(journal, started(), ["Weather in Paris, and 2 + 3?"], ScriptedProvider(TURNS))
    return journal


def test_a_recorded_conversation_replays_without_divergence(recorded):
    result = replay(recorded, "c1", driver=miniloop.driver)
    assert result.ok and result.checked == recorded.last_seq("c1") and result.divergence is None


def test_a_changed_tool_result_diverges_at_that_results_seq(recorded):
    class Changed(RecordedTools):
        def result(self, call):
            done = super().result(call)
            return msgspec.structs.replace(done, content="changed") if call.name == "add" else done

    def driver(scratch, rec, provider, tools):
        miniloop.driver(scratch, rec, provider, Changed(rec))

    seq = next(s for s, e in recorded_events(recorded) if e.type == "tool_completed"
               and e.name == "add")
    result = replay(recorded, "c1", driver=driver, collect=True)
    assert not result.ok and result.divergence.seq == seq
    assert result.divergence.expected["content"] != "changed"
    assert result.divergence.actual["content"] == "changed"
    with pytest.raises(Divergence, match=f"seq {seq}"):
        replay(recorded, "c1", driver=driver)


def test_a_changed_duplicate_policy_diverges_where_the_duplicate_was_refused(recorded):
    def driver(scratch, rec, provider, tools):
        miniloop.driver(scratch, rec, provider, tools, configure=lambda s: msgspec.structs.replace(
            s, duplicate_policy=DuplicatePolicy(rule="off")))

    # the started event itself records the policy: the change shows at seq 1
    result = replay(recorded, "c1", driver=driver, collect=True)
    assert result.divergence.seq == 1
    assert "duplicate_policy" not in result.divergence.expected  # the default policy
    assert result.divergence.actual["duplicate_policy"] == {"rule": "off"}


def test_a_changed_duplicate_rule_in_code_diverges_at_the_refusal(recorded, monkeypatch):
    from turnlog.engine.model.state import StateBuilder
    monkeypatch.setattr(StateBuilder, "is_duplicate", lambda self, name, args: False)
    seq = next(s for s, e in recorded_events(recorded) if e.type == "tool_call_rejected")
    result = replay(recorded, "c1", driver=miniloop.driver, collect=True)
    assert result.divergence.seq == seq
    assert result.divergence.expected["type"] == "tool_call_rejected"
    assert result.divergence.actual["type"] == "tool_started"


def test_a_changed_directive_gives_a_digest_miss_with_a_request_diff(recorded):
    from turnlog.replay.recorded import RecordedProvider

    class Rewording(RecordedProvider):
        def complete(self, request):
            return super().complete(msgspec.structs.replace(request, system="Be verbose."))

    def driver(scratch, rec, provider, tools):
        miniloop.driver(scratch, rec, Rewording(rec), tools)

    result = replay(recorded, "c1", driver=driver, collect=True)
    d = result.divergence
    assert d.seq == 3 and d.expected["type"] == "model_requested"
    assert d.expected["digest"] != d.actual["digest"]
    assert '-  "system": "Be brief.",' in d.request_diff.splitlines()
    assert '+  "system": "Be verbose.",' in d.request_diff.splitlines()
    assert "Be verbose." in d.render()


def test_a_fork_replays_over_its_parents_prefix(recorded):
    fork(recorded, "c1", 2, new_id="f1", message="And Lyon?")
    # the fork continues live with another script, then replays against its own recording
    from turnlog.engine.model.conversation import Conversation
    conv = Conversation.open(recorded, "f1")
    miniloop.run(conv, ScriptedProvider([
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Lyon"}}]},
        {"text": "Lyon is sunny."}]), miniloop.demo_tools)
    assert recorded.verify().ok
    result = replay(recorded, "f1", driver=miniloop.driver, collect=True)
    assert result.ok and result.checked == recorded.last_seq("f1")


def test_an_unfinished_recording_replays_up_to_its_last_event(db_path):
    with Journal(db_path, clock=FixedClock()) as journal:
        # the script runs out on turn 2: the model fails and the run ends failed
        miniloop.record(journal, started(), ["hi"], ScriptedProvider(TURNS[:1]))
        result = replay(journal, "c1", driver=miniloop.driver)
        assert result.ok and journal.stream("c1").events == result.checked


def test_a_rerun_that_stops_early_diverges_at_the_first_missing_event(recorded):
    def driver(scratch, rec, provider, tools):
        from turnlog.engine.model.conversation import Conversation
        Conversation.start(scratch, rec.started)

    result = replay(recorded, "c1", driver=driver, collect=True)
    assert result.divergence.seq == 2 and result.divergence.actual is None
    assert "stopped before" in result.divergence.reason


def recorded_events(journal):
    from turnlog.replay.rebuild import own_events
    return [(row.seq, event_ns(event)) for row, event in own_events(journal, "c1")]


def event_ns(event):
    from types import SimpleNamespace
    return SimpleNamespace(type=event.__struct_config__.tag, **{
        f: getattr(event, f) for f in event.__struct_fields__})


def test_replay_all_reports_every_conversation_and_records_the_run(recorded, db_path):
    from turnlog.replay.reports import latest_report, replay_all
    miniloop.record(recorded, started("c2"), ["again"], ScriptedProvider(TURNS[3:]))
    report = replay_all(recorded, driver=miniloop.driver)
    assert report.ok and [r.conversation_id for r in report.results] == ["c1", "c2"]
    rows = latest_report(str(db_path))
    assert [(r["conversation_id"], r["ok"], r["divergence_seq"]) for r in rows] == [("c1", 1, None),
                                                                        ("c2", 1, None)]
    assert recorded.verify().ok  # the report table is beside the events, never in them


def test_replay_all_collects_divergences_and_the_latest_run_wins(recorded, db_path, monkeypatch):
    from turnlog.engine.model.state import StateBuilder
    from turnlog.replay.reports import latest_report, replay_all
    replay_all(recorded, driver=miniloop.driver)
    monkeypatch.setattr(StateBuilder, "is_duplicate", lambda self, name, args: False)
    report = replay_all(recorded, driver=miniloop.driver)
    assert not report.ok and [r.conversation_id for r in report.divergences] == ["c1"]
    [row] = latest_report(str(db_path))
    assert row["ok"] == 0 and row["divergence_seq"] == report.divergences[0].divergence.seq
    assert row["run_id"] == report.run_id
