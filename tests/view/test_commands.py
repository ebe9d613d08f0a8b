"""``turnlog view`` and ``turnlog report`` as a user runs them, and the extra's isolation."""

from __future__ import annotations

import re
import subprocess
import sys

import httpx
import pytest
from click.testing import CliRunner

from turnlog.engine.cli import cli

from ..cli.conftest import TURNLOG, env, turnlog
from .conftest import digest


def test_importing_the_cli_and_loading_the_commands_imports_no_web_stack():
    code = ("import sys, click; from turnlog.engine.cli import cli; ctx = click.Context(cli); "
            "[cli.get_command(ctx, n) for n in cli.list_commands(ctx)]; "
            "print(sorted(m for m in ('starlette', 'uvicorn', 'jinja2') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(("command", "module"), [("view", "starlette"), ("view", "uvicorn"),
                                                 ("report", "jinja2")])
def test_without_the_extra_the_commands_say_how_to_install_it(db, monkeypatch, command, module):
    monkeypatch.setitem(sys.modules, module, None)
    args = [command, "--db", str(db)] + (["demo"] if command == "report" else [])
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert "pip install -e '.[view]' in turnlog's checkout" in result.output and module in result.output


def test_view_serves_the_journal_read_only_on_the_port_it_prints(db):
    before = digest(db)
    proc = subprocess.Popen([*TURNLOG, "view", "--db", str(db), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("serving on http://127.0.0.1:"), (line, proc.stderr.read())
        url = line.removeprefix("serving on ")
        with httpx.Client(base_url=url, timeout=60) as client:
            assert "demo-fork" in client.get("/").text
            assert client.get("/conversation", params={"id": "demo"}).status_code == 200
            assert client.get("/audit").status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert digest(db) == before


def test_view_refuses_a_missing_journal_and_a_taken_port(tmp_path, db):
    missing = turnlog("view", "--db", tmp_path / "none.db", "--port", "0")
    assert missing.returncode == 2 and "no journal at" in missing.stderr
    assert not (tmp_path / "none.db").exists()
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        busy = turnlog("view", "--db", db, "--port", taken.getsockname()[1])
    assert busy.returncode == 2 and "cannot listen on 127.0.0.1:" in busy.stderr


def test_report_writes_one_self_contained_file(db, tmp_path):
    before = digest(db)
    out = tmp_path / "r.html"
    done = turnlog("report", "demo", "--db", db, "-o", out)
    assert done.returncode == 0, done.stderr
    html = out.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>") and "no forecast for" in html
    assert not re.search(r'(src|href)="(?!data:)', html)  # nothing to fetch
    assert digest(db) == before
    stdout = turnlog("report", "demo", "--db", db)
    assert stdout.returncode == 0 and stdout.stdout == html


def test_report_of_an_unknown_conversation_is_exit_2(db):
    done = turnlog("report", "nope", "--db", db)
    assert done.returncode == 2 and "no conversation 'nope'" in done.stderr
