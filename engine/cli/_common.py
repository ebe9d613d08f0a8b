"""What every command shares: ``--db``, ``--json``, output helpers and error translation."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import click
import msgspec

from journal import Journal, TurnlogError

__all__ = ["CLIError", "db_option", "emit", "json_option", "open_journal", "problem", "translate_errors"]


class CLIError(click.ClickException):
    """Bad usage or bad input: exit status 2, message on stderr."""

    exit_code = 2


def db_option(fn: Callable) -> Callable:
    """``--db PATH``: the journal (default ``$TURNLOG_DB``, else ``./turnlog.db``)."""
    return click.option(
        "--db", "db_path", type=click.Path(dir_okay=False), envvar="TURNLOG_DB",
        default="turnlog.db", show_default=True, show_envvar=True,
        help="The journal file.")(fn)


def json_option(fn: Callable) -> Callable:
    """``--json``: one machine-readable JSON document on stdout."""
    return click.option("--json", "as_json", is_flag=True,
                        help="Print machine-readable JSON on stdout.")(fn)


def open_journal(path: str, *, must_exist: bool = False, readonly: bool = False) -> Journal:
    """Open the journal, refusing to create one where the command only reads.

    ``readonly``: for read commands; nothing is ever created, migrated or written.
    """
    if (must_exist or readonly) and path != ":memory:" and not os.path.exists(path):
        raise CLIError(f"no journal at {path!r} (use --db or TURNLOG_DB)")
    from engine.views import EXTENSIONS  # the engine's SQL views, when present

    return Journal(path, extensions=EXTENSIONS, readonly=readonly)


def emit(data: Any) -> None:
    """Print ``data`` as one JSON document."""
    click.echo(json.dumps(msgspec.to_builtins(data), ensure_ascii=False, indent=2))


def problem(message: str) -> None:
    """Print a diagnostic on stderr."""
    click.echo(message, err=True)


def translate_errors(fn: Callable) -> Callable:
    """Turn turnlog's errors into exit status 2 with their message (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TurnlogError as exc:
            raise CLIError(f"{type(exc).__name__}: {exc}") from None

    return wrapper


@contextlib.contextmanager
def journal_for(path: str, *, must_exist: bool = True,
                readonly: bool = False) -> Iterator[Journal]:
    """Open, yield and always close a journal (``readonly`` for read commands)."""
    journal = open_journal(path, must_exist=must_exist, readonly=readonly)
    try:
        yield journal
    finally:
        journal.close()


def fail(code: int = 1) -> None:
    """Exit with ``code`` after output was printed (1: the command found a problem)."""
    sys.exit(code)
