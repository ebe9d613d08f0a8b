"""``turnlog proxy`` (see docs/cli.md).

Registered on the ``turnlog`` group lazily by name (``engine.cli``) and through
the ``turnlog.commands`` entry point. Like ``view``, this module imports
neither Starlette nor uvicorn: the command does when it runs, and says how to
install them when they are missing.
"""

from __future__ import annotations

import gc
import sys

import click

from turnlog.engine.cli._common import CLIError, db_option, journal_for, translate_errors

from ..view.cli import _extra, _listen
from .translate import TARGETS
from .wires import UPSTREAM_NAMES

__all__ = ["COMMANDS", "SWITCH_INTERVAL", "proxy"]

#: How long (seconds) the recorder's thread may hold the interpreter while a request waits
#: for it (Python's default is 5 ms: a request that arrived while an exchange was being
#: recorded could wait that long before the proxy read it).
SWITCH_INTERVAL = 0.0005


def _upstreams(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        name, sep, url = value.partition("=")
        if not sep or name not in UPSTREAM_NAMES or not url.startswith(("http://", "https://")):
            raise CLIError(f"--upstream {value!r}: expected WIRE=URL with WIRE one of "
                           f"{', '.join(UPSTREAM_NAMES)} and an http(s) URL")
        out[name] = url
    return out


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on (loopback unless you say otherwise).")
@click.option("--port", type=click.IntRange(0, 65535), default=8760, show_default=True,
              help="The port to listen on (0 picks a free one).")
@click.option("--upstream", "upstream", multiple=True, metavar="WIRE=URL",
              help="Send WIRE's requests (openai, anthropic, gemini) to URL, the base URL "
                   "that wire's SDK takes (OpenAI's ends in /v1). Repeatable.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=600.0,
              show_default=True, help="Seconds to wait for the upstream (then 504).")
@click.option("--replay", is_flag=True,
              help="Answer from the journal, with no upstream: a request that differs from "
                   "every recording gets an error naming the first differing message.")
@click.option("--ignore", "ignore", multiple=True, metavar="FIELD",
              help="With --replay: a request field that never counts as a difference "
                   "(user, metadata and stream_options never do). Repeatable.")
@click.option("--to", "to", type=click.Choice(TARGETS),
              help="Translate every request to this provider's wire (its key from its usual "
                   "environment variable) and the answer back to the client's.")
@click.option("--model", help="With --to: the model to ask.")
@db_option
@translate_errors
def proxy(host: str, port: int, upstream: tuple[str, ...], timeout: float, replay: bool,
          ignore: tuple[str, ...], to: str | None, model: str | None, db_path: str) -> None:
    """Serve the model APIs (OpenAI Chat and Responses, Anthropic Messages, Gemini) and
    record every exchange as a conversation in the journal, forwarding it upstream
    unchanged. Prints `proxy on http://HOST:PORT`; Ctrl-C stops it. Point an SDK's
    base URL at it: http://HOST:PORT/v1 for OpenAI, http://HOST:PORT for the others.

    Example:

        turnlog proxy --db agents.db & OPENAI_BASE_URL=http://127.0.0.1:8760/v1 python agent.py
    """
    upstreams = _upstreams(upstream)
    _extra("proxy", "starlette", "aiohttp")
    (uvicorn,) = _extra("proxy", "uvicorn")
    from .app import create_app
    from .recorder import Recorder

    if ignore and not replay:
        raise CLIError("--ignore applies to --replay only")
    if (to is None) != (model is None):
        raise CLIError("--to and --model go together: --to PROVIDER --model M")
    if to is not None and replay:
        raise CLIError("--to and --replay exclude each other (replay needs no upstream)")
    if replay:
        from .replaying import ReplayBook

        with journal_for(db_path, readonly=True) as journal:
            book = ReplayBook(journal, ignore)
        recorder = None
    else:
        book, recorder = None, Recorder(db_path).start()
    try:
        app = create_app(recorder, upstreams, timeout=timeout, book=book,
                         to=(to, model) if to else None)
        sock = _listen(host, port)
        bound = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        click.echo(f"proxy on http://{shown}:{bound}")
        sys.stdout.flush()
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning",
                                               timeout_graceful_shutdown=2, lifespan="on"))
        sys.setswitchinterval(SWITCH_INTERVAL)
        # what start-up made (modules, the thread index) lives as long as the proxy: out of
        # the collector's sight, a full collection no longer walks it (measured: 20-60 ms)
        gc.freeze()
        server.run(sockets=[sock])
    finally:
        if recorder is not None:
            recorder.close()
    if recorder is not None and recorder.lost:
        raise CLIError(f"{recorder.lost} exchange(s) could not be recorded (see above)")


COMMANDS = [proxy]
