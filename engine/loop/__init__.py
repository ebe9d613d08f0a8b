"""The agent loop: the sans-I/O step, its sync and async drivers, and what a run hands back.

- ``step``: the loop's rules as one step, given the state, what to do next;
- ``loop`` / ``aloop``: ``Loop`` and ``AsyncLoop``, driving the step;
- ``retry``, ``resume``: retrying failed requests, and crash-safe resume;
- ``directives``, ``texts``: system directives and the reference's tool-message texts;
- ``request_digest``, ``result``, ``runners``: request digests, ``RunResult``, hand-over runners;
- ``observers``, ``otel``: who hears about a run, and its live GenAI spans.

>>> from turnlog.engine.loop import Loop, run
"""

from turnlog._lazy import export

#: What this package re-exports, by the module that defines it (imported on first use).
_EXPORTS = {
    ".aloop": ("AsyncLoop",),
    ".loop": ("Loop", "LoopBase", "RefusalHook", "new_conversation_id", "run"),
}

__all__ = export(__name__, _EXPORTS)
