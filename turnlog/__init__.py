"""turnlog: an event-sourced conversation engine for LLM agents — the one public import.

Everything public in turnlog's packages (``engine``, ``journal``, ``replay``)
is importable from here, so code does not depend on their generic names::

    import turnlog

    @turnlog.tool
    def add(a: float, b: float) -> dict:
        return {"sum": a + b}

    script = [{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}, {"text": "5"}]
    journal = turnlog.Journal("turnlog.db")
    result = turnlog.Loop(journal, turnlog.ScriptedProvider(script), [add]).start("2 + 3?")
    assert result.completed and result.final_content == "5"

``turnlog.testing`` is the property-test kit: adversarial strategies, the
``DuplicateRuleLaws`` test class for your own duplicate rule, and the replay
pytest plugin.
"""

from __future__ import annotations

from turnlog import engine as _engine
from turnlog import journal as _journal
from turnlog import replay as _replay
from turnlog._lazy import export


def _union() -> dict[str, tuple[str, ...]]:
    """The three packages' tables, by absolute module; a name the engine re-exports from the
    journal (its errors) is taken from the engine."""
    seen: set[str] = set()
    table: dict[str, tuple[str, ...]] = {}
    for package in (_engine, _journal, _replay):
        for module, names in package._EXPORTS.items():
            fresh = tuple(name for name in names if name not in seen)
            seen.update(fresh)
            table[package.__name__ + module] = fresh
    return table


#: ``turnlog.replay`` is the replay package, called as the ``replay`` function it exports.
__all__ = export(__name__, _union(), submodules=("replay",))
