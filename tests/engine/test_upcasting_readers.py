"""A version-2 event type reads as version 2 everywhere a journal holding its version-1 events
is read: the CLI timeline (``show``, ``tail``), exports, the viewer's timeline, the state.

The demonstration bumps ``conversation_halted`` to version 2 for the test: its version 1 (as
this test pretends) stored why in ``why``; version 2 (the struct as it is) in ``reason``. The
upcaster is registered in the one place, ``register_upcaster``; nothing else knows version 1.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from turnlog.engine.model import events
from turnlog.engine.audit import EXTENSIONS, Reader
from turnlog.engine.cli import cli
from turnlog.engine.cli._timeline import timeline_of
from turnlog.engine.model.conversation import Conversation, load_state
from turnlog.engine.model.events import (
    VERSIONS,
    ConversationHalted,
    ConversationStarted,
    UserMessage,
    decode_event,
    payload_of,
    register_upcaster,
)
from turnlog.engine.formats.exporter import export_conversation
from turnlog.engine.model.messages import Text
from turnlog.journal import Journal, NewEvent

_V1 = json.dumps({"type": "conversation_halted", "why": "budget spent", "refusals": 2},
                 sort_keys=True, separators=(",", ":"))


@pytest.fixture
def version_2(monkeypatch):
    """``conversation_halted`` at version 2, lifted from version 1 by one registered upcaster."""
    monkeypatch.setitem(VERSIONS, "conversation_halted", 2)
    monkeypatch.setitem(events._UPCASTERS, ("conversation_halted", 1), None)  # undone after

    @register_upcaster("conversation_halted", 1)
    def _why_is_reason(data):
        data["reason"] = data.pop("why")
        return data


@pytest.fixture
def old_journal(tmp_path):
    """A journal whose conversation ends with a version-1 ``conversation_halted``."""
    path = str(tmp_path / "old.db")
    with Journal(path, extensions=EXTENSIONS) as journal:
        conv = Conversation.start(journal, ConversationStarted(conversation_id="c", provider="p",
                                                               model="m"))
        conv.append(UserMessage(parts=(Text(text="go"),)))
        journal.append("c", [NewEvent(type="conversation_halted", version=1, payload=_V1)], 2)
    return path


def _cli(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_a_v1_event_reads_as_v2_in_the_state_the_timelines_the_exports_and_the_viewer(
        version_2, old_journal):
    upcast = {"type": "conversation_halted", "reason": "budget spent", "refusals": 2}
    assert payload_of("conversation_halted", 1, _V1) == upcast
    assert decode_event("conversation_halted", 1, _V1) == ConversationHalted(reason="budget spent",
                                                                            refusals=2)
    with Journal(old_journal) as journal:
        assert load_state(journal, "c").status == "halted"
        assert load_state(journal, "c").warning == "budget spent"
        assert any("budget spent" in line for line in timeline_of(journal, "c"))
        lines = [json.loads(line) for line in export_conversation(journal, "c", "jsonl").splitlines()]
        assert lines[-1]["version"] == 2 and lines[-1]["payload"] == upcast
        assert "budget spent" in export_conversation(journal, "c", "markdown")
    shown = json.loads(_cli("show", "c", "--db", old_journal, "--json"))
    assert shown["events"][-1]["payload"] == upcast, shown["events"][-1]
    assert "budget spent" in _cli("show", "c", "--db", old_journal)
    tailed = [json.loads(line) for line in
              _cli("tail", "--db", old_journal, "--from-position", 0, "--count", 3, "--timeout", 5, "--json").splitlines()]
    assert tailed[-1]["payload"] == upcast
    reader = Reader(old_journal)
    try:
        halted = [e for e in reader.timeline("c")["entries"] if e.get("status") == "halted"]
        assert [e["text"] for e in halted] == ["budget spent"], reader.timeline("c")["entries"]
    finally:
        reader.close()


def test_without_its_upcaster_an_old_version_is_a_typed_error_naming_where(monkeypatch, old_journal):
    monkeypatch.setitem(VERSIONS, "conversation_halted", 2)
    with Journal(old_journal) as journal:
        with pytest.raises(events.CorruptEventError, match=r"no upcaster for 'conversation_halted' v1"):
            timeline_of(journal, "c")
    result = CliRunner().invoke(cli, ["show", "c", "--db", old_journal])
    assert result.exit_code != 0 and "stream 'c' seq 3" in result.output


def test_the_sql_that_reads_payload_fields_is_written_for_each_types_current_version():
    """What stays SQL (the views, the trigger-maintained projections, the audit's queries,
    the status walk) reads payload fields with JSON paths, inside the database, where no
    Python upcaster runs. They are written for version 1 of every type they name: bumping one
    of those types must come with SQL reading both shapes and a new views version, and this
    test says so."""
    from pathlib import Path

    import turnlog.engine.audit as audit_package
    from turnlog.engine.model.events import EVENT_TYPES

    folder = Path(audit_package.__file__).parent
    source = "\n".join((folder / f"{name}.py").read_text(encoding="utf-8")
                       for name in ("views", "projections", "sql", "costs", "status", "listing",
                                    "queries"))
    named = {tag for tag in EVENT_TYPES if f"'{tag}'" in source or f'"{tag}"' in source}
    assert {"conversation_started", "model_responded", "tool_completed", "approval_requested",
            "run_interrupted"} <= named
    assert {tag: VERSIONS[tag] for tag in named} == dict.fromkeys(named, 1), (
        "an event type the audit SQL reads changed version: update the SQL in engine/audit "
        "(and the views' version) to read the new shape and the old")
