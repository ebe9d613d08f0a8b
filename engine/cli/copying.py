"""``turnlog copy SRC DST``: conversations from one journal to another (SQLite ↔ PostgreSQL)."""

from __future__ import annotations

import click

from turnlog.journal import check_source, copy_streams

from ._common import emit, journal_for, json_option, progress, translate_errors

__all__ = ["copy"]


@click.command()
@click.argument("source", metavar="SRC")
@click.argument("target", metavar="DST")
@json_option
@translate_errors
def copy(source: str, target: str, as_json: bool) -> None:
    """Copy every conversation of journal SRC into journal DST, byte for byte.

    SRC and DST are paths or URLs (sqlite:///PATH, postgresql://...). Hashes and
    fork links stay identical; copying again adds only what is new; a
    conversation whose history differs in DST is refused, naming it. SRC
    must verify (turnlog verify): a tampered source is refused before DST is
    created or written.

    Example:

        turnlog copy turnlog.db postgresql://me@dbhost/turnlog
    """
    with journal_for(source, readonly=True, named_by="SRC") as src:
        check_source(src)
        with journal_for(target, must_exist=False, named_by="DST") as dst:
            total = sum(1 for _ in src.streams())
            with progress(total, label="copying", as_json=as_json) as bar:
                result = copy_streams(src, dst, progress=lambda stream, events: bar.advance(),
                                      checked=True)
    if as_json:
        emit({"copied": result.copied, "skipped": result.skipped, "events": result.events})
    else:
        click.echo(f"{len(result.copied)} copied ({result.events} events), "
                   f"{len(result.skipped)} already there")


COMMANDS = [copy]
