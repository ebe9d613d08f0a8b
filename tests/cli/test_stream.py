"""``turnlog run --stream`` / ``resume --stream`` against the fake API server's events."""

from __future__ import annotations

import json

import pytest

from turnlog.journal import Journal
from tests.fakeapi import Reply, reply

from .conftest import turnlog

ANSWER = "Paris is sunny today, and 2 + 3 = 5."


@pytest.fixture(scope="module")
def fake():
    from tests.fakeapi import FakeAPI

    with FakeAPI() as server:
        yield server


def test_run_stream_prints_the_text_as_it_arrives_and_records_the_same_answer(fake, tmp_path):
    fake.script("openai", [reply("openai", text=ANSWER)])
    out = turnlog("run", "Weather?", "--provider", "openai", "--stream", "--db",
                  tmp_path / "t.db", **fake.env("openai"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.count(ANSWER) == 1  # streamed once, not printed again by the report
    assert out.stdout.index(ANSWER) < out.stdout.index("completed")
    assert fake.requests_for("openai")[-1].body["stream"] is True
    with Journal(tmp_path / "t.db") as journal:
        (row,) = [r for r in journal.read_all() if r.type == "model_responded"]
        assert ANSWER in row.payload


def test_json_keeps_stdout_one_document_the_text_goes_to_stderr(fake, tmp_path):
    fake.script("anthropic", [reply("anthropic", text=ANSWER)])
    out = turnlog("run", "Weather?", "--provider", "anthropic", "--stream", "--json", "--db",
                  tmp_path / "t.db", **fake.env("anthropic"))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["final_content"] == ANSWER
    assert ANSWER in out.stderr


def test_a_cut_stream_left_unfinished_is_resumed_with_stream(fake, tmp_path):
    fake.script("gemini", [Reply(body=reply("gemini", text=ANSWER), cut=3)])
    db = tmp_path / "t.db"
    out = turnlog("run", "Weather?", "--provider", "gemini", "--stream", "--retries", "0",
                  "--id", "c-cut", "--json", "--db", db, **fake.env("gemini"))
    assert json.loads(out.stdout)["status"] == "active", out.stderr
    fake.script("gemini", [reply("gemini", text=ANSWER)])
    again = turnlog("resume", "c-cut", "--stream", "--db", db, **fake.env("gemini"))
    assert again.returncode == 0, again.stderr
    assert again.stdout.count(ANSWER) == 1 and "completed" in again.stdout
