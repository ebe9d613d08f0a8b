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

from turnlog._lazy import export

#: What this package re-exports, by the module that defines it (imported on first use).
_EXPORTS = {
    ".figures": (
        "REPLAY_REPORTS", "STATUSES", "UNFINISHED", "AuditQuery", "audit", "audit_steps",
        "check_query", "parse_since",
    ),
    ".listing": (
        "appends_waiter", "conversation_events", "conversation_info", "events_after",
        "last_position", "list_conversations",
    ),
    ".prices": ("PriceTable", "Prices"),
    ".queries": ("ListQuery", "Reader", "chain_state"),
    ".views": ("EXTENSIONS", "connect_readonly"),
    "turnlog.journal": ("ReadConnection",),
}

#: ``turnlog.engine.audit(conn, query)`` is ``turnlog.engine.audit.audit(conn, query)``: the
#: engine re-exports the ``audit`` function under this package's name, so the package is
#: both (and ``import turnlog.engine.audit.prices`` reaches the submodule).
__all__ = export(__name__, _EXPORTS, call="audit")
