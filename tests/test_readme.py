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


def _section(title: str) -> str:
    return README.split(title, 1)[1].split("\n## ", 1)[0]


def test_the_readme_says_how_bare_turnlog_commands_find_the_venv():
    after = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert ". .venv/bin/activate" in after


def test_running_agents_shows_the_script_its_commands_use_and_they_run(tmp_path):
    import json
    import subprocess
    import sys

    section = _section("## Running agents (the loop)")
    script = re.search(r"```json\n(.*?)```", section, re.S).group(1)
    (tmp_path / "script.json").write_text(script, encoding="utf-8")
    assert json.loads(script)["turns"]
    commands = [line.split("  #", 1)[0].strip() for line in
                re.search(r"```bash\n(.*?)```", section, re.S).group(1).splitlines()]
    turnlog = str(Path(sys.executable).parent / "turnlog")
    cid = None
    for command in commands:
        if not command.startswith("turnlog "):
            continue
        words = command.split()[1:]
        if "<ID>" in words:
            words = [cid if w == "<ID>" else w for w in words]
        words = [w.strip('"') for w in re.findall(r'"[^"]*"|\S+', " ".join(words))]
        out = subprocess.run([turnlog, *words], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, (command, out.stderr)
        if "--json" in words and words[0] == "run":
            cid = json.loads(out.stdout)["conversation_id"]
    assert cid is not None


def test_install_hints_use_one_form_everywhere():
    docs = README + (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    code = "".join(p.read_text(encoding="utf-8") for d in ("engine", "journal", "replay")
                   for p in (ROOT / d).rglob("*.py"))
    for text in (docs, code):
        assert "turnlog[" not in text.replace("turnlog[mcp,", "")
    hinted = set(re.findall(r"pip install -e '\.\[(\w+)\]'", docs + code))
    assert {"view", "mcp", "otel", "postgres", "testing"} <= hinted


def test_testing_your_own_rules_names_an_extra_with_pytest_and_hypothesis():
    import tomllib

    section = _section("### Testing your own rules and recorded runs")
    (extra,) = re.findall(r"pip install -e '\.\[(\w+)\]'", section.split("```", 1)[0])
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert {d.split(">")[0] for d in extras[extra]} >= {"pytest", "hypothesis"}
