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


@settings(max_examples=60, deadline=None)
@given(st.lists(messages, max_size=8), st.lists(st.integers(0, 8), min_size=1, max_size=6),
       st.lists(messages, min_size=1, max_size=4))
def test_a_vouched_extension_equals_the_whole_digest_and_a_stale_one_is_checked(
        history, cuts, stranger):
    """``extends=`` (the step's word that the history only grew) skips the prefix check
    only when it names the tuple digested last; any other tuple is checked as before."""
    digests, last = RequestDigest(), None
    built: tuple = ()
    for cut in sorted(cuts):
        grown = built + tuple(history[len(built):cut]) if cut >= len(built) else tuple(history[:cut])
        request = ModelRequest(model="m", messages=grown)
        assert digests.digest(request, extends=built if cut >= len(built) else None) == \
            request.digest()
        built, last = grown, request
    # a stale word (a tuple digested before the last one) cannot reuse the wrong prefix
    other = ModelRequest(model="m", messages=tuple(stranger) + built)
    assert digests.digest(other, extends=()) == other.digest()
    assert last is not None


_TEXT = st.sampled_from(["plain", "e\u0301", "\u00e9", "", "\u212b", "tab\there"])
other_messages = st.one_of(
    st.builds(lambda i, n, a, pid, raw: Message(role="assistant", parts=(
        ToolCall(id=i, name=n, arguments=a, raw_arguments=raw, provider_id=pid),)),
        _TEXT, _TEXT, st.sampled_from([{}, {"a": 1}, {"k": [1, {"x": 1.0}]}]),
        st.none() | _TEXT, _TEXT),
    st.builds(lambda i, n, c, err: Message(role="tool", parts=(
        ToolResult(call_id=i, name=n, content=c, is_error=err),)), _TEXT, _TEXT, _TEXT,
        st.booleans()),
    st.builds(lambda p, m, t: Message(role="assistant", provider=p, model=m, parts=(Text(text=t),)),
              st.none() | _TEXT, st.none() | _TEXT, _TEXT),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(messages | other_messages, max_size=8),
       st.lists(st.integers(0, 8), min_size=1, max_size=6), _TEXT,
       st.sampled_from([(), (ToolSpec(name="t"),), (ToolSpec(name="t", description="\u00e9"),),
                        (ToolSpec(name="t", description="e\u0301"),)]),
       st.sampled_from([{}, {"a": 1, "b": 2}, {"b": 2, "a": 1}, {"a": 1.0, "b": 2},
                        {"n": {"x": "\u00e9"}}, {"n": {"x": "e\u0301"}}]))
def test_every_field_of_every_part_counts_in_the_fast_path(history, cuts, system, tools, params):
    """The fast path (a message's sorted JSON when it is ASCII and its parts plain; the rest
    keyed by its JSON in insertion order) equals the canonical digest whatever field holds
    the non-ASCII text (ids, names, provider ids, models, descriptions) and whatever order
    the request's dicts were built in."""
    digests = RequestDigest()
    for cut in sorted(cuts):
        request = ModelRequest(model="m", system=system, messages=tuple(history[:cut]),
                               tools=tools, parameters=params)
        assert digests.digest(request) == request.digest()


def _variants():
    base = {
        "text": lambda v: Message(role="user", parts=(Text(text=v),)),
        "call id": lambda v: Message(role="assistant", parts=(
            ToolCall(id=v, name="t", arguments={"a": 1}),)),
        "call name": lambda v: Message(role="assistant", parts=(
            ToolCall(id="c", name=v, arguments={"a": 1}),)),
        "call provider_id": lambda v: Message(role="assistant", parts=(
            ToolCall(id="c", name="t", arguments={"a": 1}, provider_id=v),)),
        "call raw_arguments": lambda v: Message(role="assistant", parts=(
            ToolCall(id="c", name="t", arguments={"a": 1}, raw_arguments=v),)),
        "call invalid": lambda v: Message(role="assistant", parts=(
            ToolCall(id="c", name="t", invalid=v),)),
        "argument key": lambda v: Message(role="assistant", parts=(
            ToolCall(id="c", name="t", arguments={v: 1}),)),
        "argument value": lambda v: Message(role="assistant", parts=(
            ToolCall(id="c", name="t", arguments={"a": v}),)),
        "result call_id": lambda v: Message(role="tool", parts=(
            ToolResult(call_id=v, name="t", content="x"),)),
        "result name": lambda v: Message(role="tool", parts=(
            ToolResult(call_id="c", name=v, content="x"),)),
        "result content": lambda v: Message(role="tool", parts=(
            ToolResult(call_id="c", name="t", content=v),)),
        "message provider": lambda v: Message(role="assistant", provider=v, parts=(Text(text="x"),)),
        "message model": lambda v: Message(role="assistant", model=v, parts=(Text(text="x"),)),
    }
    return [(name, make(v)) for name, make in base.items() for v in ("e\u0301", "\u212b", "ok")]


def test_no_field_of_a_plain_part_escapes_normalisation():
    """Each string field of each part the fast path takes, holding text NFC changes: the
    digest is the canonical one (a call's ``provider_id`` escaped the old field-by-field
    check: its sorted JSON, not NFC, was hashed)."""
    for name, message in _variants():
        request = ModelRequest(model="m", messages=(message,))
        assert RequestDigest().digest(request) == request.digest(), name
