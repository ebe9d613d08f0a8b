"""The scripted provider: answers from a fixed script, offline and deterministically.

Script format (``turnlog run --script FILE``)::

    {"turns": [
      {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
      {"text": "Let me also add.", "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
      {"text": "Paris is sunny and 2 + 3 = 5."}
    ]}

It answers with turn k, where k is the number of model responses already in
the current run (counting from 0): a run starts at a user message that
follows a model response, so a resumed run (or a fork taken mid-run)
continues the script where it stopped, and a chat continued with a new
message starts its script at turn 0. Past the end it raises
``ScriptExhaustedError``. Each turn costs O(1): the provider remembers how
far into the request's (append-only) message list it has counted.
A turn may also say ``"thinking"``, ``"stop_reason"``, ``"usage"`` (token
counts), ``"arguments_raw"`` per call (argument text sent as is, to test
invalid JSON) or ``"error": {"type": "rate_limit"|"server"|"timeout"|
"auth"|"bad_request"|"malformed", "message": "..."}`` to fail that turn.
Tool call ids are ``call_<n>_<index>`` (1-based; n counts every model response
of the conversation, so ids stay unique across runs), stable across re-runs.
Without ``"usage"``, token counts are estimated from the encoded size of the
request (4 bytes a token).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from turnlog.engine.model.canonical import canonical_json
from ..errors import (
    AuthenticationError,
    BadRequestError,
    FormatError,
    MalformedResponseError,
    ProviderTimeout,
    RateLimitError,
    ScriptExhaustedError,
    ServerError,
)
from turnlog.engine.model.messages import Message, Part, Text, Thinking, ToolCall, Usage
from turnlog.engine.model.nesting import check_depth, load_json
from ._common import parse_arguments
from .base import ModelRequest, ModelResponse

__all__ = ["ScriptTurn", "ScriptedProvider", "load_script"]

_encode = msgspec.json.Encoder().encode

_ERRORS = {
    "rate_limit": RateLimitError, "server": ServerError, "timeout": ProviderTimeout,
    "auth": AuthenticationError, "bad_request": BadRequestError, "malformed": MalformedResponseError,
}


class ScriptCall(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One tool call in a script turn."""

    name: str
    arguments: dict[str, Any] = {}
    arguments_raw: str | None = None
    id: str | None = None


class ScriptError(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A failure a script turn raises instead of answering."""

    type: str
    message: str = "scripted failure"


class ScriptTurn(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One scripted model response."""

    text: str | None = None
    thinking: str | None = None
    tool_calls: list[ScriptCall] = []
    stop_reason: str | None = None
    usage: dict[str, int] | None = None
    error: ScriptError | None = None


class _Script(msgspec.Struct, forbid_unknown_fields=True):
    turns: list[ScriptTurn]


def load_script(source: str | Path | dict[str, Any] | list[dict[str, Any]]) -> list[ScriptTurn]:
    """Parse a script from a file path, a dict ``{"turns": [...]}`` or a list of turns.

    Raises ``FormatError`` saying which file and which turn is wrong.
    """
    where = "script"
    try:
        if isinstance(source, (str, Path)):
            where = f"script {str(source)!r}"
            data = load_json(Path(source).read_text(encoding="utf-8"), where)
        else:
            data = source
            check_depth(data, where)  # the one nesting limit (engine.nesting)
        if isinstance(data, list):
            data = {"turns": data}
        turns = msgspec.convert(data, _Script).turns
    except OSError as exc:
        raise FormatError(f"cannot read {where}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(f"{where} is not valid JSON: {exc}") from None
    except msgspec.ValidationError as exc:
        raise FormatError(f"{where} is not a valid script: {exc}") from None
    for i, turn in enumerate(turns):
        if turn.error is not None and turn.error.type not in _ERRORS:
            raise FormatError(f"{where} turn {i}: unknown error type {turn.error.type!r}; "
                              f"expected one of {sorted(_ERRORS)}")
    return turns


class ScriptedProvider:
    """A provider that plays back a script. ``name`` is ``scripted``.

    >>> from turnlog.engine.model.messages import Message
    >>> p = ScriptedProvider([{"text": "hello"}])
    >>> p.complete(ModelRequest(model="m", messages=(Message(role="user"),))).parts
    (Text(text='hello'),)
    """

    name = "scripted"

    def __init__(self, script: str | Path | dict[str, Any] | list[Any], *,
                 model: str = "scripted") -> None:
        self.turns = load_script(script)
        self.model = model
        self._seen: tuple[int, Message | None, int, int, int] | None = None
        self._fixed: tuple[tuple, int] | None = None

    def _count(self, messages: tuple[Message, ...]) -> tuple[int, int, int]:
        """(responses in the current run, responses in all, encoded bytes) of ``messages``.

        Counts only the messages after the prefix it counted last time (the
        loop's message list only grows), so a turn costs O(1), not O(history).
        """
        n, seen = len(messages), self._seen
        if seen is not None and 0 < seen[0] <= n and messages[seen[0] - 1] is seen[1]:
            start, run, total, size = seen[0], seen[2], seen[3], seen[4]
        else:
            start = run = total = size = 0
        previous = messages[start - 1].role if start else None
        for m in messages[start:]:
            if m.role == "assistant":
                run, total = run + 1, total + 1
            elif m.role == "user" and previous not in (None, "user"):
                run = 0  # a user message after the model's turn starts a new run
            previous = m.role
            size += len(_encode(m))
        self._seen = (n, messages[-1] if n else None, run, total, size)
        return run, total, size

    def _fixed_size(self, request: ModelRequest) -> int:
        key = (request.system, request.tools, request.parameters)
        if self._fixed is None or any(a is not b for a, b in zip(self._fixed[0], key)):
            self._fixed = (key, len(_encode(request.system)) + len(_encode(request.tools))
                           + len(_encode(request.parameters)))
        return self._fixed[1]

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer with the script turn after the current run's last model response."""
        k, total, size = self._count(request.messages)
        if k >= len(self.turns):
            raise ScriptExhaustedError(
                f"the script has {len(self.turns)} turn(s) and turn {k + 1} of this run "
                "was requested (a script's turns count from the start of the current run)",
                provider=self.name)
        turn = self.turns[k]
        if turn.error is not None:
            cls = _ERRORS[turn.error.type]
            raise cls(turn.error.message, provider=self.name)
        parts: list[Part] = []
        if turn.thinking:
            parts.append(Thinking(text=turn.thinking, provider=self.name))
        if turn.text:
            parts.append(Text(text=turn.text))
        for i, call in enumerate(turn.tool_calls, start=1):
            parts.append(_call(call, call.id or f"call_{total + 1}_{i}"))
        stop = turn.stop_reason or ("tool_use" if turn.tool_calls else "end_turn")
        usage = Usage(**turn.usage) if turn.usage else Usage(
            input_tokens=(size + self._fixed_size(request)) // 4,
            output_tokens=max(1, len(_encode(parts)) // 4))
        return ModelResponse(parts=tuple(parts), stop_reason=stop, usage=usage,
                             provider=self.name, model=request.model or self.model,
                             response_id=f"scripted-{total + 1}", raw=msgspec.to_builtins(turn))

    async def acomplete(self, request: ModelRequest) -> ModelResponse:
        """``complete`` for the async loop (a script answers at once)."""
        return self.complete(request)


def _call(call: ScriptCall, call_id: str) -> ToolCall:
    if call.arguments_raw is None:
        return ToolCall(id=call_id, name=call.name, arguments=call.arguments,
                        raw_arguments=canonical_json(call.arguments))
    # as every adapter reads argument text (parse_arguments: invalid JSON, NaN, nesting)
    parsed, raw, invalid = parse_arguments(call.arguments_raw)
    return ToolCall(id=call_id, name=call.name, arguments=parsed, raw_arguments=raw,
                    invalid=invalid)
