"""Every call the model made is in the ``tool_calls`` view and the audit: pending ones too,
and server tool calls (run by the provider) counted apart from the client's."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from turnlog.engine.audit.sql import EVENTS
from turnlog.engine.audit import AuditQuery, audit
from turnlog.engine.formats.importer import import_entries, import_file
from turnlog.engine.loop import run
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.engine.tools import tool
from turnlog.engine.audit.views import EXTENSIONS, connect_readonly
from turnlog.journal import Journal

CORPUS = Path(__file__).parent.parent / "data" / "corpus"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _audit(path: Path, source=None, **filters) -> dict:
    conn = connect_readonly(str(path))
    try:
        return audit(conn, AuditQuery(**filters), source=source)
    finally:
        conn.close()


def _view(path: Path, cid: str) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT call_id, tool, outcome, arguments FROM tool_calls "
                            "WHERE conversation_id = ? ORDER BY position, call_id", (cid,)).fetchall()
    finally:
        conn.close()


def test_an_imported_transcript_ending_on_calls_shows_them_pending(db_path):
    with Journal(str(db_path), extensions=EXTENSIONS) as j:
        import_entries(j, [
            {"role": "user", "content": "2+3 and 4+5?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "add", "arguments": '{"a":2,"b":3}'}},
                {"id": "b", "type": "function", "function": {"name": "add", "arguments": '{"a":4,"b":5}'}}]},
            {"role": "tool", "tool_call_id": "a", "content": "5"},
        ], fmt="openai", conversation_id="c")
    # a pending call's row is its response's (an imported result has no tool_started)
    assert _view(db_path, "c") == [("b", "add", "pending", '{"a":4,"b":5}'),
                                   ("a", "add", "succeeded", None)]
    for source in (None, EVENTS):
        tools = _audit(db_path, source)["tools"]
        assert (tools["add"]["calls"], tools["add"]["succeeded"], tools["add"]["pending"]) == (
            2, 1, 1)


def test_a_run_interrupted_before_its_tools_ran_leaves_its_calls_pending(db_path):
    def interrupt(event: str, payload: dict[str, Any]) -> None:
        if event == "model_responded":
            raise KeyboardInterrupt  # Ctrl-C between the response and its tools

    script = [{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}, {"text": "5"}]
    with Journal(str(db_path), extensions=EXTENSIONS) as j, pytest.raises(KeyboardInterrupt):
        run(j, "2+3?", provider=ScriptedProvider(script), tools=[add], conversation_id="r",
            observers=[interrupt])
    [(call_id, name, outcome, arguments)] = _view(db_path, "r")
    assert (name, outcome, json.loads(arguments)) == ("add", "pending", {"a": 2, "b": 3})
    report = _audit(db_path)
    assert report["tools"]["add"]["pending"] == report["tools"]["add"]["calls"] == 1
    assert report == _audit(db_path, EVENTS) | {"source": "projections"}
    with Journal(str(db_path), extensions=EXTENSIONS) as j:  # resumed: the call ran
        from turnlog.engine.loop import Loop

        Loop(j, ScriptedProvider(script[1:]), [add]).resume("r")
    assert [(c, o) for c, _n, o, _a in _view(db_path, "r")] == [(call_id, "succeeded")]
    assert _audit(db_path)["tools"]["add"]["pending"] == 0


def _server_calls(value: Any) -> Counter:
    """``server_tool_use``/``mcp_tool_use`` blocks of a file, by (kind, name), counted by hand."""
    found: Counter = Counter()
    if isinstance(value, dict):
        if value.get("type") in ("server_tool_use", "mcp_tool_use"):
            found[(value["type"], value["name"])] += 1
        for v in value.values():
            found += _server_calls(v)
    elif isinstance(value, list):
        for v in value:
            found += _server_calls(v)
    return found


@pytest.mark.parametrize("name", ["anthropic-web-search-citations-thinking.json",
                                  "anthropic-mcp-servers-tool-use.json",
                                  "anthropic-code-execution-web-fetch-20260209.json"])
def test_server_tool_calls_of_a_real_transcript_are_their_own_kind_in_the_audit(db_path, name):
    path = CORPUS / name
    expected = _server_calls(json.loads(path.read_text()))
    assert expected
    with Journal(str(db_path), extensions=EXTENSIONS) as j:
        import_file(j, path, conversation_id="s")
    for source in (None, EVENTS):
        report = _audit(db_path, source)
        assert {(s["kind"], s["tool"]): s["calls"] for s in report["server_tools"]} == expected
        server_names = {n for _k, n in expected}
        assert not server_names & set(report["tools"]), "never mixed with the client's tools"
    one = next(iter(expected))
    narrowed = _audit(db_path, tool=one[1])
    assert narrowed["conversations"] == 1
    assert [(s["kind"], s["tool"]) for s in narrowed["server_tools"]] == [one]
