"""The event vocabulary: every fact a conversation records, as a frozen, tagged struct.

Each event encodes to sorted JSON (``engine.canonical.sorted_json``: keys sorted,
defaults omitted, values as given, not normalised as canonical JSON is) that
includes its ``type`` tag, so the journal's ``payload`` column is
self-describing and its bytes are reproducible, which keeps hashes stable::

    >>> e = UserMessage(parts=(Text(text="hi"),))
    >>> encode_event(e).payload
    '{"parts":[{"text":"hi","type":"text"}],"type":"user_message"}'
    >>> decode_event("user_message", 1, encode_event(e).payload) == e
    True

Schema evolution (msgspec's rules): a new field always gets a default; a
changed shape bumps the type's entry in ``VERSIONS`` and registers an
upcaster with ``register_upcaster`` that rewrites the old payload dict.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from typing import Any, Literal

import msgspec

from turnlog.journal import NewEvent

from .canonical import sorted_json_bytes, valid_unicode
from .jsontext import loads
from turnlog.engine.errors import CorruptEventError, InvalidEventError
from .messages import Part, Text, ToolCall, Usage
from .nesting import too_deep

__all__ = [
    "DECODER",
    "EVENT_TYPES",
    "MARKERS",
    "VERSIONS",
    "ApprovalDecided",
    "ApprovalRequested",
    "Charge",
    "ConversationCompleted",
    "ConversationFailed",
    "ConversationHalted",
    "ConversationStarted",
    "DirectiveLayer",
    "DuplicatePolicy",
    "ErasureRecorded",
    "Event",
    "ForkRef",
    "HoldPlaced",
    "HoldReleased",
    "ModelFailed",
    "ModelRequested",
    "ModelResponded",
    "Refusal",
    "RejectReason",
    "ReplayRef",
    "RunInterrupted",
    "StopReason",
    "ToolCallRejected",
    "ToolCompleted",
    "ToolEffect",
    "ToolProgressed",
    "ToolSpec",
    "ToolStarted",
    "TurnLimitReached",
    "UnpricedReason",
    "UserMessage",
    "check_json_data",
    "decode_event",
    "encode_event",
    "payload_of",
    "register_upcaster",
    "with_valid_unicode",
]

StopReason = Literal["end_turn", "tool_use", "max_tokens", "refusal", "other"]


class RejectReason(enum.StrEnum):
    """Why a tool call was not run: the code ``tool_call_rejected`` records.

    The correction the model reads is rendered from the code and the
    event's ``details`` (``engine.texts.refusal_message``); nothing reads
    the reason back from that text.
    """

    #: the duplicate policy refused it (same tool, same canonical arguments)
    DUPLICATE = "duplicate"
    #: no tool has that name; details: ``available`` (the tool names)
    UNKNOWN = "unknown"
    #: the tool refused to run now; details: ``why``
    DISABLED = "disabled"
    #: the arguments are not a JSON object or fail the schema; details: ``problem``, ``stage``
    INVALID_ARGUMENTS = "invalid_arguments"
    #: the output token limit cut the call off
    CUT_OFF = "cut_off"
    #: a recorded-tools replay has no recorded result for it; details: ``source``
    UNRECORDED = "unrecorded"
    #: a replay runs with tools refused
    REFUSED = "refused"
    #: the run is halted after too many refusals; details: ``refusals``
    HALTED = "halted"
    #: the process died while the tool ran
    INTERRUPTED = "interrupted"
    #: a person denied the call (``approval_decided``); details: ``approver``, ``reason``
    DENIED = "denied"
    #: the call was approved, but its tool changed since (spec hash); details: ``why``
    STALE_APPROVAL = "stale_approval"
ToolEffect = Literal["read_only", "idempotent", "side_effecting"]


class _Data(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Base of the plain records events carry."""


class ToolSpec(_Data, frozen=True):
    """A tool as the model sees it, plus what the engine needs to know about it.

    ``parameters`` is the model-facing JSON Schema (engine-injected parameters
    excluded). ``handler`` tools send back only a success message, never their
    data. ``effect`` decides whether an interrupted call may be re-run.
    ``server`` names the MCP server of a tool offered from one.
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}})
    handler: bool = False
    effect: ToolEffect = "side_effecting"
    display_name: str | None = None
    #: the MCP server the tool comes from (``engine.tools.mcp``); ``None`` for a local tool
    server: str | None = None


class DuplicatePolicy(_Data, frozen=True):
    """The rule that refuses repeated tool calls.

    ``rule``: ``previous`` (the reference's: same tool and same arguments as
    the previous call), ``window`` (within the last ``window`` calls),
    ``anywhere`` (ever in the conversation), ``custom`` (the predicate named
    ``custom``, as ``module:attr``) or ``off``. ``exempt`` tools may repeat;
    ``volatile`` maps a tool to argument keys left out of the comparison;
    ``observe_only`` records a warning but runs the call; after
    ``max_refusals`` refusals since the user's last message the run halts.
    """

    rule: Literal["previous", "window", "anywhere", "custom", "off"] = "previous"
    window: int = 1
    exempt: tuple[str, ...] = ()
    volatile: dict[str, tuple[str, ...]] = {}
    observe_only: bool = False
    max_refusals: int | None = None
    custom: str | None = None


class Refusal(_Data, frozen=True):
    """Why the loop will not run a call: a ``RejectReason`` code and its data.

    What ``Loop``'s refusal rules and its ``refuse`` hook return; the loop
    records it as ``tool_call_rejected`` with the rendered correction text.
    """

    reason: RejectReason
    details: dict[str, Any] = {}


class DirectiveLayer(_Data, frozen=True):
    """One rendered layer of the system directives (global, mode, agent, run)."""

    layer: str
    name: str
    text: str


class ForkRef(_Data, frozen=True):
    """Where a fork branched off: the parent, the seq and the parent's hash there."""

    conversation_id: str
    seq: int
    hash: str


class ReplayRef(_Data, frozen=True):
    """The recorded conversation a provider-swap replay re-ran, and its tool policy."""

    conversation_id: str
    tools: Literal["recorded", "live", "refuse"] = "recorded"


class Event(msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", omit_defaults=True):
    """Base of every event (``gc=False``, as message parts: frozen values, no cycles).

    ``replaced`` names the fields in which invalid Unicode that arrived from
    outside (a lone surrogate) was replaced with U+FFFD (``with_valid_unicode``).
    """

    replaced: tuple[str, ...] = ()


class ConversationStarted(Event, tag="conversation_started", frozen=True):
    """A conversation begins (or a fork continues its parent: ``fork`` is set).

    ``system`` is the rendered system directive, recorded so replay never
    depends on code that may have changed since.
    """

    conversation_id: str
    provider: str
    model: str
    mode: Literal["chat", "pipeline"] = "chat"
    max_turns: int = 8
    system: str = ""
    directives: tuple[DirectiveLayer, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    duplicate_policy: DuplicatePolicy = DuplicatePolicy()
    parameters: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    fork: ForkRef | None = None
    replay_of: ReplayRef | None = None
    #: tools whose every call waits for a person's decision in this conversation
    #: (``Loop(approve=...)``, ``turnlog run --approve``), besides the tools' own rule
    approve: tuple[str, ...] = ()
    #: why those calls need a decision (``Loop(approve_reason=...)``, ``--approve-reason``):
    #: recorded with each approval request they make and shown to the approver
    approve_reason: str | None = None


class UserMessage(Event, tag="user_message", frozen=True):
    """A user's message. ``timestamp`` keeps an imported entry's original time.

    ``context`` is the optional context of an orchestrator-format request
    (``{"input", "context"}``), kept apart from the text the model reads.
    """

    parts: tuple[Part, ...]
    timestamp: str | None = None
    context: str | None = None

    @classmethod
    def of(cls, text: str) -> UserMessage:
        """A plain-text user message.

        >>> UserMessage.of("hello").parts
        (Text(text='hello'),)
        """
        return cls(parts=(Text(text=text),))


class ModelRequested(Event, tag="model_requested", frozen=True):
    """Turn ``turn``'s request went out; ``digest`` is the canonical request's SHA-256."""

    turn: int
    digest: str
    provider: str
    model: str
    parameters: dict[str, Any] = {}
    #: 1 for a turn's first request; a retry after a ``model_failed`` of the same turn counts on
    attempt: int = 1


class UnpricedReason(enum.StrEnum):
    """Why a call is unpriced, as a code ``Charge.reason`` records when the sentence says
    nothing the record does not hold (its provider and model, the charge's source and
    version): every response of an unpriced model carries it, so it is kept short.

    ``Charge.explained`` renders the sentence; any other ``reason`` is a sentence already
    (and every reason recorded before the codes existed).
    """

    #: the price list (``source``, ``version``) has no entry for the model
    UNLISTED = "unlisted"
    #: neither the price list nor the ``--prices`` file's table has an entry for the model
    UNLISTED_OVERRIDES = "unlisted_overrides"


#: Each code's sentence (``Charge.explained``), filled from the response's provider and
#: model and the charge's source and version.
_UNPRICED_TEXT: dict[str, str] = {
    UnpricedReason.UNLISTED:
        "{provider}/{model} is not in {source} {version}; add it to a --prices file",
    UnpricedReason.UNLISTED_OVERRIDES:
        "{provider}/{model} is not in {source} {version} or the override table; "
        "add it to a --prices file",
}


class Charge(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What one model call cost, priced when it was recorded (``engine.audit.prices``).

    ``amount`` is ``None`` when no price was known: the call is *unpriced*
    (``reason`` says why: an ``UnpricedReason`` code, or a sentence; read it with
    :meth:`explained`), never free. ``source`` names the price list
    (``genai-prices``, ``overrides`` for a ``--prices`` file, ``scripted``),
    ``version`` its version (the genai-prices release, or ``sha256:…`` of the
    override file) and ``priced_as`` the entry that matched
    (``provider/model``).
    """

    amount: float | None = None
    currency: str = "USD"
    source: str = ""
    version: str = ""
    priced_as: str = ""
    reason: str | None = None

    def explained(self, provider: str, model: str) -> str | None:
        """``reason`` as a sentence, for the call of ``provider``/``model`` this charge
        priced: a code (``UnpricedReason``) rendered, any other reason as it is.

        >>> Charge(source="genai-prices", version="0.2.3", reason="unlisted").explained("p", "m")
        'p/m is not in genai-prices 0.2.3; add it to a --prices file'
        >>> Charge(reason="the call names no model").explained("p", "")
        'the call names no model'
        """
        text = _UNPRICED_TEXT.get(self.reason) if self.reason is not None else None
        if text is None:
            return self.reason
        return text.format(provider=provider, model=model, source=self.source,
                           version=self.version)


class ModelResponded(Event, tag="model_responded", frozen=True):
    """The model's answer to turn ``turn``: ordered parts, neutral stop reason, usage.

    ``raw`` is the provider's response body, kept for audit. ``source`` is
    ``provider`` for a live answer, ``imported`` or ``runner`` for messages
    that entered from a transcript or an external runtime (those need no
    ``model_requested`` before them).
    """

    turn: int
    parts: tuple[Part, ...]
    stop_reason: StopReason = "end_turn"
    usage: Usage = Usage()
    provider: str = ""
    model: str = ""
    response_id: str | None = None
    raw: Any = None
    latency_ms: float | None = None
    source: Literal["provider", "imported", "runner"] = "provider"
    timestamp: str | None = None
    #: the cost as priced when recorded (absent on events written before turnlog priced
    #: turns, and on imported ones: the audit prices those at their recorded time)
    charge: Charge | None = None


class ModelFailed(Event, tag="model_failed", frozen=True):
    """Turn ``turn``'s request failed; the error is kept.

    ``interrupted`` marks a streamed response that broke after it began (the
    connection was cut, or the process was stopped mid-stream); ``partial``
    holds the parts that had arrived, for audit only (they never enter the
    conversation; their tool calls never run). The turn is requested again:
    by the retry policy, else by the next ``resume``.
    """

    turn: int
    error_type: str
    message: str
    provider: str = ""
    model: str = ""
    status: int | None = None
    retryable: bool = False
    latency_ms: float | None = None
    #: seconds the provider asked to wait before trying again (a 429's ``retry-after``)
    retry_after: float | None = None
    interrupted: bool = False
    partial: tuple[Part, ...] = ()


class ToolCallRejected(Event, tag="tool_call_rejected", frozen=True):
    """A call that was not run: ``reason`` (a ``RejectReason``) and its ``details``.

    ``content`` is the correction sent back as the call's result, rendered
    from ``reason`` and ``details`` for the model; programs read those two.
    """

    call_id: str
    name: str
    reason: RejectReason
    content: str
    arguments: dict[str, Any] = {}
    details: dict[str, Any] = {}


class ToolStarted(Event, tag="tool_started", frozen=True):
    """Written just before a tool runs, so a crash mid-tool is known on resume.

    ``duplicate`` marks a call an observe-only duplicate policy let through.
    """

    call_id: str
    name: str
    arguments: dict[str, Any] = {}
    idempotency_key: str | None = None
    duplicate: bool = False


class ToolCompleted(Event, tag="tool_completed", frozen=True):
    """A tool's outcome. ``content`` is exactly what the model is sent as the result."""

    call_id: str
    name: str
    success: bool
    content: str
    data: Any = None
    error: str | None = None
    duration_ms: float | None = None
    source: Literal["live", "recorded", "imported", "interrupted", "runner"] = "live"


class ToolProgressed(Event, tag="tool_progressed", frozen=True):
    """News of call ``call_id`` while it runs, written as it happens (between its
    ``tool_started`` and its result), so a crash mid-call knows how far it got.

    ``data`` is the tool's own record of the step, with a ``kind``: an MCP call's
    ``input_required`` round, the ``elicitation`` answer given in it (who decided,
    when: as an approval), a ``task`` state, a ``reissued`` request (``engine.tools.mcp``).
    A replay serves them again, in order, with the call's result.
    """

    call_id: str
    name: str
    data: dict[str, Any] = {}


class ApprovalRequested(Event, tag="approval_requested", frozen=True):
    """Call ``call_id`` waits for a person's decision before it may run (``engine.approvals``).

    ``arguments_hash`` is the SHA-256 of the call's canonical arguments and
    ``spec_hash`` that of the tool's spec, as they were when approval was asked:
    an approved call runs only while both still match. ``reason`` says why the call
    needs a decision (the run's ``approve_reason``), for the approver to read.
    """

    call_id: str
    name: str
    arguments_hash: str
    spec_hash: str
    reason: str | None = None


class ApprovalDecided(Event, tag="approval_decided", frozen=True):
    """A person's decision on call ``call_id``: ``approve`` or ``deny``.

    ``arguments`` (only with ``approve``) are the arguments the approver edited
    the call to: the call runs with them instead, and ``arguments_hash`` is
    their canonical hash (else the approved call's).
    """

    call_id: str
    decision: Literal["approve", "deny"]
    approver: str
    decided_at: str
    arguments_hash: str
    reason: str | None = None
    arguments: dict[str, Any] | None = None


class TurnLimitReached(Event, tag="turn_limit_reached", frozen=True):
    """The run stopped at ``max_turns``; ``pending_tool_calls`` if the model still wanted tools."""

    turn_count: int
    max_turns: int
    pending_tool_calls: bool = False
    warning: str = ""


class ConversationHalted(Event, tag="conversation_halted", frozen=True):
    """The run was stopped on purpose (e.g. too many refused calls); ``reason`` says why."""

    reason: str
    refusals: int = 0


class ConversationCompleted(Event, tag="conversation_completed", frozen=True):
    """The model answered without tool calls: the run is done."""

    final_content: str = ""


class ConversationFailed(Event, tag="conversation_failed", frozen=True):
    """The run failed; ``error`` says why."""

    error: str
    error_type: str = ""


class RunInterrupted(Event, tag="run_interrupted", frozen=True):
    """The process running an unfinished run was stopped (e.g. Ctrl-C); ``resume`` continues it.

    A marker only: it changes nothing about what comes next, so the run
    resumes exactly as after a crash. ``reason`` is a code (``sigint``,
    ``sigterm``); ``message`` says it in words.
    """

    reason: str = "sigint"
    message: str = ""


class ErasureRecorded(Event, tag="erasure_recorded", frozen=True):
    """The content of events ``seqs`` of this conversation was erased (``turnlog erase``,
    ``prune``): ``by`` whom and ``reason`` why; when is this event's ``recorded_at``.

    A marker: the lifecycle stays as it was. The erased events keep their type, seq and
    the SHA-256 of their payload (so every hash and proof still holds); ``verify``
    requires each erased event to be named here, its erased payload hashing to ``kept``.
    """

    by: str
    reason: str
    seqs: tuple[int, ...]
    #: ``erase`` or ``prune`` (retention)
    via: str = "erase"
    #: the hex SHA-256 of each erased payload as stored, in the order of ``seqs``: the
    #: chain covers an erased payload only through the original's digest, so ``verify``
    #: checks the rest of it (its structure, kept in clear) against these
    kept: tuple[str, ...] = ()


class HoldPlaced(Event, tag="hold_placed", frozen=True):
    """A legal hold (``turnlog hold``): ``prune`` never erases this conversation while held."""

    by: str
    reason: str


class HoldReleased(Event, tag="hold_released", frozen=True):
    """The conversation's legal hold was lifted (``turnlog hold --release``)."""

    by: str
    reason: str = ""


_ALL = (
    ConversationStarted, UserMessage, ModelRequested, ModelResponded, ModelFailed,
    ToolCallRejected, ToolStarted, ToolCompleted, TurnLimitReached, ConversationHalted,
    ConversationCompleted, ConversationFailed, RunInterrupted, ApprovalRequested,
    ApprovalDecided, ToolProgressed, ErasureRecorded, HoldPlaced, HoldReleased,
)
AnyEvent = (
    ConversationStarted | UserMessage | ModelRequested | ModelResponded | ModelFailed
    | ToolCallRejected | ToolStarted | ToolCompleted | TurnLimitReached | ConversationHalted
    | ConversationCompleted | ConversationFailed | RunInterrupted | ApprovalRequested
    | ApprovalDecided | ToolProgressed | ErasureRecorded | HoldPlaced | HoldReleased
)
#: Event types that only annotate a conversation (an erasure, a legal hold): the lifecycle,
#: the status and the run stay exactly as they were.
MARKERS: frozenset[str] = frozenset({"erasure_recorded", "hold_placed", "hold_released"})

def _tag(event: Event | type[Event]) -> str:
    """The ``type`` an event (or event class) is stored under: its struct tag."""
    tag = event.__struct_config__.tag
    if not isinstance(tag, str):  # every event class names its tag (tag="...")
        raise TypeError(f"{event!r} has no event type tag")
    return tag


#: Each event type's tag mapped to its struct.
EVENT_TYPES: dict[str, type[Event]] = {_tag(cls): cls for cls in _ALL}
#: The current payload schema version of each event type.
VERSIONS: dict[str, int] = {tag: 1 for tag in EVENT_TYPES}

_encoder = msgspec.json.Encoder(order="sorted")
_plain_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AnyEvent)
#: The one JSON decoder for the union of every current event type (built once).
DECODER = _decoder
#: An upcaster: a stored payload (as a dict) one version up.
Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
_UPCASTERS: dict[tuple[str, int], Upcaster] = {}


def register_upcaster(type_: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Register ``fn(payload_dict) -> payload_dict`` lifting ``type_`` from ``from_version``.

    Example, after ``VERSIONS["tool_completed"]`` became 2 because ``error``
    turned into ``errors``::

        @register_upcaster("tool_completed", 1)
        def _(d):
            d["errors"] = [d.pop("error")] if d.get("error") else []
            return d
    """

    def deco(fn: Upcaster) -> Upcaster:
        _UPCASTERS[(type_, from_version)] = fn
        return fn

    return deco


def with_valid_unicode(event: Event) -> Event:
    """``event`` with invalid Unicode replaced by U+FFFD, the fields named in ``replaced``.

    The one policy for text from outside (``engine.canonical.valid_unicode``
    says why it replaces rather than refuses); applied where such text enters:
    provider responses and failures, tool results, prompts and imports. An
    event without invalid Unicode is returned as it is.

    >>> e = with_valid_unicode(UserMessage.of("hi \\udd20"))
    >>> e.parts[0].text, e.replaced
    ('hi \ufffd', ('parts',))
    """
    try:  # the common case, checked in C: every string encodes as UTF-8, nothing to replace
        _plain_encoder.encode(event)
        return event
    except (UnicodeEncodeError, TypeError, ValueError, OverflowError):
        pass  # a lone surrogate somewhere (or a value only the walk below understands)
    except RecursionError:  # data that skipped the boundaries' check (engine.nesting)
        raise InvalidEventError(too_deep(_tag(event))) from None
    updates: dict[str, Any] = {}
    for name in event.__struct_fields__:
        if name == "replaced":
            continue
        value, changed = valid_unicode(getattr(event, name))
        if changed:
            updates[name] = value
    if not updates:
        return event
    fields = tuple(sorted({*event.replaced, *updates}))
    return msgspec.structs.replace(event, replaced=fields, **updates)


def check_json_data(value: Any) -> None:
    """Raise ``TypeError`` unless ``value`` (builtins) encodes as an event's JSON does
    (:func:`encode_event`: sorted keys, so every object key must be a string), and
    ``ValueError`` for NaN or an infinity, which are not JSON (the encoder would store
    ``null`` in their place).

    >>> check_json_data({"a": [1, 2.5, None]})
    >>> check_json_data({1: "one"})
    Traceback (most recent call last):
    TypeError: Only dicts with str keys are supported when `order` is not `None`
    >>> check_json_data({"amount": float("nan")})
    Traceback (most recent call last):
    ValueError: NaN and Infinity are not JSON numbers
    """
    encoded = _encoder.encode(value)
    if b"null" in encoded:  # where a non-finite float would have gone: look closer
        try:
            json.dumps(value, allow_nan=False)
        except ValueError:
            raise ValueError("NaN and Infinity are not JSON numbers") from None


def encode_event(event: Event, recorded_at: str | None = None) -> NewEvent:
    """The journal record for ``event``: its tag, current version and sorted JSON
    (``sorted_json``: values as given, not canonical JSON's normalised form).

    Raises ``InvalidEventError`` for text that is not valid Unicode (a lone
    surrogate): boundaries repair it first (``with_valid_unicode``).
    """
    tag = _tag(event)
    try:
        payload = sorted_json_bytes(event).decode()
    except UnicodeEncodeError:
        fields = [n for n in event.__struct_fields__ if valid_unicode(getattr(event, n))[1]]
        raise InvalidEventError(
            f"{tag} holds invalid Unicode (a lone surrogate) in {', '.join(fields) or 'a field'}; "
            "pass it through with_valid_unicode first") from None
    except TypeError as exc:
        raise InvalidEventError(f"{tag} cannot be encoded as JSON: {exc}") from None
    except RecursionError:  # data that skipped the boundaries' check (engine.nesting)
        raise InvalidEventError(too_deep(tag)) from None
    return NewEvent(type=tag, version=VERSIONS[tag], payload=payload, recorded_at=recorded_at)


def decode_event(type_: str, version: int, payload: str | bytes, *, where: str = "") -> Event:
    """The event stored as ``payload``, upcast to the current version.

    Raises ``CorruptEventError`` naming ``where`` (e.g. ``"stream c1 seq 4"``)
    for an unknown type, a version newer than this code, or a payload that is
    not valid JSON for its type.
    """
    current = VERSIONS.get(type_)
    at = f" at {where}" if where else ""
    if current is None:
        raise CorruptEventError(f"unknown event type {type_!r}{at}")
    event: Event
    try:
        if version == current:
            event = _decoder.decode(payload)
        elif version > current:
            raise CorruptEventError(
                f"event {type_!r}{at} has version {version}, newer than this turnlog knows "
                f"({current}); upgrade turnlog")
        else:
            data = msgspec.json.decode(payload)
            for v in range(version, current):
                upcast = _UPCASTERS.get((type_, v))
                if upcast is None:
                    raise CorruptEventError(f"no upcaster for {type_!r} v{v}{at}")
                data = upcast(data)
            event = msgspec.convert(data, AnyEvent)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CorruptEventError(f"cannot decode {type_!r}{at}: {exc}") from None
    if event.__struct_config__.tag != type_:
        raise CorruptEventError(
            f"payload{at} says type {event.__struct_config__.tag!r} but the row says {type_!r}")
    return event


def payload_of(type_: str, version: int, payload: str | bytes, *, where: str = "",
               exact_floats: bool = False) -> Any:
    """A stored payload as its type's *current* version, as plain JSON data: the one step
    every reader of stored events takes (timelines, exports, the viewer, ``tail``), so a
    version-2 event type reads as version 2 wherever a journal holds its version-1 events.

    A current-version payload is parsed as it is (the same data, nothing re-encoded); an
    older one is upcast (``register_upcaster``) and checked as ``decode_event`` does. A type
    this turnlog does not know is shown as stored (its rows are not events this code can
    lift). Raises ``CorruptEventError`` naming ``where`` for a payload that is not valid
    JSON, or a known type at a version newer than this code or with no upcaster.

    ``exact_floats``: its floats as ``jsontext.ExactFloat``, for data written again as
    JSON text (``jsontext.indented``).

    >>> payload_of("user_message", 1, '{"parts":[{"text":"hi","type":"text"}],"type":"user_message"}')
    {'parts': [{'text': 'hi', 'type': 'text'}], 'type': 'user_message'}
    """
    current = VERSIONS.get(type_)
    if current is None or version == current:
        try:
            return loads(payload, exact_floats=exact_floats)
        except ValueError as exc:
            at = f" at {where}" if where else ""
            raise CorruptEventError(f"cannot decode {type_!r}{at}: {exc}") from None
    data = msgspec.to_builtins(decode_event(type_, version, payload, where=where))
    return loads(json.dumps(data), exact_floats=True) if exact_floats else data


def tool_calls(event: ModelResponded) -> list[ToolCall]:
    """The tool calls of a model response, in order."""
    return [p for p in event.parts if type(p) is ToolCall]
