"""``turnlog audit``: figures across conversations, from SQL over the journal's views."""

from __future__ import annotations

from typing import Any

import click

from turnlog.engine.audit import (
    STATUSES,
    AuditQuery,
    Prices,
    audit,
    audit_steps,
    check_query,
    connect_readonly,
    parse_since,
)
from turnlog.engine.audit.erasure import erasure_summary
from turnlog.engine.audit.display import milliseconds, model_label, money
from turnlog.journal import last_signed

from ._common import (
    db_option,
    emit,
    fail,
    journal_for,
    json_option,
    problem,
    progress,
    translate_errors,
)

__all__ = ["audit_command", "money", "render"]


@click.command("audit")
@click.option("--since", help="Conversations started on or after this date "
              "(2025-01-31, an ISO timestamp, or 7d / 12h / 30m ago).")
@click.option("--provider", help="Only conversations with this provider.")
@click.option("--model", help="Only conversations with this model.")
@click.option("--status", help=f"Only conversations in this status ({', '.join(STATUSES)}).")
@click.option("--tool", help="Only conversations that called this tool; tool figures for it alone.")
@click.option("--prices", "prices_file", type=click.Path(dir_okay=False),
              help="A price table (TOML) whose entries override or add to genai-prices' "
                   "(negotiated discounts, private models).")
@click.option("--reprice", is_flag=True,
              help="Also price every call at today's prices, beside the cost recorded with it.")
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True,
              help="How many of the most expensive conversations to list (0: all).")
@click.option("--check", is_flag=True,
              help="First recompute the projection tables from the events; on any "
                   "difference, list it, take every figure from the events, exit 1.")
@db_option
@json_option
@translate_errors
def audit_command(since: str | None, provider: str | None, model: str | None,
                  status: str | None, tool: str | None, prices_file: str | None,
                  reprice: bool, top: int, check: bool, db_path: str, as_json: bool) -> None:
    """Figures across conversations: status, turns, tokens, tools, failures, cost.

    Each call costs what was recorded with it when it ran; a call recorded
    without a price (imported, or older) is priced from genai-prices (and the
    --prices file on top) at the rates in effect when it was made. Models
    without a price are listed as unpriced with the reason, never counted as
    free.

    Example:

        turnlog audit --since 7d --provider openai --json
    """
    query = AuditQuery(since=parse_since(since) if since is not None else None,
                       provider=provider, model=model, status=status, tool=tool, top=top)
    check_query(query)
    prices = Prices.load(prices_file)
    with journal_for(db_path, readonly=True) as journal:  # refuses a missing or foreign file first
        signed = last_signed(journal)
        erasure = erasure_summary(journal)
    conn = connect_readonly(db_path)
    try:
        with progress(audit_steps(check), label="auditing", as_json=as_json) as bar:
            report = audit(conn, query, prices, check=check, progress=bar.advance,
                           reprice=reprice)
    finally:
        conn.close()
    if as_json:
        emit({**report, "last_checkpoint": signed, "erasure": erasure})
    else:
        click.echo(render(report))
        if erasure["erasures"] or erasure["held"]:
            held = ", ".join(erasure["held"]) or "none"
            click.echo(f"erased: {erasure['erased_events']:,} event(s) of "
                       f"{len(erasure['erased_conversations']):,} conversation(s) "
                       f"({erasure['erasures']:,} erasure(s) recorded)   legal holds: {held}")
        if signed is not None:
            click.echo(f"last signed checkpoint: {signed['size']} of {signed['events']} events "
                       "(turnlog verify --checkpoint checks it)")
    for m in report["projection_mismatches"] or ():
        problem(f"FORGED PROJECTION: {m['table']} conversation {m['conversation_id']!r} "
                f"position {m['position']}: {m['reason']} (figures above come from the events)")
    if report["projection_mismatches"]:
        fail(1)


def _table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return ["  " + fmt.format(*headers).rstrip(), *("  " + fmt.format(*r).rstrip() for r in cells)]


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.4f}".rstrip("0").rstrip(".") if v else "0"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _cost_cell(costs: dict, key: tuple[str, str]) -> Any:
    if key not in costs:
        return "0"  # no model call at all: nothing was spent
    return money(costs[key])


def render(r: dict[str, Any]) -> str:
    """The human-readable audit: a few aligned tables."""
    lines = [f"conversations: {r['conversations']:,}   turns: {r['turns']:,}   "
             + "   ".join(f"{s}: {n:,}" for s, n in r["by_status"].items())]
    tokens = {(t["provider"], t["model"]): t for t in r["tokens"]["by_provider_model"]}
    costs = {(c["provider"], c["model"]): c["cost"] for c in r["cost"]["by_provider_model"]}
    lines += ["", "by provider/model:"] + _table(
        ["provider/model", "convs", "responses", "input", "cached", "output", "cost"],
        [[model_label(m["provider"], m["model"]), m["conversations"],
          tokens.get((m["provider"], m["model"]), {}).get("responses", 0),
          tokens.get((m["provider"], m["model"]), {}).get("input", 0),
          tokens.get((m["provider"], m["model"]), {}).get("cached_input", 0),
          tokens.get((m["provider"], m["model"]), {}).get("output", 0),
          _cost_cell(costs, (m["provider"], m["model"]))]
         for m in r["by_provider_model"]])
    if r["tools"]:
        lines += ["", "tools:"] + _table(
            ["tool", "calls", "ok", "failed", "refused", "pending", "duplicates", "median ms",
             "p95 ms"],
            [[name, t["calls"], t["succeeded"], t["failures"], t["refused"], t["pending"],
              t["duplicates_prevented"], milliseconds(t["median_ms"]),
              milliseconds(t["p95_ms"])]
             for name, t in r["tools"].items()])
        reasons = [f"{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(t["refused_by_reason"].items()))
                   for name, t in r["tools"].items() if t["refused_by_reason"]]
        if reasons:
            lines += ["  refused by reason: " + "; ".join(reasons)]
    if r["server_tools"]:
        lines += ["", "server tools (run by the provider):"] + _table(
            ["tool", "kind", "calls"], [[s["tool"], s["kind"], s["calls"]] for s in r["server_tools"]])
    approvals = r["approvals"]
    if approvals["requested"]:
        waited = ("" if approvals["median_seconds_to_decision"] is None else
                  f"   to decision: median {approvals['median_seconds_to_decision']:,.1f} s, "
                  f"p95 {approvals['p95_seconds_to_decision']:,.1f} s")
        lines += ["", f"approvals: {approvals['requested']} asked   approved "
                  f"{approvals['approved']}   denied {approvals['denied']}   pending "
                  f"{approvals['pending']}   edited {approvals['edited']}{waited}"]
        if approvals["by_approver"]:
            lines += ["  by approver: " + ", ".join(
                f"{name} approved {n['approved']} denied {n['denied']}"
                for name, n in approvals["by_approver"].items())]
    if r["model_failures"]:
        lines += ["", "model failures: " + ", ".join(
            f"{k or 'unknown'} {v}" for k, v in r["model_failures"].items())]
    cost = r["cost"]
    lines += ["", f"estimated cost: {money(cost['total'])} {cost['currency']}"
              + ("" if cost["complete"] else "  (priced models only)")
              + f"   prices: {cost['prices']}"]
    for u in cost["unpriced"]:
        lines += [f"  unpriced: {model_label(u['provider'], u['model'])}: {u['reason']}"]
    if cost["by_provider"]:
        lines += ["  by provider: " + ", ".join(f"{p['provider']} {money(p['cost'])}"
                                                for p in cost["by_provider"])]
    if cost["by_day"]:
        lines += ["  by day: " + ", ".join(f"{d['day']} {money(d['cost'])}" for d in cost["by_day"])]
    lines += [f"  tool-using turns: {cost['tool_turns']['responses']:,} "
              f"{money(cost['tool_turns']['cost'])}   refused duplicates: "
              f"{cost['duplicates']['responses']:,} {money(cost['duplicates']['cost'])}   "
              f"retried requests: {cost['retried']['responses']:,} {money(cost['retried']['cost'])}"]
    if cost["conversations"]:
        lines += ["  most expensive: " + ", ".join(
            f"{c['conversation_id']} {money(c['cost'])}"
            for c in cost["conversations"])]
    if "repriced" in cost:
        again = cost["repriced"]
        lines += [f"  at today's prices: {money(again['total'])} {cost['currency']}"
                  + ("" if again["complete"] else "  (priced models only)")]
        lines += [f"    {c['conversation_id']}: recorded {money(c['recorded'])}, "
                  f"today {money(c['today'])}" for c in again["conversations"]]
    div = r["divergences"]
    if div is not None:
        lines += ["", f"last replay ({div['run_at']}): {div['checked']} checked, "
                  f"{len(div['diverged'])} diverged"
                  + "".join(f"\n  {d['conversation_id']} at seq {d['seq']}" for d in div["diverged"])]
    return "\n".join(lines)


@click.command("prices")
@click.argument("model", required=False)
@click.option("--provider", help="Only this provider's models (turnlog's name or genai-prices' id).")
@click.option("--prices", "prices_file", type=click.Path(dir_okay=False),
              help="A price table (TOML) whose entries override or add to genai-prices'.")
@click.option("--at", "when", help="The day or time to show prices for (default: now, UTC).")
@json_option
@translate_errors
def prices_command(model: str | None, provider: str | None, prices_file: str | None,
                   when: str | None, as_json: bool) -> None:
    """What a model call would be charged per token kind, per million tokens, and from
    which source and version.

    With MODEL, the one entry a call of it is priced at (exit 1 if none: it
    would be unpriced); without, every entry (narrow with --provider).

    Example:

        turnlog prices claude-sonnet-4-5 --provider anthropic
    """
    prices = Prices.load(prices_file)
    rows = prices.rates(model, provider, when)
    if as_json:
        emit({"source": prices.source, "currency": prices.currency, "prices": rows})
    else:
        for row in rows:
            click.echo(f"{row['provider']}/{row['model']}   {row['source']} {row['version']}"
                       + (f"   since {row['since']}" if "since" in row else ""))
            for kind, rate in row["rates"].items():
                click.echo(f"  {kind:<24} {_rate(rate)}")
    if model is not None and not rows:
        found = prices.find(provider or "", model)
        problem(f"unpriced: {found if isinstance(found, str) else model}")
        fail(1)


def _rate(rate: Any) -> str:
    if isinstance(rate, dict):
        return f"{rate['base']:g}" + "".join(f", above {t['above']:,} tokens {t['price']:g}"
                                             for t in rate["tiers"])
    return f"{rate:g}"


COMMANDS = [audit_command, prices_command]
