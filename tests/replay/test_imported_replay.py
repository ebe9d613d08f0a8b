"""Imported conversations replay, or are skipped with a reason: never a false divergence."""

from __future__ import annotations

import json

import pytest

from turnlog.engine.demo import DEMO_PROMPT, DEMO_SCRIPT, demo_tools
from turnlog.engine.formats.exporter import export_conversation
from turnlog.engine.formats.importer import import_entries, read_transcript
from turnlog.engine.loop import Loop
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.replay import fork, replay
from turnlog.replay.reports import replay_all


def _demo(journal, cid="c"):
    Loop(journal, ScriptedProvider(DEMO_SCRIPT), demo_tools()).start(DEMO_PROMPT, conversation_id=cid)


def _reimport(journal, source, fmt, new_id):
    entries, envelope = read_transcript(export_conversation(journal, source, fmt))
    return import_entries(journal, entries, envelope=envelope, conversation_id=new_id)


def test_a_jsonl_export_reimported_under_a_new_id_replays(journal):
    _demo(journal)
    _reimport(journal, "c", "jsonl", "copy")
    keys = [json.loads(e.payload).get("idempotency_key") for e in journal.read("copy")
            if e.type == "tool_started"]
    assert keys and all(keys)  # the read-only tool's key came along, unchanged
    result = replay(journal, "copy", collect=True)
    assert result.ok and result.skipped is None and result.checked == journal.last_seq("copy")


def test_a_reimported_fork_replays(journal):
    _demo(journal)
    fork(journal, "c", 4, new_id="f")
    Loop(journal, ScriptedProvider(DEMO_SCRIPT), demo_tools()).resume("f")
    _reimport(journal, "f", "jsonl", "fcopy")
    assert replay(journal, "fcopy", collect=True).ok


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "gemini", "datamachine"])
def test_a_provider_format_import_is_skipped_with_a_reason(journal, fmt):
    _demo(journal)
    _reimport(journal, "c", fmt, "copy")
    result = replay(journal, "copy", collect=True)
    assert result.ok and result.divergence is None
    assert "imported" in result.skipped


def test_replay_all_never_reports_an_import_as_diverged(journal):
    _demo(journal)
    for i, fmt in enumerate(["jsonl", "openai", "anthropic", "gemini", "datamachine"]):
        _reimport(journal, "c", fmt, f"copy{i}")
    report = replay_all(journal, record=False)
    assert all(r.ok for r in report.results), [str(r.divergence) for r in report.results]
