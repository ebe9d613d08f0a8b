"""Chart geometry for the audit dashboard: numbers in, rectangles out; the SVG is a template.

Bars are scaled to the largest value of the chart; series get colour classes
``s0`` … ``s7`` (``static/app.css``). Labels are data, escaped by the template.
"""

from __future__ import annotations

from typing import Any

from turnlog.engine.audit.display import model_label

__all__ = ["by_day", "hbars"]

_PALETTE = 8


def by_day(rows: list[dict[str, Any]], key: str, *, width: int = 640,
           height: int = 180) -> dict[str, Any]:
    """Stacked bars, one per day, one segment per provider/model (``rows``: the dashboard's
    ``by_day``); ``key`` is the value drawn (``input``, ``output``, ``cost``, ...)."""
    days = sorted({r["day"] for r in rows})
    series = sorted({model_label(r["provider"], r["model"]) for r in rows})
    totals = {d: sum(r[key] or 0 for r in rows if r["day"] == d) for d in days}
    largest = max(totals.values(), default=0)
    top = largest or 1  # scale: all-zero bars stay flat
    slot = width / max(len(days), 1)
    bar_w = max(min(slot * 0.7, 48), 2)
    bars, labels = [], []
    for i, day in enumerate(days):
        x, y = i * slot + (slot - bar_w) / 2, float(height)
        for r in sorted((r for r in rows if r["day"] == day),
                        key=lambda r: model_label(r["provider"], r["model"])):
            name = model_label(r["provider"], r["model"])
            h = (r[key] or 0) / top * (height - 10)
            y -= h
            bars.append({"x": round(x, 1), "y": round(y, 1), "w": round(bar_w, 1),
                         "h": round(h, 1), "cls": f"s{series.index(name) % _PALETTE}",
                         "title": f"{day} {name}: {r[key] if r[key] is not None else 'unpriced'}"})
        labels.append({"x": round(i * slot + slot / 2, 1), "text": day[5:]})
    return {"width": width, "height": height, "bars": bars, "labels": labels, "max": largest,
            "legend": [{"name": s, "cls": f"s{i % _PALETTE}"} for i, s in enumerate(series)],
            "empty": not rows}


def hbars(items: list[tuple[str, float | None]], *, width: int = 320,
          percent: bool = False) -> dict[str, Any]:
    """Horizontal bars, one per ``(label, value)``; ``percent`` scales to 100."""
    top = 100.0 if percent else max((v or 0 for _, v in items), default=0) or 1
    return {"width": width, "rows": [
        {"label": label, "value": value, "w": round((value or 0) / top * width, 1)}
        for label, value in items], "percent": percent}
