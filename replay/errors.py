"""The replay branch of turnlog's exception tree.

    TurnlogError                    (journal.errors) the root of everything turnlog raises
    └── EngineError                 (engine.errors) conversation semantics
        └── ReplayError             replay, fork, swap or diff could not do what was asked
            ├── ForkPointError      the fork point is not a seq of the parent (or the
            │                       continuation is not allowed there)
            ├── RecordingError      a recording replay needs is missing or unreadable
            └── Divergence          a re-run produced something the recording does not hold

``Divergence`` is both an error (``replay(..., collect=False)`` raises it) and
a value (``collect=True`` returns it in the report), so a test can assert on
``seq``, ``expected`` and ``actual`` either way.
"""

from __future__ import annotations

from typing import Any

from turnlog.engine.errors import EngineError

__all__ = ["Divergence", "ForkPointError", "RecordingError", "ReplayError", "RunPaused"]


class ReplayError(EngineError):
    """Replay, fork, provider swap or diff could not do what was asked."""


class RunPaused(ReplayError):
    """The recorded run stopped here (single-turn run, crash) until the next user message.

    Raised to the driver when the loop would append anything where the
    recording has the next user message (an input: the recorded run had
    stopped there); the driver then sends that message.
    """


class ForkPointError(ReplayError):
    """A fork point that is not a seq of the parent, or a continuation not allowed there."""


class RecordingError(ReplayError):
    """The recording a replay needs is missing or does not fit (e.g. no response for a turn)."""


class Divergence(ReplayError):
    """The first place a re-run differs from its recording.

    ``seq`` is the seq (in the replayed conversation's own stream) where the
    two part; ``expected`` and ``actual`` are the recorded and the produced
    event as plain dicts (``None`` when one side has no event there), with
    ``type`` included. ``request_diff`` is a unified diff of the request the
    re-run would send against the recorded one (rebuilt by folding the
    recording), when the difference is a request. ``reason`` says it in words.
    """

    def __init__(self, conversation_id: str, seq: int, expected: dict[str, Any] | None,
                 actual: dict[str, Any] | None, reason: str, request_diff: str = "") -> None:
        self.conversation_id, self.seq = conversation_id, seq
        self.expected, self.actual = expected, actual
        self.reason, self.request_diff = reason, request_diff
        super().__init__(f"conversation {conversation_id!r} diverges at seq {seq}: {reason}")

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form the CLI prints (``seq``, ``expected``, ``actual``, ...)."""
        return {"conversation_id": self.conversation_id, "seq": self.seq,
                "expected": self.expected, "actual": self.actual, "reason": self.reason,
                "request_diff": self.request_diff}

    def render(self) -> str:
        """A readable report: where, why, both events and the request diff."""
        import json

        lines = [str(self)]
        for label, event in (("expected", self.expected), ("actual", self.actual)):
            text = "(nothing)" if event is None else json.dumps(event, ensure_ascii=False,
                                                               sort_keys=True)
            lines.append(f"  {label}: {text[:2000]}")
        if self.request_diff:
            lines.append(self.request_diff)
        return "\n".join(lines)
