"""``turnlog keygen``, ``checkpoint`` and ``prove``: proving the record to someone else.

Keys and checkpoints are signed notes (``golang.org/x/mod/sumdb/note``, C2SP
tlog-checkpoint); proofs are RFC 6962 inclusion and consistency proofs over the
journal's log tree, hashes in base64. ``turnlog verify --checkpoint`` checks them.
"""

from __future__ import annotations

import base64
import os

import click

from turnlog.engine.model.conversation import require_conversation
from turnlog.journal import (
    Checkpoint,
    CheckpointError,
    JournalProtocol,
    LogTree,
    generate_key,
    make_checkpoint,
    parse_checkpoint,
    signer_key,
)

from ._common import CLIError, db_option, emit, journal_for, json_option, translate_errors

__all__ = ["checkpoint", "keygen", "prove", "read_text"]


def read_text(path: str, what: str) -> str:
    """A small text file's content, or :class:`CLIError` naming it."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(1 << 20)
    except UnicodeDecodeError:
        raise CLIError(f"{what} {path}: not UTF-8 text") from None
    except OSError as exc:
        raise CLIError(f"{what} {path}: {exc.strerror or exc}") from None


@click.command()
@click.argument("name")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write the signer (private) key here, readable by its owner only.")
@translate_errors
def keygen(name: str, output: str | None) -> None:
    """Make an Ed25519 signer key NAME; print its verifier key on a line of its own.

    The signer key (PRIVATE+KEY+NAME+HASH+BASE64) goes to -o FILE (created 0600,
    never overwritten), else to stderr; give the verifier key (NAME+HASH+BASE64) to
    whoever checks your checkpoints.

    Example:

        turnlog keygen acme-audit -o acme.key > acme.pub
    """
    key = generate_key(name)
    if output:
        try:
            fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise CLIError(f"{output} exists: keygen never overwrites a key") from None
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(key.text() + "\n")
    else:
        click.echo(key.text(), err=True)
    click.echo(key.verifier().text())


@click.command()
@click.option("--key", "key_file", required=True, type=click.Path(dir_okay=False),
              help="The signer key file (from turnlog keygen).")
@click.option("--origin", help="The checkpoint's first line (default: the journal's own origin).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Also write the note here.")
@click.option("--cosign", "cosign_files", multiple=True, type=click.Path(dir_okay=False),
              help="Another signer key file whose signature is added (a witness); repeatable.")
@db_option
@translate_errors
def checkpoint(key_file: str, origin: str | None, output: str | None,
               cosign_files: tuple[str, ...], db_path: str) -> None:
    """Sign the journal's log tree now: print a C2SP tlog-checkpoint and keep it in the journal.

    The note is ORIGIN, SIZE (events), BASE64(ROOT), a blank line, then a line
    per signature. Keep it somewhere else: `turnlog verify --checkpoint` later
    finds any rewrite of those events.

    Example:

        turnlog checkpoint --key acme.key -o today.checkpoint
    """
    key = signer_key(read_text(key_file, "signer key"))
    cosigners = [signer_key(read_text(f, "cosigner key")) for f in cosign_files]
    with journal_for(db_path) as journal, journal.log_tree() as tree:
        made = make_checkpoint(tree, key, origin=origin, cosigners=cosigners)
    if output:
        with open(output, "w", encoding="utf-8") as f:
            f.write(made.note)
    click.echo(made.note, nl=False)


def _b64(proof: list[bytes]) -> list[str]:
    return [base64.b64encode(h).decode() for h in proof]


def _signed_here(tree: LogTree, path: str) -> Checkpoint:
    """A checkpoint file, which must be of this journal's tree at its size."""
    found = parse_checkpoint(read_text(path, "checkpoint"))
    have = tree.size()
    if found.size > have:
        raise CheckpointError(f"checkpoint {path} covers {found.size} events but the journal has "
                              f"only {have}: events were cut off its end", tampered=True)
    if tree.root(found.size) != found.root:
        raise CheckpointError(f"checkpoint {path}: the journal's tree of {found.size} events has "
                              "another root (run turnlog verify --checkpoint)", tampered=True)
    return found


def _position(journal: JournalProtocol, conversation_id: str, seq: int) -> tuple[int, str]:
    require_conversation(journal, conversation_id)
    for event in journal.read(conversation_id, seq, seq):
        return event.position, event.hash
    raise CLIError(f"conversation {conversation_id!r} has no event at seq {seq}")


@click.command()
@click.argument("conversation_id", required=False)
@click.argument("seq", type=int, required=False)
@click.option("--checkpoint", "checkpoint_file", type=click.Path(dir_okay=False),
              help="The checkpoint whose tree the event is proved in.")
@click.option("--consistency", nargs=2, metavar="OLD NEW", type=click.Path(dir_okay=False),
              help="Prove that checkpoint NEW's tree extends checkpoint OLD's.")
@db_option
@json_option
@translate_errors
def prove(conversation_id: str | None, seq: int | None, checkpoint_file: str | None,
          consistency: tuple[str, str] | None, db_path: str, as_json: bool) -> None:
    """Print an RFC 6962 inclusion proof of an event, or a consistency proof.

    Inclusion: {"index", "size", "hash" (the event's chain hash, hex), "proof"};
    consistency: {"old", "new", "proof"}; proof hashes in base64. Any RFC 6962 /
    RFC 9162 verifier checks them against the checkpoints' roots.

    Example:

        turnlog prove c-1 3 --checkpoint today.checkpoint --json
    """
    with journal_for(db_path, readonly=True) as journal, journal.log_tree() as tree:
        if consistency:
            if conversation_id is not None or checkpoint_file:
                raise CLIError("prove --consistency OLD NEW takes no conversation, seq or --checkpoint")
            old, new = (_signed_here(tree, path) for path in consistency)
            if old.size > new.size:
                raise CLIError(f"--consistency OLD NEW: OLD covers {old.size} events, more than "
                               f"NEW's {new.size}")
            result: dict = {"old": old.size, "new": new.size,
                            "proof": _b64(tree.consistency(old.size, new.size))}
        else:
            if conversation_id is None or seq is None or not checkpoint_file:
                raise CLIError("prove needs ID SEQ --checkpoint FILE, or --consistency OLD NEW")
            signed = _signed_here(tree, checkpoint_file)
            position, chain_hash = _position(journal, conversation_id, seq)
            if position > signed.size:
                raise CLIError(f"conversation {conversation_id!r} seq {seq} is event {position}, "
                               f"after the checkpoint's {signed.size}: sign a newer checkpoint")
            result = {"index": position - 1, "size": signed.size, "hash": chain_hash,
                      "proof": _b64(tree.inclusion(position - 1, signed.size))}
    if as_json:
        emit(result)
    else:
        for name, value in result.items():
            shown = " ".join(value) if isinstance(value, list) else value
            click.echo(f"{name}: {shown}")


COMMANDS = [keygen, checkpoint, prove]
