"""When the loop tries a failed model request again, and how long it waits first.

The SDKs' own retries are off: the loop decides, so that every attempt is an
event (``model_requested`` with its ``attempt``, then ``model_failed`` with
``retryable`` and the provider's ``retry_after``). A ``RetryPolicy`` answers
one question — after attempt ``attempt`` failed like this, wait how long
before the next one, or give up? — and does the waiting::

    >>> policy = RetryPolicy(max_attempts=3, random=lambda: 0.5)
    >>> policy.delay(retryable=True, attempt=1), policy.delay(retryable=True, attempt=2)
    (0.25, 0.5)
    >>> policy.delay(retryable=True, attempt=3) is None    # attempts spent
    True
    >>> policy.delay(retryable=False, attempt=1) is None   # a 401 or 400 never retries
    True
    >>> policy.delay(retryable=True, attempt=1, retry_after=2.0)   # the provider said so
    2.0

Only retryable failures are tried again: rate limits (429), overload (529)
and other 5xx, timeouts and connection errors (``ProviderError.retryable``).
The wait is exponential backoff with full jitter (``random() * min(max_delay,
base_delay * 2 ** (attempt - 1))``) unless the provider said ``retry_after``,
which is honoured as given; a ``retry_after`` longer than ``max_delay`` gives
up instead of waiting that long. ``sleep`` and ``random`` are injectable so
tests never wait and draws are reproducible.
"""

from __future__ import annotations

import random as _random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["NO_RETRY", "RetryPolicy"]


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently the loop retries a retryable model failure.

    ``max_attempts`` counts the first request (1 = never retry; ``turnlog run
    --retries N`` is ``N + 1``). Waits are in seconds.
    """

    max_attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 30.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)
    random: Callable[[], float] = field(default=_random.random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("base_delay and max_delay must not be negative")

    @classmethod
    def retries(cls, n: int, **options: object) -> RetryPolicy:
        """The policy that retries up to ``n`` times (``n + 1`` attempts in all)."""
        return cls(max_attempts=n + 1, **options)  # type: ignore[arg-type]

    def delay(self, *, retryable: bool, attempt: int,
              retry_after: float | None = None) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``, or ``None`` to give up."""
        if not retryable or attempt >= self.max_attempts:
            return None
        if retry_after is not None and retry_after >= 0:
            return float(retry_after) if retry_after <= self.max_delay else None
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return self.random() * ceiling

    def wait(self, seconds: float) -> None:
        """Wait ``seconds`` (through the injected ``sleep``)."""
        if seconds > 0:
            self.sleep(seconds)


#: The policy that never retries: the first failure ends the run.
NO_RETRY = RetryPolicy(max_attempts=1)
