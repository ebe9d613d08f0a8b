"""The read API over a journal that ``turnlog view``, ``turnlog report`` and the CLI share.

A :class:`Reader` opens a journal read-only (``Journal.open(path, readonly=True)``, a
file or a PostgreSQL URL, for chains and a read connection for the engine's views:
``engine.audit.views.connect_readonly``) and answers
the questions a person auditing runs asks, as plain JSON-ready dicts:

- :meth:`Reader.conversations`: one page of conversations, filtered
  (:class:`ListQuery`: status, provider, model, tool, date range, text) and
  sorted, with turns, tools used, tokens, estimated cost and chain state;
- :meth:`Reader.conversation`: one conversation's listing row, chain state,
  fork tree, replays and recorded replay divergences;
- :meth:`Reader.timeline`: one page of its turns (user text, assistant text,
  thinking, each tool call with arguments and what became of it, refusals,
  failures, usage, cost and latency per turn);
- :meth:`Reader.dashboard`: the ``turnlog audit`` figures plus tokens and cost
  per day and provider/model.

Nothing here writes; every figure comes from functions the CLI uses too
(``engine.audit.listing``, ``engine.audit``, ``Journal.verify``, the price table).
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import threading
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import msgspec

from turnlog.journal import Journal, JournalProtocol, last_signed, shown_url

from .sql import SOURCES
from .timeline import entries
from turnlog.journal import SQLITE, Dialect, ReadConnection, dialect_of, whole_payload
from .figures import REPLAY_REPORTS, STATUSES, AuditQuery, audit, parse_since
from ..errors import BadFilterError, ConversationNotFound
from turnlog.engine.model.events import payload_of
from .listing import _turn_count, conversation_info, events_after, last_position
from .costs import conversation_figures
from .prices import Prices, PriceTable
from .projections import MODEL_CALLS, TOOL_CALLS, in_step
from .views import connect_readonly

__all__ = ["CHAIN_INLINE", "SORTS", "ListQuery", "Reader", "RecentOrder", "chain_state",
           "count_turns", "deferred_chain"]

#: The most events a conversation's page verifies before it answers (``Reader.conversation``;
#: the list verifies none): chains beyond it are left to their own request
#: (:meth:`Reader.chain`), so a page's time does not grow with a conversation's length.
CHAIN_INLINE = 500

#: Sort keys of the conversation list -> the ``conversations`` view's column (``turns`` and
#: ``tokens`` come from the audit's projection table when it is in step: one narrow scan).
SORTS = {"updated": "last_position", "started": "started_at", "id": "conversation_id",
         "status": "status", "turns": "turns", "events": "events",
         "tokens": "input_tokens + output_tokens"}
_PROJECTED_SORTS = {"turns": "coalesce(a.turns, 0)", "tokens": "coalesce(a.tokens, 0)"}
_PROJECTED_TOTALS = (f"LEFT JOIN (SELECT conversation_id, count(*) AS turns, "
                     f"sum(input_tokens + output_tokens) AS tokens FROM {MODEL_CALLS} WHERE ok "
                     f"GROUP BY conversation_id) AS a USING (conversation_id)")
#: the view's columns a list row shows: all cheap (indexed lookups, no payload summed)
_COLUMNS = ("conversation_id, started_at, updated_at, status, provider, model, turns, events, "
            "parent, replay_of, fork_seq, last_position")

_MAX_PER_PAGE = 500
#: the deepest the default list order is read from the journal's end (``Reader._recent_ids``)
_RECENT_PAGES = 2_000
#: the most events appended since a ``RecentOrder`` was read that it catches up with
_CATCH_UP = 10_000


class ListQuery(msgspec.Struct, frozen=True, kw_only=True):
    """Which conversations a list page shows, in which order; ``None`` means no filter.

    ``since``/``until`` bound the start time (``2025-01-31``, an ISO timestamp
    or ``7d``; ``until`` is inclusive of its day when it is a date). ``text``
    matches conversation ids and the text of user, assistant and tool messages.
    """

    status: str | None = None
    provider: str | None = None
    model: str | None = None
    tool: str | None = None
    since: str | None = None
    until: str | None = None
    text: str | None = None
    sort: str = "updated"
    descending: bool = True
    page: int = 1
    per_page: int = 50


def chain_state(journal: JournalProtocol, conversation_id: str) -> dict[str, Any]:
    """``{"ok": True, "checked": N}`` or ``{"ok": False, "seq": N, "conversation_id", "reason"}``.

    The chain of the conversation's whole history (ancestors up to the fork
    point included), as ``turnlog verify ID`` checks it.
    """
    report = journal.verify(conversation_id)
    bad = report.first_bad
    if bad is not None:
        return {"ok": False, "conversation_id": bad.stream_id, "seq": bad.seq,
                "reason": bad.reason, "checked": report.checked_events}
    if report.projections:
        m = report.projections[0]
        return {"ok": False, "conversation_id": m.stream_id, "seq": None,
                "reason": f"{m.object}: {m.reason}", "checked": report.checked_events}
    return {"ok": True, "checked": report.checked_events}


def deferred_chain(events: int) -> dict[str, Any]:
    """The chain state of a page that did not verify a chain of ``events`` events itself:
    ``{"ok": None, "deferred": True, "events": N}`` (:meth:`Reader.chain` verifies it)."""
    return {"ok": None, "deferred": True, "events": events}


def _stamp(text: str, name: str, end_of_day: bool = False) -> str:
    try:
        stamp = parse_since(text)
    except BadFilterError:
        raise BadFilterError(f"{name} {text!r} is not a date: use 2025-01-31, "
                             "2025-01-31T12:00:00Z or 7d / 12h / 30m") from None
    if end_of_day and len(text.strip()) == 10:
        stamp = stamp[:10] + "T23:59:59.999999Z"
    return stamp


def _prefilter(text: str, d: Dialect = SQLITE) -> str:
    """A cheap first pass for the text search: only messages whose raw payload holds the text
    (JSON escapes nothing else in it), or references a part kept in ``blobs``, have their
    text extracted; ``""`` when it would."""
    if any(c in text for c in '"\\') or any(ord(c) < 32 for c in text):
        return ""
    part = ("instr(payload, '{\"$blob\":\"') > 0" if d.name == "sqlite"
            else "strpos(payload, '{\"$blob\":\"') > 0")
    return ("position IN (SELECT position FROM events WHERE type IN ('user_message', "
            "'model_responded', 'tool_completed', 'tool_call_rejected') "
            f"AND ({d.contains('payload', '?')} OR {part})) AND ")


def count_turns(path: str, conversation_id: str) -> int:
    """How many turns the conversation's own events hold (distinct ``model_requested`` turn
    numbers), over a read connection of its own (a streamed page counts them after its
    reader has closed)."""
    conn = connect_readonly(path)
    try:
        return conn.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM events WHERE stream_id = ? AND type = "
            f"'model_requested' GROUP BY {dialect_of(conn).json('payload', '$.turn')}) AS t",
            (conversation_id,)).fetchone()[0]
    finally:
        conn.close()


class _Timeline(dict):
    """A timeline page whose ``turns`` and ``pages`` are counted when first read (``count``
    runs once): a page rendered as a stream shows its turns before counting them all."""

    def __init__(self, items: dict[str, Any], count: Any, per_page: int) -> None:
        super().__init__(items)
        self._count, self._per_page = count, per_page

    def __missing__(self, key: str) -> Any:
        if key not in ("turns", "pages"):
            raise KeyError(key)
        turns = self._count()
        self["turns"], self["pages"] = turns, max(1, math.ceil(turns / self._per_page))
        return self[key]


class RecentOrder:
    """The conversations last appended to, newest first (the list's default order), kept
    between readers, as a viewer keeps it between list pages.

    Read backwards from the journal's end once (``Reader._recent_ids``), then brought up
    to date from the events appended since: their conversations move to the front, the
    others keep their order (each one's last event is older than every new one). So a list
    page in the default order reads only the journal's new events.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (the journal's last position they are of, the ids, whether they are all there are)
        self._known: tuple[int, list[str], bool] = (-1, [], False)

    def ids(self, reader: Reader, count: int) -> list[str]:
        """The ``count`` conversations of ``reader``'s journal last appended to."""
        last = reader.last_position()
        with self._lock:
            position, ids, complete = self._known
        if position < last and last - position <= _CATCH_UP and position >= 0:
            ids = reader._appended_ids(position, ids)
            complete = complete and len(ids) <= _RECENT_PAGES
            del ids[_RECENT_PAGES:]
        elif position != last:
            ids, complete = [], False
        if len(ids) < count and not complete:
            ids = reader._recent_ids(count)
            complete = len(ids) < count
        with self._lock:
            if last >= self._known[0]:
                self._known = (last, ids, complete)
        return ids[:count]


class Reader:
    """A read-only view of the journal at ``path``; use as a context manager.

    Raises what ``Journal(path, readonly=True)`` raises for a missing or
    foreign file. A reader belongs to the thread that opened it.
    """

    def __init__(self, path: str, prices: Prices | PriceTable | None = None,
                 recent: RecentOrder | None = None) -> None:
        self.path = path
        self.prices = Prices.of(prices)
        self.recent = recent
        self.conn: ReadConnection = connect_readonly(path)
        self.dialect = dialect_of(self.conn)
        self._journal: JournalProtocol | None = None

    @property
    def journal(self) -> JournalProtocol:
        """The journal's own read-only handle (chains, ancestry, checkpoints), opened when
        first used: a list page never needs it."""
        if self._journal is None:
            # Without the engine's extensions, ``verify`` checks the hash chains alone (the
            # projections' recomputation is ``turnlog verify``'s and the audit's business).
            self._journal = Journal.open(self.path, readonly=True)
        return self._journal

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close both handles."""
        self.conn.close()
        if self._journal is not None:
            self._journal.close()

    # -- the list ----------------------------------------------------------------------

    def last_position(self) -> int:
        """The journal's last global position (what live pages poll)."""
        return last_position(self.conn)

    def appended_after(self, position: int, conversation_id: str | None = None) -> int | None:
        """The last position after ``position`` (of that conversation's events, if given),
        or ``None`` when nothing was appended since."""
        if conversation_id is None:
            last = last_position(self.conn)
            return last if last > position else None
        rows = events_after(self.conn, position, conversation_id=conversation_id, limit=1000)
        return rows[-1][0] if rows else None

    def last_signed(self) -> dict[str, int] | None:
        """The newest checkpoint kept in the journal: ``size`` signed, ``events`` now."""
        return last_signed(self.journal)

    def choices_after(self, position: int, choices: dict[str, list[str]],
                      most: int = _CATCH_UP) -> dict[str, list[str]] | None:
        """``choices`` (:meth:`choices` as of ``position``) with the values of the events
        appended since added; ``None`` when more than ``most`` were (read them afresh)."""
        if self.last_position() - position > most:
            return None
        j = self.dialect.json
        rows = self.conn.execute(
            f"SELECT type, seq, {j('payload', '$.provider')}, {j('payload', '$.model')}, "
            f"{j('payload', '$.name')} FROM events WHERE position > ? AND type IN "
            "('conversation_started', 'tool_completed', 'tool_call_rejected')",
            (position,)).fetchall()
        started = [(p, m) for kind, seq, p, m, _ in rows
                   if kind == "conversation_started" and seq == 1]
        tools = [t for kind, _, _, _, t in rows if kind != "conversation_started"]
        return {**choices,
                "providers": sorted({*choices["providers"], *(p for p, _ in started if p)}),
                "models": sorted({*choices["models"], *(m for _, m in started if m)}),
                "tools": sorted({*choices["tools"], *(t for t in tools if t)})}

    def choices(self) -> dict[str, list[str]]:
        """The values the list's filters can take: statuses, providers, models, tools."""
        j = self.dialect.json
        started = self.conn.execute(
            f"SELECT DISTINCT {j('payload', '$.provider')}, {j('payload', '$.model')} "
            "FROM events WHERE type = 'conversation_started' AND seq = 1").fetchall()
        # Names for a drop-down, not figures: the projection's narrow table when it is there
        # (checking that it is in step would cost more than the scan it saves).
        has_projection = self.conn.execute(self.dialect.table_exists(), (TOOL_CALLS,)).fetchone()
        tools = self.conn.execute(
            f"SELECT DISTINCT tool FROM {TOOL_CALLS}" if has_projection else
            f"SELECT DISTINCT {j('payload', '$.name')} FROM events "
            "WHERE type IN ('tool_completed', 'tool_call_rejected')").fetchall()
        return {"statuses": list(STATUSES),
                "providers": sorted({p for p, _ in started if p}),
                "models": sorted({m for _, m in started if m}),
                "tools": sorted({t for (t,) in tools if t}),
                "sorts": list(SORTS)}

    def _where(self, q: ListQuery) -> tuple[str, list[Any]]:
        if q.status is not None and q.status not in STATUSES:
            raise BadFilterError(f"status {q.status!r} is not one of {', '.join(STATUSES)}")
        where, params = [], []
        for column in ("status", "provider", "model"):
            value = getattr(q, column)
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if q.since is not None:
            where.append("started_at >= ?")
            params.append(_stamp(q.since, "since"))
        if q.until is not None:
            where.append("started_at <= ?")
            params.append(_stamp(q.until, "until", end_of_day=True))
        if q.tool is not None:
            projected, events = SOURCES[self.dialect.name]
            src = projected if in_step(self.conn) else events
            where.append(f"conversation_id IN ({src.tool_users})")
            params.append(q.tool)
        if q.text:
            d = self.dialect
            where.append(f"({d.contains('conversation_id', '?')} OR conversation_id IN "
                         f"(SELECT conversation_id FROM messages WHERE {_prefilter(q.text, d)}"
                         f"{d.contains('text', '?')}))")
            params += [q.text] * (3 if _prefilter(q.text) else 2)
        return (" WHERE " + " AND ".join(where)) if where else "", params

    def conversations(self, q: ListQuery = ListQuery()) -> dict[str, Any]:
        """One page of conversations: ``rows``, ``total``, ``page``, ``pages``, ``query``.

        Each row: ``conversation_id``, ``started_at``, ``status``, ``provider``,
        ``model``, ``turns``, ``events``, ``tools`` (names used), ``tokens``,
        ``cost`` (``None``: unpriced), ``chain``, ``parent``, ``replay_of`` and
        ``last_position`` (the position of its last event: its head).

        A page verifies no chain: ``chain`` is :func:`deferred_chain` (its events,
        ancestors' included), which :meth:`chain` verifies after the page is shown.
        Tokens and costs come from one pass over the page's responses
        (``engine.audit.costs.conversation_figures``).
        """
        if q.sort not in SORTS:
            raise BadFilterError(f"sort {q.sort!r} is not one of {', '.join(SORTS)}")
        if q.page < 1 or not 1 <= q.per_page <= _MAX_PER_PAGE:
            raise BadFilterError(f"page must be >= 1 and per_page 1..{_MAX_PER_PAGE}")
        where, params = self._where(q)
        total = self.conn.execute(
            f"SELECT count(*) FROM conversations{where}" if where else
            # every conversation: counted from the index, without the view's join per row
            "SELECT count(*) FROM events WHERE type = 'conversation_started' AND seq = 1",
            params).fetchone()[0]
        # a page past the last is empty (never an OFFSET past SQL's integers)
        ids = self._page_ids(q, where, params) if (q.page - 1) * q.per_page < total else []
        # The view's costly columns are computed for the page's rows only.
        by_id = {r[0]: r for r in self.conn.execute(
            f"SELECT {_COLUMNS} FROM conversations WHERE conversation_id IN "
            f"({', '.join('?' * len(ids))})", ids)}
        rows = [by_id[cid] for cid in ids if cid in by_id]
        tools, figures = self._tools_used(ids), conversation_figures(self.conn, self.prices, ids)
        items = []
        for (cid, started, updated, status, provider, model, turns, events, parent, replay_of,
             fork_seq, head) in rows:
            tokens, cost = figures.get(cid, (0, 0.0))
            items.append({"conversation_id": cid, "started_at": started, "updated_at": updated,
                          "status": status, "provider": provider, "model": model,
                          "turns": _turn_count(self.conn, turns, parent, fork_seq),
                          "events": events, "tokens": tokens, "tools": tools.get(cid, []),
                          "cost": cost, "chain": deferred_chain(events + (fork_seq or 0)),
                          "parent": parent, "replay_of": replay_of, "last_position": head})
        return {"rows": items, "total": total, "page": q.page,
                "pages": max(1, math.ceil(total / q.per_page)),
                "query": msgspec.to_builtins(q)}

    def _page_ids(self, q: ListQuery, where: str, params: list[Any]) -> list[str]:
        """The ids of the page, in order, computing only the sort key for every row."""
        if q.sort == "updated" and q.descending and not where \
                and q.page * q.per_page <= _RECENT_PAGES:
            ids = (self._recent_ids(q.page * q.per_page) if self.recent is None
                   else self.recent.ids(self, q.page * q.per_page))
            return ids[(q.page - 1) * q.per_page:]
        order = SORTS[q.sort]
        join = ""
        if q.sort in _PROJECTED_SORTS and in_step(self.conn):
            order, join = _PROJECTED_SORTS[q.sort], _PROJECTED_TOTALS
        direction = "DESC" if q.descending else "ASC"
        return [cid for (cid,) in self.conn.execute(
            f"SELECT conversation_id FROM conversations {join}{where} "
            f"ORDER BY {order} {direction}, conversation_id LIMIT ? OFFSET ?",
            [*params, q.per_page, (q.page - 1) * q.per_page])]

    def _recent_ids(self, count: int) -> list[str]:
        """The ``count`` conversations last appended to, newest first: the default list's
        order (``last_position DESC``), read backwards from the journal's end (by position,
        the table's key) instead of computing every conversation's last position."""
        found: list[str] = []
        seen: set[str] = set()
        before, batch = last_position(self.conn) + 1, max(256, 8 * count)
        while len(found) < count:
            rows = self.conn.execute(
                "SELECT position, stream_id FROM events WHERE position < ? "
                "ORDER BY position DESC LIMIT ?", (before, batch)).fetchall()
            fresh = [sid for _, sid in rows if not (sid in seen or seen.add(sid))]
            started = self._conversations_of(fresh)
            found += [sid for sid in fresh if sid in started]
            if len(rows) < batch:
                break
            before, batch = rows[-1][0], batch * 2
        return found[:count]

    def _conversations_of(self, streams: list[str]) -> set[str]:
        """Which of ``streams`` are conversations (a stream's first event starts it)."""
        if not streams:
            return set()
        return {sid for (sid,) in self.conn.execute(
            "SELECT stream_id FROM events WHERE seq = 1 AND type = 'conversation_started' "
            f"AND stream_id IN ({', '.join('?' * len(streams))})", streams)}

    def _appended_ids(self, position: int, ids: list[str]) -> list[str]:
        """``ids`` (conversations newest first as of ``position``) brought up to date: the
        conversations of the events after ``position``, newest first, then the others."""
        seen: set[str] = set()
        fresh = [sid for (sid,) in self.conn.execute(
            "SELECT stream_id FROM events WHERE position > ? ORDER BY position DESC",
            (position,)) if not (sid in seen or seen.add(sid))]
        started = self._conversations_of(fresh)
        return [sid for sid in fresh if sid in started] + [i for i in ids if i not in seen]

    def _tools_used(self, ids: list[str]) -> dict[str, list[str]]:
        if not ids:
            return {}
        marks = ", ".join("?" * len(ids))
        found: dict[str, list[str]] = defaultdict(list)
        for cid, name in self.conn.execute(
                f"SELECT DISTINCT stream_id, {self.dialect.json('payload', '$.name')} FROM events "
                "WHERE type IN ('tool_completed', 'tool_call_rejected') "
                f"AND stream_id IN ({marks}) ORDER BY 1, 2", ids):
            found[cid].append(name)
        return found

    def _model_calls(self) -> str:
        if in_step(self.conn):
            return MODEL_CALLS
        return ("(SELECT conversation_id, substr(recorded_at, 1, 10) AS day, ok, input_tokens, "
                "output_tokens, cached_input_tokens, cache_write_tokens FROM model_calls)")

    # -- one conversation --------------------------------------------------------------

    def _chain_within(self, conversation_id: str, events: int,
                      budget: int | None) -> tuple[dict[str, Any], int | None]:
        """The chain state when ``events`` fit in ``budget`` (``None``: no limit), else
        :func:`deferred_chain`; and the budget left."""
        if budget is None:
            return chain_state(self.journal, conversation_id), None
        if events > budget:
            return deferred_chain(events), budget
        return chain_state(self.journal, conversation_id), budget - events

    def chain(self, conversation_id: str) -> dict[str, Any]:
        """:func:`chain_state` of one conversation, however long; ``ConversationNotFound``
        for an unknown id."""
        if self.journal.last_seq(conversation_id) == 0:
            raise ConversationNotFound(
                f"no conversation {conversation_id!r} in {shown_url(self.path)}")
        return chain_state(self.journal, conversation_id)

    def head(self, conversation_id: str) -> int | None:
        """The position of the conversation's last event (its head), ``None`` for an unknown
        id: what a chain state verified before stays true of, the journal being append-only."""
        row = self.conn.execute("SELECT position FROM events WHERE stream_id = ? "
                                "ORDER BY seq DESC LIMIT 1", (conversation_id,)).fetchone()
        return None if row is None else row[0]

    def conversation_row(self, conversation_id: str) -> dict[str, Any]:
        """The conversation's listing row (``engine.audit.listing.conversation_info``);
        ``ConversationNotFound`` for an unknown id."""
        return conversation_info(self.conn, conversation_id, shown_url(self.path))

    def conversation(self, conversation_id: str,
                     verify_up_to: int | None = CHAIN_INLINE) -> dict[str, Any]:
        """The listing row plus ``started`` (its start event's payload), ``chain``,
        ``tree`` (the fork tree it belongs to), ``replays`` and ``replay_runs``.

        ``chain`` is verified when the history holds at most ``verify_up_to`` events
        (``None``: always), else :func:`deferred_chain`. Raises ``ConversationNotFound``
        for an unknown id.
        """
        info = conversation_info(self.conn, conversation_id, shown_url(self.path))
        first = self.conn.execute(
            "SELECT type, version, payload FROM events WHERE stream_id = ? AND seq = 1",
            (conversation_id,)).fetchone()
        info["started"] = payload_of(first[0], first[1], whole_payload(self.conn, first[2]),
                                     where=f"stream {conversation_id!r} seq 1")
        info["fork_seq"] = self.conn.execute(
            "SELECT parent_seq FROM stream_links WHERE stream_id = ?",
            (conversation_id,)).fetchone()
        info["fork_seq"] = info["fork_seq"][0] if info["fork_seq"] else None
        info["chain"] = self._chain_within(conversation_id,
                                           info["events"] + (info["fork_seq"] or 0),
                                           verify_up_to)[0]
        info["tree"] = self._tree(conversation_id)
        info["replay_runs"] = self._replay_runs(conversation_id)
        return info

    def _tree(self, conversation_id: str) -> dict[str, Any]:
        """The fork tree from the root of the conversation's ancestry down, every node with
        ``conversation_id``, ``fork_seq``, ``status``, ``current`` and ``children``."""
        root = self.journal.ancestry(conversation_id)[0][0]
        statuses = dict(self.conn.execute(
            "SELECT conversation_id, status FROM conversations WHERE conversation_id IN "
            "(WITH RECURSIVE t(id) AS (SELECT stream_id FROM events WHERE stream_id = ? "
            "AND seq = 1 UNION SELECT l.stream_id FROM stream_links l "
            "JOIN t ON l.parent_stream_id = t.id) SELECT id FROM t)", (root,)))

        def node(cid: str, fork_seq: int | None) -> dict[str, Any]:
            children = self.conn.execute(
                "SELECT stream_id, parent_seq FROM stream_links WHERE parent_stream_id = ? "
                "ORDER BY parent_seq, stream_id", (cid,)).fetchall()
            return {"conversation_id": cid, "fork_seq": fork_seq, "status": statuses.get(cid),
                    "current": cid == conversation_id,
                    "children": [node(c, s) for c, s in children]}

        return node(root, None)

    def _replay_runs(self, conversation_id: str) -> list[dict[str, Any]]:
        """Recorded deterministic replays of it (``turnlog replay --all``), newest first."""
        exists = self.conn.execute(self.dialect.table_exists(), (REPLAY_REPORTS,)).fetchone()
        if not exists:
            return []
        return [{"run_at": at, "ok": bool(ok), "seq": seq, "reason": reason}
                for at, ok, seq, reason in self.conn.execute(
                    f"SELECT run_at, ok, divergence_seq, reason FROM {REPLAY_REPORTS} "
                    "WHERE conversation_id = ? ORDER BY run_at DESC", (conversation_id,))]

    def timeline(self, conversation_id: str, page: int = 1, per_page: int = 50) -> dict[str, Any]:
        """Turns ``(page - 1) * per_page + 1`` … of the conversation's own events.

        Returns ``entries`` (dicts with a ``kind``: user, turn, assistant, tool,
        refusal, failure, end, other), ``page``, ``more`` (whether a later page
        exists), ``max_ms`` (the longest latency on the page, for scaling bars),
        and ``pages`` and ``turns``, which are counted over the whole conversation
        when first read (a page shows its turns before it counts them). Reads the
        turns' starts only up to the page's end. Raises ``ConversationNotFound``.
        """
        if page < 1 or not 1 <= per_page <= _MAX_PER_PAGE:
            raise BadFilterError(f"page must be >= 1 and per_page 1..{_MAX_PER_PAGE}")
        # the starts of turns (page - 1) * per_page + 1 … page * per_page + 1, no further
        starts = self._turn_starts(conversation_id, page * per_page + 1)
        if not starts and self.journal.last_seq(conversation_id) == 0:
            raise ConversationNotFound(
                f"no conversation {conversation_id!r} in {shown_url(self.path)}")
        if page > 1 and len(starts) <= (page - 1) * per_page:  # all of them were read
            pages = max(1, math.ceil(len(starts) / per_page))
            raise BadFilterError(f"page {page} is past the timeline's last page ({pages})")
        lo = 1 if page == 1 else starts[(page - 1) * per_page]
        hi_index = page * per_page
        hi = starts[hi_index] - 1 if hi_index < len(starts) else None
        items, longest = self._entries(conversation_id, self._started(conversation_id), lo, hi)
        return _Timeline({"entries": items, "page": page, "more": hi is not None,
                          "max_ms": longest},
                         functools.partial(count_turns, self.path, conversation_id), per_page)

    def timeline_pages(self, conversation_id: str,
                       per_page: int = _MAX_PER_PAGE) -> Iterator[tuple[list[dict[str, Any]], int]]:
        """Every page of the timeline in turn, as ``(entries, max_ms)``: the pages
        :meth:`timeline` gives, read one after the other (each turn start once) without
        holding more than one. Raises ``ConversationNotFound`` before the first."""
        if self.journal.last_seq(conversation_id) == 0:
            raise ConversationNotFound(
                f"no conversation {conversation_id!r} in {shown_url(self.path)}")
        started, lo, seen, after, turns = self._started(conversation_id), 1, set(), 0, 0
        while True:
            rows = self.conn.execute(
                f"SELECT seq, {self.dialect.json('payload', '$.turn')} FROM events "
                "WHERE stream_id = ? AND type = 'model_requested' AND seq > ? "
                "ORDER BY seq LIMIT ?", (conversation_id, after, 4096)).fetchall()
            for seq, turn in rows:
                if turn in seen:
                    continue
                seen.add(turn)
                turns += 1
                if turns > 1 and (turns - 1) % per_page == 0:  # the next page starts here
                    yield self._entries(conversation_id, started, lo, seq - 1)
                    lo = seq
            if len(rows) < 4096:
                break
            after = rows[-1][0]
        yield self._entries(conversation_id, started, lo, None)

    def _started(self, conversation_id: str) -> dict[str, Any]:
        type_, version, payload = self.conn.execute(
            "SELECT type, version, payload FROM events WHERE stream_id = ? AND seq = 1",
            (conversation_id,)).fetchone()
        return payload_of(type_, version, whole_payload(self.conn, payload),
                          where=f"stream {conversation_id!r} seq 1")

    def _entries(self, conversation_id: str, started: dict[str, Any], lo: int,
                 hi: int | None) -> tuple[list[dict[str, Any]], int]:
        """The timeline entries of events ``lo`` … ``hi`` (``None``: the last), and the
        longest latency among them."""
        events = [(seq, type_, at,
                   payload_of(type_, version, whole_payload(self.conn, payload),
                              where=f"stream {conversation_id!r} seq {seq}"))
                  for seq, type_, at, version, payload in self.conn.execute(
                      "SELECT seq, type, recorded_at, version, payload FROM events "
                      "WHERE stream_id = ? AND seq >= ? AND seq <= ? ORDER BY seq",
                      (conversation_id, lo, hi if hi is not None else 2**62))]
        items = entries(events, started, self.prices)
        longest = max([x.get("ms") or 0 for x in items]
                      + [p["outcome"].get("ms") or 0 for x in items for p in x.get("parts", ())
                         if p["type"] == "tool_call"], default=0)
        return items, longest

    def _turn_starts(self, conversation_id: str, count: int) -> list[int]:
        """The seqs at which the first ``count`` turns start (a turn's first request; retries
        repeat its number), read in batches up to the last of them."""
        starts: list[int] = []
        seen: set[Any] = set()
        after, batch = 0, max(64, min(count * 2, 4096))
        while len(starts) < count:
            rows = self.conn.execute(
                f"SELECT seq, {self.dialect.json('payload', '$.turn')} FROM events "
                "WHERE stream_id = ? AND type = 'model_requested' AND seq > ? "
                "ORDER BY seq LIMIT ?", (conversation_id, after, batch)).fetchall()
            for seq, turn in rows:
                if turn not in seen:
                    seen.add(turn)
                    starts.append(seq)
                    if len(starts) == count:
                        break
            if len(rows) < batch:
                break
            after = rows[-1][0]
        return starts

    # -- across conversations ----------------------------------------------------------

    def dashboard(self, query: AuditQuery = AuditQuery()) -> dict[str, Any]:
        """``turnlog audit``'s figures (``audit``) plus ``by_day``: per day and
        provider/model, responses, input and output tokens and cost (``None``: unpriced)."""
        report = audit(self.conn, query, self.prices)
        where, params = self._where(ListQuery(
            status=query.status, provider=query.provider, model=query.model, tool=query.tool))
        if query.since is not None:
            where += (" AND " if where else " WHERE ") + "started_at >= ?"
            params.append(query.since)
        per: dict[tuple[str, str, str], list] = {}
        costs = {(c["day"], c["provider"], c["model"]): c["cost"]
                 for c in report["cost"]["by_day_model"]}
        for provider, model, day, n, inp, out in self.conn.execute(
                f"SELECT {self.dialect.json('s.payload', '$.provider')}, "
                f"{self.dialect.json('s.payload', '$.model')}, m.day, count(*), "
                "sum(m.input_tokens), sum(m.output_tokens) "
                f"FROM {self._model_calls()} AS m JOIN events AS s "
                "ON s.stream_id = m.conversation_id AND s.seq = 1 "
                f"WHERE m.ok AND m.conversation_id IN (SELECT conversation_id FROM conversations"
                f"{where}) GROUP BY 1, 2, 3 ORDER BY 3, 1, 2", params):
            key = (day, provider or "", model or "")
            per[key] = [n, inp, out, costs.get(key)]
        report["by_day"] = [{"day": d, "provider": p, "model": m, "responses": n, "input": i,
                             "output": o, "cost": c} for (d, p, m), (n, i, o, c) in per.items()]
        report["generated_at"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return report
