"""``AsyncLoop``: the agent loop for asyncio programs, driving the same step as ``Loop``.

Same constructor, same events, same results as ``engine.loop.Loop``; ``start``,
``send`` and ``resume`` are coroutines, so one event loop runs many
conversations at once::

    >>> import asyncio
    >>> from turnlog.journal import Journal
    >>> from turnlog.engine.providers.scripted import ScriptedProvider
    >>> from turnlog.engine.demo import demo_tools
    >>> loop = AsyncLoop(Journal(":memory:"), ScriptedProvider([{"text": "hi"}]), demo_tools())
    >>> async def main():
    ...     return await asyncio.gather(*(loop.start("hello", conversation_id=f"c{i}")
    ...                                   for i in range(3)))
    >>> [r.status for r in asyncio.run(main())]
    ['completed', 'completed', 'completed']

Every decision is ``engine.step``'s; this shell only performs the actions:

- the model: ``await provider.acomplete(request)`` (the Anthropic and OpenAI
  adapters use ``AsyncAnthropic`` / ``AsyncOpenAI``, Gemini an
  ``httpx.AsyncClient``, the scripted provider answers at once); a provider
  without ``acomplete`` is called in a worker thread;
- tools: ``async def`` tools are awaited on the event loop, plain ones run in
  a worker thread (``asyncio.to_thread``), through the executor's
  ``aexecute`` (``LocalExecutor`` has one; another executor's ``execute``
  runs in a worker thread). A batch's calls run as tasks, at most
  ``max_parallel_tools`` at a time (a semaphore);
- the journal: appends are made directly on the event loop's thread. A
  SQLite commit of a few events is a fraction of a millisecond, a thread
  hop costs about as much, and it keeps every write of a conversation on
  one thread in order (the journal's connection is not shared across
  threads); an append is never interleaved with another conversation's
  (the event loop runs one callback at a time);
- the retry policy's ``wait`` and a runner's ``run`` (both synchronous)
  run in a worker thread, so a back-off never blocks other conversations.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from turnlog.engine.model.conversation import Conversation
from turnlog.engine.model.events import ConversationStarted, DuplicatePolicy
from turnlog.engine.errors import ProviderError
from turnlog.engine.tools.executor import ToolExecution
from .loop import LoopBase
from .request_digest import RequestDigest
from .result import RunResult, result_of
from .step import CallModel, Record, RunRunner, RunTools, Step, ToolRun, Wait, executor_failure, ordered

__all__ = ["AsyncLoop"]


class AsyncLoop(LoopBase):
    """The asynchronous twin of ``Loop`` (same constructor; see ``LoopBase``).

    ``start``, ``send``, ``resume`` and ``drive`` are coroutines. Many
    conversations may run at once on one ``AsyncLoop`` and one journal;
    one conversation must not be driven by two runs at the same time (the
    second's append would be refused as contention, as with ``Loop``).
    """

    async def start(self, prompt: str | None, *, conversation_id: str | None = None,
                    model: str | None = None, mode: str = "chat", max_turns: int = 8,
                    system: str = "", duplicate_policy: DuplicatePolicy | None = None,
                    parameters: dict[str, Any] | None = None,
                    metadata: dict[str, Any] | None = None, single_turn: bool = False,
                    started: ConversationStarted | None = None) -> RunResult:
        """Record a new conversation and run it (``Loop.start``)."""
        conv = self._begin(prompt, conversation_id=conversation_id, model=model, mode=mode,
                           max_turns=max_turns, system=system, duplicate_policy=duplicate_policy,
                           parameters=parameters, metadata=metadata, started=started)
        return await self._run(conv, single_turn)

    async def send(self, conversation: Conversation | str, text: str, *,
                   single_turn: bool = False) -> RunResult:
        """Add ``text`` as the next user message and run (``Loop.send``)."""
        return await self._run(self._sent(conversation, text), single_turn)

    async def resume(self, conversation: Conversation | str, *,
                     single_turn: bool = False) -> RunResult:
        """Finish a conversation a crash left unfinished (``Loop.resume``)."""
        return await self._run(self._open(conversation), single_turn)

    async def drive(self, conv: Conversation, *, single_turn: bool = False) -> RunResult:
        """Take every step the journal says is next until the run ends (or one turn, if asked)."""
        return await self._run(conv, single_turn)

    def progress_writer(self, conv: Conversation, call: Any) -> Any:
        """``LoopBase.progress_writer`` for the event loop: a tool in a worker thread hands
        its write to the event loop's thread and waits for it."""
        loop = asyncio.get_running_loop()
        inner = super().progress_writer(conv, call)

        def write(data: dict[str, Any], of: Any = None) -> None:
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                self._driver = threading.get_ident()
                inner(data, of)
                return

            async def on_loop() -> None:
                self._driver = threading.get_ident()
                inner(data, of)

            asyncio.run_coroutine_threadsafe(on_loop(), loop).result()

        return write

    async def _run(self, conv: Conversation, single_turn: bool) -> RunResult:
        try:
            result = await self._drive(conv, single_turn)
        finally:
            if conv.staged:
                self._flush(conv)
        conv.save_snapshot_if_due()
        return result

    async def _drive(self, conv: Conversation, single_turn: bool) -> RunResult:
        # a digest per run: conversations interleave on one AsyncLoop, and the incremental
        # digest only helps while one conversation's history grows
        step = Step(self, conv, single_turn=single_turn, digest=RequestDigest())
        perform = self._perform
        while True:
            action = step.next()
            kind = type(action)
            if kind is Record:
                perform(conv, action)
            elif kind is CallModel:
                self._flush(conv)  # the request is durable before it goes out
                start = self.timer()
                handle = None
                try:
                    if self.streams and callable(getattr(self.provider, "astream", None)):
                        handle = self.provider.astream(action.request)  # type: ignore[attr-defined]
                        async for delta in handle:
                            self._delta(conv, action.turn, delta)
                        response = handle.response
                    else:
                        response = await self._complete(action)
                except ProviderError as exc:  # anything else is a bug: it propagates, the run resumes
                    perform(conv, step.failed(action, exc, self.timer() - start))
                except (KeyboardInterrupt, asyncio.CancelledError):  # stopped mid-stream
                    self._stopped(conv, step, action, handle, self.timer() - start)
                    raise
                else:
                    perform(conv, step.responded(action, response, self.timer() - start))
            elif kind is RunTools:
                self._flush(conv)  # tool_started is durable before the tools run
                await self._run_tools(conv, step, action)
            elif kind is Wait:
                await asyncio.to_thread(self.retry.wait, action.delay)
            elif kind is RunRunner:
                self._flush(conv)
                result = await asyncio.to_thread(self.runner.run, action.request)
                perform(conv, step.ran(result))
            else:
                return result_of(conv.builder)

    async def _complete(self, action: CallModel) -> Any:
        acomplete = getattr(self.provider, "acomplete", None)
        if acomplete is None:
            return await asyncio.to_thread(self.provider.complete, action.request)
        return await acomplete(action.request)

    async def _run_tools(self, conv: Conversation, step: Step, action: RunTools) -> None:
        """Run a batch: one at a time when asked (or alone), else as tasks under a semaphore."""
        runs = action.runs
        if action.order is not None or action.concurrency < 2 or len(runs) < 2:
            left = len(runs)
            for run in ordered(runs, action.order):
                outcome = await self._execute(run)
                left -= 1
                self._perform(conv, step.tool_done(run, outcome, left))
            return
        gate = asyncio.Semaphore(action.concurrency)

        async def one(run: ToolRun) -> tuple[ToolRun, ToolExecution]:
            async with gate:
                return run, await self._execute(run)

        tasks = [asyncio.ensure_future(one(run)) for run in runs]
        try:
            left = len(runs)
            for next_done in asyncio.as_completed(tasks):
                run, outcome = await next_done
                left -= 1
                self._perform(conv, step.tool_done(run, outcome, left))
        finally:  # cancelled or crashed: the unfinished calls are resumed by the usual rules
            for task in tasks:
                task.cancel()

    async def _execute(self, run: ToolRun) -> ToolExecution:
        executor = self.executor
        aexecute = getattr(executor, "aexecute", None)
        try:
            if aexecute is not None:
                return await aexecute(run.call, run.tool, run.context, run.validated)
            return await asyncio.to_thread(executor.execute, run.call, run.tool, run.context,
                                           run.validated)
        except Exception as exc:  # an executor bug is still only this call's failure
            return executor_failure(exc)
