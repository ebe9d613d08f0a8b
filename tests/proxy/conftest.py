"""Fixtures of the proxy's tests: the fake API and a proxy in front of it."""

from __future__ import annotations

import pytest

from tests.fakeapi import fake_api  # noqa: F401 - a fixture

from .harness import ProxyServer


@pytest.fixture
def proxy(fake_api, tmp_path):  # noqa: F811 - the fixture above
    server = ProxyServer(tmp_path / "proxy.db", fake_api).start()
    yield server
    server.stop()
