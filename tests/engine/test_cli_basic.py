"""The inspection commands: ls, show, verify, heads — as documented in CLI.md."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest
from click.testing import CliRunner

from turnlog.engine.cli import cli
from turnlog.engine.model.conversation import Conversation
from turnlog.engine.model.events import ConversationStarted, UserMessage
from turnlog.journal import Journal


@pytest.fixture
def filled(db_path):
    j = Journal(str(db_path))
    for cid in ("a", "b"):
        c = Conversation.start(j, ConversationStarted(conversation_id=cid, provider="scripted", model="m"))
        c.append(UserMessage.of(f"hello {cid}"))
    j.close()
    return db_path


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_every_command_has_help_with_an_example():
    import click

    for name in cli.list_commands(click.Context(cli)):  # the lazily registered ones too
        result = invoke(name, "--help")
        assert result.exit_code == 0, name
        assert "Example" in result.output, f"{name} --help has no example"


def test_ls_json_lists_every_conversation_with_the_documented_fields(filled):
    result = invoke("ls", "--db", filled, "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert {r["conversation_id"] for r in rows} == {"a", "b"}
    for r in rows:
        assert {"conversation_id", "status", "provider", "model", "turn_count", "events", "parent",
                "replay_of"} <= set(r)
        assert r["events"] == 2 and r["status"] == "active"


def test_show_json_gives_seq_type_and_payload(filled):
    out = json.loads(invoke("show", "a", "--db", filled, "--json").output)
    assert out["conversation_id"] == "a"
    assert [(e["seq"], e["type"]) for e in out["events"]] == [(1, "conversation_started"), (2, "user_message")]
    assert out["events"][1]["payload"]["parts"][0]["text"] == "hello a"


def test_show_unknown_conversation_is_bad_input(filled):
    result = invoke("show", "nope", "--db", filled)
    assert result.exit_code == 2
    assert "nope" in result.output


def test_verify_ok_then_tampered_names_the_seq(filled, tmp_path):
    ok = json.loads(invoke("verify", "--db", filled, "--json").output)
    assert ok == {"ok": True, "checked_events": 4, "first_bad": None, "projections": [],
                  "missing_guards": []}
    copy = tmp_path / "copy.db"
    shutil.copy(filled, copy)
    con = sqlite3.connect(copy)
    con.execute("DROP TRIGGER IF EXISTS events_no_update")
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type='trigger'").fetchall():
        con.execute(f"DROP TRIGGER {name}")
    con.execute("UPDATE events SET payload = replace(payload, 'hello b', 'hellO b') WHERE stream_id='b'")
    con.commit()
    con.close()
    result = invoke("verify", "--db", copy, "--json")
    assert result.exit_code == 1
    bad = json.loads(result.output)["first_bad"]
    assert bad["conversation_id"] == "b" and bad["seq"] == 2


def test_heads_file_catches_a_cut_off_tail(filled, tmp_path):
    heads_file = tmp_path / "heads.json"
    result = invoke("heads", "--db", filled, "--json")
    heads_file.write_text(result.output)
    assert {h["conversation_id"]: h["seq"] for h in json.loads(result.output)} == {"a": 2, "b": 2}
    assert invoke("verify", "--db", filled, "--heads", heads_file).exit_code == 0
    copy = tmp_path / "cut.db"
    shutil.copy(filled, copy)
    con = sqlite3.connect(copy)
    [guard] = con.execute("SELECT sql FROM sqlite_master WHERE name='events_refuse_delete'"
                          ).fetchone()
    con.execute("DROP TRIGGER events_refuse_delete")
    con.execute("DELETE FROM events WHERE stream_id='a' AND seq=2")
    con.execute(guard)  # the guard put back: verify sees no missing guard
    con.commit()
    con.close()
    assert invoke("verify", "--db", copy).exit_code == 0  # a chain alone cannot see it
    result = invoke("verify", "--db", copy, "--heads", heads_file, "--json")
    assert result.exit_code == 1
    assert json.loads(result.output)["first_bad"]["conversation_id"] == "a"


def test_a_file_that_is_not_a_journal_is_bad_input_and_untouched(tmp_path):
    bogus = tmp_path / "notes.db"
    bogus.write_bytes(b"just some text, not a database\n" * 10)
    before = bogus.read_bytes()
    result = invoke("ls", "--db", bogus)
    assert result.exit_code == 2
    assert "notes.db" in result.output
    assert bogus.read_bytes() == before


def test_reading_commands_do_not_create_a_journal(tmp_path):
    missing = tmp_path / "missing.db"
    assert invoke("ls", "--db", missing).exit_code == 2
    assert not missing.exists()
