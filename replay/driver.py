"""The engine's agent loop as deterministic replay's driver.

Deterministic replay drives ``engine.loop.Loop`` through its seams: the
recorded ``conversation_started`` (``Conversation.start``), a
``RecordedProvider`` and a ``RecordedExecutor`` that serves the recorded tool
results. Unless the caller passes its current tools (``registry=``), the
registry is made of the recorded tool specs (``replay.tools.SpecTool``: any
JSON-object arguments pass, nothing runs), so a recording replays without
its tools' code; pass the real registry to also check argument validation
and enablement against the current code. Calls a recorded provider swap
refused by its tool policy are refused again through the loop's public
refusal hook (``Loop(refuse=...)``), from the recorded reason codes.

The provider-swap runner is ``replay.swap_runner``; tool loading and the
stand-in tools are ``replay.tools``.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import is_
from typing import Any

import msgspec

from turnlog.engine.model.conversation import Conversation
from turnlog.engine.loop.directives import Directives
from turnlog.engine.model.events import (
    ApprovalDecided,
    ConversationStarted,
    ToolCallRejected,
    ToolCompleted,
    ToolProgressed,
    ToolStarted,
)
from turnlog.engine.tools.executor import ToolExecution
from turnlog.engine.loop import Loop
from turnlog.engine.model.messages import ToolCall
from turnlog.engine.tools import Tool, ToolContext, ToolRegistry
from turnlog.journal import JournalProtocol

from .errors import RunPaused
from .rebuild import user_runs_of
from .recorded import REPLAY_LATENCY_MS, RecordedProvider, RecordedRetries, RecordedTools, Recording
from .tools import Verdicts, execution_of, spec_registry

__all__ = ["RecordedExecutor", "loop_driver", "record_scripted", "rendered_started"]


class RecordedExecutor:
    """The loop's ``ToolExecutor`` for deterministic replay: recorded results, checked.

    It also repeats the recorded schedule of a response's calls (which were
    started together, in which order their results came: ``keep_open``,
    ``joins``, ``order``), so a batch that ran concurrently replays to the
    same events, and so does a journal recorded before batches existed.

    With ``rerender`` the recorded text is not reused: the loop renders the
    recorded success, data and error again with the current tools' rules
    (success-message hooks, handler flags), so a change there shows up.
    """

    def __init__(self, tools: RecordedTools, *, rerender: bool = False) -> None:
        self.tools, self.rerender = tools, rerender
        self._served: set[int] = set()  # the seqs of the recorded news written again
        self._news: list[tuple[int, ToolProgressed]] | None = None
        self._index: tuple[dict[str, int], dict[str, int], dict[int, Any]] | None = None

    # --- the recorded schedule (the loop's scheduling hooks, engine.step) ---------------

    def _seqs(self) -> tuple[dict[str, int], dict[str, int], dict[int, Any]]:
        """(call id -> tool_started seq, call id -> answer seq, the event that follows each seq)."""
        if self._index is None:
            started: dict[str, int] = {}
            answered: dict[str, int] = {}
            events = self.tools.recording.events
            for seq, event in events:
                kind = type(event)
                if kind is ToolStarted:
                    started[event.call_id] = seq
                elif kind in (ToolCompleted, ToolCallRejected):
                    answered.setdefault(event.call_id, seq)
            # news of a running call (tool_progressed) is not a step of the schedule
            steps = [(seq, e) for seq, e in events if type(e) is not ToolProgressed]
            following = {seq: event for (seq, _), (_, event) in zip(steps, steps[1:])}
            self._index = (started, answered, following)
        return self._index

    def keep_open(self, batch: Sequence[ToolCall], default: bool) -> bool:
        """Whether the recording started more calls before ``batch``'s first result."""
        started, _, following = self._seqs()
        last = started.get(batch[-1].id)
        if last is None:
            return default
        ids = {c.id for c in batch}
        after = following.get(last)
        if after is None:  # the recording ends there (a crash)
            return default
        return not (type(after) is ToolCompleted and after.call_id in ids)

    def joins(self, batch: Sequence[ToolCall], call: ToolCall, default: bool) -> bool:
        """Whether the recording started ``call`` before any result of ``batch``."""
        started, answered, _ = self._seqs()
        seq = started.get(call.id)
        if seq is None:
            return default
        first = min((answered.get(c.id, 1 << 62) for c in batch), default=1 << 62)
        return seq < first

    def order(self, batch: Sequence[ToolCall]) -> list[ToolCall]:
        """``batch`` in the order the recording has its results."""
        _, answered, _ = self._seqs()
        return sorted(batch, key=lambda c: answered.get(c.id, 1 << 62))

    def execute(self, call: ToolCall, tool: Tool, context: ToolContext,
                validated: dict[str, Any]) -> ToolExecution:
        """The recorded outcome of ``call`` (a ``Divergence`` if the recording has none), after
        the news the call recorded while it ran (``tool_progressed``: each round, each task
        state), written again through the context's ``progress`` hook."""
        completed = self.tools.result(call)
        execution = execution_of(completed)
        if context.progress is not None:
            # in the recorded order: the news of calls that ran at once interleave
            answered = self.tools.recording.results[call.id][0]
            if self._news is None:
                self._news = self.tools.news()
            for seq, news in self._news:
                if seq < answered and seq not in self._served:
                    self._served.add(seq)
                    context.progress(news.data, of=news if news.call_id != call.id else None)
        if self.rerender and execution.source == "live":
            return msgspec.structs.replace(execution, content=None)
        return execution


class _ReplayLoop(Loop):
    """The loop, keeping the request it builds so a divergence can show it."""

    recording: Recording

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._built: tuple[tuple, Any] | None = None
        self._digest = _MemoDigest(self._digest)

    def build_request(self, b: Any) -> Any:
        # the same object for the same state: the provider then reuses the digest the loop
        # computed for it (the builder's message list only grows: same length, same list)
        messages = b.message_list
        key = (b, len(messages), messages[-1] if messages else None, b.model, b.system,
               b.tools, b.parameters, self.model)
        built = self._built
        if built is not None and len(built[0]) == len(key) and all(map(is_, built[0], key)):
            return built[1]
        request = super().build_request(b)
        self._built = (key, request)
        self.recording.last_request = request
        return request


class _MemoDigest:
    """A ``RequestDigest`` that remembers the digest of the last request object it saw."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.request, self.value = inner, None, ""

    def digest(self, request: Any) -> str:
        """The digest of ``request`` (computed once per request object)."""
        if request is not self.request:
            self.value, self.request = self.inner.digest(request), request
        return self.value


def rendered_started(started: ConversationStarted, directives: Directives) -> ConversationStarted:
    """``started`` with its system text rendered again by ``directives`` (today's code).

    The recorded per-run layer (``run``) is kept; a fork keeps its recorded
    system text (it was copied or overridden, not rendered).
    """
    if started.fork is not None:
        return started
    run = next((d.text for d in started.directives if d.layer == "run"), "")
    text, layers = directives.render({"mode": started.mode,
                                      "conversation_id": started.conversation_id,
                                      "metadata": dict(started.metadata)}, run)
    return msgspec.structs.replace(started, system=text, directives=layers)


def loop_driver(scratch: Any, recording: Recording, provider: RecordedProvider,
                tools: RecordedTools, *, registry: ToolRegistry | None = None,
                rerender: bool = False, directives: Directives | None = None,
                **loop_options: Any) -> None:
    """Re-run ``recording`` with the engine's loop (the default ``replay`` driver).

    ``registry`` is the tool registry to use (default: ``spec_registry`` of
    the recorded specs); ``rerender`` renders recorded results again with the
    registry's rules (see ``RecordedExecutor``); ``directives`` renders the
    system text again (``rendered_started``), so a changed directive shows
    as a divergence at seq 1; ``loop_options`` go to ``Loop`` (``predicate``,
    ``observers``...). A run the recording paused (a single-turn run, or a
    crash) before the next user message pauses here too.
    """
    loop_options.setdefault("timer", lambda: REPLAY_LATENCY_MS / 1000)  # latencies are ignored
    loop_options.setdefault("retry", RecordedRetries(provider))  # retried where recorded
    verdicts = Verdicts(recording)
    loop = _ReplayLoop(scratch, provider, registry or spec_registry(recording.started.tools,
                                                                    verdicts),
                       executor=RecordedExecutor(tools, rerender=rerender),
                       refuse=verdicts.refuse, **loop_options)
    loop.recording = recording
    provider.digests = loop._digest
    started = recording.started
    if directives is not None:
        started = rendered_started(started, directives)
    conv = Conversation.start(scratch, started)
    decisions = {seq: e for seq, e in recording.events if isinstance(e, ApprovalDecided)}
    for group in [[], *user_runs_of(e for _seq, e in recording.events)]:  # a fork may go on at once
        if group:
            conv.append(*group)
        conv = _drive_deciding(loop, conv, scratch, recording.conversation_id, decisions)


def _drive_deciding(loop: Any, conv: Conversation, scratch: Any, conversation_id: str,
                    decisions: dict[int, ApprovalDecided]) -> Conversation:
    """Drive ``conv``; where the run stops and the recording goes on with decisions
    (``approval_decided``, written by a person between a pause and its resume), append
    them as recorded and drive on."""
    while True:
        try:
            loop.drive(conv)
        except RunPaused:
            return Conversation.open(scratch, conversation_id)
        seq, decided = conv.last_seq + 1, []
        while seq in decisions:
            decided.append(decisions.pop(seq))
            seq += 1
        if not decided:
            return conv
        conv.append(*decided)


def record_scripted(journal: JournalProtocol, conversation_id: str, prompts: Sequence[str],
                    script: Any, *, max_turns: int = 8) -> str:
    """Record a conversation with the loop, the scripted provider and the demo tools."""
    from turnlog.engine.demo import demo_tools
    from turnlog.engine.providers.scripted import ScriptedProvider

    loop = Loop(journal, ScriptedProvider(script), demo_tools())
    loop.start(prompts[0], conversation_id=conversation_id, max_turns=max_turns)
    for prompt in prompts[1:]:
        loop.send(conversation_id, prompt)
    return conversation_id
