"""What a user names on the command line, turned into library objects.

``load_tools(["demo", "mypkg.tools:TOOLS"])`` builds a ``ToolRegistry``
(``demo`` is the demo toolset, ``none`` names nothing, ``MODULE:ATTR`` a
tool, a list of tools, a ``ToolRegistry`` or a plain function);
``make_provider("scripted", script="s.json")`` builds a provider. Nothing is
offered unless named: no specs, no tools.

    >>> load_tools(()).names()
    []
    >>> load_tools(["demo"]).names()
    ['add', 'append_note', 'get_current_time', 'get_weather', 'wait']
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ._imports import import_object
from .errors import EngineError
from .providers.registry import WIRES
from turnlog.engine.tools.registry import ToolRegistry

__all__ = ["PROVIDERS", "ChoiceError", "load_tools", "make_provider", "open_tools"]

#: The provider names ``make_provider`` knows: ``scripted`` and the registry's wires.
PROVIDERS = ("scripted", *WIRES)


class ChoiceError(EngineError):
    """A tool set or provider named in a way that cannot be used (what and why in the message)."""


def load_tools(specs: Iterable[str]) -> ToolRegistry:
    """A registry of the named tools: ``demo``, ``none`` or ``MODULE:ATTR`` (repeatable)."""
    from .demo import demo_tools

    registry = ToolRegistry()
    for spec in specs:
        if spec == "none":
            continue
        if spec == "demo":
            for t in demo_tools():
                registry.register(t)
            continue
        module, _, attr = spec.partition(":")
        if not module or not attr:
            raise ChoiceError(f"tools {spec!r}: name them as demo, none or MODULE:ATTR")
        try:
            found: Any = import_object(module, attr)
        except (ImportError, AttributeError, ValueError) as exc:
            raise ChoiceError(f"tools {spec!r}: cannot import it ({exc}); "
                              "name them as demo, none or MODULE:ATTR") from None
        # a Tool, a ToolRegistry, a list of tools, or a plain function (wrapped as a tool)
        items = found if isinstance(found, (ToolRegistry, list, tuple)) else [found]
        for item in items:
            registry.register(item)
    return registry


@contextlib.contextmanager
def open_tools(specs: Iterable[str], mcp: Iterable[str] = (), *,
               timeout: float | None = None,
               report: Callable[[str], None] | None = None) -> Iterator[ToolRegistry]:
    """``load_tools(specs)`` plus the tools of the MCP servers in ``mcp``, connected meanwhile.

    Each of ``mcp`` is a command line (stdio) or an ``http(s)://`` URL
    (streamable HTTP); see ``engine.tools.mcp``. The servers are closed when the
    block ends. ``timeout`` (default ``$TURNLOG_MCP_TIMEOUT`` or 60 s) bounds
    connecting and each call. A stdio server's stderr goes to a log file; when
    the block ends, ``report`` is given one line per server that wrote there.
    ``$TURNLOG_MCP_ELICIT`` (``decline``, the default, ``cancel`` or ``ask``: a person
    answers at the terminal) answers the servers' elicitations (``engine.tools.mcp.elicitor``).
    """
    registry = load_tools(specs)
    servers = list(mcp)
    if not servers:
        yield registry
        return
    from turnlog.engine.tools.mcp import elicitor, tools_from_mcp

    if timeout is None:
        timeout = float(os.environ.get("TURNLOG_MCP_TIMEOUT") or 60)
    policy = os.environ.get("TURNLOG_MCP_ELICIT") or "decline"
    served = tools_from_mcp(servers, timeout=timeout,
                            elicit=elicitor(policy, ask=_prompt if policy == "ask" else None))
    try:
        with served:
            for t in served:
                registry.register(t)
            yield registry
    finally:
        for note in served.notes() if report is not None else ():
            report(note)


def _prompt(text: str) -> str:
    """A person's answer at the terminal (``$TURNLOG_MCP_ELICIT=ask``)."""
    import click

    return str(click.prompt(text, default="", show_default=False, err=True))


def make_provider(name: str, model: str | None = None, script: str | None = None) -> Any:
    """The provider called ``name``; ``script`` (a file) is for ``scripted`` only.

    A missing API key raises ``AuthenticationError`` naming the variable.
    """
    if name == "scripted":
        from .providers.scripted import ScriptedProvider

        if script is None:
            raise ChoiceError("the scripted provider needs a script (--script FILE; "
                              "its format is in docs/cli.md)")
        return ScriptedProvider(script, model=model or "scripted")
    if script is not None:
        raise ChoiceError(f"a script only applies to the scripted provider, not {name!r}")
    from .providers import get_provider

    return get_provider(name, model=model)
