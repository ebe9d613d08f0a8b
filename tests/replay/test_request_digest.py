"""The incremental request digest equals the canonical digest of the whole request."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.canonical import digest
from engine.events import ToolSpec
from engine.messages import Message, Text, ToolCall, ToolResult
from engine.providers.base import ModelRequest
from replay.testing import arguments

messages = st.one_of(
    st.builds(lambda t: Message(role="user", parts=(Text(text=t),)), st.text(max_size=12)),
    st.builds(lambda t: Message(role="user", parts=(Text(text=t),)),
              st.sampled_from(["plain", "e\u0301", "\u00e9", ""])),
    st.builds(lambda a: Message(role="assistant", provider="p", model="m", parts=(
        ToolCall(id="c", name="t", arguments=a, raw_arguments="{}"),)),
              st.dictionaries(st.sampled_from(["a", "b", "\u00e9"]),
                              st.sampled_from([1, 1.0, 1.5, -0.0, None, True, "x", "e\u0301"]),
                              max_size=3)),
    st.builds(lambda a: Message(role="assistant", parts=(ToolCall(id="c", name="t", arguments=a),)),
              arguments()),
    st.builds(lambda c: Message(role="tool", parts=(ToolResult(call_id="c", name="t", content=c),)),
              st.text(max_size=12)),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(messages, max_size=8), st.lists(st.integers(0, 8), min_size=1, max_size=6),
       st.text(max_size=8), st.sampled_from([(), (ToolSpec(name="t"),)]),
       st.sampled_from([{}, {"temperature": 0.5}]))
def test_incremental_digest_equals_the_whole_request_digest(history, cuts, system, tools, params):
    # growing, shrinking and unrelated requests in any order, as several loops would send;
    # equal-but-not-identical histories too (1 == True, yet their canonical JSON differs)
    for cut in cuts:
        for msgs in (history[:cut], [msgspec.structs.replace(m) for m in history[:cut]]):
            request = ModelRequest(model="m", system=system, messages=tuple(msgs), tools=tools,
                                   parameters=params)
            assert request.digest() == digest(msgspec.to_builtins(request))


def test_a_history_equal_by_value_but_canonically_different_gets_its_own_digest():
    def request(value):
        return ModelRequest(model="m", messages=(Message(role="assistant", parts=(
            ToolCall(id="c", name="t", arguments={"a": value}),)),))
    for value in (1, True, 1.0, 1):
        r = request(value)
        assert r.digest() == digest(msgspec.to_builtins(r))
