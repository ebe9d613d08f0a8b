"""The viewer marks a proxied conversation as such and names its client (escaped)."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from tests.fakeapi import reply
from tests.providerkit import KEYS

from turnlog.replay.view.app import create_app

from .clients import run_openai
from .test_record import conversations


def test_the_viewer_names_the_proxy_and_the_client(proxy, fake_api):
    fake_api.script("openai", [reply("openai", text="ok")])
    run_openai(proxy.base_url("openai"), headers={"user-agent": "<script>agent</script>/1.0"},
               key=KEYS["openai"])
    proxy.drain()
    (conv_id,) = conversations(Path(proxy.db))
    with TestClient(create_app(proxy.db), base_url="http://127.0.0.1") as client:
        page = client.get("/conversation", params={"id": conv_id}).text
    assert "Recorded by <code>turnlog proxy</code> on the openai wire" in page
    assert "&lt;script&gt;agent&lt;/script&gt;/1.0" in page and "<script>agent" not in page
