"""A conversation's status in SQL, generated from the one rule (``engine.state``).

``ConversationState.status`` is the definition: ``ENDED_STATUS`` (the lifecycle a run ended
in, and the machine's transitions name the event types that end in each), then
``awaiting_approval``, ``interrupted`` and ``active``. The ``conversations`` view reads the
same from the events: the conversation's lineage is walked with a recursive query (its own
stream, then each parent up to the seq it was forked at, at any depth), so a fork of a fork
has its ancestors' status as ``load_state`` folds it. tests/engine/test_status_sql.py checks
both backends against ``ConversationState`` on random histories with forks of any depth.
"""

from __future__ import annotations

from turnlog.journal import Dialect

from turnlog.engine.model.events import (
    MARKERS,
    ApprovalDecided,
    ApprovalRequested,
    Event,
    RunInterrupted,
    ToolCallRejected,
    ToolCompleted,
)
from turnlog.engine.model.machine import TRANSITIONS
from turnlog.engine.model.state import ENDED_STATUS

__all__ = ["ENDED_BY", "status_sql"]


def _tag(cls: type[Event]) -> str:
    return str(cls.__struct_config__.tag)


#: The event types that end a run in each ended status, from the machine's transitions.
ENDED_BY: dict[str, tuple[str, ...]] = {
    status: tuple(sorted({trigger for trigger, _, dest, _, _ in TRANSITIONS if dest is lifecycle}))
    for lifecycle, status in ENDED_STATUS.items()
}

#: The annotations (erasure and hold records), which leave the state as it was.
_MARKER_TYPES: tuple[str, ...] = tuple(sorted(MARKERS))

#: The events that settle a call's request for approval (a decision, or the call's answer).
_SETTLED_BY = (_tag(ApprovalDecided), _tag(ToolCompleted), _tag(ToolCallRejected))


def _quoted(names: tuple[str, ...]) -> str:
    return ", ".join(f"'{name}'" for name in names)


def status_sql(d: Dialect, stream: str, last_seq: str, last_type: str, *,
               fork_at_marker: bool = True) -> str:
    """The status of the conversation whose stream is the SQL expression ``stream``, whose
    last own event has seq ``last_seq`` and type ``last_type``, in dialect ``d``.

    The lineage ``lin(stream_id, top, depth)`` is the conversation's own stream up to its last
    seq (depth 0; ``last_seq`` is its last event that is not a marker), then each parent up to
    its last event at or before the seq it was forked at that is not a marker (an erasure's or
    a hold's record changes no state, and a fork may be taken at one). A run's end is read from
    the lineage's last event that is not a fork's own start (a fork keeps the state it
    branched in); an approval waits while no later lineage event settles its call; the
    ``run_interrupted`` marker counts only as the conversation's own last event (a fork's
    start ends its parent's interruption). ``fork_at_marker=False`` gives views version 6's
    SQL, which took a parent's event at the fork point even when it was a marker.
    """
    j = d.json
    ends = "\n".join(f"            WHEN '{event}' THEN '{status}'"
                     for status, events in ENDED_BY.items() for event in events)
    parent_top = (f"""(SELECT max(m.seq) FROM events AS m
            WHERE m.stream_id = k.parent_stream_id AND m.seq <= k.parent_seq
              AND m.type NOT IN ({_quoted(_MARKER_TYPES)}))""" if fork_at_marker
                  else "k.parent_seq")
    return f"""(WITH RECURSIVE lin(stream_id, top, depth) AS (
        SELECT {stream}, {last_seq}, 0
        UNION ALL
        SELECT k.parent_stream_id, {parent_top}, lin.depth + 1
        FROM lin JOIN stream_links AS k ON k.stream_id = lin.stream_id)
    SELECT CASE
        WHEN ended.status IS NOT NULL THEN ended.status
        WHEN EXISTS (SELECT 1 FROM lin AS lq
            JOIN events AS q ON q.stream_id = lq.stream_id AND q.seq <= lq.top
            WHERE q.type = '{_tag(ApprovalRequested)}' AND NOT EXISTS (SELECT 1 FROM lin AS lv
                JOIN events AS v ON v.stream_id = lv.stream_id AND v.seq <= lv.top
                WHERE v.type IN ({_quoted(_SETTLED_BY)})
                  AND (lv.depth < lq.depth OR (lv.depth = lq.depth AND v.seq > q.seq))
                  AND {j('v.payload', '$.call_id')} = {j('q.payload', '$.call_id')}))
        THEN 'awaiting_approval'
        WHEN {last_type} = '{_tag(RunInterrupted)}' THEN 'interrupted'
        ELSE 'active' END
    FROM (SELECT (SELECT CASE r.type
{ends}
            END
        FROM lin JOIN events AS r ON r.stream_id = lin.stream_id AND r.seq = lin.top
        WHERE NOT (r.seq = 1 AND EXISTS (SELECT 1 FROM stream_links AS f
                                         WHERE f.stream_id = lin.stream_id))
        ORDER BY lin.depth LIMIT 1) AS status) AS ended)"""
