"""diff: turn-by-turn comparison, rendering and the fork/diff CLI."""

from __future__ import annotations

from turnlog.engine.model.events import (
    ConversationCompleted,
    ConversationStarted,
    ModelRequested,
    ModelResponded,
    ToolCallRejected,
    ToolCompleted,
    UserMessage,
)
from turnlog.engine.model.messages import Text, ToolCall, Usage
from turnlog.journal import Journal
from turnlog.replay import diff, fork
from tests.conftest import FixedClock
from tests.replay.helpers import invoke, invoke_json, record


def conversation(cid: str, *, provider="openai", model="gpt", city="Paris", result="sunny",
                 final="Paris is sunny.", call_id="call_1", tokens=100):
    return [
        ConversationStarted(conversation_id=cid, provider=provider, model=model),
        UserMessage.of("Weather in Paris?"),
        ModelRequested(turn=1, digest="d1", provider=provider, model=model),
        ModelResponded(turn=1, parts=(ToolCall(id=call_id, name="get_weather",
                                               arguments={"city": city}),),
                       stop_reason="tool_use", provider=provider, model=model,
                       usage=Usage(input_tokens=tokens, output_tokens=10)),
        ToolCompleted(call_id=call_id, name="get_weather", success=True, content=result),
        ModelRequested(turn=2, digest="d2", provider=provider, model=model),
        ModelResponded(turn=2, parts=(Text(text=final),), provider=provider, model=model,
                       usage=Usage(input_tokens=tokens * 2, output_tokens=5)),
        ConversationCompleted(final_content=final),
    ]


def test_same_behaviour_with_other_ids_provider_and_usage_is_same(journal):
    record(journal, conversation("a"))
    record(journal, conversation("b", provider="anthropic", model="claude", call_id="toolu_9",
                                 tokens=140))
    d = diff(journal, "a", "b")
    assert d.same and [t.same for t in d.turns] == [True, True]
    assert d.turns[0].usage_delta["input_tokens"] == 40
    assert d.usage_delta["input_tokens"] == 120
    assert d.turns[0].a.provider == "openai" and d.turns[0].b.provider == "anthropic"
    assert d.cost_delta is None


def test_a_different_argument_result_or_answer_is_named_at_its_turn(journal):
    record(journal, conversation("a"))
    record(journal, conversation("b", city="Lyon", result="rain", final="Lyon is rainy."))
    d = diff(journal, "a", "b")
    assert not d.same
    assert d.turns[0].differences == ["calls"] and d.turns[1].differences == ["text"]
    assert d.final_content == ("Paris is sunny.", "Lyon is rainy.")
    text = d.render()
    assert "DIFFERENT: calls" in text and "Lyon" in text and text.endswith("DIFFERENT")


def test_a_rejected_call_differs_from_an_executed_one(journal):
    events = conversation("b")
    events[4] = ToolCallRejected(call_id="call_1", name="get_weather", reason="unrecorded",
                                 content="no recording")
    record(journal, conversation("a"))
    record(journal, events)
    d = diff(journal, "a", "b")
    assert d.turns[0].b.calls[0].outcome == "rejected:unrecorded"
    assert d.turns[0].differences == ["calls"]


def test_pricing_gives_cost_deltas(journal):
    record(journal, conversation("a"))
    record(journal, conversation("b", provider="anthropic", model="claude", tokens=200))
    per_token = {"gpt": 1e-6, "claude": 3e-6}
    d = diff(journal, "a", "b", price=lambda p, m, u: u.total_tokens * per_token[m])
    assert round(d.turns[0].cost_delta, 9) == round(210 * 3e-6 - 110 * 1e-6, 9)
    assert round(d.cost_delta, 9) == round((210 + 405) * 3e-6 - (110 + 205) * 1e-6, 9)


def test_a_fork_that_continues_differently_differs_only_after_the_fork_point(journal):
    record(journal, conversation("a"))
    fid = fork(journal, "a", 5, new_id="f")  # after the tool result
    from turnlog.engine.model.conversation import Conversation
    conv = Conversation.open(journal, fid)
    conv.append(ModelRequested(turn=2, digest="x", provider="openai", model="gpt"),
                ModelResponded(turn=2, parts=(Text(text="Sunny!"),), provider="openai",
                               model="gpt"),
                ConversationCompleted(final_content="Sunny!"))
    d = diff(journal, "a", fid)
    assert [t.same for t in d.turns] == [True, False]


def test_cli_fork_and_diff_json(db_path):
    with Journal(db_path, clock=FixedClock()) as journal:
        record(journal, conversation("a"))
    result, out = invoke_json("fork", "a", "--at", "5", "--model", "gpt-5", "--id", "f",
                              db=db_path)
    assert result.exit_code == 0, result.output
    assert out == {"conversation_id": "f", "parent": "a", "fork_seq": 5}
    result, out = invoke_json("diff", "a", "f", db=db_path)
    assert result.exit_code == 0 and out["same"] is False
    assert out["turns"][0]["same"] is True and out["turns"][1]["differences"] == ["missing in b"]
    result = invoke("diff", "a", "a", db=db_path)
    assert result.exit_code == 0 and result.stdout.rstrip().endswith("SAME")


def test_cli_fork_bad_seq_and_unknown_id_exit_2_with_the_reason(db_path):
    with Journal(db_path, clock=FixedClock()) as journal:
        record(journal, conversation("a"))
    result = invoke("fork", "a", "--at", "99", db=db_path)
    assert result.exit_code == 2 and "seqs 1..8" in result.stderr
    result = invoke("diff", "a", "zz", db=db_path)
    assert result.exit_code == 2 and "'zz'" in result.stderr


def test_every_replay_command_has_help_with_an_example():
    from turnlog.replay.cli import COMMANDS
    for command in COMMANDS:
        result = invoke(command.name, "--help")
        assert result.exit_code == 0 and "Example:" in result.stdout
