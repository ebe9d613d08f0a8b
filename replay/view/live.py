"""The live pages' event streams: one journal follower shared by every ``/live`` stream.

A stream used to open its own read-only :class:`~engine.audit.queries.Reader`
(about five file descriptors) and poll it, so a few hundred open pages ran a
server out of descriptors. Now one :class:`Follower` holds one reader while
any stream is open, polls the journal's last position every ``poll`` seconds
and wakes the streams when it moves; a stream that follows one conversation
then asks the shared reader whether that conversation moved. The follower
closes its reader when the last stream ends.

At most ``max_streams`` streams are open at once: one more is refused with
:class:`TooManyStreams` (the app answers 503), so a flood of pages costs one
socket each, never the journal.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from turnlog.engine.audit import Reader
from turnlog.journal import TurnlogError

__all__ = ["MAX_STREAMS", "Follower", "TooManyStreams"]

#: how many ``/live`` streams one viewer serves at once (browsers reconnect later)
MAX_STREAMS = 64


class TooManyStreams(TurnlogError):
    """The viewer already serves ``max_streams`` live streams; try again later."""


class Follower:
    """Follows the journal at ``path`` for every open stream, through one reader.

    ``open_reader`` makes the reader (a read-only ``Reader``); all of its use
    happens on the event loop's thread.
    """

    def __init__(self, open_reader: Callable[[], Reader], poll: float,
                 max_streams: int = MAX_STREAMS) -> None:
        if not isinstance(max_streams, int) or max_streams < 1:
            raise ValueError(f"max_streams must be a positive integer, got {max_streams!r}")
        self.open_reader, self.poll, self.max_streams = open_reader, poll, max_streams
        #: streams open now
        self.streams = 0
        #: the journal's last global position, as last polled
        self.position = 0
        self._reader: Reader | None = None
        self._task: asyncio.Task[None] | None = None
        self._moved: asyncio.Condition | None = None

    def acquire(self) -> None:
        """Count one more stream, opening the reader and starting the poll for the first;
        ``TooManyStreams`` past ``max_streams``."""
        if self.streams >= self.max_streams:
            raise TooManyStreams(f"this viewer already serves {self.max_streams} live streams "
                                 "(close some pages); the page reconnects later")
        if self._reader is None:
            self._reader = self.open_reader()
            self.position = self._reader.last_position()
            self._moved = asyncio.Condition()
            self._task = asyncio.get_running_loop().create_task(self._follow())
        self.streams += 1

    def release(self) -> None:
        """Count one stream less; the last one stops the poll and closes the reader."""
        self.streams -= 1
        if self.streams == 0 and self._reader is not None:
            assert self._task is not None
            self._task.cancel()
            self._reader.close()
            self._reader, self._task, self._moved = None, None, None

    def appended_after(self, position: int, conversation_id: str | None) -> int | None:
        """The last position after ``position`` (of that conversation, if given), or ``None``."""
        if conversation_id is None:
            return self.position if self.position > position else None
        assert self._reader is not None
        return self._reader.appended_after(position, conversation_id)

    async def moved(self, seen: int, timeout: float) -> None:
        """Return once the position differs from ``seen``, or after ``timeout`` seconds."""
        assert self._moved is not None
        moved = self._moved
        async with moved:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(moved.wait_for(lambda: self.position != seen), timeout)

    async def _follow(self) -> None:
        while True:
            await asyncio.sleep(self.poll)
            reader, moved = self._reader, self._moved
            if reader is None or moved is None:
                return
            try:
                position = reader.last_position()
            except TurnlogError:  # a journal that cannot be read now: try again next time
                continue
            if position != self.position:
                self.position = position
                async with moved:
                    moved.notify_all()

    async def stream(self, after: int, conversation_id: str | None,
                     live_for: float) -> AsyncIterator[str]:
        """Server-sent events for one page: ``append`` with the new last position whenever
        events arrive, for ``live_for`` seconds (then the browser reconnects, sending
        ``Last-Event-ID``). The caller has ``acquire``\\ d the stream and releases it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + live_for
        yield "retry: 1000\n\n"
        seen: Any = None
        while True:
            if self.position != seen:
                seen = self.position
                found = self.appended_after(after, conversation_id)
                if found is not None:
                    after = found
                    yield f'id: {after}\nevent: append\ndata: {{"position": {after}}}\n\n'
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            await self.moved(seen, remaining)
