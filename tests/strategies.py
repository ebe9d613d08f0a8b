"""Hypothesis strategies for events and their parts, shared by the test suite."""

from __future__ import annotations

from hypothesis import strategies as st

from engine.events import (
    ConversationCompleted,
    ConversationFailed,
    ConversationHalted,
    ConversationStarted,
    DirectiveLayer,
    DuplicatePolicy,
    ForkRef,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ReplayRef,
    ToolCallRejected,
    ToolCompleted,
    ToolSpec,
    ToolStarted,
    TurnLimitReached,
    UserMessage,
)
from engine.messages import Image, Text, Thinking, ToolCall, Usage

ints = st.integers(min_value=-(2**53), max_value=2**53)
floats = st.floats(allow_nan=False, allow_infinity=False)
names = st.from_regex(r"[a-z][a-z0-9_]{0,15}", fullmatch=True)
ids = st.from_regex(r"[A-Za-z0-9_-]{1,24}", fullmatch=True)
json_values = st.recursive(
    st.none() | st.booleans() | ints | floats | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
arguments = st.dictionaries(names, json_values, max_size=5)
small = st.integers(min_value=0, max_value=10_000)

usage = st.builds(Usage, input_tokens=small, output_tokens=small, cached_input_tokens=small,
                  cache_write_tokens=small, reasoning_tokens=small)
tool_calls = st.builds(ToolCall, id=ids, name=names, arguments=arguments,
                       raw_arguments=st.text(max_size=30), invalid=st.none() | st.text(max_size=10))
parts = st.one_of(
    st.builds(Text, text=st.text(max_size=40)),
    st.builds(Thinking, text=st.text(max_size=40), signature=st.none() | st.text(max_size=10),
              provider=st.none() | names),
    tool_calls,
    st.builds(Image, media_type=st.sampled_from(["image/png", "image/jpeg"]),
              data=st.none() | st.text(alphabet="ABCDEF0123456789", max_size=20)),
)
tool_specs = st.builds(ToolSpec, name=names, description=st.text(max_size=30),
                       handler=st.booleans(),
                       effect=st.sampled_from(["read_only", "idempotent", "side_effecting"]))
policies = st.builds(
    DuplicatePolicy, rule=st.sampled_from(["previous", "window", "anywhere", "off"]),
    window=st.integers(min_value=1, max_value=5), exempt=st.lists(names, max_size=2).map(tuple),
    observe_only=st.booleans(), max_refusals=st.none() | st.integers(min_value=1, max_value=5))

events = st.one_of(
    st.builds(ConversationStarted, conversation_id=ids, provider=names, model=names,
              mode=st.sampled_from(["chat", "pipeline"]), max_turns=st.integers(1, 50),
              system=st.text(max_size=40),
              directives=st.lists(st.builds(DirectiveLayer, layer=names, name=names,
                                            text=st.text(max_size=20)), max_size=2).map(tuple),
              tools=st.lists(tool_specs, max_size=3).map(tuple), duplicate_policy=policies,
              parameters=arguments, metadata=arguments,
              fork=st.none() | st.builds(ForkRef, conversation_id=ids, seq=small, hash=ids),
              replay_of=st.none() | st.builds(ReplayRef, conversation_id=ids)),
    st.builds(UserMessage, parts=st.lists(parts, max_size=3).map(tuple),
              timestamp=st.none() | st.text(max_size=25)),
    st.builds(ModelRequested, turn=small, digest=ids, provider=names, model=names, parameters=arguments),
    st.builds(ModelResponded, turn=small, parts=st.lists(parts, max_size=4).map(tuple),
              stop_reason=st.sampled_from(["end_turn", "tool_use", "max_tokens", "refusal", "other"]),
              usage=usage, provider=names, model=names, response_id=st.none() | ids, raw=json_values,
              latency_ms=st.none() | floats, source=st.sampled_from(["provider", "imported", "runner"])),
    st.builds(ModelFailed, turn=small, error_type=names, message=st.text(max_size=30),
              status=st.none() | st.integers(100, 599), retryable=st.booleans()),
    st.builds(ToolCallRejected, call_id=ids, name=names,
              reason=st.sampled_from(["duplicate", "unknown", "disabled", "invalid_arguments"]),
              content=st.text(max_size=40), arguments=arguments),
    st.builds(ToolStarted, call_id=ids, name=names, arguments=arguments,
              idempotency_key=st.none() | ids, duplicate=st.booleans()),
    st.builds(ToolCompleted, call_id=ids, name=names, success=st.booleans(), content=st.text(max_size=40),
              data=json_values, error=st.none() | st.text(max_size=20), duration_ms=st.none() | floats),
    st.builds(TurnLimitReached, turn_count=small, max_turns=small, pending_tool_calls=st.booleans(),
              warning=st.text(max_size=20)),
    st.builds(ConversationHalted, reason=st.text(max_size=20), refusals=small),
    st.builds(ConversationCompleted, final_content=st.text(max_size=40)),
    st.builds(ConversationFailed, error=st.text(max_size=30), error_type=names),
)
