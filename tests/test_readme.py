"""The README's promises hold: its Python example runs and its quickstart matches CI."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_first_conversation_example_runs_as_written(tmp_path, monkeypatch):
    section = README.split("## A first conversation in Python", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - the README's own example
    assert (tmp_path / "turnlog.db").exists()


def test_quickstart_is_two_commands_and_ci_runs_the_second():
    block = re.search(r"## Quickstart.*?```bash\n(.*?)```", README, re.S).group(1)
    commands = [line for line in block.splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2
    assert "turnlog demo" in commands[0] and "pytest" in commands[1]
    assert "/^# tests$/" in (ROOT / ".ci" / "run").read_text()  # CI runs the line after "# tests"
