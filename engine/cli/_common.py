"""What every command shares: ``--db``, ``--json``, output helpers and error translation."""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import shlex
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import IO, Any

import click
import msgspec

from turnlog.journal import (
    Journal,
    JournalProtocol,
    TurnlogError,
    check_existing,
    journal_file,
    shown_url,
)
from turnlog.engine.model.jsontext import indented
from turnlog.journal.errors import CheckpointError

from ._errors import CLIError, Interrupted

__all__ = ["DEFAULT_DB", "CLIError", "Interrupted", "Progress", "colour", "command_hint",
           "db_option", "emit", "emit_streamed", "fail", "flag_pair", "hint", "journal_for", "json_option",
           "open_journal", "problem", "progress", "run_options", "translate_errors"]

#: The journal commands use when neither ``--db`` nor ``TURNLOG_DB`` names one.
DEFAULT_DB = "turnlog.db"


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


def flag_pair(decls: str, dest: str, *, default: bool | None, help: str) -> Callable:
    """A ``--on/--off`` option whose two halves may not both be given (exit 2, never last-wins).

    ``--on --on`` is the same answer twice and is accepted.
    """
    on, off = (d.strip() for d in decls.split("/"))

    def one(ctx: click.Context, param: click.Parameter, given: tuple[bool, ...]) -> bool | None:
        if len(set(given)) > 1:
            raise CLIError(f"{on} and {off} contradict each other: give one of them")
        return given[0] if given else default

    return click.option(decls, dest, multiple=True, callback=one, help=help)


def open_journal(path: str, *, must_exist: bool = False, readonly: bool = False,
                 named_by: str = "--db or TURNLOG_DB") -> JournalProtocol:
    """Open the journal a path or URL names (``Journal.open``), refusing to create a file
    where the command only reads.

    ``readonly``: for read commands; nothing is ever created, migrated or written.
    ``must_exist``: the command works on what a journal holds, so an empty (0-byte) file
    is refused as it is by a read, never turned into a journal.
    ``named_by``: where the user named the journal (``--db``, or an argument such as
    ``SRC``), so a missing one is reported there.
    """
    file = journal_file(path)  # None: a database server's, nothing to check here
    if (must_exist or readonly) and file is not None:
        if file != ":memory:" and not os.path.exists(file):
            raise CLIError(f"no journal at {path!r} (check {named_by})")
        if file != ":memory:" and must_exist:
            check_existing(file)
    from turnlog.engine.audit import EXTENSIONS  # the engine's SQL views, when present

    journal = Journal.open(path, extensions=EXTENSIONS, readonly=readonly)
    restored = getattr(journal, "restored_guards", ())
    if restored:
        problem(f"note: {journal.path}: reinstalled {', '.join(restored)}, removed outside "
                "turnlog (a tool that rebuilds a table drops its triggers); check the "
                f"history with {command_hint('verify', db_path=path)}")
    return journal


def emit(data: Any) -> None:
    """Print ``data`` as one JSON document."""
    click.echo(json.dumps(msgspec.to_builtins(data), ensure_ascii=False, indent=2))


#: about how many characters ``emit_streamed`` gathers before it writes them
STREAM_CHUNK = 1 << 16


def emit_streamed(head: dict[str, Any], key: str, items: Iterable[Any], *,
                  exact: bool = False) -> None:
    """Print ``head`` with ``key`` (its last key) holding ``items``, byte for byte as
    :func:`emit` prints ``{**head, key: list(items)}``, one item in memory at a time (and
    written about :data:`STREAM_CHUNK` characters at a time). ``exact``: the items are JSON
    data read with exact floats (``jsontext.loads``), written by msgspec."""
    opening = json.dumps(msgspec.to_builtins({**head, key: []}), ensure_ascii=False, indent=2)
    assert opening.endswith("[]\n}"), "the streamed key must come last"
    pending: list[str] = []
    opened, held = False, 0
    for item in items:
        text = (indented(item) if exact else
                json.dumps(msgspec.to_builtins(item), ensure_ascii=False, indent=2))
        text = text.replace("\n", "\n    ")
        pending.append((",\n    " if opened else opening[:-4] + "[\n    ") + text)
        opened, held = True, held + len(text)
        if held >= STREAM_CHUNK:
            click.echo("".join(pending), nl=False)
            pending, held = [], 0
    click.echo("".join(pending) + "\n  ]\n}" if opened else opening)


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
        except CheckpointError as exc:
            if not exc.tampered:
                raise CLIError(str(exc)) from None
            click.echo(f"{colour('TAMPERED', 'tampered', err=True)}: {exc}", err=True)
            sys.exit(1)  # well-formed, but it does not hold: as verify's exit 1
        except TurnlogError as exc:
            raise CLIError(f"{type(exc).__name__}: {exc}" if _debug() else str(exc)) from None
        except BrokenPipeError:  # output piped into `head`: click ends quietly
            raise
        except OSError as exc:  # a file that cannot be read or written: bad input, no traceback
            raise CLIError(f"{type(exc).__name__}: {_os_message(exc)}" if _debug()
                           else _os_message(exc)) from None

    return wrapper


@contextlib.contextmanager
def journal_for(path: str, *, must_exist: bool = True, readonly: bool = False,
                named_by: str = "--db or TURNLOG_DB") -> Iterator[JournalProtocol]:
    """Open, yield and always close a journal (``readonly`` for read commands; ``named_by``
    as for :func:`open_journal`)."""
    journal = open_journal(path, must_exist=must_exist, readonly=readonly, named_by=named_by)
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


#: What a run needs to be continued, by click parameter name: the flag that gives it again.
_RUN_OPTIONS = (("tool_specs", "--tools"), ("mcp", "--mcp"), ("script", "--script"),
                ("prices_file", "--prices"))


def run_options(params: Mapping[str, Any]) -> list[str]:
    """The ``--tools``, ``--mcp`` and ``--script`` words that ``params`` (a ``run`` or
    ``resume`` invocation's, or those recorded with its conversation) give: what
    ``resume`` must be given again to continue the run."""
    words: list[str] = []
    for name, flag in _RUN_OPTIONS:
        value = params.get(name)
        for one in (value,) if isinstance(value, str) else (value or ()):
            words += [flag, shown_url(one) if flag == "--mcp" else one]
    return words


def hint(*parts: str, run: Mapping[str, Any] | None = None) -> str:
    """A complete command line to paste, built from the invocation that prints it: ``turnlog
    PARTS...`` with its ``--db`` and, for ``run`` (parameters of a run: this invocation's
    own, or those recorded with the conversation), the options that continue that run."""
    ctx = click.get_current_context(silent=True)
    params = ctx.params if ctx is not None else {}
    words = [*parts, *run_options(run if run is not None else {})]
    return command_hint(*words, db_path=params.get("db_path"))


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
