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

import re
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from turnlog.engine.errors import TurnlogError
from turnlog.engine.model.events import ToolSpec
from turnlog.engine.model.messages import Message
from turnlog.engine.model.nesting import load_json
from turnlog.engine.providers import ModelResponse, registry
from turnlog.engine.providers._stream import Assembler

__all__ = ["DEFAULT_UPSTREAMS", "UPSTREAM_NAMES", "WIRES", "ParsedRequest", "UnparsedRequest",
           "Wire", "error_body", "parse_request", "wire_for_path"]

#: The upstream base URLs, by the name ``--upstream WIRE=URL`` takes (as each official SDK takes them).
DEFAULT_UPSTREAMS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com",
                     "gemini": "https://generativelanguage.googleapis.com"}
UPSTREAM_NAMES = tuple(sorted(DEFAULT_UPSTREAMS))
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


def _history(wire: Wire, body: dict[str, Any]) -> tuple[str, list[Message]]:
    key = wire.module.SYSTEM_KEY
    system = None
    for name in (key, *wire.system_aliases) if key else ():
        if body.get(name) is not None:
            system = body[name]
            break
    history = body[wire.history_key]
    if wire.text_history and isinstance(history, str):
        history = [{"role": "user", "content": history}]
    return wire.module.unmap_messages(system, history)


def parse_request(wire: Wire, path: str, raw: bytes) -> ParsedRequest:
    """``raw`` (a request body sent to ``path``) in neutral form.

    Raises ``UnparsedRequest`` saying why it cannot be read (not JSON, not
    an object, a history the provider's reader refuses ...).
    """
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
    gemini_match = _GEMINI.fullmatch(path)
    model = gemini_match.group(1) if gemini_match else body.get("model")
    if not isinstance(model, str) or not model:
        raise UnparsedRequest("the request names no model")
    stream = (gemini_match.group(2) == "streamGenerateContent" if gemini_match
              else body.get("stream") is True)
    parameters = {k: v for k, v in body.items() if k not in _STRUCTURE}
    return ParsedRequest(model=model, system=system or "", messages=list(messages), tools=tools,
                         parameters=parameters, stream=stream)


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
