"""The command line's two exceptions, apart from ``_common`` so the ``turnlog`` group (and
``turnlog --help``) needs only click."""

from __future__ import annotations

from typing import Any

import click

__all__ = ["CLIError", "Interrupted"]


class CLIError(click.ClickException):
    """Bad usage or bad input: exit status 2, message on stderr."""

    exit_code = 2

    def format_message(self) -> str:  # click prints "Error: " + this
        return self.message


class Interrupted(click.ClickException):
    """Ctrl-C: exit status 130, with what was interrupted and how to continue."""

    exit_code = 130

    def show(self, file: Any = None) -> None:
        click.echo(self.message, err=True)
