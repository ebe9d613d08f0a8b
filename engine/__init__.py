"""turnlog's conversation engine: events, messages, lifecycle, reducer, providers, loop, formats, audit.

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

from .approvals import (
    AlreadyDecidedError,
    ApprovalError,
    ApprovalMismatchError,
    NotAwaitingApprovalError,
    UnknownApprovalToolError,
    UnknownCallError,
    decide,
)
from .audit import AuditQuery, audit
from .canonical import canonical_json, digest
from .conversation import Conversation, load_state
from .directives import Directives
from .duplicates import call_key, is_duplicate, register_predicate
from .errors import (
    AuditError,
    AuthenticationError,
    BadFilterError,
    BadRequestError,
    ConcurrencyError,
    ConversationExistsError,
    ConversationNotFound,
    CorruptEventError,
    EngineError,
    FormatError,
    InvalidEventError,
    InvalidTransition,
    JournalError,
    MalformedResponseError,
    NestingError,
    NotAJournalError,
    PriceTableError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    RunnerError,
    SchemaTooNewError,
    ScriptExhaustedError,
    ServerError,
    StreamInterrupted,
    StreamNotFoundError,
    ToolError,
    TranscriptLockContention,
    TranscriptOrderError,
    TurnlogError,
    UnknownEntryError,
    UnknownProviderError,
)
from .events import (
    ApprovalDecided,
    ApprovalRequested,
    ConversationCompleted,
    ConversationFailed,
    ConversationHalted,
    ConversationStarted,
    DuplicatePolicy,
    Event,
    ForkRef,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ReplayRef,
    RunInterrupted,
    ToolCallRejected,
    ToolCompleted,
    ToolSpec,
    ToolStarted,
    TurnLimitReached,
    UserMessage,
    decode_event,
    encode_event,
)
from .aloop import AsyncLoop
from .executor import LocalExecutor, ToolExecution, ToolExecutor
from .formats import build_context, export_conversation, import_file, validate_tool_call
from .loop import Loop, run
from .machine import Lifecycle
from .messages import Image, Message, Text, Thinking, ToolCall, ToolResult, Usage
from .observers import Observers
from .audit.prices import PriceTable
from .providers import (
    ModelRequest,
    ModelResponse,
    Provider,
    ScriptedProvider,
    get_provider,
)
from .result import RunResult, result_of
from .retry import RetryPolicy
from .runners import Runner, RunnerResult, RunRequest
from .state import ConversationState, StateBuilder, fold, reduce
from .tools import Tool, ToolContext, ToolRegistry, tool

__all__ = [
    "AlreadyDecidedError",
    "ApprovalDecided",
    "ApprovalError",
    "ApprovalMismatchError",
    "ApprovalRequested",
    "AsyncLoop",
    "AuditError",
    "AuditQuery",
    "AuthenticationError",
    "BadFilterError",
    "BadRequestError",
    "ConcurrencyError",
    "Conversation",
    "ConversationCompleted",
    "ConversationExistsError",
    "ConversationFailed",
    "ConversationHalted",
    "ConversationNotFound",
    "ConversationStarted",
    "ConversationState",
    "CorruptEventError",
    "Directives",
    "DuplicatePolicy",
    "EngineError",
    "Event",
    "ForkRef",
    "FormatError",
    "Image",
    "InvalidEventError",
    "InvalidTransition",
    "JournalError",
    "Lifecycle",
    "LocalExecutor",
    "Loop",
    "MalformedResponseError",
    "Message",
    "ModelFailed",
    "ModelRequest",
    "ModelRequested",
    "ModelResponded",
    "ModelResponse",
    "NestingError",
    "NotAJournalError",
    "NotAwaitingApprovalError",
    "Observers",
    "PriceTable",
    "PriceTableError",
    "Provider",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeout",
    "RateLimitError",
    "ReplayRef",
    "RetryPolicy",
    "RunInterrupted",
    "RunRequest",
    "RunResult",
    "Runner",
    "RunnerError",
    "RunnerResult",
    "SchemaTooNewError",
    "ScriptExhaustedError",
    "ScriptedProvider",
    "ServerError",
    "StateBuilder",
    "StreamInterrupted",
    "StreamNotFoundError",
    "Text",
    "Thinking",
    "Tool",
    "ToolCall",
    "ToolCallRejected",
    "ToolCompleted",
    "ToolContext",
    "ToolError",
    "ToolExecution",
    "ToolExecutor",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "ToolStarted",
    "TranscriptLockContention",
    "TranscriptOrderError",
    "TurnLimitReached",
    "TurnlogError",
    "UnknownApprovalToolError",
    "UnknownCallError",
    "UnknownEntryError",
    "UnknownProviderError",
    "Usage",
    "UserMessage",
    "audit",
    "build_context",
    "call_key",
    "canonical_json",
    "decide",
    "decode_event",
    "digest",
    "encode_event",
    "export_conversation",
    "fold",
    "get_provider",
    "import_file",
    "is_duplicate",
    "load_state",
    "reduce",
    "register_predicate",
    "result_of",
    "run",
    "tool",
    "validate_tool_call",
]
