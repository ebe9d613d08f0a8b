"""The loop's incremental request digest (with its fast paths) equals the request's own digest.

Replay matches recordings by this digest, so a fast path that changed a byte
would make every recording diverge (or, worse, two requests share a digest).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from turnlog.engine.model.events import ToolSpec
from turnlog.engine.model.messages import Message, Text, ToolCall, ToolResult
from turnlog.engine.providers.base import ModelRequest
from turnlog.engine.loop.request_digest import RequestDigest
from turnlog.testing import arguments

values = st.sampled_from([1, 1.0, 1.5, -0.0, 0, None, True, False, "x", "e\u0301", "\u00e9"])
messages = st.one_of(
    st.builds(lambda t: Message(role="user", parts=(Text(text=t),)),
              st.text(max_size=12) | st.sampled_from(["plain", "e\u0301", "\u00e9", ""])),
    st.builds(lambda a, raw: Message(role="assistant", provider="p", model="m", parts=(
        ToolCall(id="c", name="t", arguments=a, raw_arguments=raw),)),
              arguments() | st.dictionaries(st.sampled_from(["a", "b", "\u00e9"]), values,
                                            max_size=3),
              st.sampled_from(["{}", '{"a": 1.0}', "{\u00e9}"])),
    st.builds(lambda c: Message(role="tool", parts=(ToolResult(call_id="c", name="t", content=c),)),
              st.text(max_size=12)),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(messages, max_size=8), st.lists(st.integers(0, 8), min_size=1, max_size=6),
       st.text(max_size=8), st.sampled_from([(), (ToolSpec(name="t"),)]),
       st.sampled_from([{}, {"temperature": 0.5}, {"temperature": 1.0}]))
def test_incremental_digest_equals_the_whole_request_digest(history, cuts, system, tools, params):
    digests = RequestDigest()
    for cut in sorted(cuts):  # a conversation's requests grow; other shapes reset the state
        request = ModelRequest(model="m", system=system, messages=tuple(history[:cut]),
                               tools=tools, parameters=params)
        assert digests.digest(request) == request.digest()
    other = ModelRequest(model="m", messages=tuple(reversed(history)), parameters=params)
    assert digests.digest(other) == other.digest()
