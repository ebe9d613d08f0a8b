"""Hostile input only ever gets typed errors, and a refused import leaves the journal byte-identical."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnlog.engine.errors import FormatError, TurnlogError
from turnlog.engine.formats.cassette import split_document
from turnlog.engine.formats.importer import import_entries, import_file, read_transcript
from turnlog.journal import Journal
from tests.conftest import FixedClock

scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
           | st.text(max_size=20) | st.integers(10_000, 100_000).map(lambda n: "x" * n))
anything = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=10)
keys = st.sampled_from(["role", "content", "timestamp", "input", "context", "parts", "type",
                        "tool_calls", "tool_call_id", "payload", "text", "functionCall",
                        "functionResponse", "id", "name", "input", "tool_use_id", "source",
                        "arguments", "function", "seq", "recorded_at", "version"])
values = st.sampled_from(["user", "assistant", "system", "tool", "model", "text", "tool_use",
                          "tool_result", "image", "thinking", "user_message", "model_responded",
                          "tool_completed", "conversation_started",
                          "AI ACTION (Turn 1): Executing X with parameters: a: 1",
                          "TOOL RESPONSE (Turn 1): SUCCESS", "2025-08-27T21:40:00Z"]) | anything
# entries built from the keys and values real formats use, so detection gets past the first check
shaped = st.recursive(st.dictionaries(keys, values, max_size=5),
                      lambda inner: st.dictionaries(keys, values | inner | st.lists(inner, max_size=3),
                                                    max_size=5), max_leaves=8)
entries = st.lists(shaped | anything, min_size=1, max_size=6)

VALID = [
    [{"role": "user", "content": "q", "timestamp": "2025-08-27T21:40:00.000Z"},
     {"role": "assistant", "content": "a"}, {"input": "r", "context": "c"}],
    [{"role": "system", "content": "s"}, {"role": "user", "content": "w?"},
     {"role": "assistant", "content": None, "tool_calls": [
         {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]},
     {"role": "tool", "tool_call_id": "c1", "content": "ok"}, {"role": "assistant", "content": "done"}],
    [{"role": "user", "content": [{"type": "text", "text": "look"}]},
     {"role": "assistant", "content": [{"type": "thinking", "thinking": "h", "signature": "s"},
                                       {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}],
    [{"role": "user", "parts": [{"text": "q"}]},
     {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"a": 1}}}]},
     {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"output": "5"}}}]}],
    [{"role": "user", "content": "go"},
     {"role": "assistant", "content": "AI ACTION (Turn 1): Executing F with parameters: a: 1"},
     {"role": "user", "content": "TOOL RESPONSE (Turn 1): SUCCESS: ok\n\n{\"a\":1}"}],
    [{"type": "conversation_started", "payload": {"conversation_id": "x", "provider": "p",
                                                  "model": "m"}},
     {"type": "user_message", "recorded_at": "2026-01-01T00:00:00.000000Z",
      "payload": {"parts": [{"type": "text", "text": "hi"}]}}],
]


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*path, i))


@st.composite
def mutated(draw):
    """A valid transcript with one to three values replaced by anything, or keys dropped."""
    doc = json.loads(json.dumps(draw(st.sampled_from(VALID))))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from([p for p in _paths(doc) if p]))
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(anything | values)
    return doc


def deep(n: int) -> str:
    return "[" * n + "]" * n


def snapshot(path):
    wal = path.with_name(path.name + "-wal")
    return path.read_bytes(), wal.read_bytes() if wal.exists() else None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(entries | mutated())
def test_any_json_entries_import_or_fail_typed_leaving_the_journal_untouched(tmp_path, entries):
    path = tmp_path / "j.db"
    journal = Journal(str(path), clock=FixedClock())
    try:
        import_entries(journal, [{"role": "user", "content": "seed"}], conversation_id="seed")
        before = snapshot(path)
        try:
            import_entries(journal, entries, conversation_id="new")
        except TurnlogError as exc:
            assert str(exc)
            assert snapshot(path) == before
            assert [s.stream_id for s in journal.streams()] == ["seed"]
    finally:
        journal.close()
        for p in tmp_path.iterdir():
            p.unlink()


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_read_or_fail_with_a_format_error(data):
    try:
        read_transcript(data)
    except FormatError as exc:
        assert str(exc)


def test_invalid_utf8_deep_nesting_and_huge_strings_are_typed_errors(tmp_path, db_path, journal):
    import_entries(journal, [{"role": "user", "content": "seed"}], conversation_id="seed")
    before = snapshot(db_path)
    cases = {
        "utf8.json": b'[{"role": "user", "content": "caf\xe9"}]',
        "deep.json": deep(100_000).encode(),
        "deepentry.json": json.dumps([{"role": "user", "content": [[[[[]]]]]}]).encode(),
        "huge.json": json.dumps([{"role": "robot", "content": "x" * 1_000_000}]).encode(),
        "scalar.json": b"42",
        "empty.json": b"",
        "emptylist.json": b"[]",
    }
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        try:
            import_file(journal, path)
        except FormatError as exc:
            assert len(str(exc)) < 2_000, name  # a huge entry is named, not echoed
        else:
            raise AssertionError(f"{name} was imported")
        assert snapshot(db_path) == before, name


def test_nan_and_infinity_and_deep_jsonl_lines_are_format_errors():
    for data, where in ((b'[{"role": "user", "content": NaN}]', "NaN"),
                        (b'{"a": 1}\n' + deep(100_000).encode() + b"\n",
                         "transcript nests deeper than 200 levels"),
                        (b'{"a": Infinity}\n{"b": 1}\n', "line 1")):
        try:
            read_transcript(data)
        except FormatError as exc:
            assert where in str(exc)
        else:
            raise AssertionError(data[:20])


_junk_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2, 5), st.text(max_size=5)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["data", "type", "message", "index", "delta", "choices", "response",
                         "output", "candidates", "content", "usage", "content_block"]),
        inner, max_size=4), max_leaves=10)


@settings(max_examples=200, deadline=None)
@given(events=st.lists(_junk_value, max_size=6),
       kind=st.sampled_from(["message_start", "content_block_delta", "response.completed",
                             "chat.completion.chunk"]))
def test_a_cassette_with_a_malformed_stream_is_a_format_error(events, kind):
    doc = {"request": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
           "response": {"_sse_events": [{"data": {"type": kind}}, *events]}}
    try:
        split_document(doc)
    except TurnlogError:
        pass
