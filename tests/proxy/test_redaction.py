"""Every credential a request carries is masked wherever the exchange is recorded: a request
may carry several (a header in any case and scheme, a second header, a query parameter), and
an upstream that echoes any of them, in an answer, a stream or an error, never puts it in the
journal's bytes (database and WAL)."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import pytest

from tests.fakeapi import error_reply, reply

from .test_record import conversations, journal_bytes

#: one credential per place a client may put one (none shaped like a known key prefix, so
#: only the proxy's collection of them, not a key-shaped pattern, can mask them)
CREDENTIALS = {
    "authorization": ("bearer", "first-credential-AAAA1111"),  # lower-case scheme
    "x-api-key": (None, "second-credential-BBBB2222"),
    "x-goog-api-key": (None, "third-credential-CCCC3333"),
    "api-key": (None, "fourth-credential-DDDD4444"),
    "proxy-authorization": ("Basic", base64.b64encode(b"user:fifth-credential-EEEE5555").decode()),
}
QUERY_KEY = "sixth-credential-FFFF6666"
SECRETS = [v for _, v in CREDENTIALS.values()] + ["fifth-credential-EEEE5555", QUERY_KEY]


def headers() -> dict[str, str]:
    return {name: f"{scheme} {value}" if scheme else value
            for name, (scheme, value) in CREDENTIALS.items()}


def echo() -> str:
    """An answer quoting every credential, raw and JSON-escaped (json.dumps of the body)."""
    return "you sent " + " and ".join(SECRETS[1:]) + f" (first: {SECRETS[0]})"


def post(proxy, stream: bool) -> httpx.Response:
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "echo my keys"}],
            "stream": stream}
    return httpx.post(f"{proxy.base_url('openai')}/chat/completions?key={QUERY_KEY}",
                      json=body, headers=headers(), timeout=30)


def assert_no_secret_in(db: Path) -> None:
    data = journal_bytes(db)
    assert data, "nothing was recorded"
    leaked = [s for s in SECRETS if s.encode() in data]
    assert leaked == [], f"in the journal: {leaked}"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_an_answer_echoing_every_credential_records_none_of_them(proxy, fake_api, stream):
    fake_api.script("openai", [reply("openai", text=echo())])
    answer = post(proxy, stream)
    assert answer.status_code == 200
    assert stream or SECRETS[2] in answer.text  # the client gets the answer unchanged
    proxy.drain()
    (events,) = conversations(Path(proxy.db)).values()
    assert [e.type for e in events][-2:] == ["model_responded", "conversation_completed"]
    assert "[redacted key]" in events[-2].payload
    assert_no_secret_in(Path(proxy.db))


def test_an_error_echoing_a_second_credential_records_none_of_them(proxy, fake_api):
    fake_api.script("openai", [error_reply("openai", 400, echo())])
    answer = post(proxy, False)
    assert answer.status_code == 400 and SECRETS[1] in answer.text
    proxy.drain()
    (events,) = conversations(Path(proxy.db)).values()
    assert events[-1].type == "model_failed"
    assert_no_secret_in(Path(proxy.db))


def test_a_history_quoting_an_echoed_credential_threads_onto_its_conversation(proxy, fake_api):
    """The next request resends the answer that held the key: masked alike, it still
    extends the recorded conversation, and the key is not recorded from the request either."""
    fake_api.script("openai", [reply("openai", text=echo()), reply("openai", text="done")])
    first = post(proxy, False).json()["choices"][0]["message"]
    body = {"model": "fake-model", "messages": [
        {"role": "user", "content": "echo my keys"}, first,
        {"role": "user", "content": f"why did you say {SECRETS[3]}?"}]}
    answer = httpx.post(f"{proxy.base_url('openai')}/chat/completions?key={QUERY_KEY}",
                        json=body, headers=headers(), timeout=30)
    assert answer.status_code == 200
    proxy.drain()
    found = conversations(Path(proxy.db))
    assert len(found) == 1, list(found)
    assert_no_secret_in(Path(proxy.db))


def test_a_credential_that_straddles_the_recorded_start_of_an_unreadable_body_is_masked_whole(
        proxy, fake_api):
    """An unreadable body is recorded by its first ``BODY_LIMIT`` characters; a key that
    starts before that cut and ends after it leaves none of its characters behind."""
    from turnlog.replay.proxy.recorder import BODY_LIMIT

    secret = CREDENTIALS["x-api-key"][1]
    body = b"{" + b"a" * (BODY_LIMIT - 11) + secret.encode() + b"b" * 500  # not JSON: unparsed
    assert body.index(secret.encode()) < BODY_LIMIT < body.index(secret.encode()) + len(secret)
    httpx.post(f"{proxy.base_url('openai')}/chat/completions", content=body,
               headers={"x-api-key": secret, "content-type": "application/json"}, timeout=30)
    proxy.drain()
    data = journal_bytes(Path(proxy.db))
    assert b"aaaaaaaaaaaaaaaa" in data, "the unreadable exchange was not recorded"
    assert secret[:10].encode() not in data
