"""Call identity: one neutral id per call, one call key, structured refusals, hostile text."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from turnlog.engine.tools.calls import assign_call_ids
from turnlog.engine.model.conversation import load_state
from turnlog.engine.demo import demo_tools
from turnlog.engine.tools.duplicates import call_key
from turnlog.engine.model.events import DuplicatePolicy, Refusal, RejectReason, ToolCallRejected
from turnlog.engine.loop import Loop
from turnlog.engine.model.messages import Message, Text, ToolCall, ToolResult
from turnlog.engine.providers import openai as openai_wire
from turnlog.engine.providers._common import plan_history
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.engine.model.state import fold_stored
from turnlog.replay import replay
from turnlog.testing import tool_call_lists


def payloads(journal, cid, kind):
    return [json.loads(e.payload) for e in journal.read(cid) if e.type == kind]


# --- repeated provider ids -------------------------------------------------------------


def test_two_calls_sharing_an_id_in_one_response_each_get_exactly_one_result(journal):
    loop = Loop(journal, ScriptedProvider([
        {"tool_calls": [{"id": "x", "name": "add", "arguments": {"a": 1, "b": 2}},
                        {"id": "x", "name": "add", "arguments": {"a": 3, "b": 4}}]},
        {"text": "3 and 7."}]), demo_tools())
    result = loop.start("Add twice", conversation_id="c")
    assert result.status == "completed"
    calls = payloads(journal, "c", "model_responded")[0]["parts"]
    assert [(c["id"], c.get("provider_id")) for c in calls] == [("x", None), ("x_2", "x")]
    done = payloads(journal, "c", "tool_completed")  # a parallel batch answers as calls finish
    assert sorted((d["call_id"], d["data"]["sum"]) for d in done) == [("x", 3), ("x_2", 7)]
    assert not load_state(journal, "c").has_pending_tools
    assert replay(journal, "c").ok


def test_an_id_reused_on_a_later_turn_is_renamed_and_replays(journal):
    same = {"id": "call_0", "name": "add", "arguments": {"a": 1, "b": 1}}
    loop = Loop(journal, ScriptedProvider([
        {"tool_calls": [same]}, {"tool_calls": [{**same, "arguments": {"a": 2, "b": 2}}]},
        {"text": "done"}]), demo_tools())
    assert loop.start("go", conversation_id="c").status == "completed"
    ids = [p["id"] for r in payloads(journal, "c", "model_responded") for p in r["parts"]
           if p["type"] == "tool_call"]
    assert ids == ["call_0", "call_0_2"]
    assert [d["data"] for d in payloads(journal, "c", "tool_completed")] == [
        {"sum": 2}, {"sum": 4}]
    assert replay(journal, "c").ok


def test_the_provider_is_sent_back_the_ids_it_minted():
    calls = assign_call_ids((ToolCall(id="x", name="a"), ToolCall(id="x", name="b")))
    messages = [Message(role="user", parts=(Text(text="q"),)),
                Message(role="assistant", parts=calls),
                Message(role="tool", parts=(ToolResult(call_id="x_2", name="b", content="B"),)),
                Message(role="tool", parts=(ToolResult(call_id="x", name="a", content="A"),))]
    _, wire = openai_wire.map_messages("", messages)
    assert [c["id"] for c in wire[1]["tool_calls"]] == ["x", "x_2"]
    assert [(m["tool_call_id"], m["content"]) for m in wire[2:]] == [("x", "A"), ("x_2", "B")]
    _, entries = plan_history("", [Message(role="assistant", parts=(
        ToolCall(id="n1", name="a", provider_id="toolu_1"),))], "anthropic")
    assert entries[0].parts[0].id == "toolu_1"


@given(tool_call_lists(max_size=6), st.sets(st.sampled_from(["x", "y", "call_1", "x_2"])))
def test_assigned_ids_are_unique_new_and_keep_the_provider_id(calls, taken):
    parts = assign_call_ids(calls, taken)
    ids = [p.id for p in parts]
    assert len(set(ids)) == len(ids) and not set(ids) & taken
    for before, after in zip(calls, parts):
        assert (after.id if after.provider_id is None else after.provider_id) == before.id
        assert (after.name, after.arguments) == (before.name, before.arguments)
    assert assign_call_ids(parts, ()) == parts  # unique ids pass unchanged


@given(tool_call_lists(names=st.just("add"), min_size=1, max_size=5))
def test_every_call_of_a_response_gets_one_answer_whatever_its_ids(tmp_path_factory, calls):
    from turnlog.journal import Journal

    script = [{"tool_calls": [{"id": c.id, "name": "add", "arguments": {"a": i, "b": 1}}
                              for i, c in enumerate(calls)]}, {"text": "ok"}]
    with Journal(str(tmp_path_factory.mktemp("j") / "t.db")) as j:
        Loop(j, ScriptedProvider(script), demo_tools()).start("go", conversation_id="c")
        answered = [e for e in j.read("c") if e.type in ("tool_completed", "tool_call_rejected")]
        assert len(answered) == len(calls)
        assert fold_stored(j.read("c")).state().status == "completed"


# --- one call key ----------------------------------------------------------------------


def test_the_call_key_pins_what_the_six_copies_disagreed_on():
    policy = DuplicatePolicy(volatile={"search": ("nonce",)})
    # an unparsable call never equals a valid call with empty arguments (replay, resume and
    # the refusal verdicts keyed it as {}), nor another unparsable text
    assert call_key("add", {}, None, "{bad") != call_key("add", {})
    assert call_key("add", {}, None, "{bad") != call_key("add", {}, None, "{worse")
    # volatile keys are left out only under a policy that names them (swap ignored them)
    assert call_key("search", {"q": 1, "nonce": 2}, policy) == call_key("search", {"q": 1}, policy)
    assert call_key("search", {"q": 1, "nonce": 2}) != call_key("search", {"q": 1})
    # the tool name counts (recorded tools compared arguments only)
    assert call_key("add", {"a": 1}) != call_key("sub", {"a": 1})
    # canonical equality: key order, 1 == 1.0, NFC
    assert call_key("t", {"a": 1, "b": "é"}) == call_key("t", {"b": "e\u0301", "a": 1.0})
    # arguments without a canonical form key apart from valid calls and from raw text
    odd = {"e\u0301": 1, "é": 2}
    assert call_key("t", odd) not in (call_key("t", {"é": 2}), call_key("t", {}, None, repr(odd)))


def test_no_other_module_compares_calls_its_own_way():
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    defs = [str(p.relative_to(root)) for folder in ("engine", "replay")
            for p in (root / folder).rglob("*.py") if "def call_key(" in p.read_text()]
    assert defs == ["engine/tools/duplicates.py"]
    for name in ("recorded.py", "swap.py", "swap_runner.py", "driver.py", "diff.py", "tools.py"):
        text = (root / "replay" / name).read_text()
        assert "canonical_json(" not in text and "canonical_value(" not in text, name


# --- canonical collisions --------------------------------------------------------------


def test_arguments_whose_keys_merge_under_nfc_are_refused_to_the_model(journal):
    raw = '{"e\\u0301": 1, "\\u00e9": 2}'
    loop = Loop(journal, ScriptedProvider([
        {"tool_calls": [{"id": "c1", "name": "add", "arguments_raw": raw}]}, {"text": "ok"}]),
        demo_tools())
    assert loop.start("go", conversation_id="c").status == "completed"
    [rejected] = payloads(journal, "c", "tool_call_rejected")
    assert rejected["reason"] == "invalid_arguments"
    assert rejected["details"]["stage"] == "parse"
    assert "same key after Unicode normalisation" in rejected["details"]["problem"]
    assert rejected["content"].startswith("TOOL FAILED: add execution failed - invalid arguments")
    assert not payloads(journal, "c", "tool_started")
    assert replay(journal, "c").ok


# --- structured refusals and the public hook -------------------------------------------


def test_refusals_carry_a_reason_code_and_details_the_text_is_rendered_from(journal):
    loop = Loop(journal, ScriptedProvider([
        {"tool_calls": [{"id": "a", "name": "nope"}, {"id": "b", "name": "add",
                                                     "arguments": {"a": "x"}}]},
        {"text": "ok"}]), demo_tools())
    loop.start("go", conversation_id="c")
    unknown, invalid = payloads(journal, "c", "tool_call_rejected")
    assert unknown["reason"] == "unknown" and "add" in unknown["details"]["available"]
    assert invalid["reason"] == "invalid_arguments" and invalid["details"]["stage"] == "schema"
    assert invalid["details"]["problem"] in invalid["content"]


def test_the_loop_refusal_hook_refuses_what_the_built_in_rules_accept(journal):
    seen = []

    def refuse(state, call, tool):
        seen.append((call.id, tool.name))
        return Refusal(reason=RejectReason.REFUSED) if call.arguments.get("a") == 13 else None

    loop = Loop(journal, ScriptedProvider([
        {"tool_calls": [{"id": "a", "name": "add", "arguments": {"a": 13, "b": 1}},
                        {"id": "b", "name": "add", "arguments": {"a": 1, "b": 1}}]},
        {"text": "ok"}]), demo_tools(), refuse=refuse)
    loop.start("go", conversation_id="c")
    assert seen == [("a", "add"), ("b", "add")]
    [rejected] = [e for e in fold_stored(journal.read("c")).message_list if e.role == "tool"][:1]
    events = [e for e in (journal.read("c")) if e.type == "tool_call_rejected"]
    assert len(events) == 1 and json.loads(events[0].payload)["reason"] == "refused"
    assert rejected.parts[0].is_error
    assert isinstance(ToolCallRejected(call_id="a", name="n", reason=RejectReason.REFUSED,
                                       content="").reason, RejectReason)


# --- the fast path of a flat, plain call ---------------------------------------------------

_KEYS = st.sampled_from(["a", "b", "é", "e\u0301", "Å", "A\u030a", "ok"]) | st.integers(0, 2)
_VALUES = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
           | st.sampled_from(["x", "é", "e\u0301"]) | st.lists(st.integers(), max_size=2))


@given(st.dictionaries(_KEYS, _VALUES, max_size=4))
def test_comparable_call_marks_invalid_exactly_the_arguments_without_a_canonical_form(arguments):
    """``comparable_call`` skips the canonical walk for flat ASCII keys and plain values; it
    must mark invalid exactly what the walk refuses (keys equal after NFC, non-string keys,
    NaN), and pass everything else unchanged."""
    from turnlog.engine.errors import InvalidEventError
    from turnlog.engine.model.canonical import canonical_value
    from turnlog.engine.tools.calls import comparable_call

    call = ToolCall(id="c", name="t", arguments=arguments, raw_arguments="{}")
    try:
        canonical_value(arguments)
        refused = False
    except InvalidEventError:
        refused = True
    checked = comparable_call(call)
    assert (checked.invalid is not None) == refused
    if not refused:
        assert checked is call
    # the same rule keys calls: on their repr exactly when there is no canonical form (an
    # int key included: it raised AttributeError before)
    assert call_key("t", arguments).startswith("t\x02") == refused


@given(st.dictionaries(_KEYS | st.sampled_from(["k\udd20", "tab\t"]),
                       _VALUES | st.sampled_from(["v\udd20", "\u00e9", 2**70]), max_size=4))
def test_the_flat_and_plain_test_is_its_rule_and_its_json_is_canonical(arguments):
    """``_flat_and_plain`` (type set and one ASCII check of the JSON, in C) answers its rule:
    string keys, values strings, ints, bools or nulls, all ASCII; and then the sorted JSON
    call_key uses is the canonical JSON."""
    from turnlog.engine.model.canonical import canonical_json
    from turnlog.engine.tools.duplicates import _flat_and_plain, _sorted

    rule = all(type(k) is str and k.isascii() and (
        type(v) in (int, bool, type(None)) or (type(v) is str and v.isascii()))
        for k, v in arguments.items())
    assert _flat_and_plain(arguments) == rule
    if rule:
        assert _sorted.encode(arguments).decode() == canonical_json(arguments)
