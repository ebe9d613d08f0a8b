"""How the audit's numbers are printed, one format each, wherever they are shown (``turnlog
audit``, the viewer's audit and conversation pages, the report)."""

from __future__ import annotations

__all__ = ["milliseconds", "money"]


def money(v: float | None) -> str:
    """A cost: 4 decimals, ``<0.0001`` for a sliver, ``0`` for nothing, ``unpriced``.

    >>> money(0.0123456), money(0.00001), money(0.0), money(None)
    ('0.0123', '<0.0001', '0', 'unpriced')
    """
    if v is None:
        return "unpriced"
    if v == 0:
        return "0"
    if abs(v) < 0.00005:
        return "<0.0001"
    return f"{v:,.4f}"


def milliseconds(v: float | None) -> str:
    """A duration in milliseconds: always two decimals (medians and p95s line up).

    >>> milliseconds(0.0285), milliseconds(0.018), milliseconds(1234.5), milliseconds(None)
    ('0.03', '0.02', '1,234.50', '-')
    """
    return "-" if v is None else f"{v:,.2f}"
