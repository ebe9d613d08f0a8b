"""The audit's queries, once over the projection tables and once over ``events`` itself.

Both sources answer the same questions with the same JSON paths (those of the
``model_calls`` and ``tool_calls`` views); the projections answer without
parsing a payload. ``{in_scope}`` narrows to the conversations in
``temp.audit_scope`` (empty when every conversation is in scope) and
``{and_tool}`` to one tool. ``pending`` and ``server`` read the calls each
response asked for as rows ``(conversation_id, call_id, tool, kind)`` (the
projection keeps them so, ``events`` parses them with
``engine.audit.projections.REQUESTED_SQL``); their ``{in_scope}`` and
``{and_tool}`` are ``REQUESTED_SCOPE`` and ``REQUESTED_TOOL`` for either source.
A client call is pending when it has a call id and no outcome of its
conversation has that id.
"""

from __future__ import annotations

import msgspec

from turnlog.journal import POSTGRES, SQLITE, Dialect
from .projections import MODEL_CALLS, REQUESTED_CALLS, TOOL_CALLS, requested_sql

__all__ = ["EVENTS", "PROJECTIONS", "REQUESTED_SCOPE", "REQUESTED_TOOL", "SOURCES", "Source",
           "events_source", "projections_source", "requested_scope"]


class Source(msgspec.Struct, frozen=True, kw_only=True):
    """One way of reading model and tool calls; every SQL text returns the same columns."""

    name: str
    in_scope: str
    and_tool: str
    #: -> count of model responses
    turns: str
    #: -> conversation_id, provider, model, day, responses, input, output, cached, written, reasoning
    calls: str
    #: -> error_type, count
    failures: str
    #: -> tool, refused, succeeded, reason, duration_ms (one row per call)
    tools: str
    #: -> the conversations that called the tool ``?``
    tool_users: str
    #: -> tool, count of its calls with no outcome in their conversation
    pending: str
    #: -> kind, tool, count of the server tool calls (``SERVER_CALL_KINDS``)
    server: str


#: ``{in_scope}`` and ``{and_tool}`` of the ``pending`` and ``server`` queries.
REQUESTED_TOOL = "AND tool = ?"


def requested_scope(d: Dialect) -> str:
    """``{in_scope}`` of the ``pending`` and ``server`` queries."""
    return f"AND conversation_id IN (SELECT conversation_id FROM {d.temp}.audit_scope)"


REQUESTED_SCOPE = requested_scope(SQLITE)

# NOT IN over an uncorrelated subquery is built once as a temporary index.
_PENDING = """SELECT tool, count(*) FROM ({requested}) AS q WHERE kind = 'client' {{in_scope}}
  {{and_tool}} AND call_id IS NOT NULL AND (conversation_id, call_id) NOT IN ({answered})
  GROUP BY tool"""
# Over the projections: one anti-join, each requested call looked up in the tool calls' index.
_PENDING_PROJECTED = f"""SELECT tool, count(*) FROM {REQUESTED_CALLS} AS q
  WHERE kind = 'client' {{in_scope}} {{and_tool}} AND call_id IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM {TOOL_CALLS} AS a
                    WHERE a.conversation_id = q.conversation_id AND a.call_id = q.call_id)
  GROUP BY tool"""
_SERVER = """SELECT kind, tool, count(*) FROM ({requested}) AS q WHERE kind != 'client' {{in_scope}}
  {{and_tool}} GROUP BY kind, tool ORDER BY kind, tool"""


def _requested(d: Dialect, calls: str) -> str:
    return f"""SELECT m.cid AS conversation_id, {d.json('r.value', '$[0]')} AS call_id,
       {d.json('r.value', '$[1]')} AS tool, {d.json('r.value', '$[2]')} AS kind
FROM ({calls}) AS m, {d.each('m.requested', None, 'r')}"""


# Grouping happens before the join, so the scope table is read once per group.
_CALLS = """
SELECT g.cid, s.provider, s.model, g.day, g.n, g.i, g.o, g.c, g.w, g.r
FROM ({grouped}) AS g JOIN {temp}.audit_scope AS s ON s.conversation_id = g.cid
"""


def projections_source(d: Dialect) -> Source:
    """The audit's queries over the projection tables, in dialect ``d``."""
    return Source(
        name="projections",
        in_scope=f"AND conversation_id IN (SELECT conversation_id FROM {d.temp}.audit_scope)",
        and_tool="AND tool = ?",
        turns=f"SELECT count(*) FROM {MODEL_CALLS} WHERE ok {{in_scope}}",
        calls=_CALLS.format(temp=d.temp, grouped=f"""
            SELECT conversation_id AS cid, day, count(*) AS n, sum(input_tokens) AS i,
                   sum(output_tokens) AS o, sum(cached_input_tokens) AS c,
                   sum(cache_write_tokens) AS w, sum(reasoning_tokens) AS r
            FROM {MODEL_CALLS} WHERE ok {{in_scope}} GROUP BY conversation_id, day"""),
        failures=f"SELECT coalesce(error_type, ''), count(*) FROM {MODEL_CALLS} "
                 f"WHERE NOT ok {{in_scope}} GROUP BY 1 ORDER BY 1",
        tools=f"SELECT tool, outcome = 'refused', outcome = 'succeeded', reason, duration_ms "
              f"FROM {TOOL_CALLS} WHERE 1 = 1 {{in_scope}} {{and_tool}}",
        tool_users=f"SELECT conversation_id FROM (SELECT conversation_id, tool FROM {TOOL_CALLS} "
                   f"UNION ALL SELECT conversation_id, tool FROM {REQUESTED_CALLS}) AS u "
                   "WHERE tool = ?",
        pending=_PENDING_PROJECTED,
        server=_SERVER.format(requested=f"SELECT * FROM {REQUESTED_CALLS}"),
    )


# SQLite caches a payload's parse across the json_extract calls of one row, so each
# payload below is parsed once.
def events_source(d: Dialect) -> Source:
    """The audit's queries over ``events`` itself, in dialect ``d``."""
    j = d.json
    by_events = _requested(d, f"SELECT stream_id AS cid, {requested_sql(d).format(e='events')} "
                              "AS requested FROM events WHERE type = 'model_responded'")
    name = j("payload", "$.name")
    call_id = j("payload", "$.call_id")
    return Source(
        name="events",
        in_scope=f"AND stream_id IN (SELECT conversation_id FROM {d.temp}.audit_scope)",
        and_tool=f"AND {name} = ?",
        turns="SELECT count(*) FROM events WHERE type = 'model_responded' {in_scope}",
        calls=_CALLS.format(temp=d.temp, grouped="""
            SELECT stream_id AS cid, substr(recorded_at, 1, 10) AS day, count(*) AS n, """
            + ", ".join(f"coalesce(sum({j('payload', f'$.usage.{key}', 'number')}), 0) AS {alias}"
                        for key, alias in (("input_tokens", "i"), ("output_tokens", "o"),
                                           ("cached_input_tokens", "c"),
                                           ("cache_write_tokens", "w"),
                                           ("reasoning_tokens", "r")))
            + """
            FROM events WHERE type = 'model_responded' {in_scope} GROUP BY stream_id, day"""),
        failures=f"SELECT coalesce({j('payload', '$.error_type')}, ''), count(*) FROM events "
                 "WHERE type = 'model_failed' {in_scope} GROUP BY 1 ORDER BY 1",
        tools=f"""SELECT {name}, type = 'tool_call_rejected',
                        {j('payload', '$.success', 'bool')}, {j('payload', '$.reason')},
                        {j('payload', '$.duration_ms', 'number')}
                 FROM events WHERE type IN ('tool_completed', 'tool_call_rejected')
                 {{in_scope}} {{and_tool}}""",
        tool_users=f"SELECT conversation_id FROM (SELECT stream_id AS conversation_id, "
                   f"{name} AS tool FROM events "
                   "WHERE type IN ('tool_completed', 'tool_call_rejected') "
                   f"UNION ALL SELECT conversation_id, tool FROM ({by_events}) AS b) AS u "
                   "WHERE tool = ?",
        pending=_PENDING.format(requested=by_events, answered=(
            f"SELECT stream_id, {call_id} FROM events "
            "WHERE type IN ('tool_completed', 'tool_call_rejected') "
            f"AND {call_id} IS NOT NULL")),
        server=_SERVER.format(requested=by_events),
    )


PROJECTIONS = projections_source(SQLITE)
EVENTS = events_source(SQLITE)
SOURCES: dict[str, tuple[Source, Source]] = {
    d.name: (projections_source(d), events_source(d)) for d in (SQLITE, POSTGRES)}
"""Dialect name -> (projections, events)."""
