"""Observers: who hears about a run's lifecycle, without being able to change it.

An observer is any callable ``observer(event: str, payload: dict)`` (the
reference's ``agents_api_loop_event(event, payload)``). Events:

``turn_started`` (turn), ``model_responded`` (turn, tool_calls, stop_reason),
``tool_executed`` (call_id, name, success, rejected), ``duplicate_prevented``
(call_id, name, arguments, observe_only: a warning when the call still ran),
``model_delta`` (turn, kind ``text``/``thinking``/``tool_arguments``, text, index,
name, call_id: one piece of a streamed response as it arrives; never journaled),
``model_retry`` (turn, attempt, delay, error: a retryable failure is tried
again after ``delay`` seconds), ``completed``, ``failed`` (error; ``interrupted`` when a stream broke), ``budget_exceeded`` (kind ``turns`` or
``refusals``), ``transcript_lock_contention`` (another writer appended first), ``recorded``
(rows: the ``StoredEvent``s just written, in order — every event of a run
reaches observers this way once it is durable; ``engine.otel.OTelObserver``
builds its spans from them). A run's end (``completed``, ``failed``,
``budget_exceeded``) is announced after its event is recorded.
Every payload has ``conversation_id``.

An observer that raises is logged (logger ``turnlog.observers``) and
ignored: observing never changes a run::

    >>> seen = []
    >>> hub = Observers([lambda e, p: seen.append(e), lambda e, p: 1 / 0])
    >>> hub.emit("completed", conversation_id="c1")
    >>> seen
    ['completed']
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["EVENTS", "Observer", "Observers"]

Observer = Callable[[str, dict[str, Any]], None]

#: The lifecycle events observers receive.
EVENTS = ("turn_started", "model_delta", "model_responded", "model_retry", "tool_executed",
          "duplicate_prevented", "completed", "failed", "budget_exceeded",
          "transcript_lock_contention", "recorded")

log = logging.getLogger("turnlog.observers")


class Observers:
    """The registered observers of one loop; ``emit`` calls each, swallowing their errors."""

    def __init__(self, observers: Iterable[Observer] = ()) -> None:
        self._observers = list(observers)

    def add(self, observer: Observer) -> None:
        """Register one more observer."""
        self._observers.append(observer)

    def __bool__(self) -> bool:
        """Whether anyone listens (work done only for observers may then be skipped)."""
        return bool(self._observers)

    def traceparent(self, conversation_id: str) -> str | None:
        """The W3C ``traceparent`` of the run's trace, from the first observer that keeps one
        (``OTelObserver``), for calls that carry it to other systems; ``None``: none does."""
        for observer in self._observers:
            trace = getattr(observer, "traceparent", None)
            if callable(trace):
                try:
                    found = trace(conversation_id)
                except Exception:  # an observer must never change the run
                    log.exception("observer %r failed on traceparent", observer)
                    continue
                if found:
                    return str(found)
        return None

    def emit(self, event: str, **payload: Any) -> None:
        """Tell every observer; one that raises is logged and skipped."""
        for observer in self._observers:
            try:
                observer(event, payload)
            except Exception:  # an observer must never change the run
                log.exception("observer %r failed on %s", observer, event)
