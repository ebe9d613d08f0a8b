"""Deeply nested input meets one limit (``engine.nesting.MAX_DEPTH``) wherever it enters, as a
user meets it: a one-line error naming where (never a RecursionError traceback), nothing
written; and a live response that nests deep is recorded or refused, never crashes the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from turnlog.engine.model.nesting import MAX_DEPTH
from turnlog.journal import Journal
from tests.fakeapi import Reply, reply

from .conftest import turnlog, write_script


def nested(depth: int, leaf: object = "x") -> object:
    value = leaf
    for i in range(depth):
        value = {"type": "mystery", "inner": value} if i % 2 else [value]
    return value


def one_line_error(done, where: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"Error: {where}") and line.endswith(
        f"nests deeper than {MAX_DEPTH} levels"), line


@pytest.mark.parametrize("depth", [250, 450, 5000])
def test_an_imported_transcript_nested_too_deep_is_refused_and_nothing_is_written(
        tmp_path, depth):
    db = tmp_path / "j.db"
    kept = tmp_path / "ok.json"
    kept.write_text(json.dumps([{"role": "user", "content": "q"},
                                {"role": "assistant", "content": "a"}]))
    assert turnlog("import", kept, "--db", db).returncode == 0
    before = db.read_bytes()
    transcript = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "mystery", "inner": "PLACE"}]}]}]
    text = json.dumps(transcript).replace('"PLACE"', "[" * depth + "]" * depth)
    path = tmp_path / "deep.json"
    path.write_text(text)
    assert len(text) < 12_000  # a small file, as found
    done = turnlog("import", path, "--format", "anthropic", "--db", db)
    one_line_error(done, str(path) + ("" if depth > 1000 else "[2].content[0].content…"))
    assert db.read_bytes() == before


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5000])
def test_a_script_nested_too_deep_is_refused_before_the_journal_exists(tmp_path, depth):
    script = tmp_path / "s.json"
    script.write_text('{"turns":' + "[" * depth + "]" * depth + "}")
    done = turnlog("run", "hi", "--script", script, "--db", tmp_path / "j.db")
    one_line_error(done, f"script {str(script)!r}")
    assert not (tmp_path / "j.db").exists()


def test_script_arguments_text_nested_too_deep_make_an_invalid_call(tmp_path):
    deep = "[" * 5000 + "]" * 5000
    script = write_script(tmp_path / "s.json",
                          {"tool_calls": [{"name": "add", "arguments_raw": deep}]},
                          {"text": "ok"})
    done = turnlog("run", "hi", "--script", script, "--tools", "demo", "--db", tmp_path / "j.db",
                   "--json")
    assert done.returncode == 0, done.stderr
    with Journal(tmp_path / "j.db") as journal:
        payloads = [json.loads(e.payload) for e in journal.read_all()]
    assert any(f"arguments nests deeper than {MAX_DEPTH} levels" in json.dumps(p)
               for p in payloads)


@pytest.fixture(scope="module")
def fake():
    from tests.fakeapi import FakeAPI

    with FakeAPI() as server:
        yield server


def _body_with(provider: str, key: str, deep_json: str) -> bytes:
    """A success body of ``provider`` with one more key whose value is ``deep_json``."""
    text = json.dumps(reply(provider, text="hi"))
    return (text[:-1] + f', "{key}": {deep_json}}}').encode()


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini", "openai-responses"])
def test_live_responses_that_nest_deep_are_recorded_or_refused_never_a_traceback(
        fake, tmp_path, provider):
    db = tmp_path / "j.db"
    under = MAX_DEPTH - 2  # the body's own level and the key's: just inside the limit
    fake.script(provider, [Reply(raw=_body_with(provider, "x_extra",
                                                json.dumps(nested(under))))])
    kept = turnlog("run", "hi", "--provider", provider, "--retries", "0", "--id", "c1",
                   "--db", db, "--json", **fake.env(provider))
    assert kept.returncode == 0, kept.stderr
    with Journal(db) as journal:
        (row,) = [e for e in journal.read("c1") if e.type == "model_responded"]
    assert '"x_extra"' in row.payload  # recorded whole, in raw

    for depth in (MAX_DEPTH + 1, 450, 5000):
        fake.script(provider, [Reply(raw=_body_with(provider, "x_extra",
                                                    "[" * depth + "]" * depth))])
        refused = turnlog("run", "hi", "--provider", provider, "--retries", "0", "--json",
                          "--db", db, **fake.env(provider))
        assert refused.returncode == 1, refused.stderr
        assert "Traceback" not in refused.stderr
        result = json.loads(refused.stdout)
        assert result["status"] == "failed"
        assert f"nests deeper than {MAX_DEPTH} levels" in result["error"], result["error"]


@pytest.mark.parametrize("depth", [450, 5000])
def test_live_tool_arguments_nested_too_deep_make_an_invalid_call_the_run_goes_on(
        fake, tmp_path, depth):
    fake.script("openai", [reply("openai", tool_calls=[("add", '{"a":' * depth + "1" +
                                                         "}" * depth)]),
                           reply("openai", text="done")])
    db = tmp_path / "j.db"
    done = turnlog("run", "hi", "--provider", "openai", "--tools", "demo", "--id", "c1",
                   "--db", db, "--json", **fake.env("openai"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"
    with Journal(db) as journal:
        text = "".join(e.payload for e in journal.read("c1"))
    assert f"nests deeper than {MAX_DEPTH} levels" in text


def test_approve_arguments_nested_too_deep_exit_2(tmp_path):
    notes = tmp_path / "n.txt"
    db = tmp_path / "j.db"
    script = write_script(tmp_path / "s.json", {"tool_calls": [
        {"name": "append_note", "arguments": {"path": str(notes), "text": "x"}}]}, {"text": "ok"})
    assert turnlog("run", "Note.", "--script", script, "--tools", "demo", "--approve",
                   "append_note", "--id", "c1", "--db", db).returncode == 0
    before = Path(db).read_bytes()
    done = turnlog("approve", "c1", "--call", "call_1_1", "--yes", "--as", "ann",
                   "--arguments", "[" * 5000 + "]" * 5000, "--db", db)
    one_line_error(done, "--arguments")
    assert Path(db).read_bytes() == before
