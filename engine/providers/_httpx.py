"""What the providers that speak their wire over plain httpx share (Gemini's REST API,
Bedrock's Converse): a sync client given or built at once, an async one built on first
use, and closing them."""

from __future__ import annotations

import httpx

from ._remote import RemoteProvider

__all__ = ["HTTPXProvider"]


class HTTPXProvider(RemoteProvider):
    """Base of a provider that sends its own HTTP requests with httpx.

    A subclass calls :meth:`_clients` from its ``__init__``; ``client`` and
    ``async_client`` may be passed in (a test's transport, a shared pool).
    """

    def _clients(self, client: httpx.Client | None, async_client: httpx.AsyncClient | None,
                 timeout: float, max_retries: int) -> None:
        self._timeout, self._retries = timeout, max_retries
        self.client = client or httpx.Client(
            timeout=timeout, transport=httpx.HTTPTransport(retries=max_retries))
        self._async_client = async_client
        self._closed = False

    def close(self) -> None:
        """Close the HTTP connections of the sync client; ``complete`` then refuses."""
        self._closed = True
        self.client.close()

    async def aclose(self) -> None:
        """Close the async client, if one was built."""
        if self._async_client is not None:
            await self._async_client.aclose()

    @property
    def async_client(self) -> httpx.AsyncClient:
        """An ``httpx.AsyncClient``, built on first use."""
        if self._async_client is None:
            self._async_client = httpx.AsyncClient(
                timeout=self._timeout, transport=httpx.AsyncHTTPTransport(retries=self._retries))
        return self._async_client
