"""``turnlog show`` and ``turnlog export`` (jsonl, markdown, datamachine) write as they read:
the same bytes as the whole-document output, one batch of events in memory at a time."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from turnlog.engine.audit import connect_readonly, conversation_events, conversation_info
from turnlog.engine.audit.listing import iter_conversation_events
from turnlog.engine.cli._common import emit, emit_streamed
from turnlog.engine.cli._timeline import header, timeline
from turnlog.engine.formats.exporter import _json_array, export_data, iter_export
from turnlog.journal import Journal, shown_url

from ..view.journal_data import build
from .conftest import TURNLOG, env

FORMATS = ("jsonl", "markdown", "datamachine")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("streamed") / "view.db"
    return path, build(path)  # the demo, a fork, a provider swap, a hostile transcript


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*TURNLOG, *args], capture_output=True, env=env(), timeout=300)


def _whole(db: Path, cid: str, fmt: str) -> bytes:
    """The export as one document, as it was written before it streamed."""
    with Journal(db, readonly=True) as journal:
        data = export_data(journal, cid, fmt)
    if fmt == "jsonl":
        text = "".join(json.dumps(x, ensure_ascii=False, separators=(",", ":")) + "\n"
                       for x in data)
    elif fmt == "markdown":
        text = data
    else:
        text = json.dumps(data, ensure_ascii=False, indent=2)
    return (text if text.endswith("\n") else text + "\n").encode()


def test_export_streams_the_same_bytes_as_the_whole_document(built, tmp_path):
    db, ids = built
    for cid in ids.values():
        for fmt in FORMATS:
            expected = _whole(db, cid, fmt)
            r = _run("export", cid, "--format", fmt, "--db", str(db))
            assert r.returncode == 0 and r.stdout == expected, (cid, fmt, r.stderr)
        out = tmp_path / "out.jsonl"
        assert _run("export", cid, "--format", "jsonl", "--db", str(db), "-o", str(out)
                    ).returncode == 0
        assert out.read_bytes() == _whole(db, cid, "jsonl")
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]  # no temporary file left


def test_show_streams_the_same_bytes_as_the_whole_timeline(built):
    db, ids = built
    for cid in ids.values():
        conn = connect_readonly(str(db))
        events = conversation_events(conn, cid)
        info = conversation_info(conn, cid, shown_url(str(db)))
        conn.close()
        r = _run("show", cid, "--json", "--db", str(db))
        assert r.returncode == 0, r.stderr
        assert r.stdout == (json.dumps({"conversation_id": cid, "events": events},
                                       ensure_ascii=False, indent=2) + "\n").encode()
        for full in (False, True):
            lines = header(info, events[0]["payload"], full, str(db)) + [""] + timeline(events,
                                                                                       full)
            r = _run("show", cid, "--db", str(db), *(["--full"] if full else []))
            assert r.returncode == 0, r.stderr
            assert r.stdout.decode().startswith("\n".join(lines) + "\n")


def test_an_unknown_conversation_writes_nothing(built, tmp_path):
    db, _ = built
    out = tmp_path / "out.jsonl"
    r = _run("export", "nope", "--format", "jsonl", "--db", str(db), "-o", str(out))
    assert r.returncode == 2 and b"no conversation 'nope'" in r.stderr and r.stdout == b""
    assert list(tmp_path.iterdir()) == []
    r = _run("export", "demo", "--format", "jsonl", "--db", str(db),
             "-o", str(tmp_path / "missing" / "out.jsonl"))
    assert r.returncode == 2 and str(tmp_path / "missing" / "out.jsonl").encode() in r.stderr


class _CountingConn:
    """A read connection that records each query's rows as they are fetched."""

    def __init__(self, conn: Any) -> None:
        self.conn, self.fetched = conn, []

    def execute(self, sql: str, params: Any = ()) -> Any:
        rows = self.conn.execute(sql, params).fetchall()
        self.fetched.append(len(rows))
        return _Rows(rows)


class _Rows(list):
    def fetchall(self) -> list:
        return list(self)


def test_show_reads_the_conversation_a_batch_at_a_time(built):
    db, _ = built
    conn = connect_readonly(str(db))
    try:
        whole = conversation_events(conn, "demo")
        counting = _CountingConn(conn)
        events = iter_conversation_events(counting, "demo", per_read=5)
        first = next(events)
        assert counting.fetched == [5] and first == whole[0]  # one batch read, not the whole
        rest = list(events)
    finally:
        conn.close()
    assert [first, *rest] == whole and len(whole) > 10
    assert all(n <= 5 for n in counting.fetched) and sum(counting.fetched) == len(whole)


def test_export_reads_one_event_per_piece(built):
    db, _ = built
    with Journal(db, readonly=True) as journal:
        pulled = []
        lineage = journal.lineage

        def counted(stream_id: str, to_seq: int | None = None):
            for row in lineage(stream_id, to_seq):
                pulled.append(row.seq)
                yield row

        history = len(list(lineage("demo-fork")))  # the parent's shared events, then its own
        journal.lineage = counted  # type: ignore[method-assign]
        for fmt in FORMATS:
            pulled.clear()
            pieces = iter_export(journal, "demo-fork", fmt)
            next(pieces)
            assert len(pulled) <= 3, (fmt, pulled)  # not the whole lineage
            list(pieces)
            assert len(pulled) == history > journal.last_seq("demo-fork")


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                     | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=10)


@settings(max_examples=60, deadline=None)
@given(head=st.dictionaries(st.text(max_size=6).filter(lambda k: k != "items"), _JSON,
                            max_size=3),
       items=st.lists(_JSON, max_size=5))
def test_streamed_json_is_the_whole_documents_text(head, items):
    assert "".join(_json_array(iter(items))) == json.dumps(items, ensure_ascii=False, indent=2)
    runner = CliRunner()
    import click

    @click.command()
    @click.option("--streamed", is_flag=True)
    def out(streamed: bool) -> None:
        if streamed:
            emit_streamed(head, "items", iter(items))
        else:
            emit({**head, "items": items})

    assert runner.invoke(out, ["--streamed"]).stdout_bytes == runner.invoke(out).stdout_bytes


def _any(tp: Any) -> Any:
    """Any instance of ``tp`` (an event, one of its fields' types): every field drawn,
    free JSON values (``Any``) as ``json_values``: floats of every magnitude, any text."""
    import types
    import typing

    import msgspec

    from turnlog.testing import json_values

    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return json_values()
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        hints = typing.get_type_hints(tp)
        return st.builds(tp, **{name: _any(hints[name]) for name in tp.__struct_fields__})
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*map(_any, args))
    if origin is dict:
        return st.dictionaries(_any(args[0]), _any(args[1]), max_size=2)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(_any(args[0]), max_size=2).map(tuple)
        return st.tuples(*map(_any, args))
    if origin is list:
        return st.lists(_any(args[0]), max_size=2)
    if origin is typing.Literal:
        return st.sampled_from(args)
    return st.from_type(tp)


def _every_event_type() -> Any:
    from turnlog.engine.model.events import EVENT_TYPES

    return st.tuples(*(_any(cls) for cls in EVENT_TYPES.values()))


@settings(max_examples=40, deadline=None)
@given(events=_every_event_type(), more=st.lists(st.floats(allow_nan=False), max_size=3))
def test_show_json_writes_what_json_wrote_for_every_event_type(tmp_path_factory, events, more):
    """``show --json`` (msgspec, written in chunks) prints the bytes the whole document printed
    by ``json.dumps`` did, for a conversation holding every event type with any field values
    (and an event whose floats json writes with an exponent)."""
    from unittest.mock import patch

    from turnlog.engine.cli import _common
    from turnlog.engine.cli.inspect import show
    from turnlog.engine.model.events import EVENT_TYPES, ToolCompleted, encode_event

    events = [*events, ToolCompleted(call_id="c", name="t", success=True, content="",
                                     data=[*more, 1e-05, 1e16, -0.0], duration_ms=1.5e-07)]
    assert {type(e) for e in events} == set(EVENT_TYPES.values())
    db = tmp_path_factory.mktemp("every") / "every.db"
    with Journal(db) as journal:
        journal.append("c", [encode_event(e, "2025-01-01T00:00:00.000000Z") for e in events], 0)
    with sqlite3.connect(db) as conn:  # the events as the whole document read them: json's
        rows = [{"seq": seq, "type": kind, "recorded_at": at, "payload": json.loads(payload)}
                for seq, kind, at, payload in conn.execute(
                    "SELECT seq, type, recorded_at, payload FROM events ORDER BY seq")]
    expected = json.dumps({"conversation_id": "c", "events": rows}, ensure_ascii=False,
                          indent=2) + "\n"
    for chunk in (64, _common.STREAM_CHUNK):  # written in many pieces, or in one
        with patch.object(_common, "STREAM_CHUNK", chunk):
            r = CliRunner().invoke(show, ["c", "--json", "--db", str(db)])
        assert r.exit_code == 0, r.output
        assert r.output == expected
