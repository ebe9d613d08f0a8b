"""Issue 25's correctness defects (items 10-22, 24), each reproduced as a user meets it:
the installed console script in a subprocess."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from .conftest import turnlog


def _demo(db: Path) -> str:
    out = turnlog("demo", "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["conversation_id"]


def _show(db: Path, cid: str) -> dict:
    out = turnlog("show", cid, "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


# 10. an openai-responses export imports back ----------------------------------------------

@pytest.mark.parametrize("forced", [(), ("--format", "openai-responses")])
def test_an_openai_responses_export_imports_back(tmp_path, db, forced):
    cid = _demo(db)
    exported = tmp_path / "responses.json"
    out = turnlog("export", cid, "--format", "openai-responses", "-o", exported, "--db", db)
    assert out.returncode == 0, out.stderr
    assert "model" not in json.loads(exported.read_text())  # the export has none
    out = turnlog("import", exported, *forced, "--db", tmp_path / "back.db", "--json")
    assert out.returncode == 0, out.stderr
    back = json.loads(out.stdout)
    assert back["formats"] == {"openai-responses": len(json.loads(exported.read_text())["input"])}
    again = tmp_path / "again.json"
    out = turnlog("export", back["conversation_id"], "--format", "openai-responses", "-o", again,
                  "--db", tmp_path / "back.db")
    assert out.returncode == 0, out.stderr
    assert json.loads(again.read_text()) == json.loads(exported.read_text())


def test_an_orchestrator_entry_with_a_string_input_is_still_one(tmp_path, db):
    entry = tmp_path / "orch.json"
    entry.write_text(json.dumps({"input": "refine claim 1", "context": "patents"}))
    out = turnlog("import", entry, "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["formats"] == {"orchestrator": 1}


# 11. contradicting flags are refused ----------------------------------------------------

@pytest.mark.parametrize("args, words", [
    (("approve", "c-1", "--all", "--yes", "--no", "--as", "alice"), "--yes and --no"),
    (("approve", "c-1", "--all", "--no", "--yes", "--as", "alice"), "--yes and --no"),
    (("tail", "--once", "--follow"), "--follow and --once"),
])
def test_both_halves_of_a_flag_pair_exit_2_and_write_nothing(db, args, words):
    cid = _demo(db)
    args = tuple(cid if a == "c-1" else a for a in args)
    before = db.read_bytes()
    out = turnlog(*args, "--db", db)
    assert out.returncode == 2, out.stdout
    assert words in out.stderr and "contradict" in out.stderr
    assert db.read_bytes() == before


# 12. a command that needs a journal never turns an empty file into one ------------------

@pytest.mark.parametrize("args", [
    ("replay", "--all"),
    ("approve", "c-1", "--all", "--yes", "--as", "alice"),
    ("resume", "c-1"),
    ("fork", "c-1", "--at", "1"),
])
def test_an_empty_file_stays_empty(tmp_path, args):
    empty = tmp_path / "empty.db"
    empty.touch()
    out = turnlog(*args, "--db", empty)
    assert out.returncode == 2, out.stdout
    assert "empty file, not a turnlog journal" in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]
    assert empty.stat().st_size == 0


# 13, 14. an MCP server that dies at start: said so, with its last stderr line; no file left --

def test_an_mcp_server_that_dies_at_start_is_named_with_its_last_stderr_line(tmp_path, db):
    server = tmp_path / "server.py"
    server.write_text("import sys\nprint('loading', file=sys.stderr)\n"
                      "print(\"ModuleNotFoundError: No module named 'fastmcp'\", file=sys.stderr)\n"
                      "sys.exit(3)\n")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [{"text": "hi"}]}))
    out = turnlog("run", "hi", "--script", script, "--mcp", f"{sys.executable} {server}",
                  "--db", db, TURNLOG_MCP_TIMEOUT="240")
    assert out.returncode == 2, out.stdout
    error = out.stderr.strip().splitlines()[-1]
    assert "failed to start" in error and "while the call ran" not in error
    assert "its last stderr line: ModuleNotFoundError: No module named 'fastmcp'" in error
    log = re.search(r"to its stderr, in (\S+\.log)", error).group(1)  # kept in a log (item 35)
    assert "loading" in Path(log).read_text() and "loading" not in out.stderr
    assert sorted(tmp_path.iterdir()) == sorted([server, script])  # no journal file


# 15. --tools MODULE:ATTR finds a module in the current directory, as python -m does ----------

def test_tools_from_a_module_in_the_current_directory(tmp_path):
    (tmp_path / "mytools.py").write_text(
        "from turnlog.engine.tools import tool\n\n\n@tool\ndef shout(text: str) -> str:\n"
        "    \"\"\"Shout it.\"\"\"\n    return text.upper()\n\n\nTOOLS = [shout]\n")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [
        {"tool_calls": [{"name": "shout", "arguments": {"text": "hi"}}]}, {"text": "done"}]}))
    out = turnlog("run", "go", "--script", "s.json", "--tools", "mytools:TOOLS", "--db", "t.db",
                  "--id", "c", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (done,) = [e for e in _show(tmp_path / "t.db", "c")["events"] if e["type"] == "tool_completed"]
    assert done["payload"]["success"] is True and "HI" in done["payload"]["content"]
    out = turnlog("run", "go", "--script", "s.json", "--tools", "nomodule:TOOLS", "--db", "t.db",
                  cwd=tmp_path)
    assert out.returncode == 2 and "No module named 'nomodule'" in out.stderr


# 22. approve --arguments refuses what is not JSON; NaN is never stored as null ---------------

def _paused(tmp_path: Path, db: Path) -> None:
    script = tmp_path / "pay.json"
    script.write_text(json.dumps({"turns": [
        {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}, {"text": "done"}]}))
    out = turnlog("run", "add", "--script", script, "--tools", "demo", "--approve", "add",
                  "--id", "c1", "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["awaiting_approval"] == ["call_1_1"]


@pytest.mark.parametrize("arguments", ['{"a": NaN, "b": 3}', '{"a": Infinity, "b": 3}',
                                       '{"a": -Infinity, "b": 3}'])
def test_approve_refuses_arguments_that_are_not_json(tmp_path, db, arguments):
    _paused(tmp_path, db)
    before = db.read_bytes()
    out = turnlog("approve", "c1", "--call", "call_1_1", "--yes", "--as", "alice",
                  "--arguments", arguments, "--db", db)
    assert out.returncode == 2, out.stdout
    assert "--arguments is not JSON" in out.stderr and "not a JSON number" in out.stderr
    assert db.read_bytes() == before
    assert [e["type"] for e in _show(db, "c1")["events"]][-1] == "approval_requested"


def test_decide_refuses_non_finite_arguments_in_python(tmp_path, db):
    from turnlog.engine.tools.approvals import ApprovalError, decide
    from turnlog.journal import Journal

    _paused(tmp_path, db)
    with Journal(db) as journal:
        last = journal.last_seq("c1")
        with pytest.raises(ApprovalError, match="not JSON data: NaN"):
            decide(journal, "c1", "call_1_1", True, "alice", arguments={"a": float("nan"), "b": 3})
        assert journal.last_seq("c1") == last


def test_a_tool_result_holding_nan_is_a_failed_result_not_null(tmp_path):
    (tmp_path / "nantool.py").write_text(
        "from turnlog.engine.tools import tool\n\n\n@tool\ndef measure() -> dict:\n"
        "    \"\"\"Measure.\"\"\"\n    return {\"value\": float(\"nan\")}\n\n\nTOOLS = [measure]\n")
    (tmp_path / "s.json").write_text(json.dumps({"turns": [
        {"tool_calls": [{"name": "measure", "arguments": {}}]}, {"text": "done"}]}))
    out = turnlog("run", "go", "--script", "s.json", "--tools", "nantool:TOOLS", "--db", "n.db",
                  "--id", "c", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (done,) = [e["payload"] for e in _show(tmp_path / "n.db", "c")["events"]
               if e["type"] == "tool_completed"]
    assert done["success"] is False and done.get("data") is None
    assert "not JSON data: NaN and Infinity are not JSON numbers" in done["error"]


# 21. an export never turns a call with no result into a result --------------------------------

@pytest.mark.parametrize("wire", ["openai", "openai-responses", "anthropic", "gemini"])
def test_a_call_waiting_for_approval_is_exported_and_imported_back_as_pending(tmp_path, db, wire):
    _paused(tmp_path, db)
    exported = tmp_path / f"{wire}.json"
    out = turnlog("export", "c1", "--format", wire, "-o", exported, "--db", db)
    assert out.returncode == 0, out.stderr
    out = turnlog("import", exported, "--id", "back", "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["status"] == "active"
    events = _show(db, "back")["events"]
    assert [e["type"] for e in events if e["type"].startswith("tool_")] == []
    assert [e["type"] for e in events][-1] == "model_responded"


# 17. one timestamp format: the journal's --------------------------------------------------------

def test_the_approvals_view_has_one_timestamp_format(tmp_path, db):
    import re
    import sqlite3

    _paused(tmp_path, db)
    out = turnlog("approve", "c1", "--all", "--yes", "--as", "alice", "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
    assert stamp.fullmatch(json.loads(out.stdout)["decisions"][0]["decided_at"])
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (requested, decided), = conn.execute("SELECT requested_at, decided_at FROM approvals")
    finally:
        conn.close()
    assert stamp.fullmatch(requested) and stamp.fullmatch(decided), (requested, decided)


# 18. an API-format message keeps its format with a vendor key; timestamp is no unknown key ----

def test_an_api_message_with_a_vendor_key_stays_api_and_its_timestamp_is_known(tmp_path, db):
    transcript = tmp_path / "api.json"
    transcript.write_text(json.dumps([
        {"role": "user", "content": "hi", "timestamp": "2025-08-27T21:40:00.000Z", "id": "m1"},
        {"role": "assistant", "content": "hello", "timestamp": "2025-08-27T21:40:01.000Z"}]))
    out = turnlog("import", transcript, "--id", "a", "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["formats"] == {"api": 2}
    assert result["warnings"] == ["entry 0: unknown keys kept as `extra` and exported to no "
                                  "wire: id"]
    started, user, *_ = _show(db, "a")["events"]
    assert started["payload"]["provider"] == "imported"  # not attributed to OpenAI
    assert user["payload"]["timestamp"] == "2025-08-27T21:40:00.000Z"
    assert {"type": "opaque", "provider": "api", "kind": "extra", "data": {"id": "m1"}} in [
        {k: p[k] for k in ("type", "provider", "kind", "data")} for p in user["payload"]["parts"]
        if p["type"] == "opaque"]


def test_an_openai_message_does_not_report_its_timestamp_as_unknown(tmp_path, db):
    transcript = tmp_path / "openai.json"
    transcript.write_text(json.dumps([
        {"role": "user", "content": "hi", "timestamp": "2025-08-27T21:40:00.000Z"},
        {"role": "assistant", "content": "hello", "refusal": None, "x_vendor": 1,
         "timestamp": "2025-08-27T21:40:01.000Z"}]))
    out = turnlog("import", transcript, "--id", "o", "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["formats"] == {"api": 1, "openai": 1}
    assert result["warnings"] == ["entry 1: unknown keys kept as `extra` and exported back to "
                                  "openai: x_vendor"]


# 24. an import bounded in memory: refused above its documented bounds, before any journal ----

def test_an_import_over_the_byte_bound_is_refused_before_reading(tmp_path, db):
    from turnlog.engine.formats.importer import MAX_IMPORT_BYTES

    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:
        f.truncate(MAX_IMPORT_BYTES + 1)  # sparse: nothing is written, nothing need be read
    out = turnlog("import", huge, "--db", db)
    assert out.returncode == 2, out.stdout
    assert "an import reads at most 256 MiB" in out.stderr and "split it" in out.stderr
    assert not db.exists()


def test_an_import_over_the_entry_bound_is_refused_and_writes_nothing(tmp_path, db):
    from turnlog.engine.formats.importer import MAX_IMPORT_ENTRIES

    many = tmp_path / "many.json"
    many.write_text("[" + ",".join(['{"role":"user","content":"m"}'] * (MAX_IMPORT_ENTRIES + 1))
                    + "]")
    out = turnlog("import", many, "--db", db)
    assert out.returncode == 2, out.stdout
    assert f"has {MAX_IMPORT_ENTRIES + 1:,} entries" in out.stderr
    assert f"an import takes at most {MAX_IMPORT_ENTRIES:,}" in out.stderr
    assert not db.exists()
