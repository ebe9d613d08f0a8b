"""The four wires the proxy serves: their paths, request readers, answers and error shapes.

Each wire is read with its provider module's registry interface
(``engine.providers.registry.wire``: ``unmap_messages``, ``unmap_tools``,
``map_response``, ``SYSTEM_KEY``, ``ASSEMBLER``), so a proxied exchange
becomes exactly the neutral request and response the loop records for that
provider.

>>> wire_for_path("/v1/chat/completions").name, wire_for_path("/v1beta/models/m:streamGenerateContent").name
('openai', 'gemini')
>>> parse_request(WIRES["openai"], "/v1/chat/completions", b'{"model": "m", "stream": true,'
...     b' "messages": [{"role": "user", "content": "hi"}]}').stream
True
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import msgspec

from turnlog.engine.errors import TurnlogError
from turnlog.engine.model.events import ToolSpec
from turnlog.engine.model.messages import Message
from turnlog.engine.model.nesting import check_depth, load_json
from turnlog.engine.providers import ModelResponse, registry
from turnlog.engine.providers._stream import Assembler

__all__ = ["DEFAULT_UPSTREAMS", "HISTORY_POINTS", "UPSTREAM_NAMES", "WIRES", "HistoryCache",
           "ParsedRequest", "UnparsedRequest", "Wire", "error_body", "parse_request",
           "wire_for_path"]

#: The upstream base URLs, by the name ``--upstream WIRE=URL`` takes (as each official SDK takes them).
DEFAULT_UPSTREAMS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com",
                     "gemini": "https://generativelanguage.googleapis.com"}
UPSTREAM_NAMES = tuple(sorted(DEFAULT_UPSTREAMS))
#: How many histories a ``HistoryCache`` keeps (the end of each, to go on from).
HISTORY_POINTS = 1024
_GEMINI = re.compile(r"/v1beta/models/([^/:]+):(streamGenerateContent|generateContent)")


class UnparsedRequest(TurnlogError):
    """A request the proxy forwards untouched but cannot read as its wire's request."""


@dataclass(frozen=True)
class Wire:
    """One wire the proxy serves: its provider name (recorded, and its registry module),
    upstream name and where its request body keeps the history."""

    name: str
    upstream: str
    #: the request body's key of the history (the system text's is the module's ``SYSTEM_KEY``)
    history_key: str
    #: the part of the path appended to the upstream base URL: OpenAI's base ends in /v1
    strip_prefix: str = ""
    #: other spellings of the system key the wire's SDKs send
    system_aliases: tuple[str, ...] = ()
    #: the history may be one string: a single user message (the Responses API's ``input``)
    text_history: bool = False

    @property
    def module(self) -> ModuleType:
        """The provider module that speaks this wire (``registry.wire(name)``)."""
        return registry.wire(self.name)

    def assembler(self) -> Assembler:
        """A fresh assembler of this wire's stream events (the module's ``ASSEMBLER``)."""
        return self.module.ASSEMBLER()

    def map_response(self, body: dict[str, Any]) -> ModelResponse:
        """An unstreamed response body of this wire in neutral form."""
        return self.module.map_response(body)


WIRES = {
    "openai": Wire("openai", "openai", "messages", "/v1"),
    "openai-responses": Wire("openai-responses", "openai", "input", "/v1", text_history=True),
    "anthropic": Wire("anthropic", "anthropic", "messages"),
    "gemini": Wire("gemini", "gemini", "contents", system_aliases=("system_instruction",)),
}
#: Body keys that are the request's history, system, tools or model, not its parameters.
_STRUCTURE = {"tools", "model", "stream"} | {
    key for w in WIRES.values() for key in (w.history_key, w.module.SYSTEM_KEY, *w.system_aliases)
    if key}
_PATHS = {"/v1/chat/completions": "openai", "/v1/responses": "openai-responses",
          "/v1/messages": "anthropic"}


def wire_for_path(path: str) -> Wire | None:
    """The wire served at ``path``, or ``None`` for a path the proxy does not know."""
    if path in _PATHS:
        return WIRES[_PATHS[path]]
    return WIRES["gemini"] if _GEMINI.fullmatch(path) else None


@dataclass
class ParsedRequest:
    """A request in neutral form, as the loop would have built it."""

    model: str
    system: str
    messages: list[Message]
    tools: tuple[ToolSpec, ...]
    parameters: dict[str, Any] = field(default_factory=dict)
    stream: bool = False


def _system(wire: Wire, body: dict[str, Any]) -> Any:
    key = wire.module.SYSTEM_KEY
    for name in (key, *wire.system_aliases) if key else ():
        if body.get(name) is not None:
            return body[name]
    return None


def _history(wire: Wire, body: dict[str, Any]) -> tuple[str, list[Message]]:
    history = body[wire.history_key]
    if wire.text_history and isinstance(history, str):
        history = [{"role": "user", "content": history}]
    return wire.module.unmap_messages(_system(wire, body), history)


def parse_request(wire: Wire, path: str, raw: bytes,
                  cache: HistoryCache | None = None) -> ParsedRequest:
    """``raw`` (a request body sent to ``path``) in neutral form.

    Raises ``UnparsedRequest`` saying why it cannot be read (not JSON, not
    an object, a history the provider's reader refuses ...). With ``cache``, a
    history that extends one read before is read only past it (``HistoryCache``):
    the same result, and the same error, as without.
    """
    if cache is not None:
        parsed = cache.parse(wire, path, raw)
        if parsed is not None:
            return parsed
    try:
        # one nesting limit (engine.nesting): too deep is unparsed, never a RecursionError
        body = load_json(raw, "the body", error=UnparsedRequest)
    except ValueError as exc:
        raise UnparsedRequest(f"the body is not JSON ({exc})") from None
    if not isinstance(body, dict):
        raise UnparsedRequest(f"the body is a JSON {type(body).__name__}, not an object")
    if wire.name == "openai-responses" and body.get("previous_response_id"):
        raise UnparsedRequest("previous_response_id: the history is held upstream, not sent")
    try:
        system, messages = _history(wire, body)
        tools = tuple(wire.module.unmap_tools(body.get("tools") or []))
    except KeyError as exc:
        raise UnparsedRequest(f"the body has no {exc.args[0]!r}") from None
    except (TurnlogError, TypeError, ValueError, AttributeError) as exc:
        raise UnparsedRequest(f"not a readable {wire.name} request: {exc}") from None
    return _parsed(wire, path, body, system, messages, tools)


def _parsed(wire: Wire, path: str, body: dict[str, Any], system: str, messages: list[Message],
            tools: tuple[ToolSpec, ...]) -> ParsedRequest:
    gemini_match = _GEMINI.fullmatch(path)
    model = gemini_match.group(1) if gemini_match else body.get("model")
    if not isinstance(model, str) or not model:
        raise UnparsedRequest("the request names no model")
    stream = (gemini_match.group(2) == "streamGenerateContent" if gemini_match
              else body.get("stream") is True)
    parameters = {k: v for k, v in body.items() if k not in _STRUCTURE}
    return ParsedRequest(model=model, system=system or "", messages=list(messages), tools=tools,
                         parameters=parameters, stream=stream)


def _constant(name: str) -> float:
    raise _Constant(name)


class _Constant(Exception):
    """A body with NaN or Infinity: msgspec writes them as null, so its hash would not
    tell them from null; such a body is read whole."""


_encode_message = msgspec.json.Encoder().encode


class HistoryCache:
    """Histories read before, so that a request resending one reads only what it adds.

    A client resends the whole history with every request. The cache keeps,
    for the last ``size`` histories read whole and without error, the wire's
    ``HistoryReader`` at their end, keyed by a hash of the wire, the system
    value and each message as parsed (its JSON, in order: byte for byte the
    value the reader would read). A request whose first k messages hash as one
    of them goes on from a copy of that reader: only the messages past k are
    read and checked for depth (with the rest of the body; the first k passed
    that check in the body they came in, and a value's depth is its own).
    Anything else is read whole by ``parse_request``'s own code, and so is any
    request whose fast read fails, so the result and every error are the same.
    Only wires whose provider module has a ``HistoryReader`` take the fast read.
    """

    def __init__(self, size: int = HISTORY_POINTS) -> None:
        self.size = size
        self._points: OrderedDict[bytes, Any] = OrderedDict()
        #: how many kept points end after n messages (a request's prefixes are looked up
        #: only at lengths some point has)
        self._lengths: Counter[int] = Counter()
        self.hits = 0

    def __len__(self) -> int:
        return len(self._points)

    def parse(self, wire: Wire, path: str, raw: bytes) -> ParsedRequest | None:
        """``raw`` read from the longest kept prefix of its history, or ``None`` (read it
        whole: it is not a fast read's, or the fast read failed)."""
        reader_type = getattr(wire.module, "HistoryReader", None)
        if reader_type is None or wire.text_history:
            return None
        try:
            return self._parse(wire, path, raw, reader_type)
        except Exception:  # noqa: BLE001 - the whole read says what is wrong, as without
            return None

    def _parse(self, wire: Wire, path: str, raw: bytes, reader_type: Any) -> ParsedRequest | None:
        body = json.loads(raw, parse_constant=_constant)
        if not isinstance(body, dict):
            return None
        history = body[wire.history_key]
        if type(history) is not list or not all(type(m) is dict for m in history):
            return None
        system = _system(wire, body)
        running = hashlib.sha256(_encode_message([wire.name, system]))
        lengths = self._lengths
        point, start = None, 0
        for n, message in enumerate(history, 1):
            running.update(_encode_message(message))
            if n in lengths:
                found = self._points.get(running.digest())
                if found is not None:
                    point, start = found[0], n
        end = running.digest()
        # what this request adds, and the rest of its body, at their own depth
        check_depth({**body, wire.history_key: history[start:]}, "the body",
                    error=UnparsedRequest)
        reader = point.copy() if point is not None else reader_type(system)
        reader.feed(history[start:], start)
        system_text, messages = reader.result()
        tools = tuple(wire.module.unmap_tools(body.get("tools") or []))
        parsed = _parsed(wire, path, body, system_text, messages, tools)
        self.hits += point is not None
        self._keep(end, reader, len(history))
        return parsed

    def _keep(self, key: bytes, reader: Any, length: int) -> None:
        points = self._points
        if key in points:
            points.move_to_end(key)
            return
        points[key] = (reader, length)
        self._lengths[length] += 1
        while len(points) > self.size:
            _, (_, gone) = points.popitem(last=False)
            self._lengths[gone] -= 1
            if not self._lengths[gone]:
                del self._lengths[gone]


_KINDS = {"openai": {400: "invalid_request_error", 401: "invalid_request_error", 404: "not_found",
                     409: "conflict", 502: "bad_gateway", 504: "timeout"},
          "anthropic": {400: "invalid_request_error", 401: "authentication_error",
                        404: "not_found_error", 409: "invalid_request_error", 502: "api_error",
                        504: "timeout_error"},
          "gemini": {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND",
                     409: "FAILED_PRECONDITION", 502: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}}


def error_body(wire: Wire, status: int, message: str) -> dict[str, Any]:
    """An error body in ``wire``'s own shape, as its SDK parses it.

    >>> error_body(WIRES["anthropic"], 502, "upstream down")["error"]["type"]
    'api_error'
    """
    kinds = _KINDS[wire.upstream]
    kind = kinds.get(status, kinds[502] if status >= 500 else kinds[400])
    if wire.upstream == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    if wire.upstream == "openai":
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return {"error": {"code": status, "message": message, "status": kind}}
