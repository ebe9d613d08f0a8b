"""The context summary behaves as the reference's orchestrator ``_build_conversation_context``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from turnlog.engine.model.events import ConversationStarted, ModelResponded, UserMessage
from turnlog.engine.formats.context import build_context, context_entries
from turnlog.engine.model.messages import Text

CLAIMS = "Generated Patent Claims:\n1. A method of carrier aggregation " + "x" * 1000

# the reference's mixed history: two API entries and one orchestrator entry
MIXED = [
    {"role": "user", "content": "draft 5 system claims for 4g carrier aggregation",
     "timestamp": "2025-08-27T21:40:00.000Z"},
    {"role": "assistant", "content": "Successfully drafted 5 content items...\n\n" + CLAIMS,
     "timestamp": "2025-08-27T21:43:00.000Z"},
    {"input": "draft 5 system claims for 4g carrier aggregation", "context": "patent_streaming",
     "timestamp": "2025-08-27T21:40:00.000Z"},
]


def reference(history, last=5):
    """The reference's orchestrator code, transcribed (its join is a newline)."""
    context_parts = []
    for i, entry in enumerate(history[-last:]):
        if entry.get("input"):
            context_parts.append(f"Previous request {i+1}: {entry['input'][:200]}...")
        elif entry.get("content"):
            role = entry.get("role", "unknown")
            content = entry["content"]
            if role == "user":
                context_parts.append(f"USER REQUEST {i+1}: {content[:200]}...")
            elif role == "assistant":
                if "Generated Patent Claims:" in content:
                    claims_start = content.find("Generated Patent Claims:")
                    claims_section = content[claims_start:]
                    claims_text = claims_section.replace("Generated Patent Claims:",
                                                         "PREVIOUSLY GENERATED CLAIMS:")
                    context_parts.append(f"ASSISTANT RESPONSE {i+1}: {claims_text[:800]}...")
                else:
                    context_parts.append(f"ASSISTANT RESPONSE {i+1}: {content[:300]}...")
        if entry.get("context"):
            context_parts.append(f"Previous context {i+1}: {entry['context'][:200]}...")
    return "\n".join(context_parts)


def test_the_mixed_history_yields_all_three_entries():
    text = build_context(MIXED)
    lines = text.split("\n", 1)[0], text.rsplit("\n", 2)[-2:]
    assert lines[0] == "USER REQUEST 1: draft 5 system claims for 4g carrier aggregation..."
    assert lines[1] == ["Previous request 3: draft 5 system claims for 4g carrier aggregation...",
                        "Previous context 3: patent_streaming..."]
    assert "ASSISTANT RESPONSE 2: PREVIOUSLY GENERATED CLAIMS:\n1. A method" in text
    assert text == reference(MIXED)


def test_the_claims_section_is_kept_to_800_characters_and_other_answers_to_300():
    text = build_context([{"role": "assistant", "content": "intro " + CLAIMS},
                          {"role": "assistant", "content": "y" * 1000}])
    first, second = text.split("\n1. A method", 1)[0], text.rsplit("\n", 1)[1]
    assert first == "ASSISTANT RESPONSE 1: PREVIOUSLY GENERATED CLAIMS:"
    section = text.split("ASSISTANT RESPONSE 1: ", 1)[1].split("...\nASSISTANT RESPONSE 2")[0]
    assert len(section) == 800
    assert second == f"ASSISTANT RESPONSE 2: {'y' * 300}..."


def test_only_the_last_n_entries_count_and_are_numbered_from_one():
    history = [{"role": "user", "content": f"q{i}"} for i in range(7)]
    assert build_context(history, last=2) == "USER REQUEST 1: q5...\nUSER REQUEST 2: q6..."


def test_the_marker_is_configurable():
    text = build_context([{"role": "assistant", "content": "Plan:\nstep " + "s" * 900}],
                         marker="Plan:", marker_label="PREVIOUS PLAN:", section_limit=25)
    assert text == "ASSISTANT RESPONSE 1: PREVIOUS PLAN:\nstep sssss..."


def test_entries_of_other_roles_add_nothing_but_keep_their_number():
    assert build_context([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]) == (
        "USER REQUEST 2: u...")


def test_a_conversation_projects_to_the_same_entries():
    events = [ConversationStarted(conversation_id="c", provider="p", model="m"),
              UserMessage(parts=(Text(text=MIXED[0]["content"]),)),
              ModelResponded(turn=1, source="imported", parts=(Text(text=MIXED[1]["content"]),)),
              UserMessage(parts=(Text(text=MIXED[2]["input"]),), context="patent_streaming")]
    assert build_context(context_entries(events)) == reference(MIXED)


entries = st.lists(st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system", "tool"]),
                           "content": st.text(max_size=40)
                           | st.text(max_size=1200).map(lambda t: "a Generated Patent Claims: " + t)}),
    st.fixed_dictionaries({"input": st.text(max_size=300)},
                          optional={"context": st.text(max_size=300)}),
), max_size=8)


@settings(max_examples=150, deadline=None)
@given(entries, st.integers(1, 8))
def test_build_context_equals_the_reference_on_any_history(history, last):
    assert build_context(history, last=last) == reference(history, last)
