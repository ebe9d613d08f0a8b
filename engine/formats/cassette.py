"""Request bodies, responses and cassettes (request + response) as transcript entries.

A file holding one API exchange is read as one conversation:

- a request body (``{model, system?, messages, tools?, ...}`` for OpenAI or
  Anthropic, ``{contents, systemInstruction?, tools?}`` for Gemini): its
  messages are the entries; ``model``, ``system`` and ``tools`` go to the
  envelope (``conversation_started`` records them) and so do its other
  parameters (``max_tokens``, ``thinking`` ...);
- a response body alone (an Anthropic message, a Chat Completions
  ``choices`` object, a Gemini ``candidates`` object) is refused: a model
  answer with nothing before it is not a conversation turnlog can hold;
- a cassette ``{"request": body, "response": body}``: the request's entries
  and then the response's, one conversation. A streamed response recorded as
  its events (``{"_sse_events": [...]}``, or a list of Gemini chunks) is
  assembled into the message it streamed.

Each wire of ``engine.providers.registry`` reads its own response bodies
(``read_response``) and any request body the shared reader here cannot
(``read_request``: the Responses API's ``input``).

>>> entries, envelope = split_document({"request": {"model": "m", "messages": [
...     {"role": "user", "content": "hi"}]}, "response": {"choices": [{"message": {
...     "role": "assistant", "content": "hello"}}]}})
>>> entries[-1], envelope["model"]
({'role': 'assistant', 'content': 'hello'}, 'm')
"""

from __future__ import annotations

from typing import Any

from ..errors import FormatError
from ..providers.registry import wires

__all__ = ["split_document"]

_BODY_LISTS = ("messages", "contents", "events")
_ENVELOPE = ("system", "systemInstruction", "system_instruction", "model", "tools", "functions")


def _body(doc: dict[str, Any]) -> tuple[list[Any], dict[str, Any]] | None:
    for module in wires():  # a body only one wire reads (its envelope names the format)
        read = module.read_request(doc)
        if read is not None:
            return read
    for key in _BODY_LISTS:
        if isinstance(doc.get(key), list):
            envelope = {k: v for k, v in doc.items() if k in _ENVELOPE}
            if "system_instruction" in envelope:
                envelope["systemInstruction"] = envelope.pop("system_instruction")
            params = {k: v for k, v in doc.items() if k not in _ENVELOPE and k != key}
            if params and key != "events":
                envelope["parameters"] = params
            return doc[key], envelope
    return None


def _response(body: Any) -> tuple[list[Any], str | None, str, Any]:
    """``(assistant entries, model, wire, usage)`` of a response body, streamed or not: read
    by the first wire of the registry that knows its shape."""
    for module in wires():
        read = module.read_response(body)
        if read is not None:
            entries, model, usage = read
            return entries, model, module.NAME, usage
    if not isinstance(body, dict):
        raise FormatError(f"response: expected a response body, got {type(body).__name__}")
    raise FormatError(f"response: not a response body turnlog reads (keys {sorted(body)[:8]})")


def split_document(doc: dict[str, Any]) -> tuple[list[Any], dict[str, Any]] | None:
    """``(entries, envelope)`` of a body, response or cassette; ``None`` for anything else."""
    if "request" in doc and "response" in doc and isinstance(doc["request"], dict):
        read = _body(doc["request"])
        if read is None:
            raise FormatError(f"request: not a request body (keys {sorted(doc['request'])[:8]})")
        entries, envelope = read
        try:
            answer, model, wire, usage = _response(doc["response"])
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            # a streamed response's events of the wrong shape: the file's fault, said so
            raise FormatError(f"response: not a readable response ({type(exc).__name__}: "
                              f"{exc})") from None
        envelope.setdefault("model", model)
        envelope["wire"] = wire
        if usage:
            envelope["usage"] = usage
        return [*entries, *answer], envelope
    read = _body(doc)
    if read is not None:
        return read
    if "choices" in doc or "candidates" in doc or (
            doc.get("type") == "message" and doc.get("role") == "assistant") or (
            doc.get("object") == "response" and isinstance(doc.get("output"), list)):
        raise FormatError("a response body alone is not a conversation (nothing asked for it); "
                          'import it with its request: {"request": ..., "response": ...}')
    return None
