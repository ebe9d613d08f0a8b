"""The ``turnlog`` command line: a thin click layer over the library (see docs/cli.md).

The group is lazy (click's "LazyGroup" pattern): ``COMMAND_TABLE`` names every built-in
command with the module whose ``COMMANDS`` (a list of click commands) holds it and its
one-line help, so ``turnlog --help`` lists them without importing a command module, and a
command's module is imported when that command runs (or its own ``--help`` is asked for).
Adding a command is adding it to a module's ``COMMANDS`` and one line here;
tests/cli/test_command_table.py checks the table against the real commands. Commands of
packages above the engine (``replay``, ``replay.view``, ``replay.proxy``) are in the table
by module name, so the engine never imports them at import time; other packages add theirs
through the ``turnlog.commands`` entry-point group (loaded when the commands are listed).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from typing import Any

import click

from ._errors import CLIError, Interrupted

__all__ = ["COMMAND_TABLE", "ORIENTATION", "cli", "main", "usage_message"]

#: Every built-in command: name -> (the module whose ``COMMANDS`` holds it, its one-line help
#: as ``turnlog --help`` shows it: the first sentence of its help).
COMMAND_TABLE: dict[str, tuple[str, str]] = {
    "approve": ("turnlog.engine.cli.approving",
                "Approve or deny tool calls that wait for a person's decision."),
    "audit": ("turnlog.engine.cli.audit",
              "Figures across conversations: status, turns, tokens, tools, failures, cost."),
    "checkpoint": ("turnlog.engine.cli.proving",
                   "Sign the journal's log tree now: print a C2SP tlog-checkpoint and keep it "
                   "in the journal."),
    "copy": ("turnlog.engine.cli.copying",
             "Copy every conversation of journal SRC into journal DST, byte for byte."),
    "demo": ("turnlog.engine.cli.run",
             "Run the offline demo: several turns, a failing tool, a prevented duplicate."),
    "diff": ("turnlog.replay.cli",
             "Compare conversations A and B turn by turn (exit 0 either way)."),
    "erase": ("turnlog.engine.cli.erasing",
              "Erase a conversation's content (messages, arguments, results); keep its proof."),
    "export": ("turnlog.engine.cli.transfer",
               "Export a conversation as provider messages, JSONL events, Data Machine text, "
               "Markdown or OTLP."),
    "fork": ("turnlog.replay.cli",
             "Start a new conversation sharing ID's first SEQ events (nothing is copied)."),
    "heads": ("turnlog.engine.cli.integrity",
              "Print each conversation's last seq and hash, to anchor outside the journal."),
    "hold": ("turnlog.engine.cli.erasing",
             "Place a legal hold on a conversation: prune never erases it while held."),
    "import": ("turnlog.engine.cli.transfer",
               "Import a transcript as one new conversation (atomic: all of it or nothing)."),
    "keygen": ("turnlog.engine.cli.proving",
               "Make an Ed25519 signer key NAME; print its verifier key on a line of its own."),
    "ls": ("turnlog.engine.cli.inspect", "List conversations, newest first."),
    "prices": ("turnlog.engine.cli.audit",
               "What a model call would be charged per token kind, per million tokens, and "
               "from which source and version."),
    "prune": ("turnlog.engine.cli.erasing",
              "Erase the content of conversations older than DATE (retention), except held ones."),
    "prove": ("turnlog.engine.cli.proving",
              "Print an RFC 6962 inclusion proof of an event, or a consistency proof."),
    "proxy": ("turnlog.replay.proxy.cli",
              "Serve the model APIs (OpenAI Chat and Responses, Anthropic Messages, Gemini) "
              "and record every exchange as a conversation in the journal, forwarding it "
              "upstream unchanged."),
    "replay": ("turnlog.replay.cli",
               "Re-run a recorded conversation: deterministically (exit 1 on divergence), or "
               "against another provider with --provider."),
    "report": ("turnlog.replay.view.cli",
               "Write one conversation's timeline as a self-contained HTML file (inline CSS "
               "and JS, no network), for sharing and attaching to tickets."),
    "resume": ("turnlog.engine.cli.run",
               "Finish a conversation a crash, kill or Ctrl-C left unfinished."),
    "run": ("turnlog.engine.cli.run",
            "Run a conversation from PROMPT; exit 1 if it failed or was halted."),
    "show": ("turnlog.engine.cli.inspect", "Show one conversation as a timeline, turn by turn."),
    "tail": ("turnlog.engine.cli.tail",
             "Follow new events in the journal as other processes append them."),
    "verify": ("turnlog.engine.cli.integrity",
               "Check hash chains (every conversation, or one); exit 1 on the first bad event."),
    "view": ("turnlog.replay.view.cli",
             "Serve a local web app over the journal, read-only: conversations, timelines, "
             "forks, diffs and audit charts."),
}

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


def _plugins_declared() -> bool:
    """Whether a distribution other than turnlog itself declares ``turnlog.commands`` entry
    points: a look for the group's header in each ``entry_points.txt`` on ``sys.path``, so
    that ``turnlog --help`` does not import ``importlib.metadata`` (40 ms) and read every
    distribution's metadata when, as usually, no plugin exists. When one does,
    ``importlib.metadata.entry_points`` reads them as always."""
    for folder in sys.path:
        try:
            names = os.listdir(folder or ".")
        except OSError:  # a zip file, or gone
            continue
        for name in names:
            if name.endswith(".dist-info"):
                project = name.split("-", 1)[0]
            elif name.endswith(".egg-info"):
                project = name[: -len(".egg-info")].split("-", 1)[0]
            else:
                continue
            if project.lower() == "turnlog":
                continue  # its own commands are in COMMAND_TABLE
            try:
                with open(os.path.join(folder or ".", name, "entry_points.txt"),
                          encoding="utf-8", errors="replace") as file:
                    if "[turnlog.commands]" in file.read():
                        return True
            except OSError:
                continue
    return False


class _Group(click.Group):
    """The ``turnlog`` group: commands imported on first use (``COMMAND_TABLE``), plugins'
    commands from entry points, Ctrl-C as exit 130."""

    _plugins_loaded = False

    def _load(self, module: str) -> None:
        for command in importlib.import_module(module).COMMANDS:
            self.commands.setdefault(command.name, command)

    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        if not _plugins_declared():
            return
        from importlib.metadata import entry_points  # 40 ms and a scan: only when needed

        built_in = {module for module, _ in COMMAND_TABLE.values()}
        for ep in entry_points(group="turnlog.commands"):
            if ep.value.partition(":")[0] in built_in:
                continue  # in the table: imported by name when used
            for command in ep.load():
                self.commands.setdefault(command.name, command)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_plugins()
        return sorted(set(self.commands) | set(COMMAND_TABLE))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in COMMAND_TABLE:
            self._load(COMMAND_TABLE[name][0])
        if name not in self.commands:
            self._load_plugins()
        return self.commands.get(name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command listing of ``--help``: a command not yet imported is shown by its line
        in ``COMMAND_TABLE`` (cut to the width as click cuts a command's own help)."""
        listed = {}
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is None:  # a stand-in that only carries the table's help
                command = click.Command(name, help=COMMAND_TABLE[name][1])
            if not command.hidden:
                listed[name] = command
        if not listed:
            return
        limit = formatter.width - 6 - max(map(len, listed))
        rows = [(name, command.get_short_help_str(limit)) for name, command in listed.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

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


def main() -> None:
    """Console-script entry point."""
    cli()
