"""Layered system directives, rendered once and recorded in ``conversation_started``.

Layers apply in a fixed order — ``global``, ``mode``, ``agent``, ``run`` —
and each holds named callables ``fn(context) -> str`` (an empty string adds
nothing). ``render`` calls them once; the texts are stored in the
conversation's first event (``system`` and ``directives``), so replaying a
conversation never depends on code that may have changed since::

    >>> d = Directives()
    >>> d.register("global", "identity", lambda ctx: "You are a careful agent.")
    >>> d.register("mode", "pipeline", lambda ctx: "Finish with the handler tool."
    ...            if ctx["mode"] == "pipeline" else "")
    >>> system, layers = d.render({"mode": "chat"}, run="Answer briefly.")
    >>> system
    'You are a careful agent.\\n\\nAnswer briefly.'
    >>> [(x.layer, x.name) for x in layers]
    [('global', 'identity'), ('run', 'run')]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from turnlog.engine.errors import EngineError
from turnlog.engine.model.events import DirectiveLayer

__all__ = ["LAYERS", "Directives"]

#: The layers, outermost first.
LAYERS = ("global", "mode", "agent", "run")

Directive = Callable[[dict[str, Any]], str]


class Directives:
    """A registry of directive callables per layer, in registration order within a layer."""

    def __init__(self) -> None:
        self._layers: dict[str, list[tuple[str, Directive]]] = {layer: [] for layer in LAYERS}

    def register(self, layer: str, name: str, fn: Directive | str) -> None:
        """Add ``fn`` (or a fixed text) to ``layer`` under ``name``."""
        if layer not in self._layers:
            raise EngineError(f"unknown directive layer {layer!r}; expected one of {list(LAYERS)}")
        self._layers[layer].append((name, fn if callable(fn) else (lambda ctx, _t=fn: _t)))

    def render(self, context: dict[str, Any], run: str = "") -> tuple[str, tuple[DirectiveLayer, ...]]:
        """The system text (non-empty layers joined by blank lines) and each rendered layer.

        ``run`` is the per-run directive (``turnlog run --system``), the innermost layer.
        """
        out: list[DirectiveLayer] = []
        for layer in LAYERS:
            for name, fn in self._layers[layer]:
                text = fn(context)
                if text:
                    out.append(DirectiveLayer(layer=layer, name=name, text=text))
        if run:
            out.append(DirectiveLayer(layer="run", name="run", text=run))
        return "\n\n".join(x.text for x in out), tuple(out)
