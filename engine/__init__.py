"""turnlog"s conversation engine: events, messages, lifecycle, reducer, providers, loop, formats, audit.

The journal (``journal``) stores hashed envelopes; this package gives them
meaning. Everything public is importable from here::

    from turnlog.engine import Loop, ScriptedProvider, tool
    from turnlog.journal import Journal

    @tool
    def add(a: float, b: float) -> dict:
        return {"sum": a + b}

    script = [{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}, {"text": "5"}]
    result = Loop(Journal("turnlog.db"), ScriptedProvider(script), [add]).start("2 + 3?")
    assert result.final_content == "5" and result.completed
"""

from turnlog._lazy import export

#: What this package re-exports, by the module that defines it (imported on first use).
_EXPORTS = {
    ".tools.approvals": (
        "AlreadyDecidedError", "ApprovalError", "ApprovalMismatchError",
        "NotAwaitingApprovalError", "UnknownApprovalToolError", "UnknownCallError", "decide",
    ),
    ".audit": ("AuditQuery", "audit"),
    ".model.canonical": ("canonical_json", "digest"),
    ".model.conversation": ("Conversation", "load_state"),
    ".loop.directives": ("Directives",),
    ".tools.duplicates": ("call_key", "is_duplicate", "register_predicate"),
    ".errors": (
        "AuditError", "AuthenticationError", "BadFilterError", "BadRequestError",
        "ConcurrencyError", "ConversationExistsError", "ConversationNotFound",
        "CorruptEventError", "EngineError", "FormatError", "InvalidEventError",
        "InvalidTransition", "JournalError", "MalformedResponseError", "NestingError",
        "NotAJournalError",
        "PriceTableError", "ProviderConnectionError", "ProviderError", "ProviderTimeout",
        "RateLimitError", "RunnerError", "SchemaTooNewError", "ScriptExhaustedError",
        "ServerError", "StreamInterrupted", "StreamNotFoundError", "ToolError",
        "TranscriptLockContention", "TranscriptOrderError", "TurnlogError",
        "UnknownEntryError", "UnknownProviderError",
    ),
    ".model.events": (
        "ApprovalDecided", "ApprovalRequested", "Charge", "ConversationCompleted",
        "ConversationFailed", "ConversationHalted", "ConversationStarted",
        "DuplicatePolicy", "Event", "ForkRef", "ModelFailed", "ModelRequested",
        "ModelResponded", "ReplayRef", "RunInterrupted", "ToolCallRejected",
        "ToolCompleted", "ToolProgressed", "ToolSpec", "ToolStarted", "TurnLimitReached",
        "UserMessage",
        "decode_event", "encode_event",
    ),
    ".loop.aloop": ("AsyncLoop",),
    ".tools.executor": ("LocalExecutor", "ToolExecution", "ToolExecutor"),
    ".formats": ("build_context", "export_conversation", "import_file", "validate_tool_call"),
    ".loop.loop": ("Loop", "run"),
    ".model.machine": ("Lifecycle",),
    ".model.messages": ("Image", "Message", "Text", "Thinking", "ToolCall", "ToolResult", "Usage"),
    ".loop.observers": ("Observers",),
    ".audit.prices": ("PriceTable", "Prices"),
    ".providers": ("ModelRequest", "ModelResponse", "Provider", "ScriptedProvider", "get_provider"),
    ".loop.result": ("RunResult", "result_of"),
    ".loop.retry": ("RetryPolicy",),
    ".loop.runners": ("RunRequest", "Runner", "RunnerResult"),
    ".model.state": ("ConversationState", "StateBuilder", "fold", "reduce"),
    ".tools.registry": ("Tool", "ToolContext", "ToolRegistry", "tool"),
}

__all__ = export(__name__, _EXPORTS)
