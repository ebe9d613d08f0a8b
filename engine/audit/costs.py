"""The audit's figures by the money: what each model call cost, summed every useful way.

Each model response is priced once (:func:`call_cost`): at the charge recorded
on its event when it has an amount (the figure the run saw, whatever prices
say today), else at today's prices for the moment it was recorded (an
imported transcript's own time where it had one). ``reprice`` prices every
call at today's prices as well, so both figures are shown side by side.
Unpriced calls make their sums unknown (``None``), never smaller.

Read from the projection, the responses recorded without an amount are summed
in SQL per group of like responses (conversation, day, own provider and model,
tool turn, retried, which counts are zero) and each group is priced once, where
its price is linear in the tokens (``Prices.linear``: no tier, no price per
request, none by the time of day) and its usages are consistent; the others are
priced one by one. A group costs what its responses cost, to a float's last
rounding.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import Any

import msgspec

from turnlog.engine.model.events import Charge
from turnlog.engine.model.messages import USAGE_COUNTS, Usage
from turnlog.journal import ReadConnection, dialect_of
from .prices import Prices, add_cost, usage_shape
from .projections import MODEL_CALLS, TOOL_CALLS

__all__ = ["call_cost", "conversation_costs", "conversation_figures", "cost_figures"]




def call_cost(prices: Prices, provider: str, model: str, at: str, usage: Usage,
              recorded: Charge | None) -> float | None:
    """One call's cost: the recorded charge's amount, else ``prices`` at ``at``.

    >>> call_cost(Prices.default(), "x", "y", "2025-01-01", Usage(),
    ...           Charge(amount=0.25, source="overrides"))
    0.25
    """
    if recorded is not None and recorded.amount is not None:
        return recorded.amount
    return prices.charge(provider, model, at, usage).amount


_TYPES = "('conversation_started', 'model_requested', 'model_responded', 'tool_call_rejected')"


def _events(conn: ReadConnection, in_scope: str, params: Sequence[Any]) -> Iterable[tuple]:
    """``(stream_id, seq, type, recorded_at, payload)`` of the four kinds the costs read, in
    each conversation's order: no JSON function and no per-response subquery."""
    d = dialect_of(conn)
    if not d.sorts_as_python:
        return conn.execute(f"SELECT e.stream_id, e.seq, e.type, e.recorded_at, e.payload "
                            f"FROM events AS e WHERE e.type IN {_TYPES} {in_scope} "
                            "ORDER BY e.stream_id, e.seq", tuple(params))
    # one scan of the table, ordered here (the type index would fetch each row apart)
    by_stream: dict[str, list[tuple]] = defaultdict(list)
    for row in conn.execute(f"SELECT e.stream_id, e.seq, e.type, e.recorded_at, e.payload "
                            f"FROM {d.scan('events', 'e')} WHERE e.type IN {_TYPES} {in_scope}",
                            tuple(params)):
        by_stream[row[0]].append(row)
    return (row for stream in sorted(by_stream)
            for row in sorted(by_stream.pop(stream), key=itemgetter(1)))


class _Part(msgspec.Struct):
    type: Any = None


class _Read(msgspec.Struct):
    """The fields of those four kinds of event the costs read (any other is skipped)."""

    provider: Any = None
    model: Any = None
    usage: Usage | None = None
    charge: Charge | None = None
    parts: list[_Part] = []
    turn: Any = None
    attempt: Any = None
    reason: Any = None


_read = msgspec.json.Decoder(_Read)


def _responses(conn: ReadConnection, in_scope: str, params: Sequence[Any]) -> list[tuple]:
    """Each response in scope, in conversation order: ``(conversation, recorded_at, provider,
    model, own provider, own model, usage, recorded amount, tool calls, refused duplicates,
    attempt)``.

    Its conversation's provider and model are those its first event names; its refused
    duplicates the ``duplicate`` refusals after it and before the conversation's next
    response; its attempt the ``attempt`` of the request just before it when that request is
    of its turn (``None`` otherwise, or when the request names none).
    """
    rows: list[list[Any]] = []
    stream, started, last_request = None, ("", ""), None
    last: list[Any] | None = None
    for cid, seq, kind, at, payload in _events(conn, in_scope, params):
        if cid != stream:
            stream, started, last_request, last = cid, ("", ""), None, None
        event = _read.decode(_text(payload))
        if seq == 1:
            started = (_str(event.provider) or "", _str(event.model) or "")
        if kind == "model_requested":
            last_request = event
        elif kind == "tool_call_rejected":
            if last is not None and event.reason == "duplicate":
                last[9] += 1
        elif kind == "model_responded":
            attempt = None
            if last_request is not None and last_request.turn is not None \
                    and last_request.turn == event.turn:
                attempt = last_request.attempt
            charge = event.charge
            last = [cid, at, *started, _str(event.provider) or None, _str(event.model) or None,
                    event.usage or Usage(), None if charge is None else charge.amount,
                    sum(1 for p in event.parts if p.type == "tool_call"), 0, attempt]
            rows.append(last)
    return rows


def _projected_rows(conn: ReadConnection, in_scope: str, params: Sequence[Any],
                    starts: _Starts, recorded: bool, where: str = "",
                    positions: bool = False) -> list[tuple]:
    """:func:`_responses` read from the model calls' projection (``engine.audit.projections``,
    kept in step with ``events`` by the journal's triggers) instead of the payloads: the same
    rows in the same order, with the usage as its counts (``USAGE_COUNTS`` order) and
    ``0`` refused duplicates (:func:`_projected_duplicates` counts them). ``recorded``
    False: only the responses recorded without a charge amount (the rest are summed in SQL,
    :func:`_projected_sums`); ``where``: a further condition on the table's row ``m``;
    ``positions``: each row ends with the response's position."""
    d = dialect_of(conn)
    counts = ", ".join(f"e.{n}" for n in USAGE_COUNTS)
    sql = (f"SELECT e.stream_id, e.position, e.recorded_at, e.provider, e.model, {counts}, "
           "e.charge_amount, e.tool_calls, e.attempt "
           f"FROM (SELECT m.*, m.conversation_id AS stream_id FROM {MODEL_CALLS} AS m "
           f"WHERE m.ok{'' if recorded else ' AND m.charge_amount IS NULL'} {where}) AS e "
           f"WHERE 1 = 1 {in_scope}")
    by_stream: dict[str, list[tuple]] = defaultdict(list)
    exact = d.sorts_as_python  # SQLite: integers and floats as they are; PostgreSQL: numeric
    for row in conn.execute(sql, tuple(params)):
        by_stream[row[0]].append(row if exact else _exactly(row))
    rows: list[tuple] = []
    for cid in sorted(by_stream):
        provider, model = starts[cid]
        # position is the stream's order (its events are appended in seq order)
        rows.extend((cid, at, provider, model, own_p, own_m, tuple(tokens), amount, n_tools, 0,
                     attempt, *((position,) if positions else ()))
                    for _, position, at, own_p, own_m, *tokens, amount, n_tools, attempt
                    in sorted(by_stream.pop(cid), key=itemgetter(1)))
    return rows


#: The usage counts a group of responses sums (``Usage`` fields; the 1-hour cache writes as
#: a charge counts them, at most the cache writes).
_GROUPED = ("input_tokens", "output_tokens", "cached_input_tokens", "cache_write_tokens",
            "cache_write_1h_tokens", "input_audio_tokens", "input_image_tokens",
            "output_audio_tokens")


def _consistent(m: str = "m") -> str:
    """SQL: the response's usage is consistent (``Prices.linear``): its parts within their
    totals, so every count a price derives from it is at least zero."""
    return (f"{m}.cached_input_tokens + {m}.cache_write_tokens + {m}.input_audio_tokens "
            f"+ {m}.input_image_tokens <= {m}.input_tokens "
            f"AND {m}.output_audio_tokens <= {m}.output_tokens")


def _key(cid: str, at: str, own_p: str | None, own_m: str | None, n_tools: int,
         attempt: int | None, counts: dict[str, int]) -> tuple:
    """A response's group: what every figure of the costs tells apart (conversation, day, own
    provider and model, tool turn, retried) and its usage's shape."""
    return (cid, at[:10], own_p, own_m, n_tools > 0, (attempt or 1) > 1, usage_shape(counts))


def _projected_groups(conn: ReadConnection, in_scope: str, params: Sequence[Any],
                      starts: _Starts, prices: Prices) -> list[tuple]:
    """The responses recorded without a charge amount, to be priced at their time: consistent
    ones (:func:`_consistent`) summed in SQL per group (:func:`_key`) and priced once per
    group when their price is linear (``Prices.linear``), the others one by one.

    Items ``(conversation, position, day or time, provider, model, own provider, own model,
    usage counts, responses, tool turn, retried)`` in conversation order (a group at its first
    response): a group and its responses cost the same, to the last rounding of a float.
    """
    d = dialect_of(conn)
    hour = ("min(m.cache_write_1h_tokens, m.cache_write_tokens)" if d.name == "sqlite"
            else "least(m.cache_write_1h_tokens, m.cache_write_tokens)")
    column = {name: f"m.{name}" for name in _GROUPED} | {"cache_write_1h_tokens": hour}
    shape = " + ".join(f"CASE WHEN {column[name]} > 0 THEN {1 << i} ELSE 0 END"
                       for i, name in enumerate(_GROUPED))
    sql = (f"SELECT e.stream_id, min(e.position), e.day, e.provider, e.model, e.tooled, "
           f"e.retried, count(*), {', '.join(f'sum(e.{n})' for n in _GROUPED)} "
           f"FROM (SELECT m.conversation_id AS stream_id, m.position, m.day, m.provider, m.model, "
           "CASE WHEN m.tool_calls > 0 THEN 1 ELSE 0 END AS tooled, "
           "CASE WHEN m.attempt > 1 THEN 1 ELSE 0 END AS retried, "
           f"{shape} AS shape, {', '.join(f'{column[n]} AS {n}' for n in _GROUPED)} "
           f"FROM {MODEL_CALLS} AS m WHERE m.ok AND m.charge_amount IS NULL "
           f"AND {_consistent()}) AS e WHERE 1 = 1 {in_scope} "
           "GROUP BY e.stream_id, e.day, e.provider, e.model, e.tooled, e.retried, e.shape")
    items: list[tuple] = []
    apart: set[tuple] = set()  # groups whose price is not linear: their responses one by one
    for cid, first, day, own_p, own_m, tooled, retried, n, *sums in conn.execute(
            sql, tuple(params)):
        provider, model = starts[cid]
        counts = dict(zip(_GROUPED, map(int, sums)))
        if prices.linear(own_p or provider, own_m or model, day):
            items.append((cid, int(first), day, provider, model, own_p, own_m, counts, int(n),
                          bool(tooled), bool(retried)))
        else:
            apart.add((cid, day, own_p, own_m, bool(tooled), bool(retried), usage_shape(counts)))
    rows = _projected_rows(conn, in_scope, params, starts, recorded=False,
                           where=f"AND NOT ({_consistent()})", positions=True)
    if apart:
        rows += [row for row in _projected_rows(conn, in_scope, params, starts, recorded=False,
                                                where=f"AND {_consistent()}", positions=True)
                 if _key(row[0], row[1], row[4], row[5], row[8], row[10],
                         _hours(dict(zip(USAGE_COUNTS, row[6])))) in apart]
    for (cid, at, provider, model, own_p, own_m, tokens, _amount, n_tools, _dups, attempt,
         position) in rows:
        items.append((cid, position, at, provider, model, own_p, own_m,
                      dict(zip(USAGE_COUNTS, tokens)), 1, n_tools > 0, (attempt or 1) > 1))
    return sorted(items, key=itemgetter(0, 1))


def _hours(counts: dict[str, int]) -> dict[str, int]:
    """``counts`` with the 1-hour cache writes as a charge counts them (at most the writes)."""
    return counts | {"cache_write_1h_tokens": min(counts["cache_write_1h_tokens"],
                                                  counts["cache_write_tokens"])}


class _Starts(dict):
    """Stream id -> its provider and model, as its first event names them when it is one of
    the kinds :func:`_responses` reads: the conversations' starts are read at once through
    the type index, any other stream's first event when it is first asked for."""

    def __init__(self, conn: ReadConnection, in_scope: str, params: Sequence[Any]) -> None:
        j = dialect_of(conn).json
        self._conn = conn
        self._select = (f"SELECT {j('e.payload', '$.provider')}, {j('e.payload', '$.model')} "
                        "FROM events AS e WHERE e.seq = 1 AND ")
        super().__init__((cid, (_str(p) or "", _str(m) or "")) for cid, p, m in conn.execute(
            self._select.replace("SELECT ", "SELECT e.stream_id, ", 1)
            + f"e.type = 'conversation_started' {in_scope}", tuple(params)))

    def __missing__(self, stream_id: str) -> tuple[str, str]:
        row = self._conn.execute(f"{self._select} e.type IN {_TYPES} AND e.stream_id = ?",
                                 (stream_id,)).fetchone()
        self[stream_id] = ("", "") if row is None else (_str(row[0]) or "", _str(row[1]) or "")
        return self[stream_id]


def _projected_sums(conn: ReadConnection, in_scope: str, params: Sequence[Any]) -> list[tuple]:
    """The responses recorded with a charge amount, summed in SQL per conversation and day:
    ``(conversation, day, responses, cost, tool turns, their cost, retried, their cost)``."""
    return [(cid, day, int(n), float(cost), int(tn), float(tc), int(rn), float(rc))
            for cid, day, n, cost, tn, tc, rn, rc in conn.execute(
        "SELECT e.stream_id, e.day, count(*), sum(e.charge_amount), "
        "sum(CASE WHEN e.tool_calls > 0 THEN 1 ELSE 0 END), "
        "sum(CASE WHEN e.tool_calls > 0 THEN e.charge_amount ELSE 0 END), "
        "sum(CASE WHEN e.attempt > 1 THEN 1 ELSE 0 END), "
        "sum(CASE WHEN e.attempt > 1 THEN e.charge_amount ELSE 0 END) "
        f"FROM (SELECT m.conversation_id AS stream_id, m.day, m.charge_amount, m.tool_calls, "
        f"m.attempt FROM {MODEL_CALLS} AS m WHERE m.ok AND m.charge_amount IS NOT NULL) AS e "
        f"WHERE 1 = 1 {in_scope} GROUP BY e.stream_id, e.day", tuple(params))]


def _projected_duplicates(conn: ReadConnection, in_scope: str, params: Sequence[Any],
                          starts: _Starts) -> list[tuple]:
    """The responses followed by refused duplicates, as :func:`_responses` rows with their
    count: each ``duplicate`` refusal of the tool calls' projection belongs to its
    conversation's last response before it (found through the ``events_by_type`` index)."""
    d = dialect_of(conn)
    counts = ", ".join(f"m.{n}" for n in USAGE_COUNTS)
    found = conn.execute(
        f"SELECT e.* FROM (SELECT m.conversation_id AS stream_id, m.position, m.recorded_at, "
        f"m.provider, m.model, {counts}, m.charge_amount, m.tool_calls, m.attempt, count(*) AS n "
        f"FROM {TOOL_CALLS} AS t JOIN events AS r ON r.position = t.position "
        "JOIN events AS p ON p.stream_id = r.stream_id AND p.seq = (SELECT max(q.seq) "
        "FROM events AS q WHERE q.type = 'model_responded' AND q.stream_id = r.stream_id "
        f"AND q.seq < r.seq) JOIN {MODEL_CALLS} AS m ON m.position = p.position "
        "WHERE t.outcome = 'refused' AND t.reason = 'duplicate' GROUP BY m.position) AS e "
        f"WHERE 1 = 1 {in_scope} ORDER BY e.stream_id, e.position", tuple(params)).fetchall()
    rows = []
    for row in found:
        *row, n = row if d.sorts_as_python else (*_exactly(tuple(row[:-1])), int(row[-1]))
        cid, _, at, own_p, own_m, *tokens, amount, n_tools, attempt = row
        rows.append((cid, at, *starts[cid], own_p, own_m, tuple(tokens), amount,
                     n_tools, n, attempt))
    return rows


def _exactly(row: tuple) -> tuple:
    """A PostgreSQL row's numerics as SQLite gives them: integer counts, a float amount."""
    cid, position, at, own_p, own_m, *tokens, amount, n_tools, attempt = row
    return (cid, position, at, own_p, own_m, *map(int, tokens),
            None if amount is None else float(amount), int(n_tools),
            None if attempt is None else int(attempt))


def _str(value: Any) -> str | None:
    # what json_extract gave the old query: a string, or None for a missing or null field
    return value if value is None or isinstance(value, str) else str(value)


def cost_figures(conn: ReadConnection, prices: Prices, top: int, *, reprice: bool = False,
                 in_scope: str = "", params: Sequence[Any] = (),
                 projected: bool = False) -> dict[str, Any]:
    """The ``cost`` section of the audit report, over the responses ``in_scope`` selects
    (a condition on ``e.stream_id`` with ``params``; empty: every conversation).

    Keys: ``currency``, ``prices`` (the source), ``total``, ``complete``,
    ``unpriced`` (provider, model and reason), ``by_provider_model``,
    ``by_provider``, ``by_day``, ``by_day_model`` (day, provider, model), ``conversations`` (the ``top`` most expensive,
    0: all), ``tool_turns`` (responses that called tools), ``duplicates``
    (the share of each response's cost spent on calls refused as duplicates),
    ``retried`` (responses to requests sent more than once), ``recorded``
    (responses priced at their recorded charge) and, with ``reprice``,
    ``repriced`` (the same calls at today's prices: total and per conversation).

    ``projected``: read the model and tool calls' projection tables (the caller has checked
    that they are in step, ``projections.in_step``) instead of every response's payload; the
    figures are the same.
    """
    # recorded amounts summed in SQL, the others priced once per group (no row read)
    summed = projected and not reprice
    starts = _Starts(conn, in_scope, params) if projected else None
    rows = ([] if summed else _projected_rows(conn, in_scope, params, starts, recorded=True)
            if projected else _responses(conn, in_scope, params))
    per_pm: dict[tuple[str, str], float | None] = {}
    per_provider: dict[str, float | None] = {}
    per_day: dict[str, float | None] = {}
    per_day_pm: dict[tuple[str, str, str], float | None] = {}
    per_conv: dict[str, float | None] = {}
    today_conv: dict[str, float | None] = {}
    unpriced: dict[tuple[str, str], str] = {}
    tool_turns = {"responses": 0, "cost": 0.0}
    duplicates = {"responses": 0, "cost": 0.0}
    retried = {"responses": 0, "cost": 0.0}
    recorded_n = 0
    usages: dict[tuple[int, ...], Usage] = {}

    def price(provider: str, model: str, own_provider: str | None, own_model: str | None,
              at: str, usage: Any, recorded: float | None) -> tuple[float | None, Charge | None]:
        # figures are by the conversation's provider and model, as every audit figure is;
        # a response that names its own is priced as that one
        priced = (own_provider or provider, own_model or model)
        now = None
        if reprice or recorded is None:
            if type(usage) is not Usage:  # the projection's counts: one Usage per distinct one
                usage = usages.get(usage) or usages.setdefault(
                    usage, Usage(**dict(zip(USAGE_COUNTS, usage))))
            now = prices.charge(*priced, at, usage)
        if recorded is not None:
            return recorded, now
        assert now is not None
        if now.amount is None:
            unpriced.setdefault(priced, now.explained(*priced) or "no price")
        return now.amount, now

    def add(cid: str, day: str, provider: str, model: str, cost: float | None) -> None:
        per_pm[(provider, model)] = add_cost(per_pm.get((provider, model), 0.0), cost)
        per_provider[provider] = add_cost(per_provider.get(provider, 0.0), cost)
        per_day[day] = add_cost(per_day.get(day, 0.0), cost)
        key = (day, provider, model)
        per_day_pm[key] = add_cost(per_day_pm.get(key, 0.0), cost)
        per_conv[cid] = add_cost(per_conv.get(cid, 0.0), cost)

    if summed:
        for cid, day, n, cost, tn, tc, rn, rc in _projected_sums(conn, in_scope, params):
            add(cid, day, *starts[cid], cost)
            recorded_n += n
            tool_turns["responses"] += tn
            tool_turns["cost"] += tc
            retried["responses"] += rn
            retried["cost"] += rc
        for (cid, _position, at, provider, model, own_provider, own_model, counts, n, tooled,
             again) in _projected_groups(conn, in_scope, params, starts, prices):
            cost, _now = price(provider, model, own_provider, own_model, at, Usage(**counts),
                               None)
            add(cid, at[:10], provider, model, cost)
            if tooled:
                _count(tool_turns, cost, n)
            if again:
                _count(retried, cost, n)
    for (cid, at, provider, model, own_provider, own_model, usage, recorded,
         n_tools, n_dups, attempt) in rows:
        cost, now = price(provider, model, own_provider, own_model, at, usage, recorded)
        recorded_n += recorded is not None
        add(cid, at[:10], provider, model, cost)
        if reprice:
            assert now is not None
            today_conv[cid] = add_cost(today_conv.get(cid, 0.0), now.amount)
        if n_tools:
            _count(tool_turns, cost)
        if n_dups:
            _count(duplicates, None if cost is None else cost * min(n_dups, n_tools) / n_tools
                   if n_tools else 0.0)
        if (attempt or 1) > 1:
            _count(retried, cost)
    if projected:  # the projection's rows carry no duplicates: each is counted here
        for (_cid, at, provider, model, own_provider, own_model, usage, recorded,
             n_tools, n_dups, _attempt) in _projected_duplicates(conn, in_scope, params, starts):
            cost, _now = price(provider, model, own_provider, own_model, at, usage, recorded)
            _count(duplicates, None if cost is None else cost * min(n_dups, n_tools) / n_tools
                   if n_tools else 0.0)
    if summed:  # the conversations in the order the rows give them (ties keep it)
        per_conv = {cid: per_conv[cid] for cid in sorted(per_conv)}
    ranked = sorted(per_conv.items(), key=lambda kv: (kv[1] is not None, kv[1] or 0.0),
                    reverse=True)
    report: dict[str, Any] = {
        "currency": prices.currency,
        "prices": prices.source,
        "total": _round(sum(v for v in per_pm.values() if v is not None)),
        "complete": not unpriced,
        "unpriced": [{"provider": p, "model": m, "reason": r}
                     for (p, m), r in sorted(unpriced.items())],
        "by_provider_model": [{"provider": p, "model": m, "cost": _round(v)}
                              for (p, m), v in sorted(per_pm.items())],
        "by_provider": [{"provider": p, "cost": _round(v)} for p, v in sorted(per_provider.items())],
        "by_day": [{"day": d, "cost": _round(v)} for d, v in sorted(per_day.items())],
        "by_day_model": [{"day": d, "provider": p, "model": m, "cost": _round(v)}
                         for (d, p, m), v in sorted(per_day_pm.items())],
        "conversations": [{"conversation_id": cid, "cost": _round(v)}
                          for cid, v in (ranked if top == 0 else ranked[:top])],
        "tool_turns": _rounded(tool_turns),
        "duplicates": _rounded(duplicates),
        "retried": _rounded(retried),
        "recorded": recorded_n,
    }
    if reprice:
        report["repriced"] = {
            "total": _round(sum(v for v in today_conv.values() if v is not None)),
            "complete": all(v is not None for v in today_conv.values()),
            "conversations": [{"conversation_id": c["conversation_id"], "recorded": c["cost"],
                               "today": _round(today_conv[c["conversation_id"]])}
                              for c in report["conversations"]]}
    return report


class _Priced(msgspec.Struct):
    """What a response's tokens and cost read (``conversation_figures``); the rest is skipped."""

    provider: Any = None
    model: Any = None
    usage: Usage | None = None
    charge: Charge | None = None


_priced = msgspec.json.Decoder(_Priced)


def conversation_figures(conn: ReadConnection, prices: Prices,
                         ids: Sequence[str]) -> dict[str, tuple[int, float | None]]:
    """Each of ``ids``' ``(tokens, cost)``: its responses' input plus output tokens, and its
    cost as :func:`cost_figures` figures its ``conversations`` (each call at its recorded
    charge, else at the prices of its time; ``None``: a call is unpriced).

    One pass over the conversations' own responses, each payload decoded once for just
    these fields (no JSON function per field, no join per response); conversations without
    model responses are left out.
    """
    if not ids:
        return {}
    j, marks = dialect_of(conn).json, ", ".join("?" * len(ids))
    started = {cid: (_str(p) or "", _str(m) or "") for cid, p, m in conn.execute(
        f"SELECT stream_id, {j('payload', '$.provider')}, {j('payload', '$.model')} "
        f"FROM events WHERE seq = 1 AND stream_id IN ({marks})", tuple(ids))}
    tokens: dict[str, int] = {}
    per_conv: dict[str, float | None] = {}
    for cid, at, payload in conn.execute(
            "SELECT stream_id, recorded_at, payload FROM events "
            f"WHERE type = 'model_responded' AND stream_id IN ({marks})", tuple(ids)):
        event = _priced.decode(_text(payload))
        usage = event.usage or Usage()
        provider, model = started.get(cid, ("", ""))
        cost = call_cost(prices, _str(event.provider) or provider, _str(event.model) or model,
                         at, usage, event.charge)
        tokens[cid] = tokens.get(cid, 0) + usage.input_tokens + usage.output_tokens
        per_conv[cid] = add_cost(per_conv.get(cid, 0.0), cost)
    return {cid: (tokens[cid], _round(v)) for cid, v in per_conv.items()}


def conversation_costs(conn: ReadConnection, prices: Prices,
                       ids: Sequence[str]) -> dict[str, float | None]:
    """Each of ``ids``' cost (:func:`conversation_figures`); conversations without model
    calls are left out."""
    return {cid: cost for cid, (_, cost) in conversation_figures(conn, prices, ids).items()}


def _text(value: Any) -> bytes | str:
    # PostgreSQL's json text, SQLite's: both strings; a driver may hand back a parsed object
    return value if isinstance(value, (str, bytes)) else msgspec.json.encode(value)


def _count(bucket: dict[str, Any], cost: float | None, responses: int = 1) -> None:
    bucket["responses"] += responses
    bucket["cost"] = add_cost(bucket["cost"], cost)


def _rounded(bucket: dict[str, Any]) -> dict[str, Any]:
    return {"responses": bucket["responses"], "cost": _round(bucket["cost"])}


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 6)
