"""``--provider bedrock`` through the installed console script, against the fake Converse API:
run, stream, export, import and swap to another wire and back."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import turnlog
from tests.fakeapi import FakeAPI, reply
from turnlog.journal import Journal


@pytest.fixture
def fake():
    with FakeAPI() as server:
        yield server


def test_run_export_import_and_swap_with_bedrock(fake, tmp_path):
    db = tmp_path / "t.db"
    fake.script("bedrock", [reply("bedrock", text="Adding.", tool_calls=[("add", {"a": 2, "b": 3})]),
                            reply("bedrock", text="2 + 3 = 5.")])
    out = turnlog("run", "2 + 3?", "--provider", "bedrock", "--model", "amazon.nova-pro-v1:0",
                  "--tools", "demo", "--id", "b1", "--json", "--db", db, **fake.env("bedrock"))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["final_content"] == "2 + 3 = 5."
    assert fake.refusals() == []
    assert fake.requests_for("bedrock")[0].path == "/model/amazon.nova-pro-v1%3A0/converse"

    exported = tmp_path / "b1.json"
    out = turnlog("export", "b1", "--format", "bedrock", "-o", exported, "--db", db)
    assert out.returncode == 0, out.stderr
    body = json.loads(exported.read_text())
    assert body["messages"][1]["content"][1]["toolUse"]["name"] == "add"
    out = turnlog("import", exported, "--id", "b2", "--json", "--db", db)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["formats"] == {"bedrock": 4}

    fake.script("openai", [reply("openai", tool_calls=[("add", {"a": 2, "b": 3})]),
                           reply("openai", text="5")])
    out = turnlog("replay", "b1", "--provider", "openai", "--id", "to-openai", "--db", db,
                  **fake.env("openai"))
    assert out.returncode == 0, out.stderr + out.stdout
    fake.script("bedrock", [reply("bedrock", tool_calls=[("add", {"a": 2, "b": 3})]),
                            reply("bedrock", text="5")])
    out = turnlog("replay", "to-openai", "--provider", "bedrock", "--id", "back", "--db", db,
                  **fake.env("bedrock"))
    assert out.returncode == 0, out.stderr + out.stdout
    assert fake.refusals() == []
    with Journal(db) as journal:
        providers = {s.stream_id: json.loads(r.payload)["provider"] for s in journal.streams()
                     for r in journal.read(s.stream_id) if r.type == "conversation_started"}
    assert providers["to-openai"] == "openai" and providers["back"] == "bedrock"


def test_run_stream_reads_the_event_stream(fake, tmp_path):
    fake.script("bedrock", [reply("bedrock", text="Streaming from Bedrock.")])
    out = turnlog("run", "Hi", "--provider", "bedrock", "--stream", "--db", tmp_path / "t.db",
                  **fake.env("bedrock"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("Streaming from Bedrock.") == 1
    assert fake.requests_for("bedrock")[0].path.endswith("/converse-stream")


@pytest.mark.parametrize(("profile", "said"), [
    ({}, "AWS_ACCESS_KEY_ID"), ({"AWS_PROFILE": "nosuch"}, "nosuch")])
def test_no_credentials_or_an_unknown_profile_is_an_error_that_says_so(tmp_path, profile, said):
    out = turnlog("run", "Hi", "--provider", "bedrock", "--db", tmp_path / "t.db",
                  AWS_ACCESS_KEY_ID="", AWS_SECRET_ACCESS_KEY="",
                  AWS_CONFIG_FILE=str(tmp_path / "none"),
                  AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
                  AWS_EC2_METADATA_DISABLED="true", **profile)
    assert out.returncode != 0
    assert said in out.stderr and "Traceback" not in out.stderr
