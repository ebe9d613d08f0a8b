"""What a new user meets beyond the defects: orientation, ls, colour, progress, cosmetics,
the scripted provider's per-turn cost, the interruption marker's law, ``import turnlog``."""

from __future__ import annotations

import importlib

import json
import re

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from .conftest import turnlog, write_script

ANSI = re.compile(r"\x1b\[")


def test_turnlog_alone_prints_a_short_orientation():
    out = turnlog()
    assert out.returncode == 0
    assert "journal" in out.stdout and "turnlog demo" in out.stdout
    assert "turnlog ls" in out.stdout and "turnlog verify" in out.stdout
    assert len(out.stdout.splitlines()) <= 15


def test_ls_has_a_header_times_counts_newest_first_and_filters(tmp_path, db):
    ok = write_script(tmp_path / "ok.json", {"text": "fine"})
    bad = write_script(tmp_path / "bad.json", {"error": {"type": "server", "message": "down"}})
    for cid, script in (("first", ok), ("second", bad), ("third", ok)):
        turnlog("run", "hi", "--id", cid, "--script", script, "--db", db)
    out = turnlog("ls", "--db", db)
    header, *rows = out.stdout.splitlines()
    assert header.split()[:3] == ["CONVERSATION", "STATUS", "UPDATED"]
    assert [r.split()[0] for r in rows] == ["third", "second", "first"]
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", rows[0])
    assert not ANSI.search(out.stdout)  # piped: no colour
    assert [r.split()[0] for r in turnlog("ls", "--db", db, "--limit", "2").stdout.splitlines()[1:]] \
        == ["third", "second"]
    failed = json.loads(turnlog("ls", "--db", db, "--status", "failed", "--json").stdout)
    assert [r["conversation_id"] for r in failed] == ["second"]
    assert {"started_at", "updated_at", "turn_count", "events"} <= set(failed[0])
    assert json.loads(turnlog("ls", "--db", db, "--since", "2000-01-01", "--json").stdout)
    assert json.loads(turnlog("ls", "--db", db, "--since", "2999-01-01", "--json").stdout) == []
    out = turnlog("ls", "--db", db, "--since", "yesterday-ish")
    assert out.returncode == 2 and "not a date" in out.stderr


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch):
    import sys

    from turnlog.engine.cli._common import colour

    class Tty:
        def isatty(self) -> bool:
            return True

        def write(self, s: str) -> None:  # pragma: no cover - never written to
            pass

    monkeypatch.setattr(sys, "stdout", Tty())
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert ANSI.search(colour("failed", "failed"))
    monkeypatch.setenv("NO_COLOR", "1")
    assert colour("failed", "failed") == "failed"
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setattr(sys, "stdout", open(__file__))  # noqa: SIM115 - not a terminal
    assert colour("failed", "failed") == "failed"


def test_replay_all_piped_prints_no_progress_bar(db):
    turnlog("demo", "--db", db)
    out = turnlog("replay", "--all", "--db", db)
    assert out.returncode == 0 and out.stderr == ""


def test_markdown_export_separates_a_tool_call_from_the_text_before_it(db):
    cid = json.loads(turnlog("demo", "--db", db, "--json").stdout)["conversation_id"]
    text = turnlog("export", cid, "--format", "markdown", "--db", db).stdout
    assert "time.\n\n**Tool call** `get_weather`" in text


def test_diff_cuts_both_columns_and_marks_the_cut(db, tmp_path):
    long = "word " * 40
    script = write_script(tmp_path / "s.json", {"text": long})
    for cid in ("a", "b"):
        turnlog("run", long, "--id", cid, "--script", script, "--db", db)
    lines = turnlog("diff", "a", "b", "--db", db).stdout.splitlines()
    user = next(line for line in lines if line.strip().startswith("user:"))
    left, right = user.split(" | ")
    assert left.rstrip().endswith("…") and right.endswith("…")
    assert len(left.strip()) == len(right.strip())


def test_signature_only_thinking_says_so_instead_of_printing_nothing():
    from turnlog.engine.cli._timeline import timeline

    events = [{"seq": 4, "type": "model_responded", "payload": {
        "turn": 1, "parts": [{"type": "thinking", "text": "", "signature": "abc"},
                             {"type": "text", "text": "hi"}], "usage": {}}}]
    lines = timeline(events)
    assert not any(line.rstrip().endswith("(thinking)") for line in lines)
    assert any("only its signature" in line for line in lines)


def test_timeline_cuts_long_text_on_a_word_boundary():
    from turnlog.engine.cli._timeline import timeline

    text = "alpha " * 100
    line = timeline([{"seq": 2, "type": "user_message",
                      "payload": {"parts": [{"type": "text", "text": text}]}}])[0]
    assert "alpha…" in line and "alph…" not in line


def test_audit_prints_every_cost_the_same_way():
    from turnlog.engine.cli.audit import money

    assert [money(v) for v in (None, 0, 0.00001, 0.0001, 1234.5)] == [
        "unpriced", "0", "<0.0001", "0.0001", "1,234.5000"]


def test_the_scripted_provider_encodes_each_message_once_per_run_not_per_turn(monkeypatch):
    import turnlog.engine.providers.scripted as scripted
    from turnlog.engine.demo import demo_tools
    from turnlog.engine.loop import Loop
    from turnlog.journal import Journal

    encoded = []
    real = scripted._encode
    monkeypatch.setattr(scripted, "_encode", lambda obj: encoded.append(1) or real(obj))
    n = 200
    turns = [{"tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}}]} for i in range(n)]
    result = Loop(Journal(":memory:"), scripted.ScriptedProvider(turns + [{"text": "done"}]),
                  demo_tools()).start("go", max_turns=n + 1)
    assert result.status == "completed" and result.turn_count == n + 1
    messages = 1 + 2 * n + 1  # user, then an assistant and a tool message per tool turn
    # each message once, plus the fixed parts (system, tools, parameters) and the output per turn
    assert len(encoded) <= messages + 3 + 2 * (n + 1)


# the interruption marker: recorded anywhere a run is unfinished, it changes nothing ---------

def _recorded_events():
    from turnlog.engine.demo import DEMO_PROMPT, DEMO_SCRIPT, demo_tools
    from turnlog.engine.model.events import decode_event
    from turnlog.engine.loop import Loop
    from turnlog.engine.providers.scripted import ScriptedProvider
    from turnlog.journal import Journal

    j = Journal(":memory:")
    Loop(j, ScriptedProvider(DEMO_SCRIPT), demo_tools()).start(DEMO_PROMPT, conversation_id="d")
    return [decode_event(e.type, e.version, e.payload) for e in j.read("d")]


EVENTS = _recorded_events()


@given(st.sets(st.integers(min_value=1, max_value=len(EVENTS) - 1)))
def test_run_interrupted_markers_leave_the_folded_state_unchanged(positions):
    from turnlog.engine.model.events import RunInterrupted
    from turnlog.engine.model.state import StateBuilder

    plain, marked = StateBuilder(), StateBuilder()
    for i, event in enumerate(EVENTS):
        plain.apply(event)
        marked.apply(event)
        if i + 1 in positions and marked.accepts(RunInterrupted()):
            marked.apply(RunInterrupted())
    a, b = plain.state(), marked.state()
    assert msgspec.structs.replace(b, seq=a.seq) == a
    assert not StateBuilder(a).accepts(RunInterrupted())  # a finished run takes no marker


def test_import_turnlog_is_the_one_public_import():
    import turnlog
    engine, journal, replay = (importlib.import_module(f"turnlog.{name}") for name in ("engine", "journal", "replay"))

    def isort(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)

    assert list(turnlog.__all__) == sorted(turnlog.__all__, key=isort)
    for package in (engine, journal, replay):
        for name in package.__all__:
            if (package, name) == (replay, "replay"):  # the package, called as the function
                assert turnlog.replay is replay and callable(replay)
                continue
            if (package, name) == (engine, "audit"):  # the package, called as the function
                assert turnlog.audit is engine.audit.audit and callable(engine.audit)
                continue
            assert getattr(turnlog, name) is getattr(package, name), name
    assert set(turnlog.__all__) == set(engine.__all__) | set(journal.__all__) | set(replay.__all__)
    assert turnlog.__doc__ and "import turnlog" in turnlog.__doc__


def test_replay_of_an_imported_conversation_says_an_imported(tmp_path, db):
    transcript = tmp_path / "t.json"
    transcript.write_text(json.dumps([{"role": "user", "content": "hi"},
                                      {"role": "assistant", "content": "hello"}]))
    assert turnlog("import", transcript, "--id", "imp", "--db", db).returncode == 0
    out = turnlog("replay", "imp", "--db", db)
    assert out.returncode == 0 and "holds an imported model message" in out.stdout


def test_load_heads_reads_the_plain_heads_lines(tmp_path):
    from turnlog.journal import Head, load_heads

    path = tmp_path / "heads.txt"
    path.write_text(f"a  1  {'0' * 64}\n\nb 22 {'f' * 64}\n")
    assert load_heads(path) == [Head("a", 1, "0" * 64), Head("b", 22, "f" * 64)]


def test_replay_of_a_one_event_fork_says_one_event(db):
    cid = json.loads(turnlog("demo", "--db", db, "--json").stdout)["conversation_id"]
    assert turnlog("fork", cid, "--at", "2", "--id", "f", "--db", db).returncode == 0
    out = turnlog("replay", "f", "--db", db)
    assert out.returncode == 0 and "f: ok, 1 event replayed identically" in out.stdout
