"""What the provider modules share: history planning, argument parsing, ids, images, errors.

``plan_history`` turns the neutral message list into an ordered list of
``Entry`` items that every wire format can render without breaking its rules:

- ``system`` messages are lifted into the top-level system text;
- every tool call of an assistant message is followed by exactly one result,
  in call order (results the history lacks become an error result saying so,
  since every API refuses an unanswered call);
- a call id that repeats an earlier one gets a ``_2``, ``_3`` ... suffix (the
  APIs refuse duplicate ids), and its result follows it;
- a tool result that answers no call of the preceding assistant message
  becomes user text (the APIs refuse orphan results);
- empty and whitespace-only text parts are dropped, and messages left empty;
- an image in an assistant message becomes the text ``[image]`` except for
  Gemini (the only wire where a model turn may hold one);
- thinking is kept only when the target provider made it (it is bound to
  that provider by its signature); another provider's thinking is dropped,
  because it was never part of the visible conversation;
- provider-bound content (``Opaque``: server tool blocks, documents,
  citations, vendor parts) goes to its own provider as it is and to any
  other as the marked text of ``render_opaque``; a message's unknown keys
  (``EXTRA``) go to their own wire only;
- a user message with nothing to send (empty or blank text) keeps its
  place as one empty ``Text`` unless a user turn (or results) already holds
  that place: each wire writes it the way it accepts (``""``, or
  ``EMPTY_TEXT`` where blank text is refused).

Consecutive entries of the same role are left for each module to merge, as
each wire format merges differently.
"""

from __future__ import annotations

import email.utils
import json
import math
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from ..errors import (
    AuthenticationError,
    BadRequestError,
    FormatError,
    MalformedResponseError,
    NestingError,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    ServerError,
)
from turnlog.engine.model.messages import (
    EXTRA,
    Image,
    Message,
    Opaque,
    Part,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    render_opaque,
)
from turnlog.engine.model.nesting import check_depth, load_json
from turnlog.engine.loop.texts import UNANSWERED
from ._redact import Redactor, _refuse_constant, read_body

__all__ = [
    "CUT_OFF",
    "EMPTY_TEXT",
    "UNANSWERED",
    "Entry",
    "count",
    "data_url",
    "error_for_status",
    "error_message",
    "mark_cut_off",
    "opt_str",
    "parse_arguments",
    "parse_body",
    "parse_data_url",
    "parse_retry_after",
    "plan_history",
    "redact",
    "require",
    "require_key",
    "wire_list",
    "wire_str",
    "with_model",
]

CUT_OFF = "cut off by max_tokens"
#: The text of an empty user message on a wire that refuses blank text (Anthropic).
EMPTY_TEXT = "(empty message)"
_NOT_FINITE = "arguments are not valid JSON: NaN and Infinity are not JSON numbers"

_BLANK = re.compile(r"\s*")


@dataclass
class Entry:
    """One planned wire message. ``results`` answer the calls of the assistant entry before it."""

    role: Literal["user", "assistant", "results"]
    parts: list[Part] = field(default_factory=list)


def _keep(part: Part, provider: str) -> bool:
    if type(part) is Text:
        return not _BLANK.fullmatch(part.text)
    if type(part) is Thinking:
        return part.provider == provider and bool(
            part.text.strip() or part.redacted or part.signature or part.wire is not None)
    if type(part) is Opaque:
        return part.provider == provider or render_opaque(part) is not None
    return True


def _bound(part: Part, provider: str) -> Part:
    """``part`` itself, or another provider's ``Opaque`` as its marked text."""
    if type(part) is Opaque and part.provider != provider:
        return Text(text=render_opaque(part) or "")
    return part


def _assistant_part(part: Part, provider: str) -> Part:
    # only Gemini lets a model turn carry an image; elsewhere a placeholder keeps its place
    if type(part) is Image and provider != "gemini":
        return Text(text="[image]")
    return _bound(part, provider)


class _Planner:
    """Walks the neutral messages once, pairing each assistant turn's calls with results."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.entries: list[Entry] = []
        self.calls: list[ToolCall] = []  # the open turn's calls, with wire-unique ids
        self.recorded: list[str] = []  # the same calls' ids as recorded
        self.results: list[ToolResult | None] = []
        self.seen: set[str] = set()

    def _unique(self, call_id: str) -> str:
        # a repeated id (some servers number calls from 0 every turn) is suffixed, since
        # the APIs refuse duplicate ids; results follow the renamed call
        new, n = call_id, 1
        while new in self.seen:
            n += 1
            new = f"{call_id}_{n}"
        self.seen.add(new)
        return new

    def assistant(self, message: Message) -> None:
        self.close()
        parts: list[Part] = []
        for part in message.parts:
            if not _keep(part, self.provider) or type(part) is ToolResult:
                continue
            part = _assistant_part(part, self.provider)
            if type(part) is ToolCall:
                # the provider is sent back the id it minted (a repeated one is suffixed)
                wire = self._unique(part.id if part.provider_id is None else part.provider_id)
                self.recorded.append(part.id)
                part = part if wire == part.id and part.provider_id is None else (
                    msgspec.structs.replace(part, id=wire, provider_id=None))
                self.calls.append(part)
                self.results.append(None)
            parts.append(part)
        if parts:
            self.entries.append(Entry("assistant", parts))

    def answer(self, result: ToolResult) -> bool:
        """Pair ``result`` with the first open call of its id; False if it answers none."""
        for i, recorded in enumerate(self.recorded):
            if recorded == result.call_id and self.results[i] is None:
                self.results[i] = msgspec.structs.replace(result, call_id=self.calls[i].id)
                return True
        return False

    def user(self, message: Message) -> None:
        others: list[Part] = []
        for part in message.parts:
            if type(part) is ToolResult:
                if not self.answer(part):
                    others.append(Text(text=f"[result of tool {part.name} ({part.call_id})]: "
                                            f"{part.content}"))
            elif _keep(part, self.provider) and type(part) in (Text, Image, Opaque):
                others.append(_bound(part, self.provider))
        if not any(type(p) is ToolResult for p in message.parts) and not any(
                type(p) is not Opaque or p.kind != EXTRA for p in others) and not (
                self.entries and self.entries[-1].role in ("user", "results") and not self.calls):
            # an empty user message keeps its place (see the module doc)
            others.insert(0, Text(text=""))
        if others:
            self.close()
            self.entries.append(Entry("user", others))
        elif self.calls and all(r is not None for r in self.results):
            self.close()

    def close(self) -> None:
        if self.calls:
            self.entries.append(Entry("results", [
                r or ToolResult(call_id=c.id, name=c.name, content=UNANSWERED, is_error=True)
                for c, r in zip(self.calls, self.results)]))
        self.calls, self.recorded, self.results = [], [], []


def plan_history(system: str, messages: Sequence[Message], provider: str) -> tuple[str, list[Entry]]:
    """The system text and the ordered entries to render for ``provider`` (see module doc)."""
    systems = [system] if system.strip() else []
    planner = _Planner(provider)
    for message in messages:
        if message.role == "system":
            text = "".join(p.text for p in message.parts if type(p) is Text)
            if text.strip():
                systems.append(text)
        elif message.role == "assistant":
            planner.assistant(message)
        else:
            planner.user(message)
    planner.close()
    return "\n\n".join(systems), planner.entries


def parse_arguments(raw: Any) -> tuple[dict[str, Any], str, str | None]:
    """``(arguments, raw_arguments, invalid)`` from what a model produced as tool arguments.

    Never raises: text that is not a JSON object is kept raw and ``invalid``
    says why, so the loop can tell the model instead of running the call.

    >>> parse_arguments('{"a": 1}')
    ({'a': 1}, '{"a": 1}', None)
    >>> parse_arguments('[1]')[2]
    'arguments must be a JSON object, got list'
    """
    if isinstance(raw, dict):
        try:
            return raw, json.dumps(raw, ensure_ascii=False, separators=(",", ":"),
                                   allow_nan=False), None
        except ValueError:
            return {}, json.dumps(raw, ensure_ascii=False), _NOT_FINITE
    if not isinstance(raw, str):
        text = json.dumps(raw, ensure_ascii=False)
        return {}, text, f"arguments must be a JSON object, got {type(raw).__name__}"
    if not raw.strip():
        return {}, raw, "arguments are empty; expected a JSON object"
    try:
        parsed = load_json(raw, "arguments", parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        return {}, raw, f"arguments are not valid JSON: {exc.msg} at char {exc.pos}"
    except ValueError:
        return {}, raw, _NOT_FINITE
    except NestingError as exc:  # the one limit (engine.nesting)
        return {}, raw, str(exc)
    if not isinstance(parsed, dict):
        return {}, raw, f"arguments must be a JSON object, got {type(parsed).__name__}"
    try:
        Redactor(None).data(parsed, "")
    except MalformedResponseError as exc:  # a lone surrogate
        return {}, raw, "arguments " + str(exc).removeprefix("response ")
    return parsed, raw, None


def mark_cut_off(parts: list[Part], stop_reason: str) -> list[Part]:
    """Mark the trailing tool call invalid when the response hit the token limit mid-call.

    A call that is the last part of a ``max_tokens`` response may be
    truncated, so it must never run; the loop sees ``invalid`` and refuses it.
    """
    if stop_reason == "max_tokens" and parts and type(parts[-1]) is ToolCall:
        call = parts[-1]
        parts[-1] = ToolCall(id=call.id, name=call.name, raw_arguments=call.raw_arguments,
                             invalid=CUT_OFF)
    return parts


def data_url(image: Image) -> str:
    """The image as a URL: its own ``url``, or a ``data:`` URL of its base64 data."""
    if image.data is not None:
        return f"data:{image.media_type};base64,{image.data}"
    return image.url or ""


def parse_data_url(url: str) -> tuple[str, str] | None:
    """``(media_type, base64 data)`` of a base64 ``data:`` URL, else ``None``."""
    m = re.fullmatch(r"data:([\w.+/-]+);base64,(.*)", url, re.DOTALL)
    return (m.group(1), m.group(2)) if m else None


def response_body(body: Any, provider: str) -> dict[str, Any]:
    """``body`` once it is a JSON object within the nesting limit (``engine.nesting``): what
    every adapter's ``map_response`` checks first, so a body parsed elsewhere is as safe to
    map and record as one ``read_body`` returned. Else ``MalformedResponseError``."""
    if not isinstance(body, dict):
        raise MalformedResponseError(f"response body is {type(body).__name__}, not an object",
                                     provider=provider)
    check_depth(body, "response body",
                error=lambda message: MalformedResponseError(message, provider=provider))
    where = _not_finite(body)
    if where is not None:
        raise MalformedResponseError(f"response body: {where} is not a JSON number "
                                     "(NaN and Infinity cannot be stored)", provider=provider)
    return body


def _not_finite(body: dict[str, Any]) -> str | None:
    """The path of the first NaN or infinite number in ``body`` (an SDK's parser, and
    ``json.loads`` for ``1e400``, yield them; the journal could not store them), else None."""
    stack: list[tuple[str, Any]] = [("", body)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{path}.{key}" if path else str(key), item) for key, item in value.items())
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in enumerate(value))
        elif type(value) is float and not math.isfinite(value):
            return path
    return None


def require(obj: Any, key: str, kind: type | tuple[type, ...], where: str, provider: str) -> Any:
    """``obj[key]`` if it is of ``kind``, else a ``MalformedResponseError`` naming ``where``."""
    if not isinstance(obj, dict) or key not in obj:
        raise MalformedResponseError(f"response has no {where}.{key}", provider=provider)
    value = obj[key]
    if not isinstance(value, kind):
        raise MalformedResponseError(
            f"response {where}.{key} is {type(value).__name__}, not the expected type",
            provider=provider)
    return value


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date).

    A value that is none of these (or negative, or not finite) is ``None``:
    a hostile header never raises.

    >>> parse_retry_after({"retry-after": "2"}), parse_retry_after({"retry-after": "soon"})
    (2.0, None)
    """
    if headers is None:
        return None
    ms = _seconds(headers.get("retry-after-ms"))
    if ms is not None:
        return ms / 1000
    value = headers.get("retry-after")
    seconds = _seconds(value)
    if seconds is not None or not value:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time()) if when.tzinfo else None


def _seconds(value: Any) -> float | None:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def redact(text: str, secret: str | None = None) -> str:
    """``text`` without ``secret`` (in any of its encodings) or anything shaped like an API key.

    APIs echo keys in error messages (``Incorrect API key provided: sk-ab***yz``);
    error messages reach the journal, keys must not. (``Redactor.message``.)

    >>> redact("Incorrect API key provided: sk-ab***yz.", None)
    'Incorrect API key provided: [redacted key].'
    """
    return Redactor(secret).message(text)


def error_for_status(status: int, message: str, provider: str,
                     headers: Any = None, secret: str | None = None) -> ProviderError:
    """The ``ProviderError`` subclass for an HTTP error status.

    The message is masked where it leaves the provider (``RemoteProvider``,
    the configured key first, then anything key-shaped); ``secret`` masks it
    here too, for callers outside that boundary.
    """
    text = f"HTTP {status}: {redact(message, secret) if secret else message}"
    if status in (401, 403):
        return AuthenticationError(f"{text} (check the API key)", provider=provider, status=status)
    if status == 429:
        after = parse_retry_after(headers)
        hint = f" (retry after {after:g}s)" if after is not None else ""
        return RateLimitError(text + hint, provider=provider, status=status, retry_after=after)
    if status == 408:
        return ProviderTimeout(text, provider=provider, status=status)
    if status >= 500:  # 503 and 529 (overloaded) may say when to come back
        return ServerError(text, provider=provider, status=status,
                           retry_after=parse_retry_after(headers))
    return BadRequestError(text, provider=provider, status=status)


def error_message(body: Any, fallback: str) -> str:
    """The human message inside an API error body (all three APIs nest it in ``error``)."""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
        if isinstance(body.get("message"), str):
            return body["message"]
    return fallback


def require_key(provider: str, api_key: str | None) -> str:
    """``api_key``, else the provider's environment variable (its wire's ``KEY_ENV``), else
    an ``AuthenticationError`` naming the variable."""
    from .registry import wire

    variable = wire(provider).KEY_ENV
    key = api_key or os.environ.get(variable)
    if not key:
        raise AuthenticationError(
            f"no API key: set {variable} or pass api_key=", provider=provider)
    return key


def with_model(response: Any, model: str) -> Any:
    """``response`` with ``model`` filled in when the body did not name one."""
    return response if response.model else msgspec.structs.replace(response, model=model)


def parse_body(text: str, provider: str, secret: str | None = None) -> Any:
    """The JSON value of a response body, or a ``MalformedResponseError`` quoting its start.

    ``secret`` is masked wherever the body echoes it (see ``_redact.read_body``);
    nesting too deep and lone surrogates are refused, never raised raw.
    """
    return read_body(text, provider, Redactor(secret))


def opt_str(obj: Any, key: str) -> str | None:
    """``obj[key]`` when it is a string; anything else (missing, null, wrong type) is None."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else None


def count(obj: Any, key: str) -> int:
    """A token count: ``obj[key]`` when it is a non-negative int, else 0."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if type(value) is int and value >= 0 else 0


def wire_list(value: Any, where: str, provider: str) -> list[dict[str, Any]]:
    """``value`` as a list of objects (``None`` is empty), else a ``FormatError`` naming ``where``."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise FormatError(f"{provider} {where}: expected a list of objects, "
                          f"got {type(value).__name__}")
    return value


def wire_str(obj: dict[str, Any], key: str, where: str, provider: str) -> str:
    """``obj[key]`` as a string (missing or null is ``""``), else a ``FormatError``."""
    value = obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise FormatError(f"{provider} {where}.{key}: expected a string, got {type(value).__name__}")
    return value
