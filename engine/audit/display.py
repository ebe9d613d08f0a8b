"""How the audit's figures and names are shown, one format each, wherever they appear
(``turnlog audit``, the viewer's pages, the report)."""

from __future__ import annotations

__all__ = ["milliseconds", "model_label", "money"]


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


def model_label(provider: str | None, model: str | None) -> str:
    """``provider/model``, saying so when the model (or both) was not recorded.

    >>> model_label("openai", "gpt-4o"), model_label("openai", ""), model_label(None, None)
    ('openai/gpt-4o', 'openai (model not recorded)', '(not recorded)')
    """
    if provider and model:
        return f"{provider}/{model}"
    if provider:
        return f"{provider} (model not recorded)"
    return f"{model} (provider not recorded)" if model else "(not recorded)"
