"""``turnlog tail``: follow events as other processes append them, like ``tail -f``."""

from __future__ import annotations

import json
import math
import time

import click

from turnlog.engine.audit import appends_waiter, connect_readonly, events_after, last_position

from ._common import db_option, flag_pair, journal_for, json_option, translate_errors
from ._timeline import timeline

__all__ = ["tail"]

_BATCH = 1000


@click.command()
@click.option("--from-position", "from_position", type=click.IntRange(min=0),
              help="Start with the event at this global position (1: from the beginning). "
                   "Default: the beginning with --once; when following, the end, so only "
                   "events appended from now on.")
@click.option("--conversation", "conversation_id", help="Only this conversation's events.")
@flag_pair("--follow/--once", "follow", default=True,
           help="Follow appends (the default; on PostgreSQL by LISTEN/NOTIFY, on SQLite by "
                "polling every --interval), or print what is there now and exit.")
@click.option("--timeout", type=click.FloatRange(min=0), help="Stop following after this many seconds.")
@click.option("--count", type=click.IntRange(min=1), help="Stop after printing this many events.")
@click.option("--interval", type=click.FloatRange(min=0.01), default=0.2, show_default=True,
              help="Seconds between polls of a SQLite journal.")
@click.option("--full", is_flag=True, help="Do not cut long values in the human output.")
@db_option
@json_option
@translate_errors
def tail(from_position: int | None, conversation_id: str | None, follow: bool,
         timeout: float | None, count: int | None, interval: float, full: bool,
         db_path: str, as_json: bool) -> None:
    """Follow new events in the journal as other processes append them.

    Events come in global (position) order; --json prints one JSON object
    per line (position, conversation_id, seq, type, recorded_at, payload).
    Stop with Ctrl-C, --once, --timeout or --count. On PostgreSQL the follower
    LISTENs for the NOTIFY every append sends, so it prints an event as soon as
    it commits; on SQLite it polls.

    Example:

        turnlog tail --from-position 1 --json --timeout 10
    """
    with journal_for(db_path, readonly=True) as journal:
        channel = getattr(journal, "channel", None)  # PostgreSQL: LISTEN instead of polling
    conn = connect_readonly(db_path)
    deadline = None if timeout is None else time.monotonic() + timeout
    printed = 0
    try:
        wait = appends_waiter(conn, channel, interval)
        if from_position is None:  # --once prints what is there; following, what comes
            after = last_position(conn) if follow else 0
        else:
            after = max(from_position - 1, 0)
        while True:
            rows = events_after(conn, after, conversation_id=conversation_id, limit=_BATCH)
            for row in rows:
                _print(row, as_json, full)
                after = row[0]
                printed += 1
                if count is not None and printed >= count:
                    return
            if len(rows) == _BATCH:
                continue  # more are waiting: no pause
            if not follow or (deadline is not None and time.monotonic() >= deadline):
                return
            wait(math.inf if deadline is None else max(0.0, deadline - time.monotonic()))
    except KeyboardInterrupt:
        pass
    finally:
        conn.close()


def _print(row: tuple, as_json: bool, full: bool) -> None:
    position, stream_id, seq, type_, recorded_at, payload = row
    if as_json:
        click.echo(json.dumps({"position": position, "conversation_id": stream_id, "seq": seq,
                               "type": type_, "recorded_at": recorded_at,
                               "payload": payload}, ensure_ascii=False))
        return
    lines = timeline([{"seq": seq, "type": type_, "payload": payload}], full)
    click.echo(f"{position:>8}  {recorded_at}  {stream_id}")
    for line in lines:
        click.echo(f"          {line}")


COMMANDS = [tail]
