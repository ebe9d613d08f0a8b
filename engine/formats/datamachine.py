"""The Data Machine text projection: the reference's role/content messages, byte for byte.

Rendering (the reference's ``formatToolCallMessage`` / ``formatToolResultMessage``)::

    >>> format_tool_call_message("google_search", {"query": "WordPress best practices", "num_results": 5}, 1)
    {'role': 'assistant', 'content': 'AI ACTION (Turn 1): Executing Google Search with parameters: query: WordPress best practices, num_results: 5'}
    >>> extract_tool_call({"role": "assistant", "content": "AI ACTION (Turn 1): Executing Google Search with parameters: query: WordPress, num_results: 5"})
    ToolCallText(tool_name='google_search', parameters={'query': 'WordPress', 'num_results': 5}, turn=1, display='Google Search')

How parameter values render (decisions the reference leaves open):

- a plain string is written as it is, and one over 50 characters as its
  first 50 plus ``...`` (the reference's truncation);
- turn 0 means no turn display: ``AI ACTION: Executing ...``;
- every other value (number, boolean, null, list, object) is compact JSON
  (``5``, ``2.5``, ``true``, ``null``, ``{"a":1}``);
- a string the parser would misread is written as a JSON string instead
  (``"5"``, ``"true"``, ``"a, b"``, ``" padded"``, ``"wait..."``, ``""``), and a
  ``, `` inside JSON is written ``,\\u0020``; so text this module renders
  parses back to the same values, while all the reference's examples stay
  byte-exact.

Parsing (``extractToolCallFromMessage``) reads ``key: value`` pairs split on
``, ``, JSON-decodes values where possible and maps the display name back to
the tool name. A value that was truncated (unquoted and ending in ``...``)
becomes a ``Truncated`` marker that compares equal to nothing, not even
itself: the reference appended a timestamp for the same reason, so a
truncated value never produces a false duplicate.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import msgspec

from turnlog.engine.model.canonical import canonical_json
from ..errors import InvalidEventError
from turnlog.engine.model.events import (
    ConversationStarted,
    Event,
    ModelResponded,
    ToolCallRejected,
    ToolCompleted,
    UserMessage,
)
from turnlog.engine.model.messages import ToolCall, text_of
from turnlog.engine.loop.texts import display_name, duplicate_message, json_data

__all__ = [
    "TRUNCATE_AT",
    "ToolCallText",
    "ToolResponseText",
    "Truncated",
    "duplicate_tool_name",
    "extract_tool_call",
    "extract_tool_response",
    "format_parameters",
    "format_tool_call_message",
    "format_tool_result_message",
    "iter_messages",
    "render_events",
    "tool_name_of",
    "validate_tool_call",
]

#: Strings longer than this are truncated to this many characters plus ``...``.
TRUNCATE_AT = 50

_CALL = re.compile(r"AI ACTION(?: \(Turn (\d+)\))?: Executing (.+?) with parameters: ?(.*)\Z",
                   re.DOTALL)
_RESPONSE = re.compile(r"TOOL RESPONSE(?: \(Turn (\d+)\))?: (.*)\Z", re.DOTALL)
_DUPLICATE = re.compile(r"You just called the (.+?) tool with the exact same parameters as your "
                        r"previous action\. ")
_FAILED = re.compile(r"TOOL FAILED: (.+?) execution failed - (.*)\Z", re.DOTALL)
_JSON_START = ('"', "{", "[")


class Truncated:
    """A parameter value the text cut at 50 characters; equal to nothing, not even itself.

    >>> t = Truncated("x" * 50)
    >>> t == t, t == "x" * 50
    (False, False)
    """

    __slots__ = ("prefix",)

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"Truncated({self.prefix!r})"


class ToolCallText(msgspec.Struct, frozen=True):
    """A parsed ``AI ACTION`` message: tool name, parameters, turn (0 = none) and display name."""

    tool_name: str
    parameters: dict[str, Any]
    turn: int
    display: str


class ToolResponseText(msgspec.Struct, frozen=True):
    """A parsed ``TOOL RESPONSE`` message: the result text, success, error and JSON data."""

    content: str
    turn: int
    success: bool
    error: str | None = None
    data: Any = None


def _turn_label(turn: int) -> str:
    return f" (Turn {turn})" if turn else ""


def _json(value: Any) -> str:
    # compact JSON never holds ", " outside strings; escaping it inside keeps the split sound
    return json_data(value).replace(", ", ",\\u0020")


def _plain(text: str, key: bool = False) -> bool:
    """Whether ``text`` can be written unquoted and read back as the same string."""
    if not text or text != text.strip() or ", " in text or text.endswith("..."):
        return False
    if key and (": " in text or text.startswith('"')):
        return False
    try:
        json.loads(text)
    except ValueError:
        return True
    return False


def _format_value(value: Any) -> str:
    if isinstance(value, str):
        if len(value) > TRUNCATE_AT:
            head = value[:TRUNCATE_AT]
            return (head if _plain(head) else _json(head)) + "..."
        return value if _plain(value) else _json(value)
    return _json(value)


def _format_key(key: str) -> str:
    return key if _plain(key, key=True) else _json(key)


def format_parameters(parameters: Mapping[str, Any]) -> str:
    """``key: value, key2: value2`` as the reference writes tool parameters."""
    return ", ".join(f"{_format_key(k)}: {_format_value(v)}" for k, v in parameters.items())


def format_tool_call_message(tool_name: str, parameters: Mapping[str, Any], turn: int = 0,
                             display: str | None = None) -> dict[str, str]:
    """The reference's ``formatToolCallMessage``: an assistant ``AI ACTION`` message."""
    return {"role": "assistant", "content": (
        f"AI ACTION{_turn_label(turn)}: Executing {display or display_name(tool_name)} "
        f"with parameters: {format_parameters(parameters)}")}


def format_tool_result_message(content: str, turn: int = 0) -> dict[str, str]:
    """The reference's ``formatToolResultMessage``: a user ``TOOL RESPONSE`` message.

    ``content`` is the result text (``engine.texts.result_content``: the
    SUCCESS or TOOL FAILED text, plus JSON data for non-handler tools).
    """
    return {"role": "user", "content": f"TOOL RESPONSE{_turn_label(turn)}: {content}"}


def tool_name_of(display: str, known: Iterable[str] = ()) -> str:
    """The tool name behind a display name: a ``known`` name that displays so, else snake case.

    >>> tool_name_of("Google Search")
    'google_search'
    >>> tool_name_of("Get URL", ["get_URL"])
    'get_URL'
    """
    for name in known:
        if display_name(name) == display:
            return name
    return display.lower().replace(" ", "_")


def _read_json(text: str, at: int) -> tuple[Any, int] | None:
    try:
        return json.JSONDecoder().raw_decode(text, at)
    except ValueError:
        return None


def _parse_parameters(text: str) -> dict[str, Any]:
    params: dict[str, Any] = {}
    i, n = 0, len(text)
    while i < n:
        if text.startswith('"', i) and (got := _read_json(text, i)) and text.startswith(": ", got[1]):
            key, i = got[0], got[1] + 2
        else:
            colon = text.find(": ", i)
            comma = text.find(", ", i)
            if colon < 0 or (0 <= comma < colon):
                # a fragment without "key: " (the reference drops it too)
                i = n if comma < 0 else comma + 2
                continue
            key, i = text[i:colon], colon + 2
        value, i = _parse_value(text, i)
        params[str(key)] = value
        if text.startswith(", ", i):
            i += 2
    return params


def _parse_value(text: str, i: int) -> tuple[Any, int]:
    if text.startswith(_JSON_START, i) and (got := _read_json(text, i)):
        value, end = got
        if text.startswith("...", end) and isinstance(value, str) and (
                end + 3 == len(text) or text.startswith(", ", end + 3)):
            return Truncated(value), end + 3
        if end == len(text) or text.startswith(", ", end):
            return value, end
    comma = text.find(", ", i)
    end = len(text) if comma < 0 else comma
    raw = text[i:end]
    if raw.endswith("..."):
        return Truncated(raw[:-3]), end
    try:
        return json.loads(raw), end
    except ValueError:
        return raw, end


def extract_tool_call(message: Mapping[str, Any], known: Iterable[str] = ()) -> ToolCallText | None:
    """The reference's ``extractToolCallFromMessage``; ``None`` if not an ``AI ACTION`` message.

    ``known`` tool names resolve display names exactly (``Get URL`` → ``get_URL``).
    """
    content = message.get("content")
    if message.get("role") != "assistant" or not isinstance(content, str):
        return None
    m = _CALL.match(content)
    if m is None:
        return None
    turn, display, params = m.groups()
    return ToolCallText(tool_name_of(display, known), _parse_parameters(params),
                        int(turn or 0), display)


def extract_tool_response(message: Mapping[str, Any]) -> ToolResponseText | None:
    """A parsed ``TOOL RESPONSE`` user message, or ``None``.

    A text starting ``TOOL FAILED:`` is a failure (its error is read back);
    otherwise a success, whose trailing JSON after a blank line is its data.
    """
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, str):
        return None
    m = _RESPONSE.match(content)
    if m is None:
        return None
    turn, body = int(m.group(1) or 0), m.group(2)
    failed = _FAILED.match(body)
    if failed:
        return ToolResponseText(body, turn, False, error=failed.group(2))
    data = None
    head, sep, tail = body.rpartition("\n\n")
    if sep:
        try:
            data = json.loads(tail)
        except ValueError:
            data = None
    return ToolResponseText(body, turn, True, data=data)


def duplicate_tool_name(message: Mapping[str, Any]) -> str | None:
    """The display name in a duplicate correction message (user role), or ``None``."""
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, str):
        return None
    m = _DUPLICATE.match(content)
    return m.group(1) if m else None


def _same(a: Any, b: Any) -> bool:
    try:
        return canonical_json(a) == canonical_json(b)
    except InvalidEventError:  # a Truncated marker (or a non-JSON value) is never the same
        return False


def validate_tool_call(tool_name: str, parameters: Mapping[str, Any],
                       messages: Sequence[Mapping[str, Any]], mode: str = "chat") -> dict[str, Any]:
    """The reference's ``validateToolCall`` over a text history (the "text rule").

    Finds the most recent ``AI ACTION`` message and refuses the call when it
    names the same tool with the same parameters. Values compare as the
    structured rule does (canonical JSON: key order, ``1`` vs ``1.0`` and
    Unicode normalisation never matter); a truncated value never matches.

    >>> history = [{"role": "assistant", "content": "AI ACTION (Turn 1): Executing Google Search with parameters: query: WordPress, num_results: 5"}]
    >>> validate_tool_call("google_search", {"query": "WordPress", "num_results": 5}, history)["is_duplicate"]
    True
    """
    for message in reversed(messages):
        call = extract_tool_call(message, (tool_name,))
        if call is None:
            continue
        if call.tool_name == tool_name and call.parameters.keys() == parameters.keys() and all(
                _same(call.parameters[k], parameters[k]) for k in parameters):
            return {"is_duplicate": True, "message": duplicate_message(tool_name, mode)}
        break
    return {"is_duplicate": False, "message": ""}


def render_events(events: Iterable[Event]) -> list[dict[str, str]]:
    """A conversation's events as the reference's role/content messages.

    The system directive (if any) is a ``system`` message; user messages are
    their text; a model response is its text (if any) as an ``assistant``
    message, then one ``AI ACTION`` message per tool call, refused calls
    included (so the text rule sees every call, as the structured rule does);
    each result is a ``TOOL RESPONSE`` message, and a call refused as a
    duplicate is answered by the duplicate correction message alone.
    Lifecycle events (requests, failures, completion) have no message.
    """
    return list(iter_messages(events))


def iter_messages(events: Iterable[Event]) -> Iterator[dict[str, str]]:
    """:func:`render_events`' messages one at a time, as ``events`` are read (a long
    conversation's export holds one message, and each call id's turn, at a time)."""
    first = True
    turn_of: dict[str, int] = {}
    displays: dict[str, str] = {}
    for event in events:
        if type(event) is ConversationStarted:
            displays.update((t.name, t.display_name) for t in event.tools if t.display_name)
            if event.system and first:
                first = False
                yield {"role": "system", "content": event.system}
        elif type(event) is UserMessage:
            first = False
            yield {"role": "user", "content": text_of(event.parts)}
        elif type(event) is ModelResponded:
            text = text_of(event.parts)
            if text:
                first = False
                yield {"role": "assistant", "content": text}
            for part in event.parts:
                if type(part) is ToolCall:
                    first = False
                    turn_of[part.id] = event.turn
                    yield format_tool_call_message(part.name, part.arguments, event.turn,
                                                   displays.get(part.name))
        elif type(event) is ToolCompleted:
            first = False
            yield format_tool_result_message(event.content, turn_of.get(event.call_id, 0))
        elif type(event) is ToolCallRejected:
            first = False
            if event.reason == "duplicate":
                yield {"role": "user", "content": event.content}
            else:
                yield format_tool_result_message(event.content, turn_of.get(event.call_id, 0))
