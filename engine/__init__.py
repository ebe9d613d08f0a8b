"""turnlog's conversation engine: events, messages, lifecycle, reducer, providers, loop, CLI.

The journal (``journal``) stores hashed envelopes; this package gives them
meaning. Import what you need from here::

    from engine import ConversationStarted, UserMessage, fold
"""

from .canonical import canonical_json, digest
from .errors import *  # noqa: F403 - the error tree is part of the public API
from .errors import __all__ as _errors_all
from .events import (
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
    ToolCallRejected,
    ToolCompleted,
    ToolSpec,
    ToolStarted,
    TurnLimitReached,
    UserMessage,
    decode_event,
    encode_event,
)
from .machine import Lifecycle
from .messages import Image, Message, Text, Thinking, ToolCall, ToolResult, Usage
from .state import ConversationState, StateBuilder, fold, reduce

__all__ = sorted([
    *_errors_all,
    "ConversationCompleted",
    "ConversationFailed",
    "ConversationHalted",
    "ConversationStarted",
    "ConversationState",
    "DuplicatePolicy",
    "Event",
    "ForkRef",
    "Image",
    "Lifecycle",
    "Message",
    "ModelFailed",
    "ModelRequested",
    "ModelResponded",
    "ReplayRef",
    "StateBuilder",
    "Text",
    "Thinking",
    "ToolCall",
    "ToolCallRejected",
    "ToolCompleted",
    "ToolResult",
    "ToolSpec",
    "ToolStarted",
    "TurnLimitReached",
    "Usage",
    "UserMessage",
    "canonical_json",
    "decode_event",
    "digest",
    "encode_event",
    "fold",
    "reduce",
])
