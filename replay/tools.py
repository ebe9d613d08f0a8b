"""Tools for replays: stand-ins made from recorded specs, recorded outcomes.

A recording replays without its tools' code: ``spec_registry`` makes each
recorded ``ToolSpec`` a ``SpecTool`` that never runs, accepts the arguments
the recording accepted and refuses what the recording shows refused as
invalid or disabled, read from the recorded ``tool_call_rejected`` reason
codes and ``details`` (never from the correction text).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from turnlog.engine.tools.approvals import arguments_hash
from turnlog.engine.tools.duplicates import call_key
from turnlog.engine.errors import ToolError
from turnlog.engine.model.events import (
    ApprovalRequested,
    Refusal,
    RejectReason,
    ToolCallRejected,
    ToolCompleted,
    ToolSpec,
)
from turnlog.engine.tools.executor import ToolExecution
from turnlog.engine.model.messages import ToolCall
from turnlog.engine.tools import Tool, ToolContext, ToolRegistry

from .errors import ReplayError
from .recorded import Recording

__all__ = ["SpecTool", "Verdicts", "execution_of", "spec_registry"]


def _never_run() -> None:
    raise ReplayError("a tool known only from its recorded spec cannot run")


class Verdicts:
    """What a recording's refusals said about calls, from their reason codes and details.

    ``invalid`` maps a call key to the schema problem the tool reported;
    ``disabled`` a call id to the reason the tool gave; ``policy`` a call id
    to the ``Refusal`` a provider swap's tool policy made (``unrecorded``,
    ``refused``); ``asked`` the arguments hashes (``engine.approvals``) of the
    calls that waited for approval. ``refuse`` is the loop's refusal hook that
    repeats those refusals.
    """

    def __init__(self, recording: Recording | None) -> None:
        self.invalid: dict[str, str] = {}
        self.disabled: dict[str, str] = {}
        self.policy: dict[str, Refusal] = {}
        self.asked: set[str] = set()
        for _seq, event in (recording.events if recording is not None else ()):
            if type(event) is ApprovalRequested:
                self.asked.add(event.arguments_hash)
            if type(event) is not ToolCallRejected:
                continue
            details = event.details
            if event.reason == RejectReason.INVALID_ARGUMENTS and details.get("stage") == "schema":
                self.invalid[call_key(event.name, event.arguments)] = str(details.get("problem", ""))
            elif event.reason == RejectReason.DISABLED:
                self.disabled[event.call_id] = str(details.get("why", ""))
            elif event.reason in (RejectReason.UNRECORDED, RejectReason.REFUSED):
                self.policy[event.call_id] = Refusal(reason=event.reason, details=details)

    def refuse(self, state: Any, call: ToolCall, tool: Tool) -> Refusal | None:
        """The loop's refusal hook: the swap policy's recorded refusal of ``call``, if any."""
        return self.policy.get(call.id)


class SpecTool(Tool):
    """A tool known only by its recorded ``ToolSpec``: it never runs.

    It accepts the arguments the recording accepted and refuses, with the
    recorded reason, the calls the recording shows refused as invalid or
    disabled (the recording, not the tool's code, is the reference).
    """

    def __init__(self, spec: ToolSpec, verdicts: Verdicts | None = None) -> None:
        super().__init__(_never_run, name=spec.name)
        self.spec = spec
        self.verdicts = verdicts or Verdicts(None)
        self.needs_approval = self.asked_approval

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments as they are, unless the recording refused them as invalid."""
        invalid = self.verdicts.invalid
        problem = invalid.get(call_key(self.name, arguments)) if invalid else None
        if problem is not None:
            raise ToolError(problem)
        return dict(arguments)

    def disabled_reason(self, context: ToolContext) -> str | None:
        """The recorded reason if the recording refused this call as disabled."""
        return self.verdicts.disabled.get(context.call_id)

    def asked_approval(self, arguments: dict[str, Any]) -> bool:
        """Whether the recording asked approval for this call (``needs_approval`` here: the
        tool's own rule was not recorded, so the recording is the reference)."""
        return arguments_hash(self.name, arguments) in self.verdicts.asked


def spec_registry(specs: Iterable[ToolSpec], verdicts: Verdicts | None = None) -> ToolRegistry:
    """A registry of ``SpecTool``s, in the recorded order, answering as ``verdicts`` say."""
    verdicts = verdicts or Verdicts(None)
    return ToolRegistry([SpecTool(s, verdicts) for s in specs])


def execution_of(done: ToolCompleted) -> ToolExecution:
    """A recorded ``tool_completed`` as the outcome an executor hands the loop."""
    return ToolExecution(success=done.success, data=done.data, error=done.error,
                         content=done.content, duration_ms=done.duration_ms, source=done.source,
                         replaced=done.replaced)
