"""What ``turnlog audit`` computes, and the one query API over it.

Everything that reads the journal to answer audit questions lives here: the
SQL views (``views``) and the trigger-maintained projection tables
(``projections``) installed as a journal extension, their rendering for
SQLite or PostgreSQL (``dialects``), the audit's questions in either source
(``sql``), the figures (``figures``), prices (``prices``: genai-prices'
database under a user's override table), conversation listings for ``ls``/``show``/``tail``
(``listing``), a conversation's timeline entries (``timeline``) and the
viewer's reader (``queries``).

The command line, the viewer and the report call only the names below (no SQL
outside this package)::

    >>> from turnlog.engine.audit import AuditQuery, audit, connect_readonly  # doctest: +SKIP
    >>> conn = connect_readonly("turnlog.db")                          # doctest: +SKIP
    >>> audit(conn, AuditQuery(tool="search"))["tools"]                # doctest: +SKIP
"""

from __future__ import annotations

from turnlog.journal import ReadConnection
from .figures import (
    REPLAY_REPORTS,
    STATUSES,
    UNFINISHED,
    AuditQuery,
    audit,
    audit_steps,
    check_query,
    parse_since,
)
from .listing import (
    appends_waiter,
    conversation_events,
    conversation_info,
    events_after,
    last_position,
    list_conversations,
)
from .prices import Prices, PriceTable
from .queries import ListQuery, Reader, chain_state
from .views import EXTENSIONS, connect_readonly

__all__ = [
    "EXTENSIONS",
    "REPLAY_REPORTS",
    "STATUSES",
    "UNFINISHED",
    "AuditQuery",
    "ListQuery",
    "PriceTable",
    "Prices",
    "ReadConnection",
    "Reader",
    "appends_waiter",
    "audit",
    "audit_steps",
    "chain_state",
    "check_query",
    "connect_readonly",
    "conversation_events",
    "conversation_info",
    "events_after",
    "last_position",
    "list_conversations",
    "parse_since",
]
