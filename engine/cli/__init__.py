"""The ``turnlog`` command line: a thin click layer over the library (see docs/cli.md).

Every module in this package that defines ``COMMANDS`` (a list of click
commands) is registered on the ``turnlog`` group, so adding a command is
adding a module. Commands of packages above the engine (``replay``: its
``replay``, ``fork`` and ``diff``; ``replay.view``: ``view`` and ``report``) are registered lazily by name, so they are
there in an uninstalled checkout too (``python -m engine.cli``) while the
engine never imports them at import time; other packages add theirs through
the ``turnlog.commands`` entry-point group.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from importlib.metadata import entry_points
from typing import Any

import click

from ._common import CLIError, Interrupted

__all__ = ["ORIENTATION", "cli", "main", "usage_message"]

#: Commands that live above the engine, by name -> the module whose ``COMMANDS`` holds them.
_LAZY = {"diff": "turnlog.replay.cli", "fork": "turnlog.replay.cli", "replay": "turnlog.replay.cli",
         "proxy": "turnlog.replay.proxy.cli", "report": "turnlog.replay.view.cli",
         "view": "turnlog.replay.view.cli"}

#: What ``turnlog`` alone prints.
ORIENTATION = """\
turnlog keeps every step of an LLM agent's conversations (messages, model
responses, tool calls and results) as events in an append-only, hash-chained
journal: one SQLite file (--db, $TURNLOG_DB, default ./turnlog.db).

Three things to try:
  turnlog demo --db demo.db       run an offline conversation and print its timeline
  turnlog ls --db demo.db         list the conversations in the journal
  turnlog verify --db demo.db     prove nobody edited the record

`turnlog --help` lists every command; docs/cli.md is the full reference."""


class _Group(click.Group):
    """The ``turnlog`` group: lazy commands, Ctrl-C as exit 130."""

    _plugins_loaded = False

    def _load(self, module: str) -> None:
        for command in importlib.import_module(module).COMMANDS:
            self.commands.setdefault(command.name, command)

    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        for ep in entry_points(group="turnlog.commands"):
            if ep.value.partition(":")[0] in _LAZY.values():
                continue  # registered lazily by name
            for command in ep.load():
                self.commands.setdefault(command.name, command)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_plugins()
        return sorted(set(self.commands) | set(_LAZY))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in _LAZY:
            self._load(_LAZY[name])
        if name not in self.commands:
            self._load_plugins()
        return self.commands.get(name)

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as exc:
            raise CLIError(usage_message(exc)) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted("interrupted (Ctrl-C)") from None
        except click.UsageError as exc:  # a command's options: one line, as every error
            raise CLIError(usage_message(exc)) from None


def usage_message(exc: click.UsageError) -> str:
    """click's usage error as one line in turnlog's wording: lower case, no full stop,
    and where the command's help is (exit status 2 as before)."""
    text = " ".join(exc.format_message().split())
    text = re.sub(r"\.\s+Did you mean", "; did you mean", text).rstrip(".")
    if text[:1].isupper() and not text[1:2].isupper():
        text = text[0].lower() + text[1:]
    where = exc.ctx.command_path if exc.ctx is not None else "turnlog"
    return f"{text} (see {where} --help)"


@click.group(cls=_Group, invoke_without_command=True,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="turnlog")
@click.option("--debug", is_flag=True, envvar="TURNLOG_DEBUG",
              help="Name the error class in error messages.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """turnlog: an event-sourced, hash-chained journal for LLM agent conversations.

    Example:

        turnlog demo && turnlog ls
    """
    ctx.meta["turnlog.debug"] = debug
    if ctx.invoked_subcommand is None:
        click.echo(ORIENTATION)


def _register() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for command in getattr(module, "COMMANDS", ()):
            cli.add_command(command)


_register()


def main() -> None:
    """Console-script entry point."""
    cli()
