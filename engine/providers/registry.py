"""One registry of the wires turnlog speaks: a provider name -> the module that speaks it.

Everything that needs to know the providers (running, import, export,
cassettes, GenAI traces, the CLI's choices, prices) asks this registry
instead of listing names. Adding a wire is one line in ``WIRES`` and one
module with the interface below:

>>> "anthropic" in WIRES and "gemini" in WIRES
True
>>> wire("anthropic").KEY_ENV
'ANTHROPIC_API_KEY'
>>> wire("nope")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
turnlog.engine.errors.UnknownProviderError: unknown provider 'nope'; expected one of ...

A wire module is imported on first use (its SDK later still, when a client
is built), and exposes:

- ``NAME``; ``KEY_ENV`` (the environment variable of its key); ``PRICE_KEY``
  (the vendor its prices are listed under: genai-prices' provider id, and an
  override table's fallback); ``GENAI_NAME`` and
  ``GENAI_OPERATION`` (its ``gen_ai.provider.name`` and
  ``gen_ai.operation.name``); ``SYSTEM_KEY`` (the request body's key of the
  system text, ``None`` when the system text is a message);
- ``create_provider(model=None, **kw)``: the client, a ``Provider``;
- ``map_messages(system, messages) -> (wire system, wire messages)`` and
  ``unmap_messages(wire system, wire messages) -> (system text, messages)``,
  one signature for every wire (the wire system is ``None`` where the system
  text travels as a message);
- ``map_tools`` / ``unmap_tools``, ``map_request`` / ``map_response`` and
  ``map_usage`` (a usage object of the wire -> ``Usage``);
- ``ASSEMBLER``: the class folding its stream events into the unstreamed body;
- ``export_body(system, messages)``: a request body's messages part (what
  ``turnlog export --format NAME`` writes);
- ``read_request(doc)``: ``(entries, envelope)`` of a request body only this
  wire reads (``envelope["format"]`` names it), else ``None``;
- ``read_response(body)``: ``(assistant entries, model, usage)`` of a
  response body of this wire, streamed or not, else ``None``;
- ``detect_entry(entry)``: whether one transcript entry is unmistakably of
  this wire (consulted after the shared rules of ``engine.formats.detect``).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from ..errors import UnknownProviderError

__all__ = ["WIRES", "by_key", "genai_name", "price_key", "wire", "wires"]

#: Provider name -> the module that speaks its wire (imported on first use).
WIRES: dict[str, str] = {
    "anthropic": "turnlog.engine.providers.anthropic",
    "openai": "turnlog.engine.providers.openai",
    "openai-responses": "turnlog.engine.providers.openai_responses",
    "gemini": "turnlog.engine.providers.gemini",
    "bedrock": "turnlog.engine.providers.bedrock",
}


def wire(name: str) -> ModuleType:
    """The module of the wire called ``name``; ``UnknownProviderError`` for any other name."""
    path = WIRES.get(name) if isinstance(name, str) else None
    if path is None:
        raise UnknownProviderError(f"unknown provider {name!r}; expected one of "
                                   f"{', '.join(sorted(WIRES))}")
    return importlib.import_module(path)


def wires() -> list[ModuleType]:
    """Every wire's module, in registry order (the order readers try them in)."""
    return [wire(name) for name in WIRES]


def by_key(key: str) -> dict[str, Any]:
    """``{name: module.<key>}`` over every wire (``KEY_ENV``, ``PRICE_KEY`` ...)."""
    return {module.NAME: getattr(module, key) for module in wires()}


def price_key(provider: str) -> str:
    """The provider name ``provider``'s prices are listed under (itself for any non-wire)."""
    return wire(provider).PRICE_KEY if provider in WIRES else provider


def genai_name(provider: str) -> str:
    """``provider`` as a ``gen_ai.provider.name`` value (a non-wire name passes through)."""
    return wire(provider).GENAI_NAME if provider in WIRES else provider
