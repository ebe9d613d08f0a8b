"""Events round-trip through canonical JSON, byte for byte."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from turnlog import testing as shipped

from turnlog.engine.errors import CorruptEventError
from turnlog.engine.model.events import EVENT_TYPES, VERSIONS, UserMessage, decode_event, encode_event, register_upcaster

events = shipped.events()


@given(events)
def test_every_event_round_trips_through_its_payload(event):
    record = encode_event(event)
    assert decode_event(record.type, record.version, record.payload) == event


@given(events)
def test_payload_is_byte_stable_and_key_sorted(event):
    payload = encode_event(event).payload
    again = encode_event(decode_event(encode_event(event).type, 1, payload)).payload
    assert again == payload
    keys = list(msgspec.json.decode(payload).keys())
    assert keys == sorted(keys)


def test_every_event_type_has_a_version():
    assert set(VERSIONS) == set(EVENT_TYPES)
    assert len(EVENT_TYPES) == 16


def test_unknown_type_names_where_it_was_found():
    with pytest.raises(CorruptEventError, match="unknown event type 'nope' at stream 'c' seq 3"):
        decode_event("nope", 1, "{}", where="stream 'c' seq 3")


def test_invalid_json_payload_is_a_typed_error():
    with pytest.raises(CorruptEventError, match="cannot decode 'user_message'"):
        decode_event("user_message", 1, '{"type": "user_message", "parts": [')


def test_payload_that_disagrees_with_its_row_type_is_refused():
    payload = encode_event(UserMessage.of("x")).payload
    with pytest.raises(CorruptEventError, match="says type 'user_message'"):
        decode_event("conversation_failed", 1, payload)


def test_newer_version_than_known_is_refused():
    payload = encode_event(UserMessage.of("x")).payload
    with pytest.raises(CorruptEventError, match="newer than this turnlog knows"):
        decode_event("user_message", 2, payload)


def test_old_versions_are_upcast(monkeypatch):
    monkeypatch.setitem(VERSIONS, "conversation_failed", 2)

    @register_upcaster("conversation_failed", 1)
    def _(data):
        data["error"] = data.pop("reason")
        return data

    old = '{"reason":"boom","type":"conversation_failed"}'
    event = decode_event("conversation_failed", 1, old)
    assert event.error == "boom"
