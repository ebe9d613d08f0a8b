"""Polish seen from outside (issue 25, items 25-37): one-line usage errors, hints that can be
pasted as printed, plain wording, and what people read of approvals and tool results."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from .conftest import turnlog, write_script

#: Words of the sentence around a printed command, where the command ends.
_PROSE = {"decides", "continues", "for", "(or", "then", "--", "turnlog"}


def hints(text: str) -> list[list[str]]:
    """Every ``turnlog ...`` command line printed in ``text``, as argv words (without
    ``turnlog``): hints are shell-quoted, so the shell's own splitting reads them."""
    found = []
    for line in text.splitlines():
        for segment in re.split(r"(?:^|\s|\()turnlog(?=\s)", line)[1:]:
            try:
                words = shlex.split(segment)
            except ValueError:
                words = segment.split()
            cut = next((i for i, w in enumerate(words) if w in _PROSE), len(words))
            if words[:cut]:
                found.append(words[:cut])
    return found


@pytest.mark.parametrize("args, where", [
    (("ls", "--bogus"), "turnlog ls --help"),
    (("ls", "--dbb", "x"), "turnlog ls --help"),
    (("show",), "turnlog show --help"),
    (("shw",), "turnlog --help"),
    (("--bogus",), "turnlog --help"),
    (("ls", "--limit", "0"), "turnlog ls --help"),
    (("run", "x", "--approve", ","), "turnlog run --help"),
])
def test_a_usage_error_is_one_line_in_turnlogs_wording_with_exit_2(args, where):
    out = turnlog(*args)
    assert out.returncode == 2
    assert out.stdout == ""
    (line,) = out.stderr.splitlines()
    assert line.startswith("Error: ") and line[7].islower()
    assert "Usage:" not in line and "Try " not in line
    assert line.endswith(f"(see {where})")
    assert ". (see" not in line  # no full stop inside the sentence


def test_usage_error_keeps_clicks_suggestion():
    line = turnlog("ls", "--dbb", "x").stderr.strip()
    assert "did you mean '--db'?" in line


def test_copy_of_a_missing_source_names_src_not_db(tmp_path):
    out = turnlog("copy", tmp_path / "nope.db", tmp_path / "x.db")
    assert out.returncode == 2
    assert "--db" not in out.stderr and "SRC" in out.stderr
    assert not (tmp_path / "x.db").exists()


def test_resume_of_a_finished_conversation_says_so_plainly(db):
    cid = json.loads(turnlog("demo", "--db", db, "--json").stdout)["conversation_id"]
    out = turnlog("resume", cid, "--db", db)
    assert out.returncode == 0
    assert "not unfinished" not in out.stdout
    assert f"conversation {cid} has already finished" in out.stdout


def _run_hints(text: str, cwd: Path) -> list[tuple[list[str], object]]:
    ran = []
    for words in hints(text):
        ran.append((words, turnlog(*words, cwd=cwd)))
    return ran


def test_every_hint_of_an_approval_scenario_runs_as_printed(tmp_path):
    """run --approve, show, approve, resume, fork, show of the fork: each printed command
    is pasted as it is (from another directory than the script's) and works."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write_script(tmp_path / "s.json",
                 {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
                 {"text": "3"})
    db = tmp_path / "j.db"
    out = turnlog("run", "add", "--id", "c1", "--script", "s.json", "--tools", "demo",
                  "--approve", "add", "--db", db, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    printed = hints(out.stdout)
    assert [w[0] for w in printed] == ["approve", "resume"]
    assert printed[1] == ["resume", "c1", "--tools", "demo", "--script", "s.json", "--db", str(db)]

    shown = turnlog("show", "c1", "--db", db).stdout
    decide, resume = hints(shown)
    assert decide[0] == "approve" and resume[:4] == ["resume", "c1", "--tools", "demo"]
    approved = turnlog(*decide, cwd=elsewhere)
    assert approved.returncode == 0, approved.stderr
    (again,) = hints(approved.stdout)
    assert again == resume
    finished = turnlog(*again, cwd=elsewhere)
    assert finished.returncode == 0, finished.stderr
    assert "completed" in finished.stdout

    forked = turnlog("fork", "c1", "--at", "3", "--db", db)
    for words, result in _run_hints(forked.stdout, elsewhere):
        assert result.returncode == 0, (words, result.stderr)
    fid = json.loads(turnlog("fork", "c1", "--at", "3", "--db", db, "--json").stdout)[
        "conversation_id"]
    fork_page = turnlog("show", fid, "--db", db).stdout
    commands = hints(fork_page)
    assert ["show", "c1", "--db", str(db)] in commands
    for words, result in _run_hints(fork_page, elsewhere):
        assert result.returncode == 0, (words, result.stderr)


def _paused_with_reason(tmp_path: Path, db: Path, *extra: str):
    write_script(tmp_path / "s.json",
                 {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
                 {"text": "3"})
    return turnlog("run", "add", "--id", "c1", "--script", tmp_path / "s.json", "--tools", "demo",
                   "--approve", "add", "--db", db, *extra)


def test_show_renders_approvals_as_sentences_not_json(tmp_path, db):
    _paused_with_reason(tmp_path, db)
    turnlog("approve", "c1", "--all", "--no", "--as", "ann", "--reason", "not today", "--db", db)
    text = turnlog("show", "c1", "--db", db).stdout
    assert "approval_requested" not in text and "approval_decided" not in text
    assert not re.search(r"[0-9a-f]{64}", text)  # no hashes for people to read
    assert re.search(r"^\s+5  tool add waits for approval  \[call_1_1\]$", text, re.M)
    assert re.search(r"^\s+6  DENIED by ann: not today  \[call_1_1\]$", text, re.M)


def test_approve_reason_is_recorded_and_shown_to_the_approver(tmp_path, db):
    why = "sums need a second pair of eyes"
    out = _paused_with_reason(tmp_path, db, "--approve-reason", why)
    assert out.returncode == 0, out.stderr
    assert f"call_1_1 add({{\"a\": 1, \"b\": 2}}): {why}" in out.stdout
    events = json.loads(turnlog("show", "c1", "--db", db, "--json").stdout)["events"]
    (asked,) = [e["payload"] for e in events if e["type"] == "approval_requested"]
    assert asked["reason"] == why
    assert events[0]["payload"]["approve_reason"] == why
    assert f"waits for approval: {why}" in turnlog("show", "c1", "--db", db).stdout
    listing = turnlog("approve", "c1", "--yes", "--as", "bob", "--db", db)
    assert listing.returncode == 2 and why in listing.stderr and "call_1_1" in listing.stderr
    assert len(listing.stderr.splitlines()) == 1
    decided = turnlog("approve", "c1", "--all", "--yes", "--as", "bob", "--db", db)
    assert decided.returncode == 0 and f"it waited because: {why}" in decided.stdout


def test_approve_reason_without_approve_is_refused_and_writes_nothing(db):
    out = turnlog("run", "x", "--approve-reason", "why", "--db", db)
    assert out.returncode == 2 and "--approve TOOL" in out.stderr
    assert not db.exists()


def test_approve_reason_in_python_survives_a_resume_by_another_loop(journal):
    from turnlog.engine.demo import demo_tools
    from turnlog.engine.loop import Loop
    from turnlog.engine.providers.scripted import ScriptedProvider

    script = [{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
              {"tool_calls": [{"name": "add", "arguments": {"a": 3, "b": 4}}]}, {"text": "ok"}]
    loop = Loop(journal, ScriptedProvider(script), demo_tools(), approve=["add"],
                approve_reason="every sum")
    assert loop.start("go", conversation_id="p").status == "awaiting_approval"
    loop.decide("p", "call_1_1", True, "ann")
    other = Loop(journal, ScriptedProvider(script), demo_tools())  # no reason given here
    assert other.resume("p").status == "awaiting_approval"
    reasons = [json.loads(e.payload).get("reason") for e in journal.read("p")
               if e.type == "approval_requested"]
    assert reasons == ["every sum", "every sum"]


def test_approve_reason_must_be_text():
    from turnlog.engine.errors import EngineError
    from turnlog.engine.loop import Loop
    from turnlog.engine.providers.scripted import ScriptedProvider
    from turnlog.engine.tools import tool
    from turnlog.journal import Journal

    @tool
    def x() -> dict:
        """A tool to approve."""
        return {}

    with pytest.raises(EngineError, match="approve_reason"):
        Loop(Journal(":memory:"), ScriptedProvider([]), [x], approve=["x"], approve_reason="  ")


def test_show_leaves_out_the_default_success_sentence_unless_full(db):
    cid = json.loads(turnlog("demo", "--db", db, "--json").stdout)["conversation_id"]
    noise = "The requested operation has been finished as requested."
    short = turnlog("show", cid, "--db", db).stdout
    assert noise not in short
    assert re.search(r"tool add ok in \d+ ms: \{\"sum\":5\.0\}$", short, re.M)
    assert noise in turnlog("show", cid, "--db", db, "--full").stdout  # what the model read


def test_audit_prints_every_median_and_p95_with_the_same_precision(db):
    for _ in range(3):
        turnlog("demo", "--db", db)
    lines = turnlog("audit", "--db", db).stdout.splitlines()
    start = lines.index("tools:") + 2
    end = lines.index("", start)
    rows = [line.split() for line in lines[start:end] if not line.startswith("  refused")]
    assert {r[0] for r in rows} == {"add", "get_current_time", "get_weather"}
    for row in rows:
        for cell in row[-2:]:
            assert re.fullmatch(r"\d[\d,]*\.\d\d", cell), row


def _doc_section(name: str) -> str:
    from .conftest import ROOT

    doc = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    return doc.split(f"\n## turnlog {name}\n", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("command", [
    ("audit",), ("audit", "--check"), ("verify",), ("ls",), ("heads",), ("show", "CID"),
    ("demo",), ("resume", "CID"), ("approve", "c1", "--all", "--yes", "--as", "ann"),
])
def test_every_top_level_json_key_is_documented_in_its_section(tmp_path, db, command):
    cid = json.loads(turnlog("demo", "--db", db, "--json").stdout)["conversation_id"]
    if command[0] == "approve":
        _paused_with_reason(tmp_path, db)
    out = turnlog(*[cid if w == "CID" else w for w in command], "--db", db, "--json")
    document = json.loads(out.stdout)
    keys = set((document[0] if isinstance(document, list) else document))
    section = _doc_section("run" if command[0] in ("demo", "resume") else command[0])
    missing = {k for k in keys if f"`{k}`" not in section}
    assert not missing, f"{command[0]} --json keys not in docs/cli.md: {sorted(missing)}"


def test_every_hint_the_demo_prints_runs_as_printed_from_elsewhere(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = turnlog("demo", "--db", tmp_path / "d.db")
    printed = hints(out.stdout.split("Next, try:", 1)[1])
    assert len(printed) == 5
    for words, result in _run_hints(out.stdout.split("Next, try:", 1)[1], elsewhere):
        assert result.returncode == 0, (words, result.stderr)


def test_a_conversation_started_in_python_says_its_resume_needs_its_tools(db):
    from turnlog.engine.demo import demo_tools
    from turnlog.engine.loop import Loop
    from turnlog.engine.providers.scripted import ScriptedProvider
    from turnlog.journal import Journal

    with Journal(str(db)) as journal:
        Loop(journal, ScriptedProvider([{"tool_calls": [{"name": "add", "arguments": {
            "a": 1, "b": 2}}]}]), demo_tools(), approve=["add"]).start("go", conversation_id="p")
    shown = turnlog("show", "p", "--db", db).stdout
    assert f"turnlog resume p --db {db} (it was not started by turnlog run" in shown
    decided = turnlog("approve", "p", "--all", "--yes", "--as", "ann", "--db", db).stdout
    assert "add the tools and script it ran with" in decided
