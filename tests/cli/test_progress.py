"""Progress bars on long work (``verify``, ``audit``, ``import``, ``replay --all``): one helper,
a bar on a terminal only, nothing when piped or with ``--json``."""

from __future__ import annotations

import io
import json
import os
import pty
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import TURNLOG, env, turnlog


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_the_helper_draws_a_bar_on_a_terminal_and_moves_it():
    from turnlog.engine.cli._common import progress

    err = Terminal()
    with progress(4, label="checking", file=err) as bar:
        assert bar.shown
        bar.advance(1)
        bar.advance(3)
    assert "checking" in err.getvalue() and "100%" in err.getvalue()


def test_the_helper_takes_a_length_known_only_later():
    from turnlog.engine.cli._common import progress

    err = Terminal()
    with progress(None, label="importing", file=err) as bar:
        bar.at(1, 4)
        bar.at(4, 4)
    assert "25%" in err.getvalue() and "100%" in err.getvalue()


@pytest.mark.parametrize("kwargs", [{}, {"as_json": True}, {"show": False}])
def test_the_helper_is_silent_when_piped_with_json_or_told_so(kwargs):
    from turnlog.engine.cli._common import progress

    err = io.StringIO() if not kwargs else Terminal()
    with progress(3, label="x", file=err, **kwargs) as bar:
        assert not bar.shown
        bar.advance(3)
        bar.at(3, 3)
    assert err.getvalue() == ""


def test_show_forces_the_bar(capsys):
    from turnlog.engine.cli._common import progress

    err = Terminal()
    with progress(2, label="forced", show=True, file=err) as bar:
        bar.advance(2)
    assert "forced" in err.getvalue()


def _transcript(path: Path, turns: int) -> Path:
    entries = []
    for n in range(turns):
        entries += [{"role": "user", "content": f"question {n}"},
                    {"role": "assistant", "content": f"answer {n}"}]
    path.write_text(json.dumps(entries), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A journal with the demo and a 300-turn import, built once for the module."""
    path = tmp_path_factory.mktemp("template") / "j.db"
    assert turnlog("demo", "--db", path).returncode == 0
    big = _transcript(path.parent / "big.json", 300)
    assert turnlog("import", big, "--db", path).returncode == 0
    return path


@pytest.fixture
def journal_with_runs(template: Path, tmp_path: Path) -> Path:
    """A copy of the template journal, and ``again.json`` (300 turns) to import beside it."""
    copy = tmp_path / "j.db"
    shutil.copyfile(template, copy)
    _transcript(tmp_path / "again.json", 300)
    return copy


@pytest.mark.parametrize("command", [
    ["verify"], ["audit", "--check"], ["replay", "--all"], ["import", "again.json"],
])
def test_piped_commands_print_no_progress_bar(journal_with_runs, tmp_path, command):
    for as_json in (False, True):
        args = [*command, "--db", journal_with_runs, *(["--json"] if as_json else [])]

        out = turnlog(*args, cwd=tmp_path)

        assert out.returncode == 0, out.stderr
        assert out.stderr == ""
        if as_json:
            json.loads(out.stdout)


def _on_a_terminal(*args: object, cwd: Path) -> tuple[int, str]:
    """Run turnlog with stderr on a pseudo-terminal (stdout piped); return its code and stderr."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([*TURNLOG, *map(str, args)], stdout=subprocess.PIPE,
                                stderr=follower, cwd=cwd, env=env(NO_COLOR="1"))
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed: the command ended
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.communicate(timeout=300)
    finally:
        os.close(leader)
    return proc.returncode, b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize(("command", "label"), [
    (["verify"], "verifying"), (["audit"], "auditing"), (["import", "again.json"], "importing"),
    (["replay", "--all"], "replaying"),
])
def test_on_a_terminal_each_long_command_draws_the_bar(journal_with_runs, tmp_path, command,
                                                       label):
    code, err = _on_a_terminal(*command, "--db", journal_with_runs, cwd=tmp_path)

    assert code == 0, err
    assert label in err and "100%" in err
    code, err = _on_a_terminal(*command, "--json", "--db", journal_with_runs, cwd=tmp_path)
    assert code == 0, err
    assert label not in err  # --json: no bar even on a terminal


def test_the_library_reports_progress_to_the_end(tmp_path):
    from turnlog.engine.audit import audit, audit_steps
    from turnlog.engine.formats.importer import import_file
    from turnlog.engine.audit.views import EXTENSIONS, connect_readonly
    from turnlog.journal import Journal

    db = tmp_path / "j.db"
    heard: list[tuple[int, int]] = []
    with Journal(db, extensions=EXTENSIONS) as journal:
        result = import_file(journal, _transcript(tmp_path / "t.json", 100),
                             progress=lambda done, total: heard.append((done, total)))
    assert heard[-1] == (201, 201) and len(heard) >= 3
    assert [d for d, _ in heard] == sorted(d for d, _ in heard)
    conn = connect_readonly(db)
    try:
        for check in (False, True):
            steps: list[int] = []
            audit(conn, check=check, progress=steps.append)
            assert sum(steps) == audit_steps(check)
    finally:
        conn.close()
    assert result.events > 200


def test_copy_draws_the_bar_on_a_terminal_only(journal_with_runs, tmp_path):
    code, err = _on_a_terminal("copy", journal_with_runs, tmp_path / "tty.db", cwd=tmp_path)
    assert code == 0, err
    assert "copying" in err and "100%" in err

    for as_json in (False, True):
        out = turnlog("copy", journal_with_runs, tmp_path / f"piped{as_json}.db",
                      *(["--json"] if as_json else []), cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert out.stderr == ""
        if as_json:
            assert json.loads(out.stdout)["events"] > 600
