"""Model failures in the loop: only ProviderErrors are failures; retryable ones are retried."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnlog.engine.model.conversation import load_state
from turnlog.engine.demo import demo_tools
from turnlog.engine.errors import (
    AuthenticationError,
    BadRequestError,
    EngineError,
    InvalidTransition,
    ProviderConnectionError,
    ProviderTimeout,
    RateLimitError,
    ServerError,
)
from turnlog.engine.model.events import ModelFailed, ModelRequested
from turnlog.engine.loop import Loop
from turnlog.engine.providers.base import ModelResponse
from turnlog.engine.model.messages import Text
from turnlog.engine.loop.retry import NO_RETRY, RetryPolicy
from turnlog.engine.model.state import StateBuilder
from turnlog.journal import Journal

# the loop suite runs on Loop and on AsyncLoop (tests/engine/conftest.py)
pytestmark = pytest.mark.usefixtures("both_loops")


def types(journal, cid):
    return [e.type for e in journal.read(cid)]


def payloads(journal, cid, kind):
    return [json.loads(e.payload) for e in journal.read(cid) if e.type == kind]


class Flaky:
    """Raises each of ``failures`` in turn, then answers ``text``."""

    name = "flaky"
    model = "flaky-1"

    def __init__(self, *failures: BaseException, text: str = "done") -> None:
        self.failures, self.text, self.calls = list(failures), text, 0

    def complete(self, request):
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return ModelResponse(parts=(Text(text=self.text),))


class Sleeps:
    """An injected ``sleep`` that records instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def policy(attempts: int = 4, sleeps: Sleeps | None = None, draw: float = 0.5) -> RetryPolicy:
    return RetryPolicy(max_attempts=attempts, sleep=sleeps or Sleeps(), random=lambda: draw)


# --- item 5: only ProviderError is a model failure ------------------------------------------

def test_a_bug_in_the_provider_propagates_and_leaves_the_run_resumable(journal):
    loop = Loop(journal, Flaky(KeyError("bug in mapping code")), demo_tools())
    with pytest.raises(KeyError, match="bug in mapping code"):
        loop.start("hi", conversation_id="c")
    assert types(journal, "c")[-1] == "model_requested"  # no model_failed, no conversation_failed
    assert load_state(journal, "c").status == "active"
    result = Loop(journal, Flaky(), demo_tools()).resume("c")
    assert result.status == "completed" and result.final_content == "done"
    assert types(journal, "c")[-3:] == ["model_requested", "model_responded",
                                        "conversation_completed"]
    assert types(journal, "c").count("model_requested") == 1  # the resume sent the same request


def test_a_turnlog_error_that_is_not_a_provider_error_propagates_too(journal):
    class Diverged(EngineError):  # replay's Divergence is such an error
        pass

    with pytest.raises(Diverged):
        Loop(journal, Flaky(Diverged("replay diverged")), demo_tools()).start(
            "hi", conversation_id="c")
    assert "model_failed" not in types(journal, "c")
    assert types(journal, "c")[-1] == "model_requested"


def test_a_provider_error_is_a_model_failure_and_fails_the_run(journal):
    result = Loop(journal, Flaky(BadRequestError("bad", provider="flaky", status=400)),
                  demo_tools()).start("hi", conversation_id="c")
    assert result.status == "failed" and "bad" in result.error
    assert types(journal, "c")[-3:] == ["model_requested", "model_failed", "conversation_failed"]


# --- item 6: retries ------------------------------------------------------------------------

@pytest.mark.parametrize("error", [
    RateLimitError("slow down", provider="flaky", retry_after=None),
    ServerError("overloaded", provider="flaky", status=529),
    ServerError("bad gateway", provider="flaky", status=502),
    ProviderTimeout("no answer", provider="flaky"),
    ProviderConnectionError("reset", provider="flaky"),
])
def test_a_retryable_failure_is_retried_and_every_attempt_is_journaled(journal, error):
    sleeps = Sleeps()
    provider = Flaky(error)
    result = Loop(journal, provider, demo_tools(), retry=policy(sleeps=sleeps)).start(
        "hi", conversation_id="c")
    assert result.status == "completed" and result.error is None and provider.calls == 2
    assert types(journal, "c") == ["conversation_started", "user_message", "model_requested",
                                   "model_failed", "model_requested", "model_responded",
                                   "conversation_completed"]
    first, second = payloads(journal, "c", "model_requested")
    assert (first["turn"], second["turn"]) == (1, 1)
    assert "attempt" not in first and second["attempt"] == 2  # the default is omitted
    (failed,) = payloads(journal, "c", "model_failed")
    assert failed["retryable"] is True and failed["error_type"] == type(error).__name__
    assert sleeps.waits == [0.25]  # full jitter: random() * base_delay for the first retry


@pytest.mark.parametrize("error", [
    AuthenticationError("HTTP 401: invalid key", provider="flaky", status=401),
    BadRequestError("HTTP 400: bad", provider="flaky", status=400),
])
def test_a_non_retryable_failure_fails_at_once(journal, error):
    sleeps = Sleeps()
    provider = Flaky(error, error)
    result = Loop(journal, provider, demo_tools(), retry=policy(sleeps=sleeps)).start(
        "hi", conversation_id="c")
    assert result.status == "failed" and provider.calls == 1 and sleeps.waits == []
    assert types(journal, "c")[-3:] == ["model_requested", "model_failed", "conversation_failed"]
    assert payloads(journal, "c", "model_failed")[0].get("retryable", False) is False


def test_exhausted_retries_fail_the_run_with_every_attempt_in_the_journal(journal):
    sleeps = Sleeps()
    failures = [ServerError(f"down {i}", provider="flaky", status=503) for i in range(5)]
    seen: list[tuple[str, dict]] = []
    result = Loop(journal, Flaky(*failures), demo_tools(), retry=policy(3, sleeps),
                  observers=[lambda e, p: seen.append((e, p))]).start("hi", conversation_id="c")
    assert result.status == "failed"
    assert "down 2" in result.error and "gave up after 3 attempts" in result.error
    assert types(journal, "c")[2:] == ["model_requested", "model_failed"] * 3 + [
        "conversation_failed"]
    assert [p.get("attempt", 1) for p in payloads(journal, "c", "model_requested")] == [1, 2, 3]
    assert sleeps.waits == [0.25, 0.5]  # exponential: base 0.5, 1.0, each times random() = 0.5
    assert [p["attempt"] for e, p in seen if e == "model_retry"] == [2, 3]
    (failed,) = payloads(journal, "c", "conversation_failed")
    assert failed["error_type"] == "model_failed"


def test_the_provider_retry_after_is_honoured_and_recorded(journal):
    sleeps = Sleeps()
    provider = Flaky(RateLimitError("HTTP 429", provider="flaky", retry_after=7.0))
    Loop(journal, provider, demo_tools(), retry=policy(sleeps=sleeps)).start(
        "hi", conversation_id="c")
    assert sleeps.waits == [7.0]
    assert payloads(journal, "c", "model_failed")[0]["retry_after"] == 7.0


def test_a_retry_after_beyond_max_delay_gives_up_instead_of_waiting(journal):
    sleeps = Sleeps()
    retry = RetryPolicy(max_attempts=4, max_delay=10, sleep=sleeps)
    result = Loop(journal, Flaky(RateLimitError("x", retry_after=3600.0)), demo_tools(),
                  retry=retry).start("hi", conversation_id="c")
    assert result.status == "failed" and sleeps.waits == []


def test_the_loop_does_not_retry_by_default(journal):
    provider = Flaky(ServerError("down", status=500))
    result = Loop(journal, provider, demo_tools()).start("hi", conversation_id="c")
    assert result.status == "failed" and provider.calls == 1


def test_a_crash_during_the_backoff_resumes_with_the_next_attempt(journal):
    class Crash(BaseException):
        pass

    def crash(seconds):
        raise Crash

    provider = Flaky(ServerError("down", status=500))
    with pytest.raises(Crash):
        Loop(journal, provider, demo_tools(),
             retry=RetryPolicy(sleep=crash, random=lambda: 1.0)).start("hi", conversation_id="c")
    assert types(journal, "c")[-1] == "model_failed"  # durable before the wait
    result = Loop(journal, provider, demo_tools(), retry=policy()).resume("c")
    assert result.status == "completed"
    assert [p.get("attempt", 1) for p in payloads(journal, "c", "model_requested")] == [1, 2]


def test_a_retried_conversation_folds_to_the_same_state_the_loop_kept(journal):
    Loop(journal, Flaky(ServerError("down", status=500), ProviderTimeout("slow")), demo_tools(),
         retry=policy()).start("hi", conversation_id="c")
    state = load_state(journal, "c")
    assert state.status == "completed" and state.error is None and state.failure is None
    assert state.turn_count == 1 and state.attempt == 3


# --- the lifecycle accepts retries and only in order ------------------------------------------

def _requested(builder: StateBuilder, attempt: int = 1) -> None:
    builder.apply(ModelRequested(turn=1, digest="0" * 64, provider="p", model="m",
                                 attempt=attempt))


def _failed_turn() -> StateBuilder:
    from turnlog.engine.model.events import ConversationStarted, UserMessage

    b = StateBuilder()
    b.apply(ConversationStarted(conversation_id="c", provider="p", model="m"))
    b.apply(UserMessage.of("hi"))
    _requested(b)
    b.apply(ModelFailed(turn=1, error_type="ServerError", message="x", retryable=True))
    return b


def test_the_lifecycle_accepts_model_failed_then_the_next_attempt():
    b = _failed_turn()
    _requested(b, attempt=2)
    assert b.lifecycle.value == "requested" and b.error is None and b.failure is None


def test_the_lifecycle_refuses_a_retry_that_skips_an_attempt_number():
    b = _failed_turn()
    with pytest.raises(InvalidTransition, match="attempt 3 requested but the next attempt is 1 or 2"):
        _requested(b, attempt=3)


def test_an_unnumbered_retry_from_an_older_journal_still_folds():
    b = _failed_turn()
    _requested(b, attempt=1)
    assert b.lifecycle.value == "requested"


def test_a_first_request_must_be_attempt_1():
    from turnlog.engine.model.events import ConversationStarted, UserMessage

    b = StateBuilder()
    b.apply(ConversationStarted(conversation_id="c", provider="p", model="m"))
    b.apply(UserMessage.of("hi"))
    with pytest.raises(InvalidTransition, match="attempt 2 requested but the next attempt is 1"):
        _requested(b, attempt=2)


# --- the policy's laws --------------------------------------------------------------------------

@given(attempts=st.integers(1, 8), attempt=st.integers(1, 10), draw=st.floats(0, 1),
       base=st.floats(0, 5), cap=st.floats(0, 60), retryable=st.booleans(),
       after=st.none() | st.floats(0, 120))
def test_the_policy_waits_within_its_bounds_and_only_for_retryable_failures(
        attempts, attempt, draw, base, cap, retryable, after):
    p = RetryPolicy(max_attempts=attempts, base_delay=base, max_delay=cap, random=lambda: draw)
    delay = p.delay(retryable=retryable, attempt=attempt, retry_after=after)
    if not retryable or attempt >= attempts:
        assert delay is None
    elif after is not None:
        assert delay == (after if after <= cap else None)
    else:
        assert delay is not None and 0 <= delay <= min(cap, base * 2 ** (attempt - 1))


def test_retries_n_is_n_plus_one_attempts_and_no_retry_is_one():
    assert RetryPolicy.retries(3).max_attempts == 4 and NO_RETRY.max_attempts == 1
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)


def test_a_bug_propagating_leaves_the_journal_as_it_was_after_the_request(tmp_path):
    j = Journal(str(tmp_path / "j.db"))
    with pytest.raises(ZeroDivisionError):
        Loop(j, Flaky(ZeroDivisionError()), demo_tools()).start("hi", conversation_id="c")
    before = [(e.seq, e.hash) for e in j.read("c")]
    with pytest.raises(ZeroDivisionError):
        Loop(j, Flaky(ZeroDivisionError()), demo_tools()).resume("c")
    assert [(e.seq, e.hash) for e in j.read("c")] == before
    assert j.verify().ok


# --- deterministic replay reproduces recorded retries ------------------------------------------

def test_replay_reproduces_a_run_that_retried_then_succeeded(journal):
    from turnlog.replay import replay

    Loop(journal, Flaky(RateLimitError("slow", retry_after=2.0), ServerError("x", status=529)),
         demo_tools(), retry=policy()).start("hi", conversation_id="c")
    result = replay(journal, "c")
    assert result.ok and result.checked == len(types(journal, "c"))


def test_replay_reproduces_exhausted_retries_and_a_run_that_did_not_retry(journal):
    from turnlog.replay import replay

    Loop(journal, Flaky(*[ServerError("x", status=500)] * 3), demo_tools(),
         retry=policy(3)).start("hi", conversation_id="spent")
    Loop(journal, Flaky(ServerError("x", status=500)), demo_tools()).start(
        "hi", conversation_id="never")
    assert replay(journal, "spent").ok and replay(journal, "never").ok


def test_replay_of_a_chat_whose_failed_run_was_followed_by_a_new_run(journal):
    from turnlog.replay import replay

    loop = Loop(journal, Flaky(ServerError("x", status=500)), demo_tools())
    loop.start("hi", conversation_id="chat")
    loop.send("chat", "again")  # a new run's turn 1: not a retry
    assert types(journal, "chat").count("model_requested") == 2
    assert replay(journal, "chat").ok


def test_a_tool_result_with_a_key_that_is_no_string_is_a_failed_call_not_a_crash(journal):
    # JSON objects have string keys; the journal encodes events with sorted keys and
    # refuses others, so the step's check uses the same rule and records a failure
    from turnlog.engine.providers.scripted import ScriptedProvider
    from turnlog.engine.tools import ToolRegistry, tool

    @tool
    def lookup(a: int) -> object:
        """Return a dict keyed by numbers."""
        return {1: "one"}

    script = [{"tool_calls": [{"name": "lookup", "arguments": {"a": 1}}]}, {"text": "done"}]
    result = Loop(journal, ScriptedProvider(script), ToolRegistry([lookup])).start(
        "go", conversation_id="c")
    assert result.status == "completed"
    [completed] = payloads(journal, "c", "tool_completed")
    assert completed["success"] is False and "result is not JSON data" in completed["error"]
