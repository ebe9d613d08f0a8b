"""The base of every provider that calls a remote API with a key: one redaction boundary.

A subclass sends the request in ``_complete`` / ``_acomplete`` and reads every
body the API returns through ``_body`` (success and error bodies alike).
``complete`` and ``acomplete`` are defined here once, so for every adapter:

- a body's text and data have the key masked before any mapping sees them
  (``_redact.read_body``), so ``raw``, parts, ids and excerpts never hold it;
- every ``ProviderError`` leaving the provider has its message masked
  (the key's forms and anything shaped like an API key), whatever built it —
  an SDK's message, a header, a connection error.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import ProviderError
from ._redact import Redactor, read_body
from .base import ModelRequest, ModelResponse

__all__ = ["RemoteProvider"]


class RemoteProvider:
    """What the SDK-backed providers and Gemini share: ``complete`` behind the key's redaction."""

    name: str
    _redactor_cache: Redactor | None = None

    # --- what a subclass says --------------------------------------------------

    def _secret(self) -> str | None:
        """The API key this provider sends (the one to keep out of everything it returns)."""
        raise NotImplementedError

    def _complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request``; read bodies with ``_body``; raise ``ProviderError``s."""
        raise NotImplementedError

    async def _acomplete(self, request: ModelRequest) -> ModelResponse:
        """``_complete`` on the async client."""
        raise NotImplementedError

    # --- shared ----------------------------------------------------------------

    @property
    def redactor(self) -> Redactor:
        """The ``Redactor`` of this provider's key."""
        secret = self._secret()
        cached = self._redactor_cache
        if cached is None or cached.secret != secret:
            cached = self._redactor_cache = Redactor(secret)
        return cached

    def _body(self, text: str) -> Any:
        """A response body as JSON data with the key masked (``MalformedResponseError`` if not JSON)."""
        return read_body(text, self.name, self.redactor)

    @contextmanager
    def _shield(self) -> Iterator[None]:
        try:
            yield
        except ProviderError as exc:
            exc.args = tuple(self.redactor.message(a) if isinstance(a, str) else a
                             for a in exc.args)
            raise

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request``; return the neutral response or raise a ``ProviderError``."""
        with self._shield():
            return self._complete(request)

    async def acomplete(self, request: ModelRequest) -> ModelResponse:
        """``complete`` on the async client."""
        with self._shield():
            return await self._acomplete(request)
