"""Model providers behind one neutral interface (``Provider``).

``scripted`` answers offline from a script; ``anthropic``, ``openai`` (Chat
Completions), ``openai-responses`` (Responses API) and ``gemini`` speak the
real APIs. ``get_provider(name, ...)`` builds one by name:

>>> get_provider("scripted", script=[{"text": "hi"}]).name
'scripted'

Each real provider's module also exposes the pure mapping functions
(``map_request``, ``map_response``, ``map_messages``, ``unmap_messages``,
``map_tools``, ``unmap_tools``) that import and export reuse.
"""

from __future__ import annotations

from typing import Any

from ..errors import UnknownProviderError
from .base import ModelRequest, ModelResponse, Provider
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

PROVIDER_NAMES = ("anthropic", "gemini", "openai", "openai-responses", "scripted")


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
    if name == "anthropic":
        from .anthropic import AnthropicProvider

        return AnthropicProvider(model, **kw)
    if name == "openai":
        from .openai import OpenAIProvider

        return OpenAIProvider(model, **kw)
    if name == "openai-responses":
        from .openai_responses import OpenAIResponsesProvider

        return OpenAIResponsesProvider(model, **kw)
    if name == "gemini":
        from .gemini import GeminiProvider

        return GeminiProvider(model, **kw)
    raise UnknownProviderError(f"unknown provider {name!r}; expected one of "
                               f"{', '.join(PROVIDER_NAMES)}")
