"""``turnlog verify`` and ``turnlog heads``: is the record intact?"""

from __future__ import annotations

import os
from typing import Any

import click

from turnlog.engine.audit.erasure import erasures_after
from turnlog.engine.model.conversation import require_conversation
from turnlog.journal import (
    BadEvent,
    Head,
    JournalProtocol,
    check_checkpoint,
    dump_heads,
    load_heads,
    parse_checkpoint,
    verifier_key,
)

from ._common import (
    CLIError,
    colour,
    db_option,
    emit,
    fail,
    journal_for,
    json_option,
    progress,
    translate_errors,
)
from .proving import read_text

__all__ = ["heads", "verify"]


def _events_to_check(journal: JournalProtocol, conversation_id: str | None) -> int:
    """How many events ``verify`` recomputes: the whole journal, or one history."""
    if conversation_id is None:
        return journal.last_position()
    return sum(journal.last_seq(s) if upto is None else upto
               for s, upto in journal.ancestry(conversation_id))


def _bad(b: BadEvent | None) -> dict | None:
    return None if b is None else {"conversation_id": b.stream_id, "seq": b.seq, "reason": b.reason}


@click.command()
@click.argument("conversation_id", required=False)
@click.option("--heads", "heads_file", type=click.Path(dir_okay=False, exists=True),
              help="Also check a heads file saved earlier by `turnlog heads` (plain or --json).")
@click.option("--checkpoint", "checkpoint_file", type=click.Path(dir_okay=False),
              help="Also check the journal against a signed checkpoint (needs --key).")
@click.option("--key", "vkey", metavar="VKEY",
              help="The checkpoint signer's verifier key: its text NAME+HASH+BASE64, or a file.")
@db_option
@json_option
@translate_errors
def verify(conversation_id: str | None, heads_file: str | None, checkpoint_file: str | None,
           vkey: str | None, db_path: str, as_json: bool) -> None:
    """Check hash chains (every conversation, or one); exit 1 on the first bad event.

    A chain cannot notice events cut off its end: save `turnlog heads` (plain
    or --json) somewhere else and check it later with --heads. A chain's owner
    can rewrite it and recompute every hash: --checkpoint FILE --key VKEY checks
    the journal against a checkpoint signed earlier (`turnlog checkpoint`): the
    signature, the tree of its events, every stored tree node and checkpoint.

    Example:

        turnlog verify --checkpoint today.checkpoint --key acme+1a2b3c4d+AbC...
    """
    checked = None
    since: list[dict[str, Any]] = []
    if (checkpoint_file is None) != (vkey is None):
        raise CLIError("--checkpoint FILE and --key VKEY go together")
    if checkpoint_file is not None and conversation_id is not None:
        raise CLIError("--checkpoint checks the whole journal: give no conversation id")
    if checkpoint_file is not None:
        note = read_text(checkpoint_file, "checkpoint")
        key = verifier_key(read_text(vkey, "verifier key") if os.path.isfile(vkey) else vkey)
        parse_checkpoint(note)  # bad input (exit 2) before the journal is read
    with journal_for(db_path, readonly=True) as journal:
        if conversation_id is not None:
            require_conversation(journal, conversation_id)
        with progress(_events_to_check(journal, conversation_id), label="verifying",
                      as_json=as_json) as bar:
            report = journal.verify(conversation_id, progress=bar.advance)
        first_bad = report.first_bad
        if first_bad is None and heads_file:
            saved = [h for h in load_heads(heads_file)
                     if conversation_id is None or h.stream_id == conversation_id]
            problems = journal.check_heads(saved)
            first_bad = problems[0] if problems else None
        if checkpoint_file is not None:
            with journal.log_tree() as tree:
                checked = check_checkpoint(tree, note, key)
            if not checked.ok and checked.position is not None and first_bad is None:
                first_bad = _event_at(journal, checked.position, checked.problem or "")
            since = erasures_after(journal, checked.size) if checked.ok else []
    ok = (first_bad is None and not report.projections and not report.missing_guards
          and (checked is None or checked.ok))
    forged = [{"table": m.object, "conversation_id": m.stream_id, "position": m.position,
               "column": m.column, "reason": m.reason, "seq": m.seq}
              for m in report.projections]
    signed = None if checked is None else {"size": checked.size, "ok": checked.ok,
                                           "problem": checked.problem, "erased_since": since}
    if as_json:
        emit({"ok": ok, "checked_events": report.checked_events, "first_bad": _bad(first_bad),
              "projections": forged, "missing_guards": list(report.missing_guards),
              **({"checkpoint": signed} if signed else {})})
    elif ok:
        also = "" if checked is None else f"; the checkpoint of {checked.size} events holds"
        click.echo(f"{colour('ok', 'ok')}: {report.checked_events} events verified{also}")
        for one in since:
            seqs = ", ".join(map(str, one["erased"]))
            signed_seqs = ", ".join(map(str, one["signed"]))
            click.echo(f"erased after the checkpoint: conversation {one['conversation_id']!r} "
                       f"seq{'s' * (len(one['erased']) > 1)} {seqs}"
                       + (" (signed by it)" if one["signed"] == one["erased"]
                          else f" ({signed_seqs} signed by it)" if one["signed"] else "")
                       + f", by {one['by']}, reason {one['reason']!r}, at {one['recorded_at']}")
        if since:
            click.echo("(a checkpoint shows what was signed and that these erasures came "
                       "after it, not that they were requested: whoever can write the "
                       "journal could forge one; match each against its request)")
    elif first_bad is None and checked is not None and not checked.ok:
        click.echo(f"{colour('TAMPERED', 'tampered')}: {checked.problem}")
    elif first_bad is not None and not first_bad.stream_id:
        click.echo(f"{colour('TAMPERED', 'tampered')}: {first_bad.reason}")
    elif first_bad is not None:
        click.echo(f"{colour('TAMPERED', 'tampered')}: conversation {first_bad.stream_id!r} "
                   f"seq {first_bad.seq}: "
                   f"{first_bad.reason}")
    for m in forged if not as_json else ():
        if m["table"] == "history":  # the lifecycle refuses the conversation's events
            click.echo(f"{colour('ILLEGAL HISTORY', 'tampered')}: conversation "
                       f"{m['conversation_id']!r} {m['reason']}")
            continue
        click.echo(f"{colour('FORGED PROJECTION', 'tampered')}: {m['table']} conversation {m['conversation_id']!r} "
                   f"position {m['position']}: {m['reason']}")
    if report.missing_guards and not as_json:
        click.echo(f"{colour('UNGUARDED', 'tampered')}: {', '.join(report.missing_guards)} "
                   "missing: the journal's schema was changed outside turnlog (a tool that "
                   "rebuilds a table drops its triggers), and nothing refuses edits any more; "
                   "the next write command reinstalls missing triggers.")
    if not ok:
        fail(1)


def _event_at(journal: JournalProtocol, position: int, reason: str) -> BadEvent:
    """The event at ``position`` as the bad event (the reason says it is the position's
    event when the journal has none there, events cut off)."""
    for event in journal.read_all(position - 1, 1):
        return BadEvent(event.stream_id, event.seq, f"event {position}: {reason}")
    return BadEvent("", 0, reason)


@click.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the heads file here.")
@db_option
@json_option
@translate_errors
def heads(output: str | None, db_path: str, as_json: bool) -> None:
    """Print each conversation's last seq and hash, to anchor outside the journal.

    Example:

        turnlog heads --json > heads.json && turnlog verify --heads heads.json
    """
    with journal_for(db_path, readonly=True) as journal:
        items: list[Head] = journal.heads()
    if output:
        dump_heads(items, output)
    if as_json:
        emit([{"conversation_id": h.stream_id, "seq": h.seq, "hash": h.hash} for h in items])
    elif not output:
        for h in items:
            click.echo(f"{h.stream_id}  {h.seq}  {h.hash}")


COMMANDS = [verify, heads]
