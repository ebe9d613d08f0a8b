"""A conversation's events as timeline entries (structured data for the viewer and the report).

Each entry is a dict with a ``kind``: ``user``, ``turn`` (a model request),
``assistant`` (its ``parts``: text, thinking, tool calls, each call with the
``outcome`` its result or refusal recorded), ``tool`` and ``refusal`` (a result
whose call is not on the page), ``failure`` (a model failure), ``end``
(completed, failed, halted, interrupted), ``approval`` (a call's approval whose call is
not on the page; shown calls carry theirs as ``approval``) and ``other``. Values stay as
recorded: escaping is the renderer's job.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import msgspec

from turnlog.engine.model.events import Charge
from turnlog.engine.model.messages import USAGE_COUNTS, Usage
from .costs import call_cost
from .prices import Prices

__all__ = ["entries"]

_USAGE_FIELDS = USAGE_COUNTS


def _text(parts: list[dict[str, Any]]) -> str:
    return "".join(p.get("text", "") for p in parts if p.get("type") == "text")


def _arguments(p: dict[str, Any]) -> str:
    if p.get("invalid"):
        return p.get("raw_arguments") or ""
    return json.dumps(p.get("arguments", {}), ensure_ascii=False, indent=2, sort_keys=True)


def _parts(parts: list[dict[str, Any]], calls: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    shown = []
    for p in parts:
        kind = p.get("type")
        if kind == "tool_call":
            call = {"type": "tool_call", "id": p.get("id", ""), "name": p.get("name", ""),
                    "arguments": _arguments(p), "invalid": p.get("invalid"),
                    "outcome": {"status": "pending"}}
            calls[call["id"]] = call
            shown.append(call)
        elif kind == "thinking":
            shown.append({"type": "thinking", "text": p.get("text", "")})
        elif kind == "text":
            shown.append({"type": "text", "text": p.get("text", "")})
        else:
            shown.append({"type": kind or "part", "text": json.dumps(p, ensure_ascii=False)})
    return shown


def _usage(p: dict[str, Any]) -> Usage:
    u = p.get("usage") or {}
    return Usage(**{k: u[k] for k in _USAGE_FIELDS if isinstance(u.get(k), int)})


def _end(type_: str, p: dict[str, Any]) -> dict[str, Any] | None:
    match type_:
        case "conversation_completed":
            return {"status": "completed", "text": p.get("final_content", "")}
        case "conversation_failed":
            return {"status": "failed", "text": p.get("error", "")}
        case "turn_limit_reached":
            return {"status": "halted", "text": f"turn limit {p.get('max_turns')} reached "
                                                f"after {p.get('turn_count')} turns"}
        case "conversation_halted":
            return {"status": "halted", "text": p.get("reason", "")}
        case "run_interrupted":
            return {"status": "interrupted", "text": p.get("message") or p.get("reason", "sigint")}
    return None


#: An approval's decision fields before it is decided.
_UNDECIDED = {"approver": None, "reason": None, "decided_at": None, "waited_s": None,
              "arguments": None}


def _approval_of(out: list[dict[str, Any]], calls: dict[str, dict[str, Any]],
                 call_id: str) -> dict[str, Any]:
    """The approval entry a decision on ``call_id`` completes (a new one if none is shown)."""
    call = calls.get(call_id)
    if call is not None and "approval" in call:
        return call["approval"]
    for entry in reversed(out):
        if entry.get("kind") == "approval" and entry.get("call_id") == call_id:
            return entry["approval"]
    return {"status": "waiting", **_UNDECIDED}


def _seconds(start: str | None, end: str | None) -> float | None:
    try:
        a, b = datetime.fromisoformat(start or ""), datetime.fromisoformat(end or "")
        return max((b - a).total_seconds(), 0.0)
    except (ValueError, TypeError):  # unreadable, or one with a time zone and one without
        return None


def entries(events: list[tuple[int, str, str, dict[str, Any]]], started: dict[str, Any],
            prices: Prices) -> list[dict[str, Any]]:
    """Timeline entries of ``events`` (``(seq, type, recorded_at, payload)`` in seq order).

    ``started`` is the conversation's start payload (its provider and model
    stand in for a response's own). Each turn costs what was recorded with it,
    else what ``prices`` say (``engine.audit.costs.call_cost``).
    """
    out: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    provider, model = started.get("provider") or "", started.get("model") or ""
    for seq, type_, at, p in events:
        base = {"seq": seq, "at": at}
        if type_ == "conversation_started":
            continue
        if type_ == "user_message":
            out.append({**base, "kind": "user", "text": _text(p.get("parts", []))})
        elif type_ == "model_requested":
            out.append({**base, "kind": "turn", "turn": p.get("turn"),
                        "attempt": p.get("attempt", 1),
                        "who": "/".join(x for x in (p.get("provider"), p.get("model")) if x)})
        elif type_ == "model_responded":
            usage = _usage(p)
            out.append({**base, "kind": "assistant", "turn": p.get("turn"),
                        "who": "/".join(x for x in (p.get("provider"), p.get("model")) if x),
                        "parts": _parts(p.get("parts", []), calls),
                        "stop_reason": p.get("stop_reason", "end_turn"),
                        "source": p.get("source", "provider"),
                        "usage": {k: getattr(usage, k) for k in _USAGE_FIELDS},
                        "cost": call_cost(prices, p.get("provider") or provider,
                                          p.get("model") or model, at, usage,
                                          msgspec.convert(p["charge"], Charge)
                                          if isinstance(p.get("charge"), dict) else None),
                        "ms": p.get("latency_ms")})
        elif type_ == "model_failed":
            out.append({**base, "kind": "failure", "turn": p.get("turn"),
                        "error_type": p.get("error_type", ""), "message": p.get("message", ""),
                        "status": p.get("status"), "retryable": p.get("retryable", False),
                        "ms": p.get("latency_ms")})
        elif type_ == "tool_started":
            call = calls.get(p.get("call_id", ""))
            if call is not None:
                call["outcome"] = {"status": "started", "seq": seq,
                                   "duplicate": p.get("duplicate", False)}
        elif type_ == "tool_completed":
            outcome = {"status": "ok" if p.get("success") else "failed", "seq": seq,
                       "content": p.get("content", ""), "error": p.get("error"),
                       "ms": p.get("duration_ms"), "source": p.get("source", "live")}
            call = calls.get(p.get("call_id", ""))
            if call is not None:
                call["outcome"] = outcome
            else:
                out.append({**base, "kind": "tool", "name": p.get("name", ""),
                            "call_id": p.get("call_id", ""), "outcome": outcome})
        elif type_ == "tool_call_rejected":
            outcome = {"status": "refused", "seq": seq, "reason": p.get("reason", ""),
                       "content": p.get("content", "")}
            call = calls.get(p.get("call_id", ""))
            if call is not None:
                call["outcome"] = outcome
            else:
                out.append({**base, "kind": "refusal", "name": p.get("name", ""),
                            "call_id": p.get("call_id", ""), "outcome": outcome,
                            "arguments": json.dumps(p.get("arguments", {}), ensure_ascii=False,
                                                    indent=2, sort_keys=True)})
        elif type_ == "approval_requested":
            approval = {"status": "waiting", "asked_seq": seq, "asked_at": at,
                        "asked_reason": p.get("reason"), **_UNDECIDED}
            call = calls.get(p.get("call_id", ""))
            if call is not None:
                call["approval"] = approval
            else:
                out.append({**base, "kind": "approval", "name": p.get("name", ""),
                            "call_id": p.get("call_id", ""), "approval": approval})
        elif type_ == "approval_decided":
            approval = _approval_of(out, calls, p.get("call_id", ""))
            approval.update({
                "status": "approved" if p.get("decision") == "approve" else "denied",
                "seq": seq, "approver": p.get("approver", ""), "reason": p.get("reason"),
                "decided_at": p.get("decided_at", at),
                "waited_s": _seconds(approval.get("asked_at"), p.get("decided_at", at)),
                "arguments": None if p.get("arguments") is None else json.dumps(
                    p["arguments"], ensure_ascii=False, indent=2, sort_keys=True)})
            if "asked_seq" not in approval:  # its request is not on the page
                out.append({**base, "kind": "approval", "name": "",
                            "call_id": p.get("call_id", ""), "approval": approval})
        elif (end := _end(type_, p)) is not None:
            out.append({**base, "kind": "end", **end})
        else:
            out.append({**base, "kind": "other", "type": type_,
                        "text": json.dumps(p, ensure_ascii=False, sort_keys=True)})
    return out
