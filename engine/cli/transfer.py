"""``turnlog import`` and ``turnlog export``: transcripts in, every format out."""

from __future__ import annotations

from pathlib import Path

import click

from engine.formats.detect import FORMATS
from engine.formats.exporter import EXPORT_FORMATS, export_conversation
from engine.formats.importer import import_file

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
    Anthropic, Gemini, Data Machine and turnlog formats.

    Example:

        turnlog import history.json --id support-42 --json
    """
    if not Path(file).is_file():
        raise CLIError(f"no such file: {file}")
    with journal_for(db_path, must_exist=False) as journal, \
            progress(None, label="importing", as_json=as_json) as bar:
        result = import_file(journal, file, fmt=_IMPORT_ALIASES.get(fmt, fmt),
                             conversation_id=conversation_id, progress=bar.at)
    if as_json:
        emit(result)
        return
    for warning in getattr(result, "warnings", ()):  # what the importer noticed but accepted
        problem(f"warning: {warning}")
    formats = ", ".join(f"{k} {v}" for k, v in sorted(result.formats.items()))
    click.echo(f"imported {result.conversation_id}: {result.events} events "
               f"({formats}); status {result.status}")


@click.command()
@click.argument("conversation_id")
@click.option("--format", "fmt", type=click.Choice([*EXPORT_FORMATS, *_EXPORT_ALIASES]),
              required=True, help="The output format (turnlog is an alias of jsonl).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write here, not stdout.")
@db_option
@translate_errors
def export(conversation_id: str, fmt: str, output: str | None, db_path: str) -> None:
    """Export a conversation as provider messages, JSONL events, Data Machine text or Markdown.

    Example:

        turnlog export support-42 --format anthropic -o messages.json
    """
    with journal_for(db_path, readonly=True) as journal:
        text = export_conversation(journal, conversation_id, _EXPORT_ALIASES.get(fmt, fmt))
    if output:
        Path(output).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    else:
        click.echo(text, nl=not text.endswith("\n"))


COMMANDS = [export, import_]
