"""The engine's agent loop as replay's driver and as the provider-swap runner.

Deterministic replay drives ``engine.loop.Loop`` through its seams: the
recorded ``conversation_started`` (``Conversation.start``), a
``RecordedProvider`` and a ``RecordedExecutor`` that serves the recorded tool
results. Unless the caller passes its current tools (``tools=``), the
registry is made of the recorded tool specs (``SpecTool``: any JSON-object
arguments pass, nothing runs), so a recording replays without its tools'
code; pass the real registry to also check argument validation and
enablement against the current code.

A provider swap drives a ``Loop`` with the target provider; under the
``recorded`` and ``refuse`` policies, a call that the policy refuses is
refused where the loop refuses calls (``tool_call_rejected`` with reason
``unrecorded`` or ``refused``), before anything would run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import is_
from typing import Any

import msgspec

from engine.conversation import Conversation
from engine.directives import Directives
from engine.events import ConversationStarted, ToolCallRejected, ToolCompleted, ToolSpec, UserMessage
from engine.errors import ToolError
from engine.executor import ToolExecution
from engine.loop import Loop
from engine.messages import ToolCall
from engine.tools import Tool, ToolContext, ToolRegistry
from journal import Journal

from .errors import ReplayError
from .recorded import RecordedProvider, RecordedRetries, RecordedTools, Recording
from .swap import SwapTools

__all__ = ["RecordedExecutor", "SpecTool", "SwapExecutor", "load_tools", "loop_driver",
           "loop_runner", "record_scripted", "rendered_started", "spec_registry"]


def _never_run() -> None:
    raise ReplayError("a tool known only from its recorded spec cannot run")


class _Verdicts:
    """What the recorded tools said about calls: invalid arguments and disabled tools.

    Read back from the recorded rejections' texts, so a stand-in tool refuses
    exactly the calls the real tool refused, with the same reason (and a
    change in the loop's texts still shows as a divergence).
    """

    _INVALID = ("invalid arguments: ", ". Call it again with arguments that match its schema")
    _DISABLED = "tool is disabled: "

    def __init__(self, recording: Recording | None) -> None:
        self.invalid: dict[str, str] = {}
        self.disabled: dict[str, str] = {}
        #: call id -> (reason, why) for the calls a swap's tool policy refused
        self.policy: dict[str, tuple[str, str]] = {}
        for _seq, event in (recording.events if recording is not None else ()):
            if type(event) is not ToolCallRejected:
                continue
            text = event.content.split(" execution failed - ", 1)[-1]
            if event.reason == "invalid_arguments" and text.startswith(self._INVALID[0]) and \
                    text.endswith(self._INVALID[1]):
                problem = text[len(self._INVALID[0]):-len(self._INVALID[1])]
                self.invalid[_key(event.name, event.arguments)] = problem
            elif event.reason == "disabled" and text.startswith(self._DISABLED):
                self.disabled[event.call_id] = text[len(self._DISABLED):]
            elif event.reason in ("unrecorded", "refused"):
                self.policy[event.call_id] = (event.reason, text)


def _key(name: str, arguments: dict[str, Any]) -> str:
    from engine.duplicates import call_key
    from engine.events import DuplicatePolicy

    return call_key(name, arguments, DuplicatePolicy())


class SpecTool(Tool):
    """A tool known only by its recorded ``ToolSpec``: it never runs.

    It accepts the arguments the recording accepted and refuses, with the
    recorded reason, the calls the recording shows refused as invalid or
    disabled (the recording, not the tool's code, is the reference).
    """

    def __init__(self, spec: ToolSpec, verdicts: _Verdicts | None = None) -> None:
        super().__init__(_never_run, name=spec.name)
        self.spec = spec
        self.verdicts = verdicts or _Verdicts(None)

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments as they are, unless the recording refused them as invalid."""
        invalid = self.verdicts.invalid
        problem = invalid.get(_key(self.name, arguments)) if invalid else None
        if problem is not None:
            raise ToolError(problem)
        return dict(arguments)

    def disabled_reason(self, context: ToolContext) -> str | None:
        """The recorded reason if the recording refused this call as disabled."""
        return self.verdicts.disabled.get(context.call_id)


def spec_registry(specs: Iterable[ToolSpec], recording: Recording | None = None) -> ToolRegistry:
    """A registry of ``SpecTool``s, in the recorded order, answering as ``recording`` did."""
    verdicts = _Verdicts(recording)
    return ToolRegistry([SpecTool(s, verdicts) for s in specs])


def _execution(done: ToolCompleted) -> ToolExecution:
    return ToolExecution(success=done.success, data=done.data, error=done.error,
                         content=done.content, duration_ms=done.duration_ms, source=done.source)


class RecordedExecutor:
    """The loop's ``ToolExecutor`` for deterministic replay: recorded results, checked.

    With ``rerender`` the recorded text is not reused: the loop renders the
    recorded success, data and error again with the current tools' rules
    (success-message hooks, handler flags), so a change there shows up.
    """

    def __init__(self, tools: RecordedTools, *, rerender: bool = False) -> None:
        self.tools, self.rerender = tools, rerender

    def execute(self, call: ToolCall, tool: Tool, context: ToolContext,
                validated: dict[str, Any]) -> ToolExecution:
        """The recorded outcome of ``call`` (a ``Divergence`` if the recording has none)."""
        execution = _execution(self.tools.result(call))
        if self.rerender and execution.source == "live":
            return msgspec.structs.replace(execution, content=None)
        return execution


def _user_groups(events: Sequence[tuple[int, Any]]) -> list[list[UserMessage]]:
    groups: list[list[UserMessage]] = []
    fresh = True
    for _seq, event in events:
        if type(event) is UserMessage:
            if fresh:
                groups.append([])
            groups[-1].append(event)
            fresh = False
        else:
            fresh = True
    return groups


class _ReplayLoop(Loop):
    """The loop, keeping the request it builds so a divergence can show it.

    A recorded provider swap refused some calls by its tool policy; those
    are refused again, where the swap's loop refused them, with the same text.
    """

    recording: Recording
    verdicts: _Verdicts

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._built: tuple[tuple, Any] | None = None
        if hasattr(self, "_digest"):  # the loop's incremental digest, shared with the provider
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

    def _refusal(self, b: Any, call: ToolCall, tool: Tool | None) -> tuple[str | None, str]:
        reason, why = super()._refusal(b, call, tool)
        if reason is None and call.id in self.verdicts.policy:
            return self.verdicts.policy[call.id]
        return reason, why


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
    from .deterministic import RunPaused

    from .deterministic import REPLAY_LATENCY_MS

    loop_options.setdefault("timer", lambda: REPLAY_LATENCY_MS / 1000)  # latencies are ignored
    loop_options.setdefault("retry", RecordedRetries(provider))  # retried where recorded
    verdicts = _Verdicts(recording)
    loop = _ReplayLoop(scratch, provider,
                       registry or ToolRegistry([SpecTool(s, verdicts)
                                                 for s in recording.started.tools]),
                       executor=RecordedExecutor(tools, rerender=rerender), **loop_options)
    loop.recording, loop.verdicts = recording, verdicts
    if isinstance(getattr(loop, "_digest", None), _MemoDigest):
        provider.digests = loop._digest
    started = recording.started
    if directives is not None:
        started = rendered_started(started, directives)
    conv = Conversation.start(scratch, started)
    for group in [[], *_user_groups(recording.events[1:])]:  # a fork may continue at once
        if group:
            conv.append(*group)
        try:
            loop.drive(conv)
        except RunPaused:
            conv = Conversation.open(scratch, recording.conversation_id)


class SwapExecutor:
    """The loop's ``ToolExecutor`` for a provider swap under the ``recorded`` policy."""

    def __init__(self, tools: SwapTools) -> None:
        self.tools = tools

    def execute(self, call: ToolCall, tool: Tool, context: ToolContext,
                validated: dict[str, Any]) -> ToolExecution:
        """The recorded result matching the call's tool name and canonical arguments."""
        answer = self.tools.outcome(call)
        if type(answer) is not ToolCompleted:  # refused calls never reach the executor
            raise ReplayError(f"no recorded result for {call.name} ({call.id})")
        return _execution(answer)


class _SwapLoop(Loop):
    """The loop, refusing what the swap's tool policy refuses where it refuses calls."""

    def __init__(self, *args: Any, swap_tools: SwapTools, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.swap_tools = swap_tools

    def _refusal(self, b: Any, call: ToolCall, tool: Tool | None) -> tuple[str | None, str]:
        reason, why = super()._refusal(b, call, tool)
        if reason is None and self.swap_tools.policy != "live":
            answer = self.swap_tools.peek(call)
            if type(answer) is ToolCallRejected:
                return answer.reason, answer.content
        return reason, why


def loop_runner(journal: Journal, started: ConversationStarted, runs: list[list[UserMessage]],
                provider: Any, tools: SwapTools, live_tools: Any = None) -> None:
    """Record a provider swap with the engine's loop: one run per recorded user turn."""
    if tools.policy == "live":
        registry = live_tools if isinstance(live_tools, ToolRegistry) else ToolRegistry(
            live_tools or ())
        loop = _SwapLoop(journal, provider, registry, swap_tools=tools)
    else:
        loop = _SwapLoop(journal, provider, spec_registry(started.tools), swap_tools=tools,
                         executor=SwapExecutor(tools))
    conv = Conversation.start(journal, started, rest=runs[0])
    loop.drive(conv)
    for group in runs[1:]:
        conv.append(*group)
        loop.drive(conv)


def load_tools(specs: Sequence[str]) -> ToolRegistry:
    """Tools named as ``turnlog run --tools`` names them (``demo`` or ``MODULE:ATTR``)."""
    from engine.choices import load_tools as named_tools

    return named_tools(specs)


def record_scripted(journal: Journal, conversation_id: str, prompts: Sequence[str],
                    script: Any, *, max_turns: int = 8) -> str:
    """Record a conversation with the loop, the scripted provider and the demo tools."""
    from engine.demo import demo_tools
    from engine.providers.scripted import ScriptedProvider

    loop = Loop(journal, ScriptedProvider(script), demo_tools())
    loop.start(prompts[0], conversation_id=conversation_id, max_turns=max_turns)
    for prompt in prompts[1:]:
        loop.send(conversation_id, prompt)
    return conversation_id
