"""docs/cli.md and ``--help`` agree: every command and flag of one is in the other."""

from __future__ import annotations

import re

import click
import pytest

from turnlog.engine.cli import cli

from .conftest import ROOT, turnlog

DOC = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
_HELP = {"-h", "--help"}


def _sections() -> dict[str, str]:
    """``## turnlog NAME`` headings -> their text (``""`` for the group's own section)."""
    found = {}
    for block in re.split(r"^## ", DOC, flags=re.M)[1:]:
        heading, _, body = block.partition("\n")
        if heading == "turnlog" or heading.startswith("turnlog "):
            found[heading.removeprefix("turnlog").strip()] = body
    return found


def _documented_flags(body: str) -> set[str]:
    """The flags in the first column of the section's option table."""
    flags = set()
    for line in body.splitlines():
        if line.startswith("| `-"):
            first = line.split("|")[1]
            flags |= set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", first))
    return flags


def _help_flags(command: click.Command) -> set[str]:
    return {opt for p in command.params if isinstance(p, click.Option)
            for opt in (*p.opts, *p.secondary_opts)} - _HELP


def _commands() -> dict[str, click.Command]:
    ctx = click.Context(cli)
    return {name: cli.get_command(ctx, name) for name in cli.list_commands(ctx)}


def test_every_command_is_documented_and_every_documented_command_exists():
    assert set(_sections()) - {""} == set(_commands())


def test_turnlog_help_lists_exactly_the_documented_commands():
    out = turnlog("--help")
    listed = {line.split()[0] for line in out.stdout.split("Commands:", 1)[1].splitlines()
              if line.startswith("  ") and line.strip()}
    assert listed == set(_sections()) - {""}


@pytest.mark.parametrize("name", sorted(_commands()))
def test_each_commands_flags_in_help_and_in_the_reference_agree(name):
    command = _commands()[name]
    documented = _documented_flags(_sections()[name])
    assert _help_flags(command) == documented - _HELP, name
    help_text = turnlog(name, "--help").stdout
    for flag in documented - _HELP:
        assert re.search(rf"(?<![\w-]){re.escape(flag)}\b", help_text), (name, flag)


def test_the_groups_own_options_are_documented():
    assert _help_flags(cli) == _documented_flags(_sections()[""]) - _HELP


def test_the_reference_covers_exit_codes_the_script_and_the_demo_tools():
    for needle in ("| 130 |", "| 2 |", "| 1 |", "| 0 |", "## The scripted provider's script",
                   "## The demo toolset", "`append_note(path: str, text: str)`", "--json"):
        assert needle in DOC, needle


def test_no_message_points_users_at_a_file_that_does_not_ship():
    for path in [*ROOT.glob("engine/**/*.py"), *ROOT.glob("replay/*.py")]:
        assert "see CLI.md" not in path.read_text(encoding="utf-8"), path
