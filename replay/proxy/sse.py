"""An incremental reader of server-sent events: bytes in as they arrive, JSON events out.

>>> p = SSEParser()
>>> p.feed(b'event: ping\\ndata: {"a"') + p.feed(b': 1}\\n\\ndata: [DONE]\\n\\n')
[{'a': 1}]
"""

from __future__ import annotations

import json
from typing import Any

from turnlog.engine.errors import MalformedResponseError

__all__ = ["SSEParser"]


class SSEParser:
    """Splits a byte stream into events and returns each event's JSON ``data`` object.

    Non-JSON data (OpenAI's closing ``[DONE]``) is skipped; a ``data`` that is
    JSON but not an object is a ``MalformedResponseError``.
    """

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """The events completed by ``chunk``."""
        self._buffer += chunk.replace(b"\r\n", b"\n")
        *blocks, self._buffer = self._buffer.split(b"\n\n")
        out = []
        for block in blocks:
            data = [line[5:].removeprefix(b" ") for line in block.split(b"\n")
                    if line.startswith(b"data:")]
            if not data:
                continue
            text = b"\n".join(data)
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if not isinstance(value, dict):
                raise MalformedResponseError(f"stream event is not an object: {text[:80]!r}")
            out.append(value)
        return out
