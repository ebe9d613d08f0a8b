"""The neutral provider interface: what the loop sends and what every provider returns.

A provider turns a ``ModelRequest`` (system text, neutral messages, tool specs,
parameters) into a ``ModelResponse`` (ordered parts, a neutral stop reason,
usage, the provider's id and raw body). The loop only ever sees this
interface; each module in ``engine.providers`` maps it to one wire format.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import msgspec

from turnlog.engine.model.canonical import digest
from turnlog.engine.model.events import StopReason, ToolSpec
from turnlog.engine.model.messages import Message, Part, Usage

__all__ = ["ModelRequest", "ModelResponse", "Provider"]


class ModelRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One request to a model, in neutral form.

    ``parameters`` holds sampling and limit settings (``max_tokens``,
    ``temperature``, ``top_p``, ``stop``); providers map the ones they know.
    """

    model: str
    system: str = ""
    messages: tuple[Message, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    parameters: dict[str, Any] = {}

    def digest(self) -> str:
        """SHA-256 of the canonical request: what replay matches recordings by."""
        return digest(msgspec.to_builtins(self))


class ModelResponse(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A model's answer in neutral form.

    ``raw`` is the provider's response body as JSON-ready data, kept for audit;
    it never contains credentials.
    """

    parts: tuple[Part, ...]
    stop_reason: StopReason = "end_turn"
    usage: Usage = Usage()
    provider: str = ""
    model: str = ""
    response_id: str | None = None
    raw: Any = None
    #: fields whose invalid Unicode was already replaced (a recorded response served again)
    replaced: tuple[str, ...] = ()


@runtime_checkable
class Provider(Protocol):
    """Anything that answers a ``ModelRequest``. ``name`` is recorded in the journal."""

    name: str

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` and return the neutral response, or raise a ``ProviderError``."""
        ...
