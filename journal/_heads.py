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
    """Read a heads file written by :func:`dump_heads` or ``turnlog heads --json``."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        reason = exc.strerror or exc
        raise HeadsFileError(f"cannot read heads file {os.fspath(path)}: {reason}") from exc
    try:
        records = _decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise HeadsFileError(f"{os.fspath(path)} is not a turnlog heads file: {exc}") from exc
    return [Head(r.conversation_id, r.seq, r.hash) for r in records]
