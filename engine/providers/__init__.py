"""Model providers behind one neutral interface (``Provider``).

``scripted`` answers offline from a script; ``anthropic``, ``openai`` and
``gemini`` speak the real APIs. ``get_provider(name, ...)`` builds one by name.
"""

from .base import ModelRequest, ModelResponse, Provider
from .scripted import ScriptedProvider, load_script

__all__ = ["ModelRequest", "ModelResponse", "Provider", "ScriptedProvider", "load_script"]
