"""The audit's queries, once over the projection tables and once over ``events`` itself.

Both sources answer the same questions with the same JSON paths (those of the
``model_calls`` and ``tool_calls`` views); the projections answer without
parsing a payload. ``{in_scope}`` narrows to the conversations in
``temp.audit_scope`` (empty when every conversation is in scope) and
``{and_tool}`` to one tool. ``pending`` and ``server`` read the calls each
response asked for (``engine.projections.REQUESTED_SQL``) as rows
``(conversation_id, call_id, tool, kind)``; their ``{in_scope}`` and
``{and_tool}`` are ``REQUESTED_SCOPE`` and ``REQUESTED_TOOL`` for either source.
"""

from __future__ import annotations

import msgspec

from .projections import MODEL_CALLS, REQUESTED_SQL, TOOL_CALLS

__all__ = ["EVENTS", "PROJECTIONS", "REQUESTED_SCOPE", "REQUESTED_TOOL", "Source"]


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


_SCOPE = "(SELECT conversation_id FROM temp.audit_scope)"

#: ``{in_scope}`` and ``{and_tool}`` of the ``pending`` and ``server`` queries.
REQUESTED_SCOPE = f"AND conversation_id IN {_SCOPE}"
REQUESTED_TOOL = "AND tool = ?"

_REQUESTED = """SELECT m.cid AS conversation_id, json_extract(r.value, '$[0]') AS call_id,
       json_extract(r.value, '$[1]') AS tool, json_extract(r.value, '$[2]') AS kind
FROM ({calls}) AS m, json_each(m.requested) AS r"""

# NOT IN over an uncorrelated subquery is built once as a temporary index.
_PENDING = """SELECT tool, count(*) FROM ({requested}) WHERE kind = 'client' {{in_scope}} {{and_tool}}
  AND (conversation_id, call_id) NOT IN ({answered}) GROUP BY tool"""
_SERVER = """SELECT kind, tool, count(*) FROM ({requested}) WHERE kind != 'client' {{in_scope}}
  {{and_tool}} GROUP BY kind, tool ORDER BY kind, tool"""
_BY_PROJECTION = _REQUESTED.format(
    calls=f"SELECT conversation_id AS cid, requested FROM {MODEL_CALLS} WHERE requested IS NOT NULL")
_BY_EVENTS = _REQUESTED.format(
    calls=f"SELECT stream_id AS cid, {REQUESTED_SQL.format(e='events')} AS requested FROM events "
          "WHERE type = 'model_responded'")

# Grouping happens before the join, so the scope table is read once per group.
_CALLS = """
SELECT g.cid, s.provider, s.model, g.day, g.n, g.i, g.o, g.c, g.w, g.r
FROM ({grouped}) AS g JOIN temp.audit_scope AS s ON s.conversation_id = g.cid
"""

PROJECTIONS = Source(
    name="projections",
    in_scope=f"AND conversation_id IN {_SCOPE}",
    and_tool="AND tool = ?",
    turns=f"SELECT count(*) FROM {MODEL_CALLS} WHERE ok {{in_scope}}",
    calls=_CALLS.format(grouped=f"""
        SELECT conversation_id AS cid, day, count(*) AS n, sum(input_tokens) AS i,
               sum(output_tokens) AS o, sum(cached_input_tokens) AS c,
               sum(cache_write_tokens) AS w, sum(reasoning_tokens) AS r
        FROM {MODEL_CALLS} WHERE ok {{in_scope}} GROUP BY conversation_id, day"""),
    failures=f"SELECT coalesce(error_type, ''), count(*) FROM {MODEL_CALLS} "
             f"WHERE NOT ok {{in_scope}} GROUP BY 1 ORDER BY 1",
    tools=f"SELECT tool, outcome = 'refused', outcome = 'succeeded', reason, duration_ms "
          f"FROM {TOOL_CALLS} WHERE 1 {{in_scope}} {{and_tool}}",
    tool_users=f"SELECT conversation_id FROM (SELECT conversation_id, tool FROM {TOOL_CALLS} "
               f"UNION ALL SELECT conversation_id, tool FROM ({_BY_PROJECTION})) WHERE tool = ?",
    pending=_PENDING.format(requested=_BY_PROJECTION, answered=(
        f"SELECT conversation_id, call_id FROM {TOOL_CALLS} WHERE call_id IS NOT NULL")),
    server=_SERVER.format(requested=_BY_PROJECTION),
)

# SQLite caches a payload's parse across the json_extract calls of one row, so each
# payload below is parsed once.
EVENTS = Source(
    name="events",
    in_scope=f"AND stream_id IN {_SCOPE}",
    and_tool="AND json_extract(payload, '$.name') = ?",
    turns="SELECT count(*) FROM events WHERE type = 'model_responded' {in_scope}",
    calls=_CALLS.format(grouped="""
        SELECT stream_id AS cid, substr(recorded_at, 1, 10) AS day, count(*) AS n,
               coalesce(sum(json_extract(payload, '$.usage.input_tokens')), 0) AS i,
               coalesce(sum(json_extract(payload, '$.usage.output_tokens')), 0) AS o,
               coalesce(sum(json_extract(payload, '$.usage.cached_input_tokens')), 0) AS c,
               coalesce(sum(json_extract(payload, '$.usage.cache_write_tokens')), 0) AS w,
               coalesce(sum(json_extract(payload, '$.usage.reasoning_tokens')), 0) AS r
        FROM events WHERE type = 'model_responded' {in_scope} GROUP BY stream_id, day"""),
    failures="SELECT coalesce(json_extract(payload, '$.error_type'), ''), count(*) FROM events "
             "WHERE type = 'model_failed' {in_scope} GROUP BY 1 ORDER BY 1",
    tools="""SELECT json_extract(payload, '$.name'), type = 'tool_call_rejected',
                    json_extract(payload, '$.success'), json_extract(payload, '$.reason'),
                    json_extract(payload, '$.duration_ms')
             FROM events WHERE type IN ('tool_completed', 'tool_call_rejected')
             {in_scope} {and_tool}""",
    tool_users="SELECT conversation_id FROM (SELECT stream_id AS conversation_id, "
               "json_extract(payload, '$.name') AS tool FROM events "
               "WHERE type IN ('tool_completed', 'tool_call_rejected') "
               f"UNION ALL SELECT conversation_id, tool FROM ({_BY_EVENTS})) WHERE tool = ?",
    pending=_PENDING.format(requested=_BY_EVENTS, answered=(
        "SELECT stream_id, json_extract(payload, '$.call_id') FROM events "
        "WHERE type IN ('tool_completed', 'tool_call_rejected') "
        "AND json_extract(payload, '$.call_id') IS NOT NULL")),
    server=_SERVER.format(requested=_BY_EVENTS),
)
