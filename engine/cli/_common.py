"""What every command shares: ``--db``, ``--json``, output helpers and error translation."""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import shlex
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

import click
import msgspec

from turnlog.journal import Journal, JournalProtocol, TurnlogError, shown_url
from turnlog.journal._open import is_postgres, sqlite_path

__all__ = ["DEFAULT_DB", "CLIError", "Interrupted", "Progress", "colour", "command_hint",
           "db_option", "emit", "fail", "journal_for", "json_option", "open_journal", "problem",
           "progress", "translate_errors"]

#: The journal commands use when neither ``--db`` nor ``TURNLOG_DB`` names one.
DEFAULT_DB = "turnlog.db"


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


def db_option(fn: Callable) -> Callable:
    """``--db PATH|URL``: the journal (default ``$TURNLOG_DB``, else ``./turnlog.db``)."""
    return click.option(
        "--db", "db_path", metavar="PATH|URL", envvar="TURNLOG_DB",
        default=DEFAULT_DB, show_default=True, show_envvar=True,
        help="The journal: a SQLite file path, sqlite:///PATH or postgresql://USER@HOST/DB.")(fn)


def json_option(fn: Callable) -> Callable:
    """``--json``: one machine-readable JSON document on stdout."""
    return click.option("--json", "as_json", is_flag=True,
                        help="Print machine-readable JSON on stdout.")(fn)


def open_journal(path: str, *, must_exist: bool = False,
                 readonly: bool = False) -> JournalProtocol:
    """Open the journal a path or URL names (``Journal.open``), refusing to create a file
    where the command only reads.

    ``readonly``: for read commands; nothing is ever created, migrated or written.
    """
    if (must_exist or readonly) and not is_postgres(path):
        file = sqlite_path(path)
        if file != ":memory:" and not os.path.exists(file):
            raise CLIError(f"no journal at {path!r} (use --db or TURNLOG_DB)")
    from turnlog.engine.audit import EXTENSIONS  # the engine's SQL views, when present

    return Journal.open(path, extensions=EXTENSIONS, readonly=readonly)


def emit(data: Any) -> None:
    """Print ``data`` as one JSON document."""
    click.echo(json.dumps(msgspec.to_builtins(data), ensure_ascii=False, indent=2))


def problem(message: str) -> None:
    """Print a diagnostic on stderr."""
    click.echo(message, err=True)


def _debug() -> bool:
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx is not None else None
    return bool(root is not None and root.meta.get("turnlog.debug")) or bool(
        os.environ.get("TURNLOG_DEBUG"))


def _os_message(exc: OSError) -> str:
    what = exc.strerror or str(exc)
    return f"{exc.filename}: {what}" if exc.filename else what


def translate_errors(fn: Callable) -> Callable:
    """Turn turnlog's errors and file errors into exit status 2 with a plain message.

    The error's class name is added only with ``turnlog --debug``.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TurnlogError as exc:
            raise CLIError(f"{type(exc).__name__}: {exc}" if _debug() else str(exc)) from None
        except BrokenPipeError:  # output piped into `head`: click ends quietly
            raise
        except OSError as exc:  # a file that cannot be read or written: bad input, no traceback
            raise CLIError(f"{type(exc).__name__}: {_os_message(exc)}" if _debug()
                           else _os_message(exc)) from None

    return wrapper


@contextlib.contextmanager
def journal_for(path: str, *, must_exist: bool = True,
                readonly: bool = False) -> Iterator[JournalProtocol]:
    """Open, yield and always close a journal (``readonly`` for read commands)."""
    journal = open_journal(path, must_exist=must_exist, readonly=readonly)
    try:
        yield journal
    finally:
        journal.close()


def command_hint(*parts: str, db_path: str | None = None) -> str:
    """A command line to copy and paste: ``turnlog PARTS... [--db PATH]``, shell-quoted.

    A password in a ``--db`` URL is shown as ``***`` (``shown_url``): put it back,
    or leave it out of the URL and let libpq read ``PGPASSWORD`` or ``~/.pgpass``.
    """
    words = ["turnlog", *parts]
    if db_path is not None and db_path != DEFAULT_DB:
        words += ["--db", shown_url(db_path)]
    return " ".join(shlex.quote(w) if w != "turnlog" else w for w in words)


def _colour_on(err: bool = False) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    stream = sys.stderr if err else sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())


_STATUS_COLOURS = {"completed": "green", "ok": "green", "failed": "red", "halted": "yellow",
                   "active": "cyan", "interrupted": "yellow", "diverged": "red",
                   "tampered": "red", "same": "green", "different": "red"}


def colour(text: str, kind: str | None = None, *, err: bool = False, **style: Any) -> str:
    """``text`` styled for a terminal (by ``kind``, e.g. a status); plain when piped or NO_COLOR."""
    if not _colour_on(err):
        return text
    if kind is not None and kind.lower() in _STATUS_COLOURS:
        style.setdefault("fg", _STATUS_COLOURS[kind.lower()])
    return click.style(text, **style) if style else text


class Progress:
    """What :func:`progress` yields: tell it how far the work is; it draws or stays silent.

    ``advance(n)`` moves the bar on by ``n`` steps; ``at(done, total)`` sets both (for
    work whose size is known only once it has started). Without a bar both do nothing.
    """

    def __init__(self, bar: Any = None) -> None:
        self._bar = bar

    @property
    def shown(self) -> bool:
        """Whether a bar is drawn."""
        return self._bar is not None

    def advance(self, n: int = 1) -> None:
        """Move the bar on by ``n`` steps."""
        if self._bar is not None:
            self._bar.update(n)

    def at(self, done: int, total: int) -> None:
        """``done`` steps of ``total`` are finished."""
        if self._bar is not None:
            self._bar.length = total
            self._bar.update(done - self._bar.pos)


@contextlib.contextmanager
def progress(length: int | None, *, label: str, as_json: bool = False, show: bool | None = None,
             file: IO[str] | None = None) -> Iterator[Progress]:
    """A :class:`Progress` of ``length`` steps (``None``: not known yet) for long work (``verify``, ``audit``, ``import``,
    ``replay --all``): one helper, one bar.

    The bar is drawn on stderr (or ``file``) only when ``show``; by default, when that
    stream is a terminal and the command prints no ``--json``. Otherwise nothing is
    written, so a piped command's output stays exactly as it was.
    """
    out = file if file is not None else sys.stderr
    if show is None:
        show = not as_json and bool(getattr(out, "isatty", lambda: False)())
    if not show:
        yield Progress()
        return
    # An unknown length (``None``) until ``at`` says: click needs an endless iterable then.
    steps = itertools.repeat(None) if length is None else None
    with click.progressbar(steps, length=length, label=label, file=out) as bar:
        yield Progress(bar)


def fail(code: int = 1) -> None:
    """Exit with ``code`` after output was printed (1: the command found a problem)."""
    sys.exit(code)
