"""Saved heads files, shaped like ``turnlog heads --json`` output so such a file can be checked."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Annotated

import msgspec

from ._types import Head
from .errors import HeadsFileError

__all__ = ["dump_heads", "load_heads"]


class _HeadRecord(msgspec.Struct):
    # The key is the CLI's name for a stream: the file is one of its outputs.
    conversation_id: Annotated[str, msgspec.Meta(min_length=1)]
    seq: Annotated[int, msgspec.Meta(ge=1)]
    hash: Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]


_decoder = msgspec.json.Decoder(list[_HeadRecord])


def dump_heads(heads: Iterable[Head], path: str | os.PathLike[str]) -> None:
    """Write ``heads`` to ``path`` as a JSON array of ``{"conversation_id", "seq", "hash"}``."""
    records = [_HeadRecord(h.stream_id, h.seq, h.hash) for h in heads]
    text = msgspec.json.format(msgspec.json.encode(records), indent=2) + b"\n"
    try:
        with open(path, "wb") as f:
            f.write(text)
    except OSError as exc:
        reason = exc.strerror or exc
        raise HeadsFileError(f"cannot write heads file {os.fspath(path)}: {reason}") from exc


def load_heads(path: str | os.PathLike[str]) -> list[Head]:
    """Read a heads file: :func:`dump_heads` / ``turnlog heads --json`` output, or the plain
    ``turnlog heads`` lines (``ID SEQ HASH``, blank lines ignored).

    An empty file (or only whitespace) is a :class:`HeadsFileError`: checking no heads
    would pass whatever was cut off the journal."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        reason = exc.strerror or exc
        raise HeadsFileError(f"cannot read heads file {os.fspath(path)}: {reason}") from exc
    if not data.strip():
        raise HeadsFileError(f"{os.fspath(path)} is empty: it holds no heads to check (save "
                             "them with turnlog heads -o FILE)")
    if not data.lstrip().startswith((b"[", b"{")):
        return _plain_heads(data, os.fspath(path))
    try:
        records = _decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise HeadsFileError(f"{os.fspath(path)} is not a turnlog heads file: {exc}") from exc
    return [Head(r.conversation_id, r.seq, r.hash) for r in records]


def _plain_heads(data: bytes, where: str) -> list[Head]:
    """The lines ``turnlog heads`` prints: ``ID SEQ HASH`` separated by whitespace."""
    heads = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HeadsFileError(f"{where} is not a turnlog heads file: {exc}") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        words = line.split()
        if len(words) != 3:
            raise HeadsFileError(f"{where} is not a turnlog heads file: line {number}: expected "
                                 f"'ID SEQ HASH' (turnlog heads output), got {line.strip()!r}")
        try:
            record = msgspec.convert({"conversation_id": words[0], "seq": int(words[1]),
                                      "hash": words[2]}, _HeadRecord)
        except (ValueError, msgspec.ValidationError) as exc:
            raise HeadsFileError(f"{where} is not a turnlog heads file: line {number}: "
                                 f"{exc}") from None
        heads.append(Head(record.conversation_id, record.seq, record.hash))
    return heads
