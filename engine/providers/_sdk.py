"""What the SDK-backed providers share: clients, keys, closing, and the call itself.

Each subclass says which SDK client classes to build, how to turn a
``ModelRequest`` into the SDK call's keyword arguments, which SDK method to
call, how to read the response body and how to translate the SDK's errors;
the sync and async paths are the same code.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from typing import Any

try:  # the HTTP library the SDKs send with (anthropic>=2, openai>=3), else plain httpx
    import httpx2 as _http
except ImportError:  # pragma: no cover - older SDK releases
    import httpx as _http

from ..errors import ProviderError
from ._common import require_key, with_model
from ._remote import RemoteProvider
from ._stream import Assembler, AsyncResponseStream, ResponseStream
from .base import ModelRequest, ModelResponse

__all__ = ["SDKProvider"]


class SDKProvider(RemoteProvider):
    """Base of a provider that calls an official SDK (``anthropic``, ``openai``).

    The key comes from ``api_key`` or the SDK's environment variable (checked
    by ``require_key``, which names it), the endpoint from ``base_url`` or
    ``base_url_env``. The SDK's retries are off by default (``max_retries=0``):
    the loop decides. The async client is built on first use of ``acomplete``.
    Everything returned is masked of the key (``RemoteProvider``).
    """

    name: str
    key_owner: str
    base_url_env: str
    default_model: str

    def __init__(self, model: str | None = None, *, api_key: str | None = None,
                 base_url: str | None = None, timeout: float = 60.0, max_retries: int = 0,
                 client: Any = None, async_client: Any = None) -> None:
        self.model = model or self.default_model
        self._options: dict[str, Any] = {}
        if client is None or async_client is None:
            self._options = {"api_key": require_key(self.key_owner, api_key), "timeout": timeout,
                             "base_url": base_url or os.environ.get(self.base_url_env),
                             "max_retries": max_retries}
        sync_class, _ = self._client_classes()
        self.client = client or sync_class(**self._options)
        self._async_client = async_client
        self._closed = False

    # --- what a subclass says --------------------------------------------------

    def _client_classes(self) -> tuple[type, type]:
        """The SDK's sync and async client classes."""
        raise NotImplementedError

    def _kwargs(self, request: ModelRequest) -> dict[str, Any]:
        """The SDK call's keyword arguments for ``request`` (``model`` filled in)."""
        raise NotImplementedError

    def _endpoint(self, client: Any) -> Any:
        """The SDK resource whose ``with_raw_response.create`` makes the call."""
        raise NotImplementedError

    def _map_body(self, body: dict[str, Any]) -> ModelResponse:
        """The neutral response for a parsed response body."""
        raise NotImplementedError

    def _errors(self) -> AbstractContextManager[None]:
        """A context manager turning the SDK's errors into ``ProviderError``s."""
        raise NotImplementedError

    def _assembler(self) -> Assembler:
        """A fresh assembler of this wire's stream events into its unstreamed body."""
        raise NotImplementedError

    def _stream_kwargs(self) -> dict[str, Any]:
        """The extra keyword arguments that make the SDK call stream."""
        return {"stream": True}

    # --- shared ----------------------------------------------------------------

    def close(self) -> None:
        """Close the HTTP connections of the sync client; later calls refuse."""
        self._closed = True
        self.client.close()

    async def aclose(self) -> None:
        """Close the async client, if one was built (the sync client stays usable)."""
        if self._async_client is not None:
            await self._async_client.close()

    @property
    def async_client(self) -> Any:
        """The SDK's async client, built on first use."""
        if self._async_client is None:
            _, async_class = self._client_classes()
            self._async_client = async_class(**self._options)
        return self._async_client

    def _secret(self) -> str | None:
        return self._options.get("api_key") or getattr(self.client, "api_key", None)

    def _prepare(self, request: ModelRequest) -> dict[str, Any]:
        if self._closed:
            raise ProviderError("the provider was closed", provider=self.name)
        kwargs = self._kwargs(request)
        kwargs["model"] = kwargs.get("model") or self.model
        return kwargs

    def _finish(self, text: str, model: str) -> ModelResponse:
        return with_model(self._map_body(self._body(text)), model)

    def _complete(self, request: ModelRequest) -> ModelResponse:
        kwargs = self._prepare(request)
        with self._errors():
            raw = self._endpoint(self.client).with_raw_response.create(**kwargs)
            text = raw.http_response.text
        return self._finish(text, kwargs["model"])

    async def _acomplete(self, request: ModelRequest) -> ModelResponse:
        kwargs = self._prepare(request)
        with self._errors():
            raw = await self._endpoint(self.async_client).with_raw_response.create(**kwargs)
            text = raw.http_response.text
        return self._finish(text, kwargs["model"])

    def stream(self, request: ModelRequest) -> ResponseStream:
        """Send ``request`` streamed (the SDK's streaming API): iterate the handle for deltas.

        The handle's ``response`` is then what ``complete`` would have returned.
        """
        kwargs = self._prepare(request) | self._stream_kwargs()
        model = kwargs["model"]

        def events() -> Any:
            with self._endpoint(self.client).create(**kwargs) as stream:
                for event in stream:
                    yield event.to_dict()

        return ResponseStream(self, events, self._assembler(),
                              lambda text: self._finish(text, model), self._errors,
                              (_http.TransportError,))

    def astream(self, request: ModelRequest) -> AsyncResponseStream:
        """``stream`` on the async client: ``async for`` the handle."""
        kwargs = self._prepare(request) | self._stream_kwargs()
        model = kwargs["model"]

        async def events() -> Any:
            stream = await self._endpoint(self.async_client).create(**kwargs)
            async with stream:
                async for event in stream:
                    yield event.to_dict()

        return AsyncResponseStream(self, events, self._assembler(),
                                   lambda text: self._finish(text, model), self._errors,
                              (_http.TransportError,))
