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
    ".approvals": (
        "AlreadyDecidedError", "ApprovalError", "ApprovalMismatchError",
        "NotAwaitingApprovalError", "UnknownApprovalToolError", "UnknownCallError", "decide",
    ),
    ".audit": ("AuditQuery", "audit"),
    ".canonical": ("canonical_json", "digest"),
    ".conversation": ("Conversation", "load_state"),
    ".directives": ("Directives",),
    ".duplicates": ("call_key", "is_duplicate", "register_predicate"),
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
    ".events": (
        "ApprovalDecided", "ApprovalRequested", "Charge", "ConversationCompleted",
        "ConversationFailed", "ConversationHalted", "ConversationStarted",
        "DuplicatePolicy", "Event", "ForkRef", "ModelFailed", "ModelRequested",
        "ModelResponded", "ReplayRef", "RunInterrupted", "ToolCallRejected",
        "ToolCompleted", "ToolSpec", "ToolStarted", "TurnLimitReached", "UserMessage",
        "decode_event", "encode_event",
    ),
    ".aloop": ("AsyncLoop",),
    ".executor": ("LocalExecutor", "ToolExecution", "ToolExecutor"),
    ".formats": ("build_context", "export_conversation", "import_file", "validate_tool_call"),
    ".loop": ("Loop", "run"),
    ".machine": ("Lifecycle",),
    ".messages": ("Image", "Message", "Text", "Thinking", "ToolCall", "ToolResult", "Usage"),
    ".observers": ("Observers",),
    ".audit.prices": ("PriceTable", "Prices"),
    ".providers": ("ModelRequest", "ModelResponse", "Provider", "ScriptedProvider", "get_provider"),
    ".result": ("RunResult", "result_of"),
    ".retry": ("RetryPolicy",),
    ".runners": ("RunRequest", "Runner", "RunnerResult"),
    ".state": ("ConversationState", "StateBuilder", "fold", "reduce"),
    ".tools": ("Tool", "ToolContext", "ToolRegistry", "tool"),
}

#: ``turnlog.engine.audit`` is the audit package, called as the ``audit`` function it exports.
__all__ = export(__name__, _EXPORTS, submodules=("audit",))
