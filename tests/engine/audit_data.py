"""A small journal of varied conversations for the audit, view, show and tail tests.

Built only through ``Conversation.append`` (the library), with fixed timestamps,
so tests can compute the expected figures independently from the raw events.
"""

from __future__ import annotations

from turnlog.journal import Journal

from turnlog.engine.model.conversation import Conversation
from turnlog.engine.model.events import (
    ConversationCompleted,
    ConversationFailed,
    ConversationStarted,
    ForkRef,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ReplayRef,
    ToolCallRejected,
    ToolCompleted,
    ToolStarted,
    TurnLimitReached,
    UserMessage,
)
from turnlog.engine.model.messages import Text, ToolCall, Usage

PRICES = """
currency = "USD"
per_tokens = 1_000_000

[[prices]]
provider = "openai"
model = "gpt-4o"
since = 2024-01-01
input = 5.0
cached_input = 2.5
output = 15.0

[[prices]]
provider = "openai"
model = "gpt-4o"
since = 2025-01-01
input = 2.5
cached_input = 1.25
output = 10.0

[[prices]]
provider = "anthropic"
model = "claude-x"
since = 2025-01-01
input = 3.0
cached_input = 0.3
output = 15.0
"""


class _Writer:
    """Appends events one day-stamped transaction at a time."""

    def __init__(self, journal: Journal, started: ConversationStarted, day: str) -> None:
        self.day, self.tick = day, 0
        self.conv = Conversation.start(journal, started, recorded_at=self.stamp())

    def stamp(self) -> str:
        self.tick += 1
        return f"{self.day}T10:00:{self.tick:02d}.000000Z"

    def __call__(self, *events):
        return self.conv.append(*events, recorded_at=[self.stamp() for _ in events])

    def turn(self, turn: int, *parts, usage: Usage, provider="", model="", stop="end_turn"):
        self(ModelRequested(turn=turn, digest="d", provider=provider, model=model),
             ModelResponded(turn=turn, parts=tuple(parts), usage=usage, provider=provider,
                            model=model, stop_reason=stop))


def _tool(w: _Writer, call_id: str, name: str, args: dict, ok: bool, ms: float, content: str):
    w(ToolStarted(call_id=call_id, name=name, arguments=args),
      ToolCompleted(call_id=call_id, name=name, success=ok, content=content,
                    error=None if ok else content, duration_ms=ms))


def build(journal: Journal) -> None:
    """done, old, fail, halt, active, mystery, plus a fork of done and a replay of done."""
    # completed, openai/gpt-4o: a tool success, a tool failure, a prevented duplicate
    w = _Writer(journal, ConversationStarted(conversation_id="done", provider="openai",
                                             model="gpt-4o", system="Be brief."), "2025-03-01")
    w(UserMessage.of("Weather in Paris and 2+3?"))
    w.turn(1, Text(text="Let me check."),
           ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"}),
           ToolCall(id="c2", name="add", arguments={"a": 2, "b": "x"}),
           usage=Usage(input_tokens=1000, output_tokens=100, cached_input_tokens=400),
           provider="openai", model="gpt-4o", stop="tool_use")
    _tool(w, "c1", "get_weather", {"city": "Paris"}, True, 10.0, '{"forecast":"sunny"}')
    _tool(w, "c2", "add", {"a": 2, "b": "x"}, False, 30.0, "b is not a number")
    w.turn(2, ToolCall(id="c3", name="get_weather", arguments={"city": "Paris"}),
           usage=Usage(input_tokens=1200, output_tokens=20), provider="openai", model="gpt-4o",
           stop="tool_use")
    w(ToolCallRejected(call_id="c3", name="get_weather", reason="duplicate",
                       content="You already called get_weather with these arguments."))
    w.turn(3, Text(text="Paris is sunny."), usage=Usage(input_tokens=1300, output_tokens=50),
           provider="openai", model="gpt-4o")
    w(ConversationCompleted(final_content="Paris is sunny."))

    # completed long ago, same model: priced at the old rate
    w = _Writer(journal, ConversationStarted(conversation_id="old", provider="openai",
                                             model="gpt-4o"), "2024-06-01")
    w(UserMessage.of("hi"))
    w.turn(1, Text(text="hello"), usage=Usage(input_tokens=2000, output_tokens=1000),
           provider="openai", model="gpt-4o")
    w(ConversationCompleted(final_content="hello"))

    # failed, anthropic: two model failures
    w = _Writer(journal, ConversationStarted(conversation_id="fail", provider="anthropic",
                                             model="claude-x"), "2025-03-02")
    w(UserMessage.of("hello?"))
    w(ModelRequested(turn=1, digest="d", provider="anthropic", model="claude-x"),
      ModelFailed(turn=1, error_type="RateLimitError", message="slow down", status=429))
    w(ModelRequested(turn=1, digest="d", provider="anthropic", model="claude-x"),
      ModelFailed(turn=1, error_type="ServerError", message="overloaded", status=529))
    w(ConversationFailed(error="ServerError: overloaded", error_type="ServerError"))

    # halted at the turn limit, anthropic: an unknown tool refused, a slow tool
    w = _Writer(journal, ConversationStarted(conversation_id="halt", provider="anthropic",
                                             model="claude-x", max_turns=2), "2025-03-03")
    w(UserMessage.of("wait around"))
    w.turn(1, ToolCall(id="h1", name="teleport", arguments={}),
           usage=Usage(input_tokens=500, output_tokens=10, cached_input_tokens=100),
           provider="anthropic", model="claude-x", stop="tool_use")
    w(ToolCallRejected(call_id="h1", name="teleport", reason="unknown",
                       content="There is no tool named teleport."))
    w.turn(2, ToolCall(id="h2", name="wait", arguments={"seconds": 1}),
           usage=Usage(input_tokens=600, output_tokens=10), provider="anthropic",
           model="claude-x", stop="tool_use")
    _tool(w, "h2", "wait", {"seconds": 1}, True, 1000.0, '{"slept":1}')
    w(TurnLimitReached(turn_count=2, max_turns=2, warning="max turns (2) reached"))

    # still active: started, asked, nothing answered yet
    w = _Writer(journal, ConversationStarted(conversation_id="active", provider="openai",
                                             model="gpt-4o-mini"), "2025-03-04")
    w(UserMessage.of("anyone?"))

    # a model nobody priced
    w = _Writer(journal, ConversationStarted(conversation_id="mystery", provider="acme",
                                             model="m1"), "2025-03-05")
    w(UserMessage.of("hi"))
    w.turn(1, Text(text="hi"), usage=Usage(input_tokens=10, output_tokens=5))
    w(ConversationCompleted(final_content="hi"))

    # a fork of "done" after its first tool results (seq 8), continued with anthropic
    w = _Writer(journal, ConversationStarted(
        conversation_id="fork", provider="anthropic", model="claude-x",
        fork=ForkRef(conversation_id="done", seq=8, hash=journal.hash_at("done", 8))),
        "2025-03-06")
    w.turn(2, Text(text="Sunny in Paris."), usage=Usage(input_tokens=300, output_tokens=30),
           provider="anthropic", model="claude-x")
    w(ConversationCompleted(final_content="Sunny in Paris."))

    # a provider-swap replay of "done" that is still waiting for the model
    w = _Writer(journal, ConversationStarted(
        conversation_id="replay", provider="anthropic", model="claude-x",
        replay_of=ReplayRef(conversation_id="done")), "2025-03-07")
    w(UserMessage.of("Weather in Paris and 2+3?"))
