"""``turnlog view`` and ``turnlog report`` (see docs/cli.md).

Registered on the ``turnlog`` group lazily by name (``engine.cli``) and through
the ``turnlog.commands`` entry point. This module imports neither Starlette
nor uvicorn nor Jinja2: the commands do, when they run, so the rest of the CLI
works without the ``view`` extra and these two say how to install it.
"""

from __future__ import annotations

import importlib
import socket
import sys
from collections.abc import Iterator
from types import ModuleType

import click

from turnlog.engine.cli._common import CLIError, db_option, journal_for, translate_errors

__all__ = ["COMMANDS", "report", "view"]

_HINT = ("turnlog {command} needs the view extra: pip install -e '.[view]' in turnlog's "
         "checkout ({missing} is missing)")


def _extra(command: str, *modules: str) -> list[ModuleType]:
    try:
        return [importlib.import_module(m) for m in modules]
    except ModuleNotFoundError as exc:
        raise CLIError(_HINT.format(command=command, missing=exc.name)) from None


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
    # accepted sockets inherit it; without it each answer waited out a 40 ms delayed ACK
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise CLIError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    return sock


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on (loopback unless you say otherwise).")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="The port to listen on (0 picks a free one).")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="Also answer requests for this Host name (repeatable; by default only "
                   "the --host address and the loopback names are answered).")
@db_option
@translate_errors
def view(host: str, port: int, db_path: str, allow_hosts: tuple[str, ...] = ()) -> None:
    """Serve a local web app over the journal, read-only: conversations, timelines,
    forks, diffs and audit charts. Prints `serving on http://HOST:PORT`; Ctrl-C stops it.

    Requests naming another Host (a page on another domain pointed at this
    address) get a 400.

    Example:

        turnlog demo --db demo.db && turnlog view --db demo.db --port 0
    """
    _extra("view", "starlette", "jinja2")
    (uvicorn,) = _extra("view", "uvicorn")
    with journal_for(db_path, readonly=True):  # a missing or foreign file: exit 2 at once
        pass
    from .app import create_app, hosts_for

    app = create_app(db_path, hosts=hosts_for(host, allow_hosts))
    sock = _listen(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"serving on http://{shown}:{bound}")
    sys.stdout.flush()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1,
                                           lifespan="off"))
    server.run(sockets=[sock])


@click.command()
@click.argument("conversation_id")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write the HTML file here (default: standard output).")
@db_option
@translate_errors
def report(conversation_id: str, output: str | None, db_path: str) -> None:
    """Write one conversation's timeline as a self-contained HTML file (inline CSS and JS,
    no network), for sharing and attaching to tickets.

    Example:

        turnlog report c-1a2b -o c-1a2b.html
    """
    _extra("report", "jinja2")
    with journal_for(db_path, readonly=True):
        pass
    from .report import iter_report

    pieces = iter_report(db_path, conversation_id)  # rendered as the timeline is read
    first = next(pieces)  # an unknown conversation fails here, before anything is written
    if output is None:
        for chunk in _chunks(first, pieces):
            click.echo(chunk, nl=False)
        return
    with open(output, "w", encoding="utf-8") as f:
        for chunk in _chunks(first, pieces):
            f.write(chunk)
    click.echo(f"wrote {output}", err=True)


def _chunks(first: str, pieces: Iterator[str], size: int = 65536) -> Iterator[str]:
    """``first`` and ``pieces`` joined into chunks of about ``size`` characters."""
    buffer, held = [first], len(first)
    for piece in pieces:
        buffer.append(piece)
        held += len(piece)
        if held >= size:
            yield "".join(buffer)
            buffer, held = [], 0
    yield "".join(buffer)


COMMANDS = [report, view]
