"""Figures across conversations, computed with SQL over the journal's views.

``audit(conn, query, prices)`` answers: how many conversations, in which
status, with which provider and model; how many turns and tokens; how each
tool fared (calls, failures, duplicates prevented, refusals by reason,
calls still pending, median and p95 duration); which server tools the
providers ran themselves (``server_tools``, by kind and name, never mixed
with the client tools); which model errors occurred; what the runs cost
(``engine.audit.costs``, priced by :class:`~engine.audit.prices.Prices`); and which divergences
the last recorded replay found. Nothing is folded in Python: a handful of
grouped queries over ``conversations``, ``model_calls`` and ``tool_calls``
(see ``engine.audit.views``) does the work, scoped by a temporary table of the
conversations the filters select.

>>> from turnlog.engine.audit.views import connect_readonly  # doctest: +SKIP
>>> audit(connect_readonly("turnlog.db"), AuditQuery(provider="openai"))["conversations"]  # doctest: +SKIP
12
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from .sql import REQUESTED_TOOL, SOURCES, Source, requested_scope
from turnlog.journal import ReadConnection, dialect_of
from ..errors import BadFilterError
from .costs import cost_figures
from .prices import Prices, PriceTable
from .projections import check as check_projections
from .projections import in_step

__all__ = [
    "REPLAY_REPORTS",
    "STATUSES",
    "UNFINISHED",
    "AuditQuery",
    "audit",
    "audit_steps",
    "check_query",
    "parse_since",
]

#: The statuses a conversation can be in (``conversations.status``, ``ConversationState.status``).
STATUSES = ("active", "awaiting_approval", "interrupted", "completed", "failed", "halted")

#: The statuses of a conversation whose run has not finished (``turnlog resume`` continues it).
UNFINISHED = ("active", "awaiting_approval", "interrupted")

#: The table a replay run may record its results in; ``audit`` reports its last run.
#: Columns read: ``run_at`` (ISO timestamp of the run; the greatest is the last run),
#: ``conversation_id``, ``ok`` (1/0) and ``divergence_seq`` (NULL when ok).
REPLAY_REPORTS = "replay_reports"

_RELATIVE = re.compile(r"^(\d+)([dhm])$")


class AuditQuery(msgspec.Struct, frozen=True, kw_only=True):
    """Which conversations an audit covers; ``None`` means no filter.

    ``since`` is a normalised timestamp (see :func:`parse_since`): conversations
    started at or after it. ``tool`` keeps conversations that called that tool
    and narrows the tool figures to it. ``top`` is how many of the most
    expensive conversations to list (0: all).
    """

    since: str | None = None
    provider: str | None = None
    model: str | None = None
    status: str | None = None
    tool: str | None = None
    top: int = 10


def parse_since(text: str, now: dt.datetime | None = None) -> str:
    """``2025-01-31``, ``2025-01-31T12:00:00Z`` (any ISO form) or ``7d``/``12h``/``30m`` ago,
    as the journal's timestamp format.

    >>> parse_since("2025-01-31")
    '2025-01-31T00:00:00.000000Z'
    >>> parse_since("2d", now=dt.datetime(2025, 1, 3, tzinfo=dt.UTC))
    '2025-01-01T00:00:00.000000Z'
    """
    rel = _RELATIVE.match(text.strip())
    if rel:
        unit = {"d": "days", "h": "hours", "m": "minutes"}[rel.group(2)]
        when = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(**{unit: int(rel.group(1))})
    else:
        try:
            when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            raise BadFilterError(
                f"--since {text!r} is not a date: use 2025-01-31, 2025-01-31T12:00:00Z "
                f"or 7d / 12h / 30m") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def check_query(query: AuditQuery) -> None:
    """Refuse filter values no conversation can match for a reason worth telling the user."""
    if query.status is not None and query.status not in STATUSES:
        raise BadFilterError(f"--status {query.status!r} is not one of {', '.join(STATUSES)}")


def audit(conn: ReadConnection, query: AuditQuery = AuditQuery(),
          prices: Prices | PriceTable | None = None, source: Source | None = None, *,
          check: bool = False, progress: Callable[[int], None] | None = None,
          reprice: bool = False) -> dict[str, Any]:
    """The audit figures as a JSON-ready dict (the ``turnlog audit --json`` document).

    ``conn`` is a connection to a journal that has the engine's views and
    projections (``engine.audit.views.connect_readonly``). Figures come from the
    projection tables when they are in step with ``events``, else from
    ``events`` itself (``source`` forces one; the report's ``source`` says
    which). Only temporary tables are written.

    ``check`` first recomputes the projection tables from ``events``
    (``engine.audit.projections.check``): every difference is listed under
    ``projection_mismatches`` and the figures then come from ``events``, never
    from a forged table. Without it, ``projection_mismatches`` is ``None``.

    ``reprice`` adds ``cost.repriced``: every call at today's ``prices`` beside
    the cost recorded with it (``engine.audit.costs``).

    ``progress(1)``, when given, is called after each of :func:`audit_steps` stages
    (for a progress bar).
    """
    check_query(query)
    step = progress or _no_progress
    prices = Prices.of(prices)
    mismatches = check_projections(conn) if check else None
    if check:
        step(1)
    dialect = dialect_of(conn)
    projected, events = SOURCES[dialect.name]
    if source is not None:  # the same questions, asked in this connection's dialect
        src = projected if source.name == projected.name else events
    else:
        src = projected if not mismatches and in_step(conn) else events
    _scope(conn, query, src)
    step(1)
    report: dict[str, Any] = _conversations(conn)
    step(1)
    # Unfiltered, every event is in scope: skip the per-event scope check.
    unfiltered = (query.since, query.provider, query.model, query.status, query.tool) == (None,) * 5
    in_scope = "" if unfiltered else src.in_scope
    report["turns"] = conn.execute(src.turns.format(in_scope=in_scope)).fetchone()[0]
    step(1)
    calls = conn.execute(src.calls.format(in_scope=in_scope)).fetchall()
    report["tokens"] = _tokens(calls)
    step(1)
    report["model_failures"] = dict(conn.execute(src.failures.format(in_scope=in_scope)).fetchall())
    step(1)
    and_tool, params = (src.and_tool, (query.tool,)) if query.tool else ("", ())
    requested = {"in_scope": "" if unfiltered else requested_scope(dialect),
                 "and_tool": REQUESTED_TOOL if query.tool else ""}
    pending = dict(conn.execute(src.pending.format(**requested), params).fetchall())
    report["tools"] = _tools(conn.execute(src.tools.format(in_scope=in_scope, and_tool=and_tool),
                                          params), pending)
    step(1)
    report["server_tools"] = [
        {"kind": kind, "tool": tool, "calls": n}
        for kind, tool, n in conn.execute(src.server.format(**requested), params)]
    report["approvals"] = _approvals(conn.execute(
        "SELECT tool, decision, approver, edited, requested_at, decided_at FROM approvals "
        + ("WHERE 1 = 1" if unfiltered else
           f"WHERE conversation_id IN (SELECT conversation_id FROM {dialect.temp}.audit_scope)")
        + (" AND tool = ?" if query.tool else ""), params))
    report["source"] = src.name
    report["cost"] = cost_figures(conn, prices, query.top, reprice=reprice,
                                  in_scope="" if unfiltered else "AND e.stream_id IN (SELECT "
                                  f"conversation_id FROM {dialect.temp}.audit_scope)",
                                  projected=src.name == projected.name)
    report["divergences"] = _divergences(conn)
    report["filters"] = {k: v for k, v in msgspec.to_builtins(query).items() if k != "top"}
    report["projection_mismatches"] = None if mismatches is None else [
        {"table": m.object, "conversation_id": m.stream_id, "position": m.position,
         "column": m.column, "reason": m.reason} for m in mismatches]
    conn.execute(f"DROP TABLE {dialect.temp}.audit_scope")
    step(1)
    return report


def audit_steps(check: bool = False) -> int:
    """How many times :func:`audit` calls its ``progress`` (one more with ``check``)."""
    return _STEPS + int(check)


_STEPS = 7


def _no_progress(_steps: int) -> None:
    """``audit``'s progress when nobody listens."""


def _scope(conn: ReadConnection, query: AuditQuery, src: Source) -> None:
    where, params = [], []
    for column in ("provider", "model", "status"):
        value = getattr(query, column)
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if query.since is not None:
        where.append("started_at >= ?")
        params.append(query.since)
    if query.tool is not None:
        where.append(f"conversation_id IN ({src.tool_users})")
        params.append(query.tool)
    temp = dialect_of(conn).temp
    conn.execute(f"DROP TABLE IF EXISTS {temp}.audit_scope")
    conn.execute(
        "CREATE TEMP TABLE audit_scope (conversation_id TEXT PRIMARY KEY, provider TEXT, "
        "model TEXT, status TEXT)" + (" WITHOUT ROWID" if temp == "temp" else ""))
    conn.execute(
        f"INSERT INTO {temp}.audit_scope SELECT conversation_id, provider, model, status "
        f"FROM conversations {'WHERE ' + ' AND '.join(where) if where else ''}", params)


def _conversations(conn: ReadConnection) -> dict[str, Any]:
    temp = dialect_of(conn).temp
    by_status = dict.fromkeys(STATUSES, 0)
    for status, n in conn.execute(
            f"SELECT status, count(*) FROM {temp}.audit_scope GROUP BY status"):
        by_status[status] = n
    by_model = [
        {"provider": p, "model": m, "conversations": n, "by_status": {
            s: c for s, c in zip(STATUSES, counts)}}
        for p, m, n, *counts in conn.execute(
            "SELECT provider, model, count(*), "
            + ", ".join(f"sum(CASE WHEN status = '{s}' THEN 1 ELSE 0 END)" for s in STATUSES)
            + f" FROM {temp}.audit_scope GROUP BY provider, model ORDER BY provider, model")]
    return {"conversations": sum(by_status.values()), "by_status": by_status,
            "by_provider_model": by_model}


_TOKEN_KINDS = ("input", "output", "cached_input", "cache_write", "reasoning")


def _tokens(calls: list[tuple]) -> dict[str, Any]:
    totals = [0] * len(_TOKEN_KINDS)
    per: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0] * (1 + len(_TOKEN_KINDS)))
    for _cid, provider, model, _day, responses, *tokens in calls:
        row = per[(provider, model)]
        row[0] += responses
        for i, n in enumerate(tokens):
            row[i + 1] += n
            totals[i] += n
    return {
        **dict(zip(_TOKEN_KINDS, totals)),
        "by_provider_model": [
            {"provider": p, "model": m, "responses": row[0], **dict(zip(_TOKEN_KINDS, row[1:]))}
            for (p, m), row in sorted(per.items())],
    }


def _tools(rows: Iterable[tuple], pending: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Per tool: calls by outcome (``pending``: no outcome yet), refusals by reason,
    median and p95 duration."""
    outcomes: Counter[tuple[str, str, str]] = Counter()
    durations: dict[str, list[float]] = defaultdict(list)
    for name, refused, success, reason, ms in rows:
        if refused:
            outcomes[(name, "refused", reason or "")] += 1
            continue
        outcomes[(name, "succeeded" if success else "failed", "")] += 1
        if ms is not None:
            durations[name].append(ms)
    for name, n in pending.items():
        outcomes[(name, "pending", "")] += n
    tools: dict[str, dict[str, Any]] = {}
    for (name, outcome, reason), n in sorted(outcomes.items()):
        t = tools.setdefault(name, {
            "calls": 0, "succeeded": 0, "failures": 0, "refused": 0, "pending": 0,
            "duplicates_prevented": 0, "refused_by_reason": {}, "median_ms": None,
            "p95_ms": None})
        t["calls"] += n
        if outcome == "pending":
            t["pending"] += n
        elif outcome == "refused":
            t["refused"] += n
            t["refused_by_reason"][reason] = n
            if reason == "duplicate":
                t["duplicates_prevented"] += n
        else:
            t["succeeded" if outcome == "succeeded" else "failures"] += n
    for name, values in durations.items():
        tools[name]["median_ms"], tools[name]["p95_ms"] = _median_p95(values)
    return dict(sorted(tools.items()))


def _median_p95(values: list[float]) -> tuple[float | None, float | None]:
    """The median (the mean of the two middle values) and the p95 (the nearest rank)."""
    if not values:
        return None, None
    values.sort()
    n = len(values)
    return (values[(n - 1) // 2] + values[n // 2]) / 2, values[-(-95 * n // 100) - 1]


def _approvals(rows: Iterable[tuple]) -> dict[str, Any]:
    """Calls that asked for a person's approval: how they were decided, by whom, how fast.

    ``seconds_to_decision`` runs from the request's recording to the decision's
    ``decided_at``; ``pending`` calls have no decision yet.
    """
    counts = {"requested": 0, "approved": 0, "denied": 0, "pending": 0, "edited": 0}
    by_approver: dict[str, dict[str, int]] = {}
    by_tool: dict[str, dict[str, int]] = {}
    waits: list[float] = []
    for tool, decision, approver, edited, requested_at, decided_at in rows:
        outcome = {"approve": "approved", "deny": "denied"}.get(decision, "pending")
        counts["requested"] += 1
        counts[outcome] += 1
        counts["edited"] += bool(edited)
        per_tool = by_tool.setdefault(tool, {"requested": 0, "approved": 0, "denied": 0,
                                             "pending": 0})
        per_tool["requested"] += 1
        per_tool[outcome] += 1
        if outcome != "pending":
            mine = by_approver.setdefault(approver, {"approved": 0, "denied": 0})
            mine[outcome] += 1
            waited = _seconds_between(requested_at, decided_at)
            if waited is not None:
                waits.append(waited)
    median, p95 = _median_p95(waits)
    return {**counts, "by_approver": dict(sorted(by_approver.items())),
            "by_tool": dict(sorted(by_tool.items())),
            "median_seconds_to_decision": median, "p95_seconds_to_decision": p95}


def _seconds_between(start: str | None, end: str | None) -> float | None:
    """Seconds from one ISO timestamp to a later one (``None`` if either is unreadable)."""
    try:
        a, b = dt.datetime.fromisoformat(start or ""), dt.datetime.fromisoformat(end or "")
        if (a.tzinfo is None) != (b.tzinfo is None):
            a, b = a.replace(tzinfo=dt.UTC), b.replace(tzinfo=dt.UTC)
        return max((b - a).total_seconds(), 0.0)
    except ValueError:
        return None


def _divergences(conn: ReadConnection) -> dict[str, Any] | None:
    """The last recorded replay run's findings, or ``None`` when replays record nothing."""
    exists = conn.execute(dialect_of(conn).table_exists(), (REPLAY_REPORTS,)).fetchone()
    if not exists:
        return None
    rows = conn.execute(
        f"SELECT run_at, conversation_id, ok, divergence_seq FROM {REPLAY_REPORTS} "
        f"WHERE run_at = (SELECT max(run_at) FROM {REPLAY_REPORTS}) ORDER BY conversation_id"
    ).fetchall()
    if not rows:
        return None
    return {"run_at": rows[0][0], "checked": len(rows),
            "diverged": [{"conversation_id": cid, "seq": seq}
                         for _run, cid, ok, seq in rows if not ok]}
