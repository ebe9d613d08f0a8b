"""``turnlog import`` and ``turnlog export``: transcripts in, every format out."""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import click

from turnlog.engine.formats.detect import FORMATS
from turnlog.engine.formats.exporter import (
    EXPORT_FORMATS,
    STREAMED_FORMATS,
    export_conversation,
    export_data,
    iter_export,
)
from turnlog.engine.formats.genai import SEMCONVS
from turnlog.engine.formats.otlp import COMPRESSIONS, PROTOCOLS, otlp_target, send_otlp
from turnlog.engine.formats.importer import import_entries, read_file

from ._common import (
    CLIError,
    db_option,
    emit,
    journal_for,
    json_option,
    problem,
    progress,
    translate_errors,
)

__all__ = ["export", "import_"]


#: ``jsonl`` names turnlog's own format on the command line, as ``export --format jsonl`` writes it.
_IMPORT_ALIASES = {"jsonl": "turnlog"}
_EXPORT_ALIASES = {"turnlog": "jsonl"}


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice([*FORMATS, *_IMPORT_ALIASES]),
              help="Read every entry as this format (default: detect each entry); "
                   "jsonl and turnlog both name turnlog's own events.")
@click.option("--id", "conversation_id", help="The new conversation's id (default: imp-…).")
@db_option
@json_option
@translate_errors
def import_(file: str, fmt: str | None, conversation_id: str | None, db_path: str,
            as_json: bool) -> None:
    """Import a transcript as one new conversation (atomic: all of it or nothing).

    FILE is a JSON array, JSONL, a provider request body or `turnlog export
    --format jsonl` output; entries may mix API, orchestrator, OpenAI,
    Anthropic, Gemini, Data Machine and turnlog formats. What was kept
    without being understood (a message's unknown keys) is reported as a
    warning on stderr, and in --json's `warnings`.

    Example:

        turnlog import history.json --id support-42 --json
    """
    if not Path(file).is_file():
        raise CLIError(f"no such file: {file}")
    entries, envelope = read_file(file)  # a file refused is refused before the journal opens
    with journal_for(db_path, must_exist=False) as journal, \
            progress(None, label="importing", as_json=as_json) as bar:
        result = import_entries(journal, entries, fmt=_IMPORT_ALIASES.get(fmt, fmt),
                                conversation_id=conversation_id, envelope=envelope,
                                progress=bar.at)
    for warning in result.warnings:  # what the importer kept without understanding it
        problem(f"warning: {warning}")
    if as_json:
        emit(result)
        return
    formats = ", ".join(f"{k} {v}" for k, v in sorted(result.formats.items()))
    click.echo(f"imported {result.conversation_id}: {result.events} events "
               f"({formats}); status {result.status}")


@click.command()
@click.argument("conversation_id")
@click.option("--format", "fmt", type=click.Choice([*EXPORT_FORMATS, *_EXPORT_ALIASES]),
              required=True, help="The output format (turnlog is an alias of jsonl; otlp is "
                                  "an OpenTelemetry trace as OTLP/JSON).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write here, not stdout.")
@click.option("--content", is_flag=True,
              help="otlp: put messages, instructions, tool definitions, arguments and results "
                   "on the spans (opt-in: they may hold personal data).")
@click.option("--endpoint", metavar="[URL]", is_flag=False, flag_value="",
              help="otlp: send the trace to this OTLP/HTTP collector instead of printing it "
                   "(/v1/traces is appended unless the URL ends so); without a URL, to "
                   "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT.")
@click.option("--protocol", type=click.Choice(PROTOCOLS),
              help="With --endpoint: OTLP/HTTP protobuf (the default, or "
                   "OTEL_EXPORTER_OTLP_PROTOCOL) or JSON.")
@click.option("--header", "headers", multiple=True, metavar="K=V",
              help="With --endpoint: send this HTTP header (repeatable; after "
                   "OTEL_EXPORTER_OTLP_HEADERS). Values are never printed.")
@click.option("--compression", type=click.Choice(COMPRESSIONS),
              help="With --endpoint: gzip the body, or not (default none, or "
                   "OTEL_EXPORTER_OTLP_COMPRESSION).")
@click.option("--semconv", type=click.Choice(SEMCONVS),
              help="otlp: the GenAI conventions' generation: genai-0.1 "
                   "(semantic-conventions-genai v0.1.0, the default) or 1.41 "
                   "(semantic-conventions v1.41.0).")
@db_option
@translate_errors
def export(conversation_id: str, fmt: str, output: str | None, content: bool,
           endpoint: str | None, protocol: str | None, headers: tuple[str, ...],
           compression: str | None, semconv: str | None, db_path: str) -> None:
    """Export a conversation as provider messages, JSONL events, Data Machine text, Markdown or OTLP.

    Example:

        turnlog export support-42 --format anthropic -o messages.json
    """
    fmt = _EXPORT_ALIASES.get(fmt, fmt)
    if endpoint is None and (protocol or headers or compression):
        raise CLIError("--protocol, --header and --compression say how --endpoint sends: "
                       "give --endpoint too")
    if semconv is not None and fmt != "otlp":
        raise CLIError(f"--semconv picks the OTLP trace's conventions: use it with --format "
                       f"otlp, not {fmt}")
    if endpoint is not None and fmt != "otlp":
        raise CLIError(f"--endpoint sends an OTLP trace: use it with --format otlp, not {fmt}")
    target = (otlp_target(endpoint or None, headers=headers, protocol=protocol,
                          compression=compression) if endpoint is not None else None)
    if fmt in STREAMED_FORMATS and not content:  # one event at a time, however long
        with journal_for(db_path, readonly=True) as journal:
            _write_streamed(iter_export(journal, conversation_id, fmt), output)
        return
    with journal_for(db_path, readonly=True) as journal:
        request = (export_data(journal, conversation_id, fmt, content=content, semconv=semconv)
                   if target is not None else None)
        text = (export_conversation(journal, conversation_id, fmt, content=content,
                                    semconv=semconv)
                if request is None or output else "")
    if target is not None:
        sent = send_otlp(request, target)
        click.echo(f"sent {sent} span(s) of {conversation_id} to {target.shown()} "
                   f"({target.protocol}{', gzip' if target.compression == 'gzip' else ''})")
        if not output:
            return
    if output:
        Path(output).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    else:
        click.echo(text, nl=not text.endswith("\n"))


def _write_streamed(pieces: Iterator[str], output: str | None) -> None:
    """Write ``pieces`` as they come, in chunks of about 64 KiB, ending with a newline as the
    whole-text path does: to ``output`` through a temporary file renamed into place (an
    export that fails midway leaves no file), else to standard output."""
    first = next(pieces, "")  # an unknown conversation fails here, before anything is written
    if output is None:
        write = functools.partial(click.echo, nl=False)
        _chunks(itertools.chain([first], pieces), write)
        return
    target = Path(output)
    part = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        f = part.open("w", encoding="utf-8")
    except OSError as exc:  # named as the user named it, not as the temporary file
        raise OSError(exc.errno, exc.strerror, output) from None
    try:
        with f:
            _chunks(itertools.chain([first], pieces), f.write)
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)


def _chunks(pieces: Iterable[str], write: Callable[[str], object]) -> None:
    buffer: list[str] = []
    size, last = 0, ""
    for piece in pieces:
        if not piece:
            continue
        buffer.append(piece)
        size, last = size + len(piece), piece
        if size >= 65536:
            write("".join(buffer))
            buffer, size = [], 0
    write("".join(buffer) + ("" if last.endswith("\n") else "\n"))


COMMANDS = [export, import_]
