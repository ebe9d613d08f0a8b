"""A conversation's events as a timeline people can read (``turnlog show``).

One line (or a few) per event, grouped by turn: what the user said, what
the model answered and which tools it called with which arguments, each
tool's result or why it was refused, model failures, usage per turn, and
how the run ended. Long values are cut at ``width`` characters unless
``full`` is asked for.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from turnlog.engine.loop.texts import readable_result

from ._common import command_hint

__all__ = ["header", "iter_timeline", "timeline", "timeline_of"]

_WIDTH = 200


def _clip(text: str, full: bool, width: int = _WIDTH) -> str:
    text = text if full else " ".join(text.split())  # a clipped line stays one line
    if full or len(text) <= width:
        return text
    cut = text[:width]
    space = cut.rfind(" ")
    if space > width * 2 // 3:  # end on a whole word when one ends near the limit
        cut = cut[:space]
    return f"{cut}… ({len(text):,} chars, --full for all)"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _indent(text: str, prefix: str) -> str:
    return text.replace("\n", "\n" + prefix)


def header(info: dict[str, Any], started: dict[str, Any], full: bool,
           db_path: str | None = None) -> list[str]:
    """The lines above the timeline: identity, status, lineage, system prompt, tools
    (``db_path``: the journal the commands it names must read)."""
    who = "/".join(x for x in (started.get("provider"), started.get("model")) if x) or "-"
    lines = [f"conversation {info['conversation_id']}  {who}  mode={started.get('mode', 'chat')}  "
             f"status={info['status']}  turns={info['turn_count']}  events={info['events']}"]
    fork = started.get("fork")
    if fork:
        lines.append(f"  fork of {fork['conversation_id']} at seq {fork['seq']} "
                     f"({command_hint('show', fork['conversation_id'], db_path=db_path)} "
                     "for the shared history)")
    replay = started.get("replay_of")
    if replay:
        lines.append(f"  replay of {replay['conversation_id']} "
                     f"(recorded tools: {replay.get('tools', 'recorded')})")
    for child in info.get("forks", ()):
        lines.append(f"  forked as {child['conversation_id']} at seq {child['fork_seq']}")
    for child in info.get("replays", ()):
        lines.append(f"  replayed as {child}")
    if started.get("system"):
        lines.append("  system: " + _indent(_clip(started["system"], full), "          "))
    tools = [t["name"] for t in started.get("tools", ())]
    if tools:
        lines.append("  tools: " + ", ".join(tools))
    return lines


def _usage(u: dict[str, Any]) -> str:
    extra = "".join(f", {label} {u[k]:,}" for k, label in
                    (("cached_input_tokens", "cached"), ("cache_write_tokens", "cache write"),
                     ("reasoning_tokens", "reasoning")) if u.get(k))
    return f"usage: input {u.get('input_tokens', 0):,}{extra}; output {u.get('output_tokens', 0):,}"


def _parts(parts: Iterable[dict[str, Any]], full: bool) -> list[str]:
    lines = []
    for p in parts:
        kind = p.get("type")
        if kind == "text":
            lines.append("      " + _indent(_clip(p["text"], full), "      "))
        elif kind == "thinking":
            text = p.get("text", "")
            lines.append("      (thinking) " + _clip(text, full) if text else
                         "      (thinking, not shown: the provider returned only its signature)")
        elif kind == "tool_call":
            bad = f"  INVALID: {p['invalid']}" if p.get("invalid") else ""
            args = p.get("raw_arguments") if p.get("invalid") else _json(p.get("arguments", {}))
            lines.append(f"      -> {p['name']}({_clip(args or '', full)})  [{p['id']}]{bad}")
        elif kind == "image":
            lines.append(f"      (image {p.get('media_type', '')})")
    return lines


def _event(seq: int, type_: str, p: dict[str, Any], full: bool) -> list[str]:
    at = f"{seq:>4}  "
    match type_:
        case "conversation_started":
            return [f"{at}started"]
        case "user_message":
            text = "".join(x.get("text", "") for x in p.get("parts", ()) if x.get("type") == "text")
            return [f"{at}user: " + _indent(_clip(text, full), "        ")]
        case "model_requested":
            who = "/".join(x for x in (p.get("provider"), p.get("model")) if x)
            return [f"--- turn {p['turn']}" + (f"  ({who})" if who else "")]
        case "model_responded":
            who = "/".join(x for x in (p.get("provider"), p.get("model")) if x)
            took = f" in {p['latency_ms']:,.0f} ms" if p.get("latency_ms") is not None else ""
            source = f" [{p['source']}]" if p.get("source", "provider") != "provider" else ""
            lines = [f"{at}model{' ' + who if who else ''} (turn {p['turn']}, "
                     f"stop: {p.get('stop_reason', 'end_turn')}{took}){source}:"]
            lines += _parts(p.get("parts", ()), full)
            lines.append("      " + _usage(p.get("usage", {})))
            return lines
        case "model_failed":
            status = f" (HTTP {p['status']})" if p.get("status") else ""
            retry = ", retryable" if p.get("retryable") else ""
            return [f"{at}MODEL FAILED {p['error_type']}{status}{retry}: {_clip(p['message'], full)}"]
        case "tool_started":
            dup = "  (duplicate let through: observe-only policy)" if p.get("duplicate") else ""
            return [f"{at}tool {p['name']} started  [{p['call_id']}]{dup}"]
        case "tool_progressed":
            return [f"{at}tool {p['name']} {_news(p.get('data') or {}, full)}  [{p['call_id']}]"]
        case "tool_completed":
            took = f" in {p['duration_ms']:,.0f} ms" if p.get("duration_ms") is not None else ""
            source = f" [{p['source']}]" if p.get("source", "live") != "live" else ""
            if p["success"]:  # --full: the exact text the model read
                said = p["content"] if full else readable_result(p["content"])
                return [f"{at}tool {p['name']} ok{took}{source}"
                        + (f": {_clip(said, full)}" if said else "")]
            return [f"{at}tool {p['name']} FAILED{took}{source}: "
                    f"{_clip(p.get('error') or p['content'], full)}"]
        case "tool_call_rejected":
            args = f" {_clip(_json(p['arguments']), full)}" if p.get("arguments") else ""
            return [f"{at}tool {p['name']} REFUSED ({p['reason']}){args}  [{p['call_id']}]",
                    f"      sent back: {_clip(p['content'], full)}"]
        case "approval_requested":
            why = f": {_clip(p['reason'], full)}" if p.get("reason") else ""
            return [f"{at}tool {p['name']} waits for approval{why}  [{p['call_id']}]"]
        case "approval_decided":
            done = "APPROVED" if p["decision"] == "approve" else "DENIED"
            why = f": {_clip(p['reason'], full)}" if p.get("reason") else ""
            lines = [f"{at}{done} by {p['approver']}{why}  [{p['call_id']}]"]
            if p.get("arguments") is not None:
                lines.append(f"      with edited arguments {_clip(_json(p['arguments']), full)}")
            return lines
        case "turn_limit_reached":
            pending = ", the model still wanted tools" if p.get("pending_tool_calls") else ""
            return [f"{at}HALTED: turn limit {p['max_turns']} reached after "
                    f"{p['turn_count']} turns{pending}"]
        case "conversation_halted":
            return [f"{at}HALTED: {p['reason']} ({p.get('refusals', 0)} refusals)"]
        case "conversation_completed":
            return [f"{at}completed: {_clip(p.get('final_content', ''), full)}"]
        case "conversation_failed":
            return [f"{at}FAILED: {_clip(p['error'], full)}"]
        case "run_interrupted":
            reason = p.get("reason", "sigint")  # the payload omits the default
            why = p.get("message") or {"sigint": "Ctrl-C", "sigterm": "terminated"}.get(reason,
                                                                                       reason)
            return [f"{at}INTERRUPTED ({why}): the run stopped unfinished; "
                    "`turnlog resume` continues it"]
    return [f"{at}{type_} {_clip(_json(p), full)}"]


def timeline_of(journal: Any, conversation_id: str, full: bool = False) -> list[str]:
    """The timeline lines of one conversation's own events in ``journal``."""
    return timeline(({"seq": e.seq, "type": e.type, "payload": json.loads(e.payload)}
                     for e in journal.read(conversation_id)), full)


def timeline(events: Iterable[dict[str, Any]], full: bool = False) -> list[str]:
    """The timeline lines of ``events`` (dicts with ``seq``, ``type``, ``payload``)."""
    return list(iter_timeline(events, full))


def iter_timeline(events: Iterable[dict[str, Any]], full: bool = False) -> Iterator[str]:
    """:func:`timeline`'s lines as ``events`` are read (a long conversation is shown without
    holding it)."""
    for e in events:
        yield from _event(e["seq"], e["type"], e["payload"], full)


def _news(data: dict[str, Any], full: bool) -> str:
    """One line for news of a running call (``tool_progressed``; MCP's kinds by name)."""
    kind = data.get("kind")
    if kind == "input_required":
        asked = ", ".join(f"{k} ({v.get('method', '?')})"
                          for k, v in (data.get("inputRequests") or {}).items())
        return f"input required (round {data.get('round', '?')}): {asked or 'state only'}"
    if kind == "elicitation":
        content = f" {_clip(_json(data['content']), full)}" if data.get("content") else ""
        return (f"elicitation {data.get('key', '')!r} answered {data.get('action')}{content} "
                f"by {data.get('approver')}")
    if kind == "task":
        said = f": {_clip(data['statusMessage'], full)}" if data.get("statusMessage") else ""
        return f"task {data.get('taskId')} {data.get('status')}{said}"
    if kind == "reissued":
        return (f"request re-issued (attempt {data.get('attempt')}): "
                f"{_clip(str(data.get('error', '')), full)}")
    return f"news: {_clip(_json(data), full)}"
