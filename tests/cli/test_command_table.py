"""``turnlog --help`` lists the commands from ``COMMAND_TABLE`` without importing a command
module; the table must say what the real commands say."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import click

import turnlog.engine.cli as engine_cli
from turnlog.engine.cli import COMMAND_TABLE

from .conftest import env, turnlog


def _real_commands() -> dict[str, tuple[str, click.Command]]:
    """Every command the engine's CLI modules and turnlog's own entry points define, by name."""
    modules = {f"{engine_cli.__name__}.{info.name}" for info in pkgutil.iter_modules(engine_cli.__path__)
               if not info.name.startswith("_")}
    modules |= {ep.value.partition(":")[0] for ep in entry_points(group="turnlog.commands")
                if ep.value.startswith("turnlog.")}
    found: dict[str, tuple[str, click.Command]] = {}
    for module in sorted(modules):
        for command in getattr(importlib.import_module(module), "COMMANDS", ()):
            assert command.name not in found, f"{command.name} is defined twice"
            found[command.name] = (module, command)
    return found


def test_the_table_names_every_command_with_its_module_and_its_own_first_sentence():
    real = _real_commands()
    assert set(COMMAND_TABLE) == set(real)
    for name, (module, command) in real.items():
        assert COMMAND_TABLE[name] == (module, command.get_short_help_str(10**6)), name


_LISTING = """
import json, sys
import click
from click.testing import CliRunner
from turnlog.engine.cli import cli
widths = (50, 80, 132)
helps = [CliRunner().invoke(cli, ["--help"], terminal_width=w).output for w in widths]
loaded = sorted(m for m in sys.modules if m.startswith("turnlog.") and m.endswith(".cli")
                or ".cli." in m)
ctx = click.Context(cli)
for name in cli.list_commands(ctx):
    cli.get_command(ctx, name)  # now every command is the real one
eager = [CliRunner().invoke(cli, ["--help"], terminal_width=w).output for w in widths]
print(json.dumps({"lazy": helps, "eager": eager, "loaded": loaded}))
"""


def test_help_imports_no_command_module_and_reads_as_the_loaded_commands_would():
    out = subprocess.run([sys.executable, "-c", _LISTING], capture_output=True, text=True,
                         env=env(), check=True)
    seen = json.loads(out.stdout)
    assert seen["loaded"] == ["turnlog.engine.cli", "turnlog.engine.cli._errors"]
    assert seen["lazy"] == seen["eager"]
    for name in COMMAND_TABLE:
        assert f"\n  {name} " in seen["lazy"][2], name


def test_the_console_script_lists_every_command_and_runs_one_by_its_table_entry(tmp_path):
    listed = turnlog("--help")
    assert listed.returncode == 0, listed.stderr
    commands = listed.stdout.split("Commands:\n", 1)[1].splitlines()
    assert [line.split()[0] for line in commands] == sorted(COMMAND_TABLE)
    shown = turnlog("ls", "--db", tmp_path / "j.db", "--help")
    assert shown.returncode == 0 and "List conversations, newest first." in shown.stdout
    unknown = turnlog("lss")
    assert unknown.returncode == 2 and "no such command 'lss'" in unknown.stderr.lower()


def _plugin(folder):
    """A third-party distribution on ``folder`` whose ``turnlog.commands`` add ``hello``."""
    (folder / "hello_plugin.py").write_text(
        "import click\n\n\n@click.command()\ndef hello():\n    \"\"\"Say hello.\"\"\"\n"
        "    click.echo('hello from a plugin')\n\n\nCOMMANDS = [hello]\n")
    info = folder / "hello_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hello-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[turnlog.commands]\nhello = hello_plugin:COMMANDS\n")


def test_a_plugins_command_is_listed_and_runs_and_without_one_help_reads_no_metadata(tmp_path):
    script = str(Path(sys.executable).with_name("turnlog"))
    probe = ("import sys; sys.argv = ['turnlog', '--help']\n"
             "from turnlog.engine.cli import cli\n"
             "try:\n    cli()\nexcept SystemExit:\n    pass\n"
             "print('METADATA' if 'importlib.metadata' in sys.modules else 'NONE')\n")
    bare = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=tmp_path, check=True)
    assert bare.stdout.rstrip().endswith("NONE") and " hello " not in bare.stdout
    _plugin(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    listed = subprocess.run([script, "--help"], capture_output=True, text=True, env=env)
    assert listed.returncode == 0 and "hello" in listed.stdout and "Say hello." in listed.stdout
    ran = subprocess.run([script, "hello"], capture_output=True, text=True, env=env)
    assert ran.returncode == 0 and ran.stdout == "hello from a plugin\n"
