"""The loop suite runs on both loops: ``both_loops`` swaps ``Loop`` for ``AsyncLoop``.

A module opts in with ``pytestmark = pytest.mark.usefixtures("both_loops")``:
each test runs once with ``Loop`` and once with ``BlockingAsyncLoop``, an
``AsyncLoop`` whose coroutine methods are run by ``asyncio.run``, so the same
test body drives the same step through the async shell (the module's
``Loop`` and the ``Loop`` that ``engine.loop.run`` builds are replaced).
"""

from __future__ import annotations

import asyncio

import pytest

import turnlog.engine.loop
from turnlog import engine
from turnlog.engine.loop.aloop import AsyncLoop


class BlockingAsyncLoop(AsyncLoop):
    """``AsyncLoop`` with blocking entry points (each one ``asyncio.run``)."""

    def start(self, *args, **kwargs):
        return asyncio.run(AsyncLoop.start(self, *args, **kwargs))

    def send(self, *args, **kwargs):
        return asyncio.run(AsyncLoop.send(self, *args, **kwargs))

    def resume(self, *args, **kwargs):
        return asyncio.run(AsyncLoop.resume(self, *args, **kwargs))

    def drive(self, *args, **kwargs):
        return asyncio.run(AsyncLoop.drive(self, *args, **kwargs))


@pytest.fixture(params=["sync", "async"])
def both_loops(request, monkeypatch):
    """Run the test with ``Loop`` and again with the async loop in its place."""
    if request.param == "async":
        monkeypatch.setattr(engine.loop, "Loop", BlockingAsyncLoop)
        if hasattr(request.module, "Loop"):
            monkeypatch.setattr(request.module, "Loop", BlockingAsyncLoop)
    return request.param
