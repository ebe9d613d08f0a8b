"""The Data Machine text projection against the reference's own examples, and its text rule."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from turnlog.engine.model.events import (
    ConversationStarted,
    ModelResponded,
    ToolCallRejected,
    ToolCompleted,
    ToolSpec,
    UserMessage,
)
from turnlog.engine.formats.datamachine import (
    Truncated,
    extract_tool_call,
    extract_tool_response,
    format_parameters,
    format_tool_call_message,
    format_tool_result_message,
    render_events,
    validate_tool_call,
)
from turnlog.engine.model.messages import Text, ToolCall
from turnlog.engine.model.state import fold
from turnlog.engine.loop.texts import duplicate_message, result_content
from turnlog import testing as shipped

names = shipped.identifiers()

# --- the reference's examples, verbatim ------------------------------------------


def test_format_tool_call_message_matches_the_reference_example():
    assert format_tool_call_message(
        "google_search", {"query": "WordPress best practices", "num_results": 5}, 1
    ) == {"role": "assistant", "content": "AI ACTION (Turn 1): Executing Google Search with "
                                          "parameters: query: WordPress best practices, num_results: 5"}


def test_extract_tool_call_matches_the_reference_example():
    message = {"role": "assistant", "content": "AI ACTION (Turn 1): Executing Google Search with "
                                               "parameters: query: WordPress, num_results: 5"}
    call = extract_tool_call(message)
    assert call.tool_name == "google_search"
    assert call.parameters == {"query": "WordPress", "num_results": 5}
    assert call.turn == 1


def test_validate_tool_call_matches_the_reference_examples():
    conversation = [
        {"role": "user", "content": "Search for WordPress"},
        {"role": "assistant", "content": "AI ACTION (Turn 1): Executing Google Search with "
                                         "parameters: query: WordPress, num_results: 5"},
        {"role": "user", "content": "TOOL RESPONSE (Turn 1): ..."},
    ]
    first = validate_tool_call("google_search", {"query": "WordPress", "num_results": 5},
                               conversation)
    assert first == {"is_duplicate": True, "message": duplicate_message("google_search")}
    assert first["message"].startswith("You just called the Google Search tool with the exact "
                                       "same parameters")
    second = validate_tool_call("google_search", {"query": "WordPress plugins", "num_results": 5},
                                conversation)
    assert second == {"is_duplicate": False, "message": ""}


def test_tool_result_message_for_a_handler_tool_has_no_data():
    content = result_content("wordpress_publish", success=True,
                             data={"id": 123, "title": "New Post"}, handler=True)
    assert format_tool_result_message(content, 2) == {
        "role": "user",
        "content": "TOOL RESPONSE (Turn 2): SUCCESS: Wordpress Publish completed successfully. "
                   "The requested operation has been finished as requested."}


def test_tool_result_message_for_other_tools_appends_json_data_after_a_blank_line():
    content = result_content("google_search", success=True, data={"results": ["a", "b"]})
    message = format_tool_result_message(content, 3)
    assert message["content"] == (
        "TOOL RESPONSE (Turn 3): SUCCESS: Google Search completed successfully. The requested "
        'operation has been finished as requested.\n\n{"results":["a","b"]}')
    parsed = extract_tool_response(message)
    assert parsed.success and parsed.turn == 3 and parsed.data == {"results": ["a", "b"]}


def test_failed_tool_response_reads_back_its_error():
    content = result_content("twitter_publish", success=False, error="Invalid credentials")
    parsed = extract_tool_response(format_tool_result_message(content, 1))
    assert content == "TOOL FAILED: twitter_publish execution failed - Invalid credentials"
    assert not parsed.success and parsed.error == "Invalid credentials"


def test_turn_zero_has_no_turn_display():
    assert format_tool_call_message("add", {"a": 1}, 0)["content"] == (
        "AI ACTION: Executing Add with parameters: a: 1")
    assert format_tool_result_message("SUCCESS", 0)["content"] == "TOOL RESPONSE: SUCCESS"
    assert extract_tool_call(format_tool_call_message("add", {"a": 1}, 0)).turn == 0


# --- value rendering ---------------------------------------------------------------


def test_strings_over_fifty_characters_are_cut_to_fifty_plus_dots():
    text = "x" * 51
    assert format_parameters({"q": text}) == f"q: {'x' * 50}..."
    assert format_parameters({"q": "y" * 50}) == f"q: {'y' * 50}"


def test_non_strings_render_as_compact_json():
    assert format_parameters({"n": 2.5, "ok": True, "none": None, "tags": ["a", "b"],
                              "o": {"k": 1}}) == (
        'n: 2.5, ok: true, none: null, tags: ["a","b"], o: {"k":1}')


def test_strings_that_would_read_back_differently_are_quoted():
    assert format_parameters({"a": "5", "b": "a, b", "c": " pad", "d": "wait...", "e": ""}) == (
        'a: "5", b: "a,\\u0020b", c: " pad", d: "wait...", e: ""')
    call = extract_tool_call(format_tool_call_message("t", {"a": "5", "b": "a, b", "c": " pad",
                                                            "d": "wait...", "e": ""}, 1))
    assert call.parameters == {"a": "5", "b": "a, b", "c": " pad", "d": "wait...", "e": ""}


def test_a_truncated_value_parses_as_a_marker_equal_to_nothing():
    call = extract_tool_call(format_tool_call_message("search", {"q": "z" * 80, "n": 1}, 1))
    marker = call.parameters["q"]
    assert isinstance(marker, Truncated) and marker.prefix == "z" * 50
    assert marker != marker and marker != "z" * 50 and marker != "z" * 80
    assert call.parameters["n"] == 1


def test_a_truncated_value_never_produces_a_false_duplicate():
    history = [format_tool_call_message("search", {"q": "z" * 80}, 1)]
    assert not validate_tool_call("search", {"q": "z" * 80}, history)["is_duplicate"]


def test_reference_style_unquoted_dots_are_treated_as_truncated():
    message = {"role": "assistant",
               "content": "AI ACTION (Turn 2): Executing Fetch Page with parameters: url: "
                          "https://example.com/a/very/long/path/that/was/cut/o..."}
    call = extract_tool_call(message, ["fetch_page"])
    assert call.tool_name == "fetch_page" and isinstance(call.parameters["url"], Truncated)


def test_known_names_resolve_display_names_exactly():
    message = format_tool_call_message("get_URL", {}, 1)
    assert message["content"] == "AI ACTION (Turn 1): Executing Get URL with parameters: "
    assert extract_tool_call(message, ["get_URL"]).tool_name == "get_URL"
    assert extract_tool_call(message).tool_name == "get_url"


def test_non_tool_messages_do_not_parse():
    assert extract_tool_call({"role": "user", "content": "AI ACTION (Turn 1): Executing X with "
                                                        "parameters: a: 1"}) is None
    assert extract_tool_call({"role": "assistant", "content": "hello"}) is None
    assert extract_tool_response({"role": "assistant", "content": "TOOL RESPONSE: x"}) is None


# --- projection of a conversation ------------------------------------------------


def _conversation():
    return [
        ConversationStarted(conversation_id="c", provider="p", model="m", system="Be brief.",
                            tools=(ToolSpec(name="google_search"),
                                   ToolSpec(name="wordpress_publish", handler=True))),
        UserMessage.of("Search for WordPress"),
        ModelResponded(turn=1, source="imported", parts=(
            Text(text="Searching."),
            ToolCall(id="a", name="google_search", arguments={"query": "WordPress", "num_results": 5}))),
        ToolCompleted(call_id="a", name="google_search", success=True,
                      content=result_content("google_search", success=True, data={"hits": 2})),
        ModelResponded(turn=2, source="imported", parts=(
            ToolCall(id="b", name="google_search", arguments={"num_results": 5, "query": "WordPress"}),)),
        ToolCallRejected(call_id="b", name="google_search", reason="duplicate",
                         content=duplicate_message("google_search")),
        ModelResponded(turn=3, source="imported", parts=(Text(text="Found 2."),)),
    ]


def test_render_events_writes_the_reference_messages_in_order():
    assert render_events(_conversation()) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Search for WordPress"},
        {"role": "assistant", "content": "Searching."},
        {"role": "assistant", "content": "AI ACTION (Turn 1): Executing Google Search with "
                                         "parameters: query: WordPress, num_results: 5"},
        {"role": "user", "content": "TOOL RESPONSE (Turn 1): SUCCESS: Google Search completed "
                                    "successfully. The requested operation has been finished as "
                                    'requested.\n\n{"hits":2}'},
        {"role": "assistant", "content": "AI ACTION (Turn 2): Executing Google Search with "
                                         "parameters: num_results: 5, query: WordPress"},
        {"role": "user", "content": duplicate_message("google_search")},
        {"role": "assistant", "content": "Found 2."},
    ]


# --- the structured rule and the text rule --------------------------------------

# values that never need truncation: short strings and any non-string JSON
short_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6)
    | st.floats(allow_nan=False, allow_infinity=False, width=32) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=6)
calls = st.tuples(names, st.dictionaries(names, short_values, max_size=4))


def _structured_refuses(first, second) -> bool:
    started = ConversationStarted(conversation_id="c", provider="p", model="m")
    state = fold([started, UserMessage.of("go"),
                  ModelResponded(turn=1, source="imported",
                                 parts=(ToolCall(id="1", name=first[0], arguments=first[1]),)),
                  ToolCompleted(call_id="1", name=first[0], success=True, content="ok")])
    return state.is_duplicate(*second)


def _text_refuses(first, second) -> bool:
    history = [format_tool_call_message(first[0], first[1], 1),
               format_tool_result_message("ok", 1)]
    return validate_tool_call(second[0], second[1], history)["is_duplicate"]


@settings(max_examples=300, deadline=None)
@given(calls, calls, st.booleans())
def test_structured_and_text_rules_agree_when_nothing_is_truncated(first, second, same):
    if same:  # half the pairs are the same call, keys reordered
        second = (first[0], dict(reversed(list(first[1].items()))))
    assert _structured_refuses(first, second) == _text_refuses(first, second)


long_text = st.text(min_size=51, max_size=80)


@settings(max_examples=200, deadline=None)
@given(names, st.dictionaries(names, short_values | long_text, min_size=1, max_size=4), st.data())
def test_truncation_never_makes_the_text_rule_refuse_what_the_structured_rule_accepts(
        name, arguments, data):
    assume(any(isinstance(v, str) and len(v) > 50 for v in arguments.values()))
    second = data.draw(st.sampled_from([arguments, {**arguments, "extra": 1}]))
    first, second = (name, arguments), (name, second)
    if _text_refuses(first, second):
        assert _structured_refuses(first, second)
    assert not _text_refuses(first, (name, arguments))  # a truncated value never matches
