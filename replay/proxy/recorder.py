"""The proxy's journal writer: each finished exchange becomes the loop's own events.

Exchanges are recorded after they were answered, by one writer thread in
arrival order, so recording adds no latency and appends are serialised.
Each exchange is one transaction (a proxy killed mid-request leaves no half
of it). An exchange is threaded (``threads``): appended to the conversation
whose recorded history its request extends, a fork where it departs from
one part-way, or a new conversation. What it records:

- the request's new items: ``user_message`` (after ``conversation_completed``
  when the previous run had ended on an answer), and for tool results
  ``tool_started`` + ``tool_completed`` (``source="runner"``: the client ran
  the tool; ``duration_ms`` is the time between the answer that called it and
  the request that brought its result);
- ``model_requested`` (digest of the neutral request), then
  ``model_responded`` (+ ``conversation_completed`` for a final answer) or
  ``model_failed`` (an upstream error, an unreachable upstream, a stream cut
  or abandoned mid-way: ``interrupted``, with what arrived as ``partial``).

A request the wire's reader refuses is recorded as an unparsed exchange: a
conversation of its own, ``conversation_started`` (``metadata.proxy`` holds
the path, status, reason and the bodies, bounded and redacted) and
``conversation_failed`` with ``error_type="unparsed"``. Keys never reach the
journal: headers are not recorded and every recorded body and message goes
through the providers' ``Redactor`` with the request's key.
"""

from __future__ import annotations

import functools
import queue
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from turnlog.engine.model.conversation import Conversation
from turnlog.engine.errors import (
    InvalidTransition,
    MalformedResponseError,
    ProviderError,
    TurnlogError,
)
from turnlog.engine.model.events import (
    ConversationCompleted,
    ConversationFailed,
    ConversationStarted,
    Event,
    encode_event,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ToolCompleted,
    ToolStarted,
    UserMessage,
    with_valid_unicode,
)
from turnlog.engine.model.machine import Lifecycle
from turnlog.engine.model.messages import Message, Part, ToolCall, ToolResult, text_of
from turnlog.engine.providers import ModelRequest, ModelResponse
from turnlog.engine.providers._common import UNANSWERED, error_for_status, error_message
from turnlog.engine.providers._stream import CUT_BY_STREAM
from turnlog.engine.providers._redact import Redactor, read_body
from turnlog.engine.loop.request_digest import RequestDigest
from turnlog.engine.model.snapshots import open_builder
from turnlog.engine.model.state import StateBuilder
from turnlog.journal import Journal, JournalLockedError, NewEvent, StreamAppend

from ..fork import fork_started
from .threads import KeyMemo, ThreadIndex, history_keys, message_items, message_keys
from .sse import SSEParser
from .wires import HistoryCache, ParsedRequest, UnparsedRequest, Wire, parse_request

__all__ = ["BODY_LIMIT", "CUT_REACH", "LOCK_RETRY_SECONDS", "MAX_BATCH", "RECORD_LIMIT", "SPOOL_MEMORY", "Exchange", "Recorder", "proxied",
           "rebuild_index", "settle", "settle_request"]

#: How much of an unparsed exchange's bodies is kept (characters each).
BODY_LIMIT = 64_000
#: A request body larger than this (bytes) is streamed upstream as it arrives, through a
#: spool that keeps at most this much in memory (the rest in a temporary file).
SPOOL_MEMORY = 1 << 20
#: The largest request body recorded as events (bytes). A larger one (a 50 MB image) is
#: forwarded whole but recorded as an unparsed exchange with its first ``BODY_LIMIT``
#: characters, so that memory stays bounded whatever a client sends.
RECORD_LIMIT = 16 << 20

#: How far past ``BODY_LIMIT`` an over-large body's start is kept, so that a credential that
#: straddles the cut is still seen whole and masked (no key is anywhere near this long).
CUT_REACH = 4096
#: How long a locked journal is retried before the record is reported as lost.
LOCK_RETRY_SECONDS = 30.0
#: The most exchanges the writer records in one transaction.
MAX_BATCH = 256


@dataclass
class Exchange:
    """One request and its answer, as the proxy saw them."""

    wire: Wire
    path: str
    client: str
    #: every credential the request carried (masked wherever the exchange is recorded)
    secrets: tuple[str, ...]
    #: when the request arrived (``time.monotonic``)
    started: float
    parsed: ParsedRequest | None = None
    unparsed: str | None = None
    conversation: str | None = None
    raw_request: bytes = b""
    status: int | None = None
    response: ModelResponse | None = None
    #: (error_type, message, retryable, interrupted, partial parts)
    failure: tuple[str, str, bool, bool, tuple[Part, ...]] | None = None
    raw_response: bytes = b""
    #: a streamed answer's chunks as relayed; ``complete``: it ended normally
    chunks: list[bytes] | None = None
    complete: bool = False
    broken: str | None = None
    #: the path is one the proxy reads
    known: bool = True
    #: with ``--to``: the provider and model that answered instead of the client's wire
    target: str | None = None
    target_model: str | None = None
    ended: float = field(default_factory=time.monotonic)
    #: a large request body, streamed upstream: its bytes (``raw_request`` is then empty)
    spool: Any = None
    _masks: tuple[tuple[str, ...], Redactor] | None = field(default=None, repr=False)

    @property
    def latency_ms(self) -> float:
        """From the request's arrival to the answer's end."""
        return (self.ended - self.started) * 1000

    @property
    def redactor(self) -> Redactor:
        """The ``Redactor`` of every credential the request carried (one per set of them:
        an agent sends the same key with every request)."""
        if self._masks is None or self._masks[0] != self.secrets:
            self._masks = (self.secrets, _redactor(self.secrets))
        return self._masks[1]


@functools.lru_cache(maxsize=64)
def _redactor(secrets: tuple[str, ...]) -> Redactor:
    return Redactor(*secrets)


def _unspool(exchange: Exchange) -> None:
    """Take a streamed body out of its spool: whole up to ``RECORD_LIMIT``, else its start."""
    spool, exchange.spool = exchange.spool, None
    with spool:
        size = spool.seek(0, 2)
        spool.seek(0)
        if size <= RECORD_LIMIT:
            exchange.raw_request = spool.read()
        else:
            # past the cut by CUT_REACH, so a key that straddles it is masked whole
            exchange.raw_request = spool.read(BODY_LIMIT + CUT_REACH)
            exchange.unparsed = (f"the request body ({size:,} bytes) is larger than the proxy "
                                 f"records ({RECORD_LIMIT:,} bytes); it was forwarded whole")


def settle_request(exchange: Exchange, cache: HistoryCache | None = None) -> None:
    """Read the request in neutral form (``parsed``), or say why not (``unparsed``).

    Credentials echoed inside the body (a history that quotes an answer
    which held a key) are masked before it is read, as in every recorded answer.
    ``cache``: histories read before (``wires.HistoryCache``), read again only past them.
    """
    if exchange.spool is not None:
        _unspool(exchange)
    if exchange.parsed is not None or exchange.unparsed is not None:
        return
    if not exchange.known:
        exchange.unparsed = f"{exchange.path} is not a path the proxy reads"
        return
    raw = exchange.raw_request
    if exchange.secrets:
        text = raw.decode(errors="surrogateescape")
        masked = exchange.redactor.text(text)
        if masked != text:
            raw = masked.encode(errors="surrogateescape")
    try:
        exchange.parsed = parse_request(exchange.wire, exchange.path, raw, cache)
    except UnparsedRequest as exc:
        exchange.unparsed = str(exc)


def settle(exchange: Exchange, cache: HistoryCache | None = None) -> None:
    """Read what the proxy passed on: the request, and the answer as a response or failure.

    Done by the writer thread, after the client has its answer: parsing and
    mapping never add latency. The answer is read through a ``Redactor`` of
    every credential the request carried, so a key the upstream echoes (in
    its text, a field, an error) never reaches a recorded part. ``cache``: as in
    ``settle_request``.
    """
    settle_request(exchange, cache)
    if exchange.parsed is None or exchange.response is not None or exchange.failure is not None:
        return
    wire = exchange.wire
    redactor = exchange.redactor
    if exchange.chunks is not None:
        _settle_stream(exchange, redactor)
        return
    text = exchange.raw_response.decode(errors="replace")
    unreadable = MalformedResponseError("the answer is not a JSON object")
    try:
        body = read_body(text, wire.name, redactor)
    except MalformedResponseError as exc:
        body, unreadable = None, exc
    if exchange.status == 200:
        try:
            if not isinstance(body, dict):
                raise unreadable
            exchange.response = wire.map_response(body)
        except ProviderError as exc:
            exchange.failure = (type(exc).__name__, str(exc), False, False, ())
        return
    text = error_message(body, redactor.text(text[:2000]))
    exc = error_for_status(exchange.status or 0, text, wire.name)
    exchange.failure = (type(exc).__name__, str(exc), bool(getattr(
        exc, "retryable", exchange.status in (429, 500, 502, 503, 504, 529))), False, ())


def _settle_stream(exchange: Exchange, redactor: Redactor) -> None:
    wire = exchange.wire
    assembler = wire.assembler()
    broken = exchange.broken
    try:
        for event in SSEParser().feed(b"".join(exchange.chunks or [])):
            assembler.feed(event)
    except ProviderError as exc:
        broken = broken or str(exc)
    done = assembler.done or getattr(assembler, "finished", False)
    if exchange.complete and broken is None and done:
        try:
            exchange.response = wire.map_response(redactor.data(assembler.body(), wire.name))
        except ProviderError as exc:
            exchange.failure = (type(exc).__name__, str(exc), False, False, ())
        return
    partial: tuple[Part, ...] = ()
    if assembler.started:
        try:
            partial = tuple(
                ToolCall(id=p.id, name=p.name, raw_arguments=p.raw_arguments,
                         invalid=CUT_BY_STREAM) if type(p) is ToolCall else p
                for p in wire.map_response(redactor.data(assembler.body(), wire.name)).parts)
        except ProviderError:
            partial = ()
    why = broken or ("the upstream ended the stream before its last event" if exchange.complete
                     else "the client went away before the stream ended")
    exchange.failure = ("StreamInterrupted", why, True, True, partial)


def proxied(started: ConversationStarted) -> dict[str, Any] | None:
    """The proxy's metadata of a conversation it recorded (``None`` for any other)."""
    meta = started.metadata.get("proxy") if isinstance(started.metadata, dict) else None
    return meta if isinstance(meta, dict) else None


def rebuild_index(journal: Journal, index: ThreadIndex) -> None:
    """Load every proxied conversation of ``journal`` into ``index`` (oldest first)."""
    from turnlog.engine.model.events import decode_event

    streams = sorted(journal.streams(), key=lambda s: s.first_recorded_at)
    for info in streams:
        events = [(row.stream_id, row.seq, decode_event(row.type, row.version, row.payload))
                  for row in journal.lineage(info.stream_id)]
        own = [e for s, _, e in events if s == info.stream_id and type(e) is ConversationStarted]
        if not own or proxied(own[0]) is None or proxied(own[0]).get("unparsed"):
            continue
        keys: list[bytes] = []
        points: list[tuple[str, int]] = []
        wire = proxied(own[0]).get("wire", own[0].provider)
        for stream, seq, event in events:
            kind = type(event)
            if kind is ConversationStarted and event.fork is None:
                new = history_keys(wire, event.system, [])
            elif kind is UserMessage:
                new = message_keys(Message(role="user", parts=event.parts))
            elif kind is ModelResponded:
                new = message_keys(Message(role="assistant", parts=event.parts))
            elif kind is ToolCompleted:
                new = message_keys(Message(role="tool", parts=(ToolResult(
                    call_id=event.call_id, name=event.name, content=event.content),)))
            else:
                continue
            keys += new
            points += [(stream, seq)] * len(new)
        index.add(info.stream_id, keys, points)


class _Pending:
    """The appends planned for one transaction, and the exchanges they record."""

    def __init__(self) -> None:
        #: stream -> (events, the stream's last seq before them, fork parent)
        self.streams: dict[str, tuple[list[NewEvent], int, tuple[str, int] | None]] = {}
        self.exchanges: list[Exchange] = []

    def add(self, stream: str, events: list[NewEvent], expected: int,
            parent: tuple[str, int] | None) -> None:
        held = self.streams.get(stream)
        if held is None:
            self.streams[stream] = (events, expected, parent)
        else:  # a stream appears once per transaction: its later events join its earlier ones
            held[0].extend(events)

    def appends(self) -> list[StreamAppend]:
        return [StreamAppend(stream, events, expected, parent)
                for stream, (events, expected, parent) in self.streams.items()]

    def mark(self) -> dict[str, int]:
        """How many events each stream holds now: what ``undo`` goes back to."""
        return {stream: len(held[0]) for stream, held in self.streams.items()}

    def undo(self, mark: dict[str, int]) -> None:
        """Drop every event planned since ``mark`` (an exchange whose planning failed
        part-way records none of its events)."""
        for stream in list(self.streams):
            if stream in mark:
                del self.streams[stream][0][mark[stream]:]
            else:
                del self.streams[stream]


class Recorder:
    """The writer thread: ``submit`` exchanges, ``drain`` to wait, ``close`` to stop.

    Group commit: the thread takes every exchange queued when it is ready (up to
    ``MAX_BATCH``) and records them in one transaction, in arrival order, so a
    busy proxy commits once per batch instead of once per exchange and a quiet one
    still records each exchange at once. The batch is threaded one exchange after
    the other against the index as the earlier ones left it (a request that
    arrives before its predecessor is committed threads onto it all the same).
    A locked journal is retried for ``LOCK_RETRY_SECONDS``; a batch the journal
    refuses is recorded again one exchange per transaction, so that only the
    exchange at fault is reported (on stderr, counted in ``lost``).
    ``recorded`` counts the exchanges committed, ``commits`` the transactions.
    """

    def __init__(self, db_path: str, *, index: ThreadIndex | None = None) -> None:
        self.db_path = db_path
        self.index = index or ThreadIndex()
        self.recorded = 0
        self.lost = 0
        self.commits = 0
        self._queue: queue.Queue[Exchange | None] = queue.Queue()
        self._open: dict[str, Conversation] = {}
        self._answered_at: dict[str, float] = {}
        #: each open conversation's digest of its requests so far (``model_requested``
        #: hashes only the messages new since the conversation's last request)
        self._digests: dict[str, RequestDigest] = {}
        #: the histories of recent requests: a request is read only past the one it resends
        self._histories = HistoryCache()
        #: the thread keys of the messages of recent requests (``HistoryCache`` hands the
        #: same message objects back for a history read before)
        self._keys = KeyMemo()
        #: what ``record_all`` does by the slow path only (tests hold the fast one to it):
        #: a fresh digest of every request, every event applied again to the
        #: conversation's state instead of adopting the state that planned it, and
        #: every request's history read whole
        self.fast = True
        self._journal: Journal | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="turnlog-proxy-recorder",
                                        daemon=True)

    def start(self) -> Recorder:
        """Open the journal (creating it), load the proxied conversations, start writing."""
        self._thread.start()
        self._ready.wait()
        if self._journal is None:
            raise self._error
        return self

    def submit(self, exchange: Exchange) -> None:
        """Queue ``exchange`` to be recorded (never blocks)."""
        self._queue.put(exchange)

    def drain(self) -> None:
        """Wait until every submitted exchange is recorded (or reported lost)."""
        self._queue.join()

    def close(self) -> None:
        """Record what is queued, then stop the thread and close the journal."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    # --- the writer thread ----------------------------------------------------

    def _run(self) -> None:
        try:
            self._journal = Journal.open(self.db_path)
            rebuild_index(self._journal, self.index)
        except TurnlogError as exc:
            self._error, self._journal = exc, None
            self._ready.set()
            return
        self._ready.set()
        try:
            while True:
                items = self._take()
                try:
                    self.record_all([e for e in items if e is not None])
                    if items[-1] is None:
                        return
                finally:
                    for _ in items:
                        self._queue.task_done()
        finally:
            self._journal.close()

    def _take(self) -> list[Exchange | None]:
        """The next exchange (waiting for it), and every one queued behind it, up to
        ``MAX_BATCH`` or the stop sign."""
        items = [self._queue.get()]
        while items[-1] is not None and len(items) < MAX_BATCH:
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return items

    def record_all(self, exchanges: list[Exchange]) -> None:
        """Record ``exchanges`` in one transaction (in the calling thread; the writer
        thread's own). A fork from an event that is not committed yet commits what
        is planned before it first."""
        pending = _Pending()
        for exchange in exchanges:
            mark, planned = pending.mark(), len(pending.exchanges)
            try:
                self._plan_exchange(exchange, pending)
            except Exception as exc:  # noqa: BLE001 - reported, never silent, never fatal
                self._report(exchange, exc)
                pending.undo(mark)  # none of its events, if it failed after staging some
                del pending.exchanges[planned:]
                self._commit(pending)
                self._forget()  # its half-planned state is not the journal's
        self._commit(pending)

    def _commit(self, pending: _Pending) -> None:
        exchanges, appends = pending.exchanges, pending.appends()
        pending.streams, pending.exchanges = {}, []
        if not appends:
            self.recorded += len(exchanges)
            return
        try:
            self._append_retrying(appends)
        except JournalLockedError as exc:  # still locked after LOCK_RETRY_SECONDS
            self._forget()
            for exchange in exchanges:
                self._report(exchange, exc)
        except Exception as exc:  # noqa: BLE001 - find the exchange at fault, report it
            self._forget()
            if len(exchanges) == 1:
                self._report(exchanges[0], exc)
            else:
                for exchange in exchanges:
                    self.record_all([exchange])
        else:
            self.recorded += len(exchanges)
            self.commits += 1

    def _append_retrying(self, appends: list[StreamAppend]) -> None:
        deadline = time.monotonic() + LOCK_RETRY_SECONDS
        delay = 0.02
        while True:
            try:
                self._journal.append_many(appends)
                return
            except JournalLockedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _forget(self) -> None:
        """Drop what the writer planned but did not commit: its open conversations and
        its index are read again from the journal."""
        self._open.clear()
        self._digests.clear()
        index = ThreadIndex()
        try:
            rebuild_index(self._journal, index)
        except Exception as exc:  # noqa: BLE001 - threading starts afresh, and says so
            print(f"turnlog proxy: could not reread the recorded conversations "
                  f"({type(exc).__name__}: {exc}); new requests start new conversations",
                  file=sys.stderr, flush=True)
        self.index = index

    def _report(self, exchange: Exchange, exc: BaseException) -> None:
        self.lost += 1
        print(f"turnlog proxy: could not record the {exchange.wire.name} exchange to "
              f"{exchange.path} ({type(exc).__name__}: {exc})", file=sys.stderr, flush=True)

    # --- one exchange ---------------------------------------------------------

    def record(self, exchange: Exchange) -> None:
        """Record ``exchange`` now, in its own transaction (in the calling thread)."""
        self.record_all([exchange])

    def _plan_exchange(self, exchange: Exchange, pending: _Pending) -> None:
        """Plan ``exchange``'s events into ``pending``; the writer's state (open
        conversations, index) moves on as if they were committed."""
        journal = self._journal
        assert journal is not None, "start() first"
        settle(exchange, self._histories if self.fast else None)
        redactor = exchange.redactor
        if exchange.parsed is None:
            self._plan_unparsed(exchange, exchange.unparsed or "unreadable", redactor, pending)
            return
        parsed = exchange.parsed
        keys = (self._keys.history_keys if self.fast else history_keys)(
            exchange.wire.name, parsed.system, parsed.messages)
        named = exchange.conversation
        # sharing only the system prompt is no departure: a conversation of its own
        match = (self.index.match(keys, only=named, least=2)
                 if named is None or named in self.index else None)
        if match is not None and not match.extends and match.at[0] in pending.streams:
            self._commit(pending)  # a fork reads its parent's point from the journal
            self._plan_exchange(exchange, pending)
            return
        try:
            if match is not None and match.extends:
                conv_id = match.conversation_id
                conversation = self._conversation(conv_id)
                events, item_events, new_keys, planned = self._plan(
                    exchange, conv_id, conversation.builder, keys, match.matched, redactor,
                    self._answered_at.get(conv_id))
            else:
                conv_id = named if named is not None and named not in self.index else (
                    self._fork_id(match.at) if match is not None else _new_id())
                started = self._started(exchange, conv_id, match)
                builder = open_builder(journal, *match.at) if match is not None else StateBuilder()
                scratch = StateBuilder(builder.state())
                scratch.apply(started, scratch.seq + 1)
                events, item_events, new_keys, planned = self._plan(
                    exchange, conv_id, scratch, keys, match.matched if match else 0,
                    redactor, None)
                if match is not None:  # a fork's scratch numbers on from its parent's seqs
                    planned = None
                conversation = Conversation(journal, conv_id, builder, 0)
                events.insert(0, started)
                item_events = [i + 1 for i in item_events]  # -1 (the start) becomes 0
        except InvalidTransition as exc:
            self._plan_unparsed(exchange, f"its history cannot continue a conversation here: "
                                f"{exc}", redactor, pending)
            return
        if conversation.last_seq == 0:  # a new conversation, or a fork
            seqs = self._stage(pending, conversation, events,
                               parent=match.at if match is not None else None, planned=planned)
            self._open[conv_id] = conversation
            if match is not None:
                self.index.branch(match.conversation_id, match.matched, conv_id)
        else:
            seqs = self._stage(pending, conversation, events, planned=planned)
        self.index.add(conv_id, new_keys, [(conv_id, seqs[i]) for i in item_events])
        if exchange.response is not None:
            self._answered_at[conv_id] = exchange.ended
        pending.exchanges.append(exchange)

    def _stage(self, pending: _Pending, conversation: Conversation, events: list[Event],
               parent: tuple[str, int] | None = None,
               planned: StateBuilder | None = None) -> list[int]:
        """Apply ``events`` to ``conversation`` and plan them; their seqs.

        ``planned``: the conversation's state with ``events`` already applied (by
        ``_plan``, which checked them): it becomes the conversation's state instead of
        applying each event again, and keeps its message objects, which the
        conversation's ``RequestDigest`` knows by identity.
        """
        base = conversation.last_seq
        if planned is not None and self.fast:
            planned.seq = base + len(events)
            conversation.builder = planned
        else:
            for i, event in enumerate(events):
                conversation.builder.apply(event, base + 1 + i)
        conversation.last_seq += len(events)
        pending.add(conversation.id, [encode_event(e) for e in events], base, parent)
        return list(range(base + 1, base + 1 + len(events)))

    def _conversation(self, conv_id: str) -> Conversation:
        conversation = self._open.get(conv_id)
        if conversation is None:
            conversation = self._open[conv_id] = Conversation.open(self._journal, conv_id)
        return conversation

    def _fork_id(self, at: tuple[str, int]) -> str:
        return f"{at[0]}.fork{at[1]}-{uuid.uuid4().hex[:8]}"

    def _started(self, exchange: Exchange, conv_id: str, match: Any) -> ConversationStarted:
        parsed = exchange.parsed
        meta = {"proxy": {"wire": exchange.wire.name, "client": exchange.client,
                          "path": exchange.path}}
        if exchange.target is not None:
            meta["proxy"]["to"] = exchange.target
        provider, model = _answering(exchange)
        if match is not None:
            return fork_started(self._journal, match.at[0], match.at[1], conv_id, metadata=meta,
                                provider=provider, model=model, tools=parsed.tools,
                                parameters=parsed.parameters)
        return ConversationStarted(
            conversation_id=conv_id, provider=provider, model=model,
            system=parsed.system, tools=parsed.tools, parameters=parsed.parameters,
            max_turns=10_000, metadata=meta)

    def _plan(self, exchange: Exchange, conv_id: str, builder: StateBuilder, keys: list[bytes],
              matched: int, redactor: Redactor, answered_at: float | None
              ) -> tuple[list[Event], list[int], list[bytes], StateBuilder]:
        """The events for the request's unmatched items and its answer.

        Returns ``(events, the index in events recording each new item, the new items' keys,
        builder's state with the events applied)``; ``builder`` is left as it was (a copy
        of its state checks each event).
        """
        scratch = StateBuilder(builder.state())
        events: list[Event] = []
        item_events: list[int] = []
        new_keys: list[bytes] = []

        def add(event: Event) -> int:
            event = with_valid_unicode(event)
            scratch.apply(event)
            events.append(event)
            return len(events) - 1

        def close_pending() -> None:
            for call in list(scratch.pending.values()):
                add(ToolStarted(call_id=call.id, name=call.name, arguments=call.arguments))
                add(ToolCompleted(call_id=call.id, name=call.name, success=False,
                                  content=UNANSWERED, error=UNANSWERED, source="runner"))

        parsed = exchange.parsed
        tool_ms = (None if answered_at is None
                   else round(max(0.0, exchange.started - answered_at) * 1000, 3))
        if matched == 0:  # item 0, the system prompt, is recorded by conversation_started
            new_keys.append(keys[0])
            item_events.append(-1)
        position = 1
        for message in parsed.messages:
            for piece in message_items(message):
                if position < matched:
                    position += 1
                    continue
                new_keys.append(keys[position])  # history_keys keyed it: item_key(*piece)
                position += 1
                kind, value = piece
                if kind == "result":
                    call = _answered_call(scratch, value)
                    if call is None:
                        raise InvalidTransition(scratch.lifecycle.value, "tool_completed",
                                                scratch.seq + 1,
                                                f"result for {value.call_id!r} answers no call")
                    add(ToolStarted(call_id=call.id, name=call.name, arguments=call.arguments))
                    item_events.append(add(ToolCompleted(
                        call_id=call.id, name=call.name, success=not value.is_error,
                        content=value.content, error=value.content if value.is_error else None,
                        duration_ms=tool_ms, source="runner")))
                elif kind == "user":
                    close_pending()
                    if scratch.lifecycle is Lifecycle.ANSWERED:
                        add(ConversationCompleted(final_content=scratch.final_content))
                    item_events.append(add(UserMessage(parts=value)))
                else:  # an assistant message the proxy did not answer (the client's own)
                    close_pending()
                    item_events.append(add(ModelResponded(
                        turn=scratch.turn_count + 1, parts=value, source="imported",
                        stop_reason="tool_use" if any(type(p) is ToolCall for p in value)
                        else "end_turn")))
        close_pending()
        turn = scratch.turn_count + 1
        provider, model = _answering(exchange)
        # the digest the loop would compute from this state (engine.step.request_of), so that
        # `turnlog replay` re-runs a proxied conversation like any other
        request = ModelRequest(model=scratch.model, system=scratch.system,
                               messages=tuple(scratch.message_list), tools=scratch.tools,
                               parameters=scratch.parameters)
        attempt = scratch.attempt + 1 if scratch.failure is not None else 1
        if self.fast:
            digest = self._digests.setdefault(conv_id, RequestDigest()).digest(request)
        else:
            digest = request.digest()
        add(ModelRequested(turn=turn, digest=digest, provider=provider,
                           model=model, parameters=parsed.parameters, attempt=attempt))
        response = exchange.response
        if response is not None:
            item_events.append(add(ModelResponded(
                turn=turn, parts=response.parts, stop_reason=response.stop_reason,
                usage=response.usage, provider=provider,
                model=response.model or model, response_id=response.response_id,
                raw=redactor.data(response.raw, provider),
                latency_ms=round(exchange.latency_ms, 3))))
            new_keys += message_keys(Message(role="assistant", parts=response.parts))
            if scratch.lifecycle is Lifecycle.ANSWERED:
                add(ConversationCompleted(final_content=text_of(response.parts)))
        else:
            error_type, message, retryable, interrupted, partial = exchange.failure or (
                "ProviderError", "no answer", False, False, ())
            add(ModelFailed(turn=turn, error_type=error_type, message=redactor.message(message),
                            provider=provider, model=model,
                            status=exchange.status, retryable=retryable,
                            latency_ms=round(exchange.latency_ms, 3), interrupted=interrupted,
                            partial=partial))
        return events, item_events, new_keys, scratch

    def _plan_unparsed(self, exchange: Exchange, reason: str, redactor: Redactor,
                       pending: _Pending) -> None:
        conv_id = _new_id()
        reach = BODY_LIMIT + CUT_REACH
        raw_request = redactor.cut(exchange.raw_request[:reach].decode(errors="replace"), BODY_LIMIT)
        raw_response = redactor.cut(exchange.raw_response[:reach].decode(errors="replace"),
                                    BODY_LIMIT)
        meta = {"proxy": {"wire": exchange.wire.name, "client": exchange.client,
                          "path": exchange.path, "status": exchange.status,
                          "unparsed": reason, "request": raw_request, "response": raw_response}}
        model = exchange.parsed.model if exchange.parsed is not None else ""
        started = with_valid_unicode(ConversationStarted(
            conversation_id=conv_id, provider=exchange.wire.name, model=model, metadata=meta))
        self._stage(pending, Conversation(self._journal, conv_id, StateBuilder(), 0), [
            started, ConversationFailed(error=f"unparsed exchange: {reason}",
                                        error_type="unparsed")])
        pending.exchanges.append(exchange)


def _answering(exchange: Exchange) -> tuple[str, str]:
    """The provider and model that answered: the ``--to`` target, else the client's wire."""
    if exchange.target is not None:
        return exchange.target, exchange.target_model or exchange.parsed.model
    return exchange.wire.name, exchange.parsed.model


def _new_id() -> str:
    return f"px-{uuid.uuid4().hex[:12]}"


def _answered_call(builder: StateBuilder, result: ToolResult) -> ToolCall | None:
    """The pending call ``result`` answers: by id, else the first pending of its name, else the first."""
    pending = list(builder.pending.values())
    for call in pending:
        if call.id == result.call_id or call.provider_id == result.call_id:
            return call
    for call in pending:
        if call.name == result.name:
            return call
    return pending[0] if pending else None


