"""The engine's branch of turnlog's exception tree.

    TurnlogError                        (journal.errors) the root of everything turnlog raises
    ├── JournalError ...                (journal.errors) the file and its rows
    └── EngineError                     conversation semantics
        ├── InvalidTransition           an event the lifecycle does not accept here
        ├── InvalidEventError           an event that cannot be built or decoded
        ├── ConversationNotFound        no conversation with that id
        ├── ToolError                   tool registration or arguments
        ├── TranscriptLockContention    another runner wrote the same conversation at the same time
        ├── RunnerError                 an external runner handed back a result that cannot be recorded
        ├── FormatError                 a transcript or script that no format understands
        │   ├── UnknownEntryError       a transcript entry no format recognises (index, keys)
        │   └── TranscriptOrderError    entries the lifecycle refuses in that order (index)
        ├── ConversationExistsError     a new conversation's id is already taken
        ├── ConversationErasedError     a replay, fork or run of a conversation whose content
        │                               was erased (``seq``: the first erased event)
        ├── AuditError                  an audit that cannot be computed as asked
        │   ├── BadFilterError          a filter value turnlog cannot read (e.g. --since)
        │   └── PriceTableError         a price table file that is missing or malformed
        ├── UnknownProviderError        a provider name turnlog does not know
        ├── ReplayError ...             (replay.errors) fork points, recordings, ``Divergence``
        └── ProviderError               a model provider failed; ``retryable`` says whether to retry
            ├── AuthenticationError     401/403: the key is missing or wrong
            ├── RateLimitError          429: ``retry_after`` seconds when the provider says
            ├── ProviderTimeout         no answer in time
            ├── ProviderConnectionError the endpoint could not be reached
            ├── BadRequestError         400/404/422: the provider refused the request
            ├── ServerError             5xx
            ├── MalformedResponseError  an answer turnlog cannot read
            └── ScriptExhaustedError    the scripted provider has no turn left

sqlite3 and SDK errors are translated where they enter turnlog's code; none escapes raw.
"""

from __future__ import annotations

from typing import Any

from turnlog.journal.errors import (
    ConcurrencyError,
    CorruptEventError,
    JournalError,
    NotAJournalError,
    SchemaTooNewError,
    StreamNotFoundError,
    TurnlogError,
)

__all__ = [
    "AuditError",
    "AuthenticationError",
    "BadFilterError",
    "BadRequestError",
    "ConcurrencyError",
    "ConversationErasedError",
    "ConversationExistsError",
    "ConversationNotFound",
    "CorruptEventError",
    "EngineError",
    "FormatError",
    "InvalidEventError",
    "InvalidTransition",
    "JournalError",
    "MalformedResponseError",
    "NestingError",
    "NotAJournalError",
    "PriceTableError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeout",
    "RateLimitError",
    "RunnerError",
    "SchemaTooNewError",
    "ScriptExhaustedError",
    "ServerError",
    "StreamInterrupted",
    "StreamNotFoundError",
    "ToolError",
    "TranscriptLockContention",
    "TranscriptOrderError",
    "TurnlogError",
    "UnknownEntryError",
    "UnknownProviderError",
]


class EngineError(TurnlogError):
    """A problem with conversation semantics rather than storage."""


class InvalidTransition(EngineError):
    """The lifecycle does not accept this event in the conversation's current state.

    ``state``, ``event_type`` and ``seq`` say where; ``reason`` says why.
    """

    def __init__(self, state: str, event_type: str, seq: int | None, reason: str = "") -> None:
        self.state, self.event_type, self.seq, self.reason = state, event_type, seq, reason
        where = f" at seq {seq}" if seq is not None else ""
        why = f": {reason}" if reason else ""
        super().__init__(f"event {event_type!r} is not allowed in state {state!r}{where}{why}")


class InvalidEventError(EngineError):
    """An event that cannot be built, encoded or decoded."""


class ConversationNotFound(EngineError):
    """No conversation with that id exists in the journal."""


class ToolError(EngineError):
    """A tool that cannot be registered, or arguments that do not fit its schema."""


class TranscriptLockContention(EngineError):
    """Two runners appended to one conversation at once; this one stopped without writing.

    Its ``__cause__`` is the journal's ``ConcurrencyError``.
    """


class RunnerError(EngineError):
    """An external runner's result cannot be normalised into journal events."""


class FormatError(EngineError):
    """Input in a shape no supported format recognises (a transcript entry, a script)."""


class NestingError(FormatError):
    """JSON from outside nests deeper than ``engine.nesting.MAX_DEPTH``; the message says where."""


class UnknownEntryError(FormatError):
    """A transcript entry that no format recognises; ``index`` and ``keys`` say which."""

    def __init__(self, message: str, *, index: int, keys: list[str] | None = None) -> None:
        self.index, self.keys = index, keys
        super().__init__(message)


class TranscriptOrderError(FormatError):
    """Transcript entries the lifecycle refuses in that order; ``index`` is the entry."""

    def __init__(self, message: str, *, index: int | None = None) -> None:
        self.index = index
        super().__init__(message)


class ConversationExistsError(EngineError):
    """A new conversation was asked for under an id the journal already holds."""


class ConversationErasedError(EngineError):
    """A conversation whose content was erased cannot be replayed, forked or continued:
    what the model would be sent is gone. ``conversation_id`` and ``seq`` name the first
    erased event of its history."""

    def __init__(self, message: str, *, conversation_id: str = "", seq: int = 0) -> None:
        super().__init__(message)
        self.conversation_id = conversation_id
        self.seq = seq


class AuditError(EngineError):
    """An audit that cannot be computed as asked."""


class BadFilterError(AuditError):
    """A filter value that cannot be read (a ``--since`` that is not a date, say)."""


class PriceTableError(AuditError):
    """A price table that cannot be read; the message names the file and the entry."""


class UnknownProviderError(EngineError):
    """``get_provider`` was asked for a provider turnlog does not have."""


class ProviderError(EngineError):
    """A model provider failed. ``provider`` names it; ``retryable`` says whether a retry may help.

    ``retry_after`` is the wait in seconds the provider asked for, when it did.
    """

    retryable = False

    def __init__(self, message: str, *, provider: str = "", status: int | None = None,
                 retry_after: float | None = None) -> None:
        self.provider, self.status, self.retry_after = provider, status, retry_after
        super().__init__(f"{provider}: {message}" if provider else message)


class AuthenticationError(ProviderError):
    """The provider refused the credentials (HTTP 401/403)."""


class RateLimitError(ProviderError):
    """The provider is rate limiting (HTTP 429); ``retry_after`` is in seconds when known."""

    retryable = True

    def __init__(self, message: str, *, provider: str = "", status: int | None = 429,
                 retry_after: float | None = None) -> None:
        super().__init__(message, provider=provider, status=status, retry_after=retry_after)


class ProviderTimeout(ProviderError):
    """The provider did not answer in time."""

    retryable = True


class ProviderConnectionError(ProviderError):
    """The provider's endpoint could not be reached (DNS, refused connection, TLS, reset)."""

    retryable = True


class StreamInterrupted(ProviderConnectionError):
    """A streamed response broke after it began; ``partial`` holds the parts that arrived.

    The loop records it as ``model_failed`` with ``interrupted`` and those parts.
    """

    def __init__(self, message: str, *, provider: str = "", partial: tuple[Any, ...] = (),
                 status: int | None = None) -> None:
        super().__init__(message, provider=provider, status=status)
        self.partial = partial


class BadRequestError(ProviderError):
    """The provider refused the request as invalid (HTTP 400/404/422)."""


class ServerError(ProviderError):
    """The provider failed on its side (HTTP 5xx)."""

    retryable = True


class MalformedResponseError(ProviderError):
    """The provider answered with something turnlog cannot read."""


class ScriptExhaustedError(ProviderError):
    """The scripted provider was asked for a turn its script does not have."""
