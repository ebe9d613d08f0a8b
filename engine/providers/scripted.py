"""The scripted provider: answers from a fixed script, offline and deterministically.

Script format (``turnlog run --script FILE``)::

    {"turns": [
      {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
      {"text": "Let me also add.", "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
      {"text": "Paris is sunny and 2 + 3 = 5."}
    ]}

It answers with turn k, where k is the number of assistant messages already in
the request (the model responses recorded so far), so a resumed or forked run
continues where it stopped. Past the end it raises ``ScriptExhaustedError``.
A turn may also say ``"thinking"``, ``"stop_reason"``, ``"usage"`` (token
counts), ``"arguments_raw"`` per call (argument text sent as is, to test
invalid JSON) or ``"error": {"type": "rate_limit"|"server"|"timeout"|
"auth"|"bad_request"|"malformed", "message": "..."}`` to fail that turn.
Tool call ids are ``call_<turn>_<index>`` (1-based), stable across runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from ..canonical import canonical_json
from ..errors import (
    AuthenticationError,
    BadRequestError,
    FormatError,
    InvalidEventError,
    MalformedResponseError,
    ProviderTimeout,
    RateLimitError,
    ScriptExhaustedError,
    ServerError,
)
from ..messages import Part, Text, Thinking, ToolCall, Usage
from .base import ModelRequest, ModelResponse

__all__ = ["ScriptTurn", "ScriptedProvider", "load_script"]

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
            data = json.loads(Path(source).read_text(encoding="utf-8"))
        else:
            data = source
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

    >>> from engine.messages import Message
    >>> p = ScriptedProvider([{"text": "hello"}])
    >>> p.complete(ModelRequest(model="m", messages=(Message(role="user"),))).parts
    (Text(text='hello'),)
    """

    name = "scripted"

    def __init__(self, script: str | Path | dict[str, Any] | list[Any], *,
                 model: str = "scripted") -> None:
        self.turns = load_script(script)
        self.model = model

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer with the script turn after the last recorded model response."""
        k = sum(1 for m in request.messages if m.role == "assistant")
        if k >= len(self.turns):
            raise ScriptExhaustedError(
                f"the script has {len(self.turns)} turn(s) and turn {k + 1} was requested",
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
            parts.append(_call(call, call.id or f"call_{k + 1}_{i}"))
        stop = turn.stop_reason or ("tool_use" if turn.tool_calls else "end_turn")
        usage = Usage(**turn.usage) if turn.usage else Usage(
            input_tokens=len(canonical_json(msgspec.to_builtins(request))) // 4,
            output_tokens=max(1, len(_json(parts)) // 4))
        return ModelResponse(parts=tuple(parts), stop_reason=stop, usage=usage,
                             provider=self.name, model=request.model or self.model,
                             response_id=f"scripted-{k + 1}", raw=msgspec.to_builtins(turn))


def _json(parts: list[Part]) -> str:
    # arguments without a canonical form (keys merging under NFC) are the loop's to refuse
    try:
        return canonical_json(msgspec.to_builtins(parts))
    except InvalidEventError:
        return msgspec.json.encode(parts).decode()


def _call(call: ScriptCall, call_id: str) -> ToolCall:
    if call.arguments_raw is None:
        return ToolCall(id=call_id, name=call.name, arguments=call.arguments,
                        raw_arguments=canonical_json(call.arguments))
    try:
        parsed = json.loads(call.arguments_raw)
    except json.JSONDecodeError as exc:
        return ToolCall(id=call_id, name=call.name, raw_arguments=call.arguments_raw,
                        invalid=f"arguments are not valid JSON: {exc.msg} at char {exc.pos}")
    if not isinstance(parsed, dict):
        return ToolCall(id=call_id, name=call.name, raw_arguments=call.arguments_raw,
                        invalid=f"arguments must be a JSON object, got {type(parsed).__name__}")
    return ToolCall(id=call_id, name=call.name, arguments=parsed, raw_arguments=call.arguments_raw)
