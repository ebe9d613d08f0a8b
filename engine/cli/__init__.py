"""The ``turnlog`` command line: a thin click layer over the library (see CLI.md).

Every module in this package that defines ``COMMANDS`` (a list of click
commands) is registered on the ``turnlog`` group, so adding a command is
adding a module. Packages above the engine (``replay``) add theirs through
the ``turnlog.commands`` entry-point group, so the engine never imports them.
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points

import click

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="turnlog")
def cli() -> None:
    """turnlog: an event-sourced, hash-chained journal for LLM agent conversations.

    Example:

        turnlog demo && turnlog ls
    """


def _register() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for command in getattr(module, "COMMANDS", ()):
            cli.add_command(command)
    for ep in entry_points(group="turnlog.commands"):
        for command in ep.load():
            cli.add_command(command)


_register()


def main() -> None:
    """Console-script entry point."""
    cli()
