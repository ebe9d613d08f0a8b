"""Model providers behind one neutral interface (``Provider``).

``scripted`` answers offline from a script; ``anthropic``, ``openai`` (Chat
Completions), ``openai-responses`` (Responses API) and ``gemini`` speak the
real APIs; ``engine.providers.registry`` maps each wire's name to its module.
``get_provider(name, ...)`` builds one by name:

>>> get_provider("scripted", script=[{"text": "hi"}]).name
'scripted'

Each real provider's module also exposes the pure mapping functions
(``map_request``, ``map_response``, ``map_messages``, ``unmap_messages``,
``map_tools``, ``unmap_tools``, ``map_usage``) that import and export reuse,
one interface for every wire (see ``engine.providers.registry``).
"""

from __future__ import annotations

from typing import Any

from ..errors import UnknownProviderError
from .base import ModelRequest, ModelResponse, Provider
from .registry import WIRES, wire
from .scripted import ScriptedProvider, load_script

__all__ = [
    "PROVIDER_NAMES",
    "ModelRequest",
    "ModelResponse",
    "Provider",
    "ScriptedProvider",
    "get_provider",
    "load_script",
]

#: Every provider ``get_provider`` builds: the registry's wires and ``scripted``.
PROVIDER_NAMES = tuple(sorted([*WIRES, "scripted"]))


def get_provider(name: str, *, model: str | None = None, script: Any = None, **kw: Any) -> Provider:
    """The provider called ``name``, ready to ``complete`` requests.

    ``script`` is the scripted provider's script (a path, dict or list of
    turns); ``kw`` goes to the real providers (``api_key``, ``base_url``,
    ``timeout``, ``max_retries``, ``client``). Raises ``UnknownProviderError``
    for a name not in ``PROVIDER_NAMES``, ``FormatError`` for a scripted
    provider without a script, and ``AuthenticationError`` naming the
    environment variable when a real provider has no key.
    """
    if name == "scripted":
        if script is None:
            from ..errors import FormatError

            raise FormatError("the scripted provider needs a script (--script FILE)")
        return ScriptedProvider(script, model=model or "scripted")
    if name in WIRES:
        return wire(name).create_provider(model, **kw)
    raise UnknownProviderError(f"unknown provider {name!r}; expected one of "
                               f"{', '.join(PROVIDER_NAMES)}")
