"""Provider tests share the loopback fake API server (tests/fakeapi.py)."""

from tests.fakeapi import fake_api  # noqa: F401 - the fixture, re-exported for this directory
