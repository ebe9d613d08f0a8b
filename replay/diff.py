"""diff: two conversations side by side, turn by turn.

Each model turn is summarised (who answered, its text, the tool calls it made
with canonical arguments, what became of each call, the stop reason, usage)
and the two conversations' turns are compared in order. A turn is ``same``
when the behaviour matches: text, tool calls (name and canonical arguments;
call ids are ignored, since every provider mints its own), call outcomes and
results, stop reason and failure. Provider, model, usage and cost are shown
as deltas and never make a turn differ: a replay against another model is
expected to cost differently. ``same`` for the whole diff also needs equal
turn counts, statuses and final answers::

    d = diff(journal, "run-openai", "run-anthropic")
    d.same, [t.differences for t in d.turns if not t.same]
    print(d.render())
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from turnlog.engine.tools.duplicates import call_key
from turnlog.engine.model.events import (
    ConversationStarted,
    ModelFailed,
    ModelResponded,
    ToolCallRejected,
    ToolCompleted,
    UserMessage,
)
from turnlog.engine.model.messages import USAGE_COUNTS, Thinking, ToolCall, Usage, text_of
from turnlog.journal import JournalProtocol

from .rebuild import lineage_events, rebuild

__all__ = ["CallSummary", "ConversationDiff", "Pricing", "TurnDiff", "TurnSummary", "diff",
           "summarise"]

#: ``price(provider, model, usage) -> USD or None`` (None: the model is unpriced).
Pricing = Callable[[str, str, Usage], "float | None"]


class CallSummary(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One tool call and what became of it (``outcome``: success, failed, rejected:<reason>, pending).

    ``arguments`` is the argument object, or the raw text of arguments that
    did not parse; calls compare by ``key()``.
    """

    name: str
    arguments: Any = None
    outcome: str = "pending"
    result: str | None = None

    def key(self) -> str:
        """The call's ``call_key``: same tool, same canonical arguments."""
        raw = self.arguments if isinstance(self.arguments, str) else None
        return call_key(self.name, {} if raw is not None else self.arguments, None, raw)


class TurnSummary(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One model turn of a conversation, reduced to what the diff compares."""

    turn: int
    provider: str = ""
    model: str = ""
    user: list[str] = []
    text: str = ""
    thinking: bool = False
    calls: list[CallSummary] = []
    stop_reason: str | None = None
    failed: str | None = None
    usage: Usage = Usage()

    def behaviour(self) -> tuple:
        """What ``same`` compares (no ids, provider, model, usage or cost)."""
        return (self.user, self.text, [(c.key(), c.outcome, c.result) for c in self.calls],
                self.stop_reason, self.failed)


class TurnDiff(msgspec.Struct, kw_only=True):
    """Turn ``turn`` of both conversations; ``differences`` names the fields that differ."""

    turn: int
    same: bool
    differences: list[str]
    a: TurnSummary | None
    b: TurnSummary | None
    usage_delta: dict[str, int]
    cost_delta: float | None = None


class ConversationDiff(msgspec.Struct, kw_only=True):
    """The whole comparison: ``same`` when every turn, the status and final answer match."""

    a: str
    b: str
    same: bool
    turns: list[TurnDiff]
    status: tuple[str, str]
    final_content: tuple[str, str]
    usage_delta: dict[str, int]
    cost_delta: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``same``, ``turns``, ...), as ``turnlog diff --json`` prints it."""
        return msgspec.to_builtins(self)

    def render(self, style: Callable[[str, str], str] | None = None) -> str:
        """A readable side-by-side rendering, one block per turn.

        ``style(text, kind)`` may decorate the verdicts (kind ``same`` or
        ``different``), e.g. with terminal colour; by default they stay plain.
        """
        return _render(self, style or (lambda text, _kind: text))


def summarise(journal: JournalProtocol, conversation_id: str) -> list[TurnSummary]:
    """The conversation's model turns (forks include their parent's prefix), in order."""
    turns: list[TurnSummary] = []
    by_id: dict[str, CallSummary] = {}
    user: list[str] = []
    for _row, event in lineage_events(journal, conversation_id):
        kind = type(event)
        if kind is UserMessage:
            user.append(text_of(event.parts))
        elif kind is ModelResponded:
            calls = []
            for part in event.parts:
                if type(part) is ToolCall:
                    call = CallSummary(name=part.name, arguments=_arguments(part),
                                       outcome="invalid" if part.invalid else "pending")
                    by_id[part.id] = call
                    calls.append(call)
            turns.append(TurnSummary(
                turn=event.turn, provider=event.provider, model=event.model, user=user,
                text=text_of(event.parts), calls=calls, stop_reason=event.stop_reason,
                thinking=any(type(p) is Thinking for p in event.parts), usage=event.usage))
            user = []
        elif kind is ModelFailed:
            turns.append(TurnSummary(turn=event.turn, provider=event.provider, model=event.model,
                                     user=user, failed=f"{event.error_type}: {event.message}"))
            user = []
        elif kind is ToolCompleted and event.call_id in by_id:
            call = by_id[event.call_id]
            call.outcome, call.result = ("success" if event.success else "failed"), event.content
        elif kind is ToolCallRejected and event.call_id in by_id:
            call = by_id[event.call_id]
            call.outcome, call.result = f"rejected:{event.reason}", event.content
        elif kind is ConversationStarted:
            continue
    if user:  # user input after the last model turn
        turns.append(TurnSummary(turn=(turns[-1].turn if turns else 0) + 1, user=user))
    return turns


def _arguments(call: ToolCall) -> Any:
    """The arguments as shown (the raw text of a call whose arguments did not parse)."""
    return call.raw_arguments if call.invalid else call.arguments


def _usage_delta(a: Usage, b: Usage) -> dict[str, int]:
    return {f: getattr(b, f) - getattr(a, f) for f in USAGE_COUNTS}


def _cost(price: Pricing | None, t: TurnSummary | None) -> float | None:
    if price is None or t is None or t.failed is not None or not t.provider:
        return 0.0 if t is None or not t.provider else None
    return price(t.provider, t.model, t.usage)


def _cost_delta(price: Pricing | None, a: TurnSummary | None, b: TurnSummary | None) -> float | None:
    ca, cb = _cost(price, a), _cost(price, b)
    return None if price is None or ca is None or cb is None else cb - ca


_FIELDS = ("user", "text", "calls", "stop_reason", "failed")


def _turn_diff(i: int, a: TurnSummary | None, b: TurnSummary | None,
               price: Pricing | None) -> TurnDiff:
    if a is None or b is None:
        differences = ["missing in " + ("a" if a is None else "b")]
    else:
        differences = [f for f, x, y in zip(_FIELDS, a.behaviour(), b.behaviour()) if x != y]
    return TurnDiff(turn=i, same=not differences, differences=differences, a=a, b=b,
                    usage_delta=_usage_delta(a.usage if a else Usage(), b.usage if b else Usage()),
                    cost_delta=_cost_delta(price, a, b))


def diff(journal: JournalProtocol, a: str, b: str, *, price: Pricing | None = None) -> ConversationDiff:
    """Compare conversations ``a`` and ``b`` turn by turn.

    ``price(provider, model, usage)`` prices a turn in USD (``None``: not
    priced); without it ``cost_delta`` is ``None``. Raises
    ``ConversationNotFound`` for an unknown id.
    """
    sa, sb = rebuild(journal, a), rebuild(journal, b)
    ta, tb = summarise(journal, a), summarise(journal, b)
    turns = [_turn_diff(i + 1, ta[i] if i < len(ta) else None, tb[i] if i < len(tb) else None,
                        price) for i in range(max(len(ta), len(tb)))]
    costs = [t.cost_delta for t in turns]
    same = (all(t.same for t in turns) and sa.status == sb.status
            and sa.final_content == sb.final_content)
    return ConversationDiff(
        a=a, b=b, same=same, turns=turns, status=(sa.status, sb.status),
        final_content=(sa.final_content, sb.final_content),
        usage_delta=_usage_delta(sa.usage, sb.usage),
        cost_delta=None if price is None or None in costs else sum(costs))


def _side(t: TurnSummary | None) -> list[str]:
    if t is None:
        return ["(no turn)"]
    lines = [f"{t.provider}/{t.model}" if t.provider else "(no model turn)"]
    lines += [f"user: {u[:70]}" for u in t.user]
    if t.failed:
        lines.append(f"FAILED {t.failed[:70]}")
    if t.text:
        lines.append(f"text: {t.text[:70]}")
    for c in t.calls:
        args = msgspec.json.encode(c.arguments).decode()
        lines.append(f"call {c.name}({args[:50]}) -> {c.outcome}")
    if t.stop_reason:
        lines.append(f"stop: {t.stop_reason}  tokens: {t.usage.input_tokens}/"
                     f"{t.usage.output_tokens}")
    return lines


def _fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, marked with an ellipsis when cut (both columns)."""
    return text if len(text) <= width else text[:width - 1] + "…"


def _render(d: ConversationDiff, style: Callable[[str, str], str]) -> str:
    width = 60
    out = [f"{'A: ' + d.a:<{width}} | B: {d.b}", "-" * (2 * width + 3)]
    for t in d.turns:
        mark = (style("same", "same") if t.same
                else style("DIFFERENT", "different") + ": " + ", ".join(t.differences))
        out.append(f"turn {t.turn}  {mark}")
        left, right = _side(t.a), _side(t.b)
        for i in range(max(len(left), len(right))):
            x = left[i] if i < len(left) else ""
            y = right[i] if i < len(right) else ""
            out.append(f"  {_fit(x, width - 2):<{width - 2}} | {_fit(y, width - 2)}")
    out.append("-" * (2 * width + 3))
    out.append(f"status: {d.status[0]} | {d.status[1]}")
    out.append(f"final: {d.final_content[0][:55]!r} | {d.final_content[1][:55]!r}")
    delta = ", ".join(f"{k} {v:+d}" for k, v in d.usage_delta.items() if v)
    out.append(f"usage delta (B - A): {delta or 'none'}")
    if d.cost_delta is not None:
        out.append(f"cost delta (B - A): {d.cost_delta:+.6f} USD")
    out.append(style("SAME", "same") if d.same else style("DIFFERENT", "different"))
    return "\n".join(out)
