"""Import a transcript — any supported format, mixed entries allowed — as one conversation.

>>> from turnlog.journal import Journal
>>> j = Journal(":memory:")
>>> r = import_entries(j, [
...     {"role": "user", "content": "draft 5 claims", "timestamp": "2025-08-27T21:40:00.000Z"},
...     {"role": "assistant", "content": "Generated Patent Claims: 1. A method"},
...     {"input": "refine claim 1", "context": "patent_streaming"}], conversation_id="c1")
>>> r.conversation_id, r.events, r.formats
('c1', 5, {'api': 2, 'orchestrator': 1})

The file (``read_transcript``) is a JSON array of entries, JSONL (one entry
per line), a request body (``{"messages": [...], "system"?}`` for OpenAI or
Anthropic, ``{"contents": [...], "systemInstruction"?}`` for Gemini), an
OTLP/JSON trace whose GenAI spans carry messages
(``engine.formats.otlp_import``), or ``turnlog show --json`` output. Each
entry's format is detected on its own (``engine.formats.detect``) unless ``fmt`` forces one. The entries of
each wire in ``engine.providers.registry`` are read with its own ``unmap_messages``; a run of
consecutive entries of one provider format is read together, so tool
results find their calls' names.

Import is atomic: every entry is normalised and the whole history folded
through the lifecycle (``engine.formats.assemble``) before one journal
transaction writes it all. An entry no format recognises raises
``UnknownEntryError`` (its index and keys); a history the lifecycle refuses
raises ``TranscriptOrderError`` (the entry index). Either way nothing is
written. System messages, wherever they stand, become the conversation's
system text (joined by blank lines).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from turnlog.journal import JournalProtocol, StreamNotFoundError

from turnlog.engine.model.conversation import Conversation
from turnlog.engine.model.canonical import valid_unicode
from ..errors import (
    ConversationExistsError,
    CorruptEventError,
    FormatError,
    NestingError,
    UnknownEntryError,
)
from turnlog.engine.model.events import (
    EVENT_TYPES,
    ConversationStarted,
    Event,
    ModelResponded,
    ToolSpec,
    decode_event,
    with_valid_unicode,
)
from turnlog.engine.model.messages import EXTRA, Message, Opaque, Text, ToolCall, ToolResult, Usage
from turnlog.engine.model.nesting import check_depth, too_deep
from ..providers.registry import WIRES, wire
from .assemble import Item, assemble
from .cassette import split_document
from .datamachine import Truncated, duplicate_tool_name, extract_tool_call, extract_tool_response
from .detect import AMBIGUOUS_TEXT, FORMATS, PROVIDER_FORMATS, detect_entry
from .otlp_import import is_otlp, otlp_transcript

__all__ = ["MAX_IMPORT_BYTES", "MAX_IMPORT_ENTRIES", "ImportResult", "Progress",
           "import_entries", "import_file", "read_file", "read_transcript"]

_PROGRESS_EVERY = 64  # entries between two progress reports

#: The largest transcript file an import reads. An import is atomic and holds the whole
#: transcript in memory (parsed, normalised and folded before one transaction writes it):
#: its peak is about 4 times the file (a 200 MB file of long messages: 750 MB) plus about
#: 3 KB per entry (a million tiny messages in 41 MB: 2.9 GB). These bounds keep it near 1 GB.
MAX_IMPORT_BYTES = 256 * 1024 * 1024
#: The most entries one import takes (see ``MAX_IMPORT_BYTES``).
MAX_IMPORT_ENTRIES = 250_000


class ImportResult(msgspec.Struct, frozen=True, kw_only=True):
    """What an import wrote: the conversation, its event count and entries per format.

    ``warnings`` name what was kept without being understood (an entry's
    unknown keys, kept in an ``extra`` part and exported back to their wire).
    """

    conversation_id: str
    events: int
    formats: dict[str, int]
    status: str = "active"
    warnings: tuple[str, ...] = ()


def _decode_text(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{source}: not UTF-8 text (bad byte at offset {exc.start})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _loads(text: str) -> Any:
    # NaN and Infinity are not JSON; the journal could not store them faithfully
    return json.loads(text, parse_constant=_no_constant)


def _parse(text: str, source: str) -> Any:
    """One JSON document, or JSONL (one per line)."""
    try:
        return _loads(text)
    except ValueError as whole:
        problem = f"{source}: not JSON: {whole}"
    # JSONL lines end at "\n" only: str.splitlines would also split inside strings at U+0085 etc.
    lines = [(n, line) for n, line in enumerate(text.split("\n"), 1) if line.strip()]
    if len(lines) < 2:
        raise FormatError(problem)
    doc = []
    for n, line in lines:
        try:
            doc.append(_loads(line))
        except ValueError as exc:
            raise FormatError(f"{source} line {n}: not JSON: {exc}") from None
    return doc


def read_transcript(data: bytes | str, source: str = "transcript") -> tuple[list[Any], dict[str, Any]]:
    """``(entries, envelope)`` from a file's bytes; ``envelope`` holds a request body's system.

    Raises ``FormatError`` saying where for text that is not UTF-8, JSON or JSONL.
    """
    text = _decode_text(data, source) if isinstance(data, bytes) else data
    try:
        doc = _parse(text, source)
    except RecursionError:  # deeper than Python's parser goes: far past the limit
        raise NestingError(too_deep(source)) from None
    check_depth(doc, source)  # the one nesting limit (engine.nesting), naming the file
    if isinstance(doc, list):
        return doc, {}
    if isinstance(doc, dict):
        if is_otlp(doc):  # an OTLP/JSON trace: the conversation its GenAI spans carry
            return otlp_transcript(doc)
        return split_document(doc) or ([doc], {})
    raise FormatError(f"{source}: expected a JSON array or object of entries, "
                      f"got {type(doc).__name__}")


def _stamp(value: Any, index: int) -> tuple[str | None, str | None]:
    """``(original timestamp, journal recorded_at)`` from an entry's ``timestamp``."""
    if value is None:
        return None, None
    if not isinstance(value, str):
        raise FormatError(f"entry {index}: timestamp must be a string, got {type(value).__name__}")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value, None  # kept on the event; the journal records the import time
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        moment = moment.astimezone(UTC)
    except (OverflowError, ValueError):
        return value, None
    return value, moment.isoformat(timespec="microseconds")[:26] + "Z"


def _keys(entry: Any) -> list[str]:
    return sorted(map(str, entry)) if isinstance(entry, dict) else []


def _unknown(entry: Any, index: int, fmt: str | None = None) -> UnknownEntryError:
    what = (f"keys {_keys(entry)}" if isinstance(entry, dict)
            else f"a JSON {type(entry).__name__}")
    if isinstance(entry, dict) and "role" in entry:
        what += f", role {str(entry.get('role'))[:40]!r}"
    expected = f"{'an' if fmt[:1] in 'aeiou' else 'a'} {fmt} entry" if fmt else f"an entry in one of: {', '.join(FORMATS)}"
    return UnknownEntryError(f"entry {index}: unknown entry ({what}); expected {expected}",
                             index=index, keys=_keys(entry))


# --- one entry at a time ------------------------------------------------------


def _api(entry: dict[str, Any], index: int) -> list[Item]:
    role, content = entry.get("role"), entry.get("content")
    if role not in ("user", "assistant", "system") or not isinstance(content, str):
        raise _unknown(entry, index, "api")
    original, stamp = _stamp(entry.get("timestamp"), index)
    if role == "system":
        return [Item("system", index, content=content)]
    # keys no format defines are kept (exported to no wire) and reported, never dropped
    extra = {k: v for k, v in entry.items() if k not in ("role", "content", "timestamp")}
    kept = (Opaque(provider="api", kind=EXTRA, data=extra),) if extra else ()
    return [Item(role, index, (Text(text=content), *kept), original, stamp)]


def _orchestrator(entry: dict[str, Any], index: int) -> list[Item]:
    request, context = entry.get("input"), entry.get("context")
    if not isinstance(request, str) or not (context is None or isinstance(context, str)) or (
            entry.keys() - {"input", "context", "timestamp"}):
        raise _unknown(entry, index, "orchestrator")
    original, stamp = _stamp(entry.get("timestamp"), index)
    return [Item("user", index, (Text(text=request),), original, stamp, context=context)]


def _datamachine(entry: dict[str, Any], index: int) -> list[Item]:
    original, stamp = _stamp(entry.get("timestamp"), index)
    call = extract_tool_call(entry)
    if call is not None:
        # a value the text cut off is stored as the text shows it ("first 50 chars..."):
        # the full value is gone, and the journal holds JSON, not markers
        arguments = {k: f"{v.prefix}..." if type(v) is Truncated else v
                     for k, v in call.parameters.items()}
        raw = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
        part = ToolCall(id=f"dm_{index}", name=call.tool_name, arguments=arguments,
                        raw_arguments=raw)
        return [Item("assistant", index, (part,), original, stamp, provider="",
                     turn_hint=call.turn or None)]
    response = extract_tool_response(entry)
    if response is not None:
        return [Item("result", index, timestamp=original, recorded_at=stamp,
                     content=response.content, success=response.success, data=response.data,
                     error=response.error)]
    if duplicate_tool_name(entry) is not None:
        return [Item("duplicate", index, timestamp=original, recorded_at=stamp,
                     content=entry["content"])]
    return _api(entry, index)


def _turnlog(entry: dict[str, Any], index: int) -> list[Item]:
    payload = entry.get("payload", entry)
    kind = entry.get("type")
    if not isinstance(payload, dict) or not isinstance(kind, str) or kind not in EVENT_TYPES:
        raise _unknown(entry, index, "turnlog")
    payload, repaired = valid_unicode({**payload, "type": kind})
    version = entry.get("version", 1)
    try:
        event = decode_event(kind, version if isinstance(version, int) else 1,
                             json.dumps(payload), where=f"entry {index}")
    except (CorruptEventError, TypeError, ValueError) as exc:
        raise FormatError(f"entry {index}: not a valid turnlog {kind!r} event: {exc}") from None
    if repaired:  # record where the invalid Unicode was (Event.replaced)
        original = entry.get("payload", entry)
        fields = sorted(k for k in original if k in event.__struct_fields__
                        and valid_unicode(original[k])[1])
        event = msgspec.structs.replace(event, replaced=tuple(fields))
    _, stamp = _stamp(entry.get("recorded_at"), index)
    return [Item("event", index, recorded_at=stamp, event=event)]


_SINGLE = {"api": _api, "orchestrator": _orchestrator, "datamachine": _datamachine,
           "turnlog": _turnlog}


# --- runs of provider entries ---------------------------------------------------


def _unmap(fmt: str, entries: list[Any], envelope: dict[str, Any]) -> tuple[str, list[Message]]:
    module = wire(fmt)
    system = envelope.get(module.SYSTEM_KEY) if module.SYSTEM_KEY else None
    return module.unmap_messages(system, entries)


def _message_items(message: Message, index: int, entry: Any) -> list[Item]:
    original, stamp = _stamp(entry.get("timestamp"), index)
    if message.role == "tool":
        return [Item("result", index, timestamp=original, recorded_at=stamp, call_id=p.call_id,
                     name=p.name, content=p.content, success=not p.is_error,
                     error=p.content if p.is_error else None)
                for p in message.parts if type(p) is ToolResult]
    if message.role == "system":
        return [Item("system", index, content="".join(
            p.text for p in message.parts if type(p) is Text))]
    return [Item(message.role, index, message.parts, original, stamp,
                 provider=message.provider or "")]


def _file_terms(message: str, fmt: str, single: bool) -> str:
    """A reader's message in the file's terms: one entry is not ``messages[0]`` to the user."""
    if single:
        for head in (f"{fmt} messages[0].", f"{fmt} messages[0]: ", f"{fmt} contents[0].",
                     f"{fmt} messages[0].content", f"{fmt} contents[0].parts"):
            if message.startswith(head):
                return f"{message[len(head):].lstrip('.: ') or message} ({fmt})"
    return message


def _read_run(fmt: str, entries: list[Any], envelope: dict[str, Any], where: str
              ) -> tuple[str, list[Message]]:
    try:
        return _unmap(fmt, entries, envelope)
    except FormatError as exc:
        text = _file_terms(str(exc), fmt, where.startswith("entry "))
        raise FormatError(f"{where}: {text}") from None
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        # the provider's reader met a shape it does not check; still the input's fault
        raise FormatError(f"{where}: not a readable {fmt} message "
                          f"({type(exc).__name__}: {exc})") from None


def _provider_run(fmt: str, run: list[tuple[int, Any]]) -> list[Item]:
    counts = [(index, entry, len(_read_run(fmt, [entry], {}, f"entry {index}")[1]))
              for index, entry in run]
    system, messages = _read_run(fmt, [e for _, e in run], {}, f"entries {run[0][0]}-{run[-1][0]}")
    items: list[Item] = []
    if system:
        items.append(Item("system", run[0][0], content=system))
    at = 0
    for index, entry, n in counts:
        for message in messages[at:at + n]:
            items.extend(_message_items(message, index, entry))
        at += n
    return items


def _envelope_system(envelope: dict[str, Any]) -> list[Item]:
    """The system text of a request body: read by the wire the envelope names, else by
    the first wire whose system key it holds."""
    fmt = envelope.get("format")
    for name in [fmt] if fmt in WIRES else WIRES:
        key = wire(name).SYSTEM_KEY
        if key is not None and envelope.get(key) is not None:
            text, _ = _read_run(name, [], {key: envelope[key]}, key)
            return [Item("system", 0, content=text)] if text else []
    return []


Progress = Callable[[int, int], None]
"""``progress(done, total)``: ``done`` of ``total`` steps of an import are finished."""


def normalise(entries: Sequence[Any], fmt: str | None = None,
              envelope: dict[str, Any] | None = None,
              progress: Progress | None = None) -> tuple[list[Item], dict[str, int]]:
    """Every entry as ``Item``s, in order, and how many entries each format had.

    ``progress(done, len(entries) + 1)`` hears about each entry read (the last step
    is the import's write).
    """
    envelope = envelope or {}
    fmt = fmt or envelope.get("format")  # a request body of one wire is read as that wire
    if fmt is not None and fmt not in FORMATS:
        raise FormatError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    detected: list[tuple[int, Any, str]] = []
    for index, entry in enumerate(entries):
        kind = fmt or detect_entry(entry)
        if kind == AMBIGUOUS_TEXT:
            kind = "openai" if detected and detected[-1][2] == "openai" else "anthropic"
        if kind is None or (fmt is not None and not isinstance(entry, dict)):
            raise _unknown(entry, index, fmt)
        detected.append((index, entry, kind))
    items: list[Item] = _envelope_system(envelope)
    counts: dict[str, int] = {}
    run: list[tuple[int, Any]] = []
    total = len(detected) + 1
    for pos, (index, entry, kind) in enumerate(detected):
        if progress is not None and pos % _PROGRESS_EVERY == 0:
            progress(pos, total)
        counts[kind] = counts.get(kind, 0) + 1
        if kind in PROVIDER_FORMATS:
            run.append((index, entry))
            nxt = detected[pos + 1][2] if pos + 1 < len(detected) else None
            if nxt != kind:
                items.extend(_provider_run(kind, run))
                run = []
        else:
            items.extend(_SINGLE[kind](entry, index))
    return items, counts


def _spec(tool: dict[str, Any]) -> ToolSpec:
    fn = tool.get("function", tool)
    schema = fn.get("parameters") or fn.get("input_schema") or fn.get("parametersJsonSchema")
    if not isinstance(fn.get("name"), str):
        raise FormatError(f"tools: a tool without a name ({sorted(fn)[:6]})")
    return ToolSpec(name=fn["name"], description=fn.get("description") or "",
                    parameters=schema if isinstance(schema, dict)
                    else {"type": "object", "properties": {}})


def _tools(envelope: dict[str, Any]) -> tuple[list[ToolSpec], list[Any]]:
    """A request's function tools as specs, and its other (server-side) tools verbatim.

    ``tool_specs`` are specs a wire's own ``read_request`` already read.
    """
    specs: list[ToolSpec] = list(envelope.get("tool_specs") or ())
    server: list[Any] = []
    tools = envelope.get("tools") if isinstance(envelope.get("tools"), list) else []
    functions = envelope.get("functions") if isinstance(envelope.get("functions"), list) else []
    for tool in [*tools, *functions]:
        if not isinstance(tool, dict):
            raise FormatError(f"tools: expected objects, got {type(tool).__name__}")
        declarations = tool.get("functionDeclarations", tool.get("function_declarations"))
        if isinstance(declarations, list):
            specs.extend(_spec(d) for d in declarations if isinstance(d, dict))
        elif "function" in tool or "input_schema" in tool or (
                "parameters" in tool and tool.get("type", "function") == "function"):
            specs.append(_spec(tool))
        else:
            server.append(tool)
    return specs, server


def _warnings(items: list[Item]) -> tuple[str, ...]:
    """One warning per entry whose unknown keys were kept as an ``extra`` part."""
    from ..providers.openai import MESSAGE_KEYS

    out = []
    for item in items:
        for part in item.parts:
            if type(part) is Opaque and part.kind == EXTRA and isinstance(part.data, dict):
                unknown = sorted(k for k in part.data if k not in MESSAGE_KEYS)
                back = ("exported to no wire" if part.provider == "api"
                        else f"exported back to {part.provider}")
                if unknown:
                    out.append(f"entry {item.index}: unknown keys kept as `extra` and {back}: "
                               f"{', '.join(unknown)}")
    return tuple(dict.fromkeys(out))


def _started(items: list[Item], conversation_id: str, formats: dict[str, int],
             envelope: dict[str, Any] | None = None) -> tuple[ConversationStarted, str | None]:
    """The first event (a turnlog ``conversation_started`` entry, or a new one) and its stamp."""
    systems = [i.content for i in items if i.kind == "system" and i.content.strip()]
    first = next((i for i in items if i.kind != "system"), None)
    if first is not None and type(first.event) is ConversationStarted:
        items.remove(first)
        started = msgspec.structs.replace(first.event, conversation_id=conversation_id, fork=None)
        if systems:
            started = msgspec.structs.replace(
                started, system="\n\n".join([started.system, *systems]).strip())
        return started, first.recorded_at
    envelope = envelope or {}
    specs, server = _tools(envelope)
    metadata: dict[str, Any] = {"imported_formats": sorted(formats)}
    if server:
        metadata["server_tools"] = server
    if envelope.get("parameters"):
        metadata["request_parameters"] = envelope["parameters"]
    model = envelope.get("model") if isinstance(envelope.get("model"), str) else ""
    # the provider whose wire the model's turns came in (so the audit attributes and prices
    # them); "imported" when the file mixes providers' wires or has none
    wires = [f for f in formats if f in PROVIDER_FORMATS]
    provider = (envelope.get("wire") or envelope.get("format")
                or (wires[0] if len(wires) == 1 else "imported"))
    return ConversationStarted(conversation_id=conversation_id, provider=provider,
                               model=model, system="\n\n".join(systems), tools=tuple(specs),
                               metadata=metadata), (first.recorded_at if first else None)


def import_entries(journal: JournalProtocol, entries: Sequence[Any], *, fmt: str | None = None,
                   conversation_id: str | None = None,
                   envelope: dict[str, Any] | None = None,
                   progress: Progress | None = None) -> ImportResult:
    """Import ``entries`` as one new conversation (atomic; see the module doc).

    ``conversation_id`` defaults to a fresh ``imp-…`` id; an id the journal
    already has raises ``ConversationExistsError``. ``progress(done, total)``,
    when given, hears how far the import is: one step per entry, one for the write.
    """
    if not isinstance(entries, Sequence) or isinstance(entries, (str, bytes)):
        raise FormatError("a transcript is a list of entries")
    if not entries:
        raise FormatError("the transcript has no entries")
    _check_count(entries)
    # one nesting limit (engine.nesting), before any walk of the entries could recurse
    check_depth(list(entries), "transcript")
    check_depth(envelope or {}, "transcript envelope")
    items, formats = normalise(entries, fmt, envelope, progress)
    cid = conversation_id or f"imp-{uuid.uuid4().hex[:12]}"
    if valid_unicode(cid)[1]:
        raise FormatError(f"conversation id {cid!r} is not valid Unicode")
    try:
        journal.stream(cid)
    except StreamNotFoundError:
        pass
    else:
        raise ConversationExistsError(f"conversation {cid!r} already exists in {journal.path}")
    started, stamps0 = _started(items, cid, formats, envelope)
    events, stamps, builder = assemble(started, [i for i in items if i.kind != "system"])
    events = _with_response_usage(events, envelope or {})
    stamps[0] = stamps0
    events = [with_valid_unicode(e) for e in events]  # invalid Unicode: U+FFFD, recorded
    if progress is not None:
        progress(len(entries), len(entries) + 1)
    Conversation.start(journal, events[0], stamps[0], rest=events[1:], rest_recorded_at=stamps[1:])
    if progress is not None:
        progress(len(entries) + 1, len(entries) + 1)
    return ImportResult(conversation_id=cid, events=len(events), formats=formats,
                        status=builder.state().status, warnings=_warnings(items))


def _with_response_usage(events: list[Event], envelope: dict[str, Any]) -> list[Event]:
    """A cassette's response usage on the model turn it answered (the last one)."""
    raw, name = envelope.get("usage"), envelope.get("wire")
    if not isinstance(raw, dict) or name not in PROVIDER_FORMATS:
        return events
    usage = wire(name).map_usage(raw)
    last = max((i for i, e in enumerate(events) if type(e) is ModelResponded), default=None)
    if last is None or events[last].usage != Usage():
        return events
    return [*events[:last], msgspec.structs.replace(events[last], usage=usage), *events[last + 1:]]


def _check_count(entries: Sequence[Any], source: str = "the transcript") -> None:
    if len(entries) > MAX_IMPORT_ENTRIES:
        raise FormatError(
            f"{source} has {len(entries):,} entries and an import takes at most "
            f"{MAX_IMPORT_ENTRIES:,}: it is atomic and holds the whole transcript in memory "
            "(about 3 KB per entry); split it into several conversations")


def read_file(path: str | Path) -> tuple[list[Any], dict[str, Any]]:
    """``read_transcript`` of the file at ``path``, refusing (``FormatError``) a file over
    ``MAX_IMPORT_BYTES`` before reading it and one over ``MAX_IMPORT_ENTRIES`` entries."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_IMPORT_BYTES:
            raise FormatError(
                f"{path} has {size / 2**20:,.0f} MiB and an import reads at most "
                f"{MAX_IMPORT_BYTES / 2**20:,.0f} MiB: it is atomic and holds the whole "
                "transcript in memory (about 4 times the file); split it into several "
                "conversations")
        data = path.read_bytes()
    except OSError as exc:
        raise FormatError(f"cannot read {path}: {exc.strerror or exc}") from None
    entries, envelope = read_transcript(data, str(path))
    del data
    _check_count(entries, str(path))
    return entries, envelope


def import_file(journal: JournalProtocol, path: str | Path, *, fmt: str | None = None,
                conversation_id: str | None = None,
                progress: Progress | None = None) -> ImportResult:
    """Read ``path`` (``read_file``) and ``import_entries`` it (``progress`` too)."""
    entries, envelope = read_file(path)
    return import_entries(journal, entries, fmt=fmt, conversation_id=conversation_id,
                          envelope=envelope, progress=progress)
