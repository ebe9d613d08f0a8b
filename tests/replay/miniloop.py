"""A minimal agent loop for testing replay's machinery independently of engine's loop.

It records conversations the way the engine's loop does (request, response,
each call started+completed or refused as a duplicate, completion), and is a
``Driver`` for ``replay`` (serving recorded results through ``RecordedTools``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from turnlog.engine.model.conversation import Conversation
from turnlog.engine.errors import ProviderError
from turnlog.engine.model.events import (
    ConversationCompleted,
    ConversationFailed,
    ConversationStarted,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ToolCallRejected,
    ToolCompleted,
    ToolStarted,
    TurnLimitReached,
    UserMessage,
)
from turnlog.engine.model.messages import ToolCall
from turnlog.engine.loop.texts import duplicate_message, result_content
from turnlog.journal import Journal
from turnlog.replay.recorded import RecordedTools, request_of

Tools = Callable[[ToolCall], tuple[bool, Any]]


def demo_tools(call: ToolCall) -> tuple[bool, Any]:
    if call.name == "add":
        return True, {"sum": call.arguments.get("a", 0) + call.arguments.get("b", 0)}
    if call.name == "get_weather" and call.arguments.get("city") in ("Paris", "Lyon"):
        return True, {"city": call.arguments["city"], "forecast": "sunny"}
    return False, f"unknown city {call.arguments.get('city')!r}"


def run(conv: Conversation, provider, tools: Tools | RecordedTools) -> None:
    b = conv.builder
    while True:
        if b.turn_count - b.run_start_turn >= b.max_turns:
            conv.append(TurnLimitReached(turn_count=b.max_turns, max_turns=b.max_turns))
            return
        request = request_of(b.state())
        turn = b.turn_count + 1
        conv.append(ModelRequested(turn=turn, digest=request.digest(), provider=provider.name,
                                   model=request.model))
        t0 = time.perf_counter()
        try:
            r = provider.complete(request)
        except ProviderError as exc:
            conv.append(ModelFailed(turn=turn, error_type=type(exc).__name__, message=str(exc),
                                    provider=provider.name, model=request.model,
                                    status=exc.status),
                        ConversationFailed(error=str(exc), error_type=type(exc).__name__))
            return
        conv.append(ModelResponded(turn=turn, parts=r.parts, stop_reason=r.stop_reason,
                                   usage=r.usage, provider=r.provider, model=r.model,
                                   response_id=r.response_id, raw=r.raw,
                                   latency_ms=(time.perf_counter() - t0) * 1000))
        calls = [p for p in r.parts if type(p) is ToolCall]
        if not calls:
            conv.append(ConversationCompleted(final_content=b.final_content))
            return
        for call in calls:
            if b.is_duplicate(call.name, call.arguments):
                conv.append(ToolCallRejected(call_id=call.id, name=call.name, reason="duplicate",
                                             content=duplicate_message(call.name, b.mode),
                                             arguments=call.arguments))
                continue
            answer = tools.outcome(call) if hasattr(tools, "outcome") else None
            if answer is not None:
                conv.append(answer)
                continue
            conv.append(ToolStarted(call_id=call.id, name=call.name, arguments=call.arguments))
            if isinstance(tools, RecordedTools):
                done = tools.result(call)
                conv.append(ToolCompleted(call_id=done.call_id, name=done.name,
                                          success=done.success, content=done.content,
                                          data=done.data, error=done.error,
                                          duration_ms=0.0, source=done.source))
                continue
            t0 = time.perf_counter()
            ok, value = (tools.live if hasattr(tools, "outcome") else tools)(call)
            data, error = (value, None) if ok else (None, value)
            conv.append(ToolCompleted(
                call_id=call.id, name=call.name, success=ok, data=data, error=error,
                content=result_content(call.name, success=ok, data=data, error=error),
                duration_ms=(time.perf_counter() - t0) * 1000))


def record(journal: Journal, started: ConversationStarted, prompts: list[str], provider,
           tools: Tools = demo_tools) -> str:
    conv = Conversation.start(journal, started)
    for prompt in prompts:
        conv.append(UserMessage.of(prompt))
        run(conv, provider, tools)
    return started.conversation_id


def driver(scratch: Journal, recording, provider, tools: RecordedTools,
           configure: Callable[[ConversationStarted], ConversationStarted] = lambda s: s) -> None:
    conv = Conversation.start(scratch, configure(recording.started))
    for _seq, event in recording.events[1:]:
        if type(event) is UserMessage:
            conv.append(event)
            run(conv, provider, tools)


def runner(journal, started, runs, provider, tools, live_tools) -> None:
    """A ``swap`` runner: the swapped run, recorded with this minimal loop."""
    tools.live = live_tools or demo_tools
    conv = Conversation.start(journal, started)
    for messages in runs:
        conv.append(*messages)
        run(conv, provider, tools)


def script(*turns: dict) -> list[dict]:
    return json.loads(json.dumps(list(turns)))
