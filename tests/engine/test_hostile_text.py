"""Invalid Unicode from outside is replaced with U+FFFD and recorded, never a crash."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from turnlog.engine.model.canonical import canonical_value, valid_unicode
from turnlog.engine.errors import InvalidEventError, TurnlogError
from turnlog.engine.model.events import UserMessage, encode_event, with_valid_unicode
from turnlog.engine.formats.importer import import_entries
from turnlog.engine.loop import Loop
from turnlog.engine.model.messages import Text
from turnlog.engine.providers.base import ModelResponse
from turnlog.engine.tools import tool
from turnlog.replay import replay

BAD = "bad \udd20 text"


class Surrogates:
    """A provider whose answers hold lone surrogates (as a hostile server's JSON escapes do)."""

    name, model = "hostile", "h"

    def __init__(self) -> None:
        self.turn = 0

    def complete(self, request):
        self.turn += 1
        if self.turn == 1:
            from turnlog.engine.model.messages import ToolCall

            return ModelResponse(parts=(Text(text=BAD), ToolCall(
                id="c\ud800", name="echo", arguments={"k": "v\udd20"})), stop_reason="tool_use",
                response_id="r\udd20", raw={"text": BAD})
        return ModelResponse(parts=(Text(text="done"),))


@tool
def echo(k: str) -> dict:
    """Echo back, with a lone surrogate of its own."""
    return {"got": k, "extra": "\udfff"}


def payloads(journal, cid, kind):
    return [json.loads(e.payload) for e in journal.read(cid) if e.type == kind]


def test_lone_surrogates_in_prompt_response_and_tool_result_are_replaced_and_recorded(journal):
    result = Loop(journal, Surrogates(), [echo]).start(BAD, conversation_id="c")
    assert result.status == "completed"
    [user] = payloads(journal, "c", "user_message")
    assert user["parts"][0]["text"] == "bad \ufffd text" and user["replaced"] == ["parts"]
    response = payloads(journal, "c", "model_responded")[0]
    assert response["replaced"] == ["parts", "raw", "response_id"]
    assert response["parts"][1]["id"] == "c\ufffd"
    [done] = payloads(journal, "c", "tool_completed")
    assert done["success"] and done["replaced"] == ["content", "data"]
    assert done["data"]["extra"] == "\ufffd"
    assert replay(journal, "c").ok


def test_a_transcript_with_lone_surrogates_imports_with_the_replacement_recorded(journal):
    r = import_entries(journal, [{"role": "user", "content": BAD},
                                 {"type": "user_message", "payload": {"parts": [
                                     {"type": "text", "text": BAD}]}}])
    rows = [json.loads(e.payload) for e in journal.read(r.conversation_id)][1:]
    assert [(p["parts"][0]["text"], p["replaced"]) for p in rows] == [
        ("bad \ufffd text", ["parts"])] * 2


def test_a_turnlog_entry_whose_type_is_not_a_string_is_a_typed_error(journal):
    before = journal.last_seq("x")
    for entries in ([{"type": {}}], [{"type": []}], [{"type": None, "payload": {}}]):
        try:
            import_entries(journal, entries, fmt="turnlog", conversation_id="x")
        except TurnlogError:
            pass
        else:  # pragma: no cover
            raise AssertionError(f"{entries} imported")
    assert journal.last_seq("x") == before == 0


def test_encoding_an_event_with_a_lone_surrogate_is_a_typed_error():
    try:
        encode_event(UserMessage.of(BAD))
    except InvalidEventError as exc:
        assert "user_message" in str(exc) and "parts" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("encoded")


@given(st.text(alphabet=st.characters(codec=None, categories=None), max_size=20))
def test_valid_unicode_leaves_valid_text_alone_and_always_yields_encodable_text(text):
    fixed, replaced = valid_unicode(text)
    fixed.encode()
    try:
        text.encode()
    except UnicodeEncodeError:
        assert replaced
    else:
        assert (fixed, replaced) == (text, False)


@given(st.text(max_size=4), st.sampled_from("éñÅüǖệ"), st.text(max_size=4), st.booleans())
def test_keys_that_merge_under_nfc_are_refused_never_one_dropped(head, letter, tail, nfd_first):
    import unicodedata

    composed = unicodedata.normalize("NFC", head + letter + tail)
    decomposed = unicodedata.normalize("NFD", composed)
    first, second = (decomposed, composed) if nfd_first else (composed, decomposed)
    try:
        canonical_value({"nested": {first: 1, second: 2}})
    except InvalidEventError as exc:
        assert "normalisation" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("merged")


def test_with_valid_unicode_returns_a_valid_event_unchanged():
    event = UserMessage.of("fine é")
    assert with_valid_unicode(event) is event
