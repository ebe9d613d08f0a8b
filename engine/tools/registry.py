"""Tools: the ``@tool`` decorator, the ``Tool`` it builds and the ``ToolRegistry``.

A tool is a plain function. Its model-facing JSON Schema comes from its type
hints and its docstring (the first paragraph is the description, an
``Args:`` section describes the parameters)::

    >>> @tool(effect="read_only")
    ... def add(a: float, b: float) -> dict:
    ...     '''Add two numbers.
    ...
    ...     Args:
    ...         a: the first number
    ...         b: the second number
    ...     '''
    ...     return {"sum": a + b}
    >>> add.spec.parameters["required"], add.spec.description
    (['a', 'b'], 'Add two numbers.')

Parameters the engine fills (the reference's ToolParameters) never reach the
model's schema: a parameter annotated ``ToolContext`` receives the whole
context; one named ``conversation_id``, ``turn``, ``mode``, ``call_id``,
``metadata``, ``data``, ``now`` or ``idempotency_key`` receives that field;
names listed in ``inject=`` are taken from the run's metadata. They are
merged in at call time, after the model's arguments were validated.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any, get_args, get_type_hints

import msgspec

from turnlog.engine.errors import ToolError
from turnlog.engine.model.events import ToolEffect, ToolSpec
from turnlog.engine.loop.texts import result_content

__all__ = ["INJECTED", "Tool", "ToolContext", "ToolRegistry", "tool"]


class ToolContext(msgspec.Struct, frozen=True, kw_only=True):
    """What the engine knows when it runs a call; injected into tools that ask for it.

    ``data`` is the run's data packets (``metadata["data"]``, pipeline mode);
    ``idempotency_key`` is set for read-only and idempotent tools and is the
    same on every attempt of the same call (conversation, turn, canonical
    arguments), so a re-run after a crash can be deduplicated downstream.

    For tools that talk to other systems (``engine.tools.mcp``): ``traceparent`` is the
    run's W3C trace context when an ``OTelObserver`` watches it; ``progress(data)``,
    when the loop offers it, records ``data`` (a dict) at once as a
    ``tool_progressed`` event of this call; ``resumed`` holds the ``data`` of the
    call's ``tool_progressed`` events an interrupted run recorded, when the tool picks
    the call up again (``Tool.picks_up``).
    """

    conversation_id: str
    turn: int
    mode: str = "chat"
    call_id: str = ""
    metadata: dict[str, Any] = {}
    data: Any = None
    now: datetime | None = None
    idempotency_key: str | None = None
    traceparent: str | None = None
    progress: Any = None
    resumed: tuple[Any, ...] = ()


#: Parameter names the engine fills from the ``ToolContext``.
INJECTED = frozenset({"conversation_id", "turn", "mode", "call_id", "metadata", "data", "now",
                      "idempotency_key"})
_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_ARG_LINE = re.compile(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _doc_parts(doc: str | None) -> tuple[str, dict[str, str]]:
    """The description (first paragraph) and per-argument descriptions of a docstring.

    Arguments come from a Google-style ``Args:`` section: ``name: text`` or
    ``name (type): text``, continued on more deeply indented lines.
    """
    lines = inspect.cleandoc(doc or "").splitlines()
    end = next((i for i, line in enumerate(lines) if not line.strip()), len(lines))
    description = " ".join(line.strip() for line in lines[:end])
    args: dict[str, str] = {}
    in_args, current, indent = False, None, None
    for line in lines[end:]:
        if _ARGS_HEADER.match(line):
            in_args, current, indent = True, None, None
            continue
        if not in_args or not line.strip():
            current = None if not line.strip() else current
            continue
        depth = len(line) - len(line.lstrip())
        if depth == 0:  # the next section
            in_args = False
            continue
        m = _ARG_LINE.match(line)
        if m and (indent is None or depth <= indent):
            current, indent = m.group(1), depth
            args[current] = m.group(2).strip()
        elif current:
            args[current] = f"{args[current]} {line.strip()}".strip()
    return description, args


class Tool:
    """A registered tool: its function, model-facing ``spec`` and engine-side rules.

    ``enabled(context) -> bool | str`` may disable the tool per call (a string
    is the reason); ``requires_env`` names environment variables that must be
    set; ``success_message(name, data, arguments) -> str | None`` replaces the
    default SUCCESS text (the reference's ``datamachine_tool_success_message``).
    ``parallel_safe`` lets a ``side_effecting`` tool's calls run concurrently
    with other calls of the same response (``read_only`` and ``idempotent``
    ones always may; see ``engine.step``). ``fn`` may be an ``async def``
    function (awaited by ``AsyncLoop``, run to its end by ``Loop``).
    Call ``tool(...)`` objects like the plain function.
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None,
                 description: str | None = None, handler: bool = False,
                 effect: ToolEffect = "side_effecting", display_name: str | None = None,
                 enabled: Callable[[ToolContext], bool | str] | None = None,
                 requires_env: Iterable[str] = (), inject: Iterable[str] = (),
                 success_message: Callable[[str, Any, dict[str, Any]], str | None] | None = None,
                 needs_approval: bool | Callable[[dict[str, Any]], bool] = False,
                 parallel_safe: bool = False) -> None:
        self.fn = fn
        #: ``True`` or a predicate over the validated arguments: calls wait for a person's
        #: decision before they run (``engine.approvals``)
        self.needs_approval = needs_approval
        self.parallel_safe = parallel_safe
        self.name = name or fn.__name__
        self.enabled_predicate = enabled
        self.requires_env = tuple(requires_env)
        self.success_message = success_message
        self.inject = frozenset(inject)
        doc_description, arg_docs = _doc_parts(fn.__doc__)
        self._context_param: str | None = None
        self._injected: list[str] = []
        self._args_type, parameters = self._build_schema(arg_docs)
        self.spec = ToolSpec(name=self.name, description=description or doc_description,
                             parameters=parameters, handler=handler, effect=effect,
                             display_name=display_name)

    def __repr__(self) -> str:
        return f"Tool({self.name!r}, effect={self.spec.effect!r}, handler={self.spec.handler})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    @property
    def handler(self) -> bool:
        """Whether only a success message (never the data) goes back to the model."""
        return self.spec.handler

    @property
    def effect(self) -> ToolEffect:
        """``read_only``, ``idempotent`` or ``side_effecting`` (may not be re-run after a crash)."""
        return self.spec.effect

    def _build_schema(self, arg_docs: dict[str, str]) -> tuple[type, dict[str, Any]]:
        try:
            hints = get_type_hints(self.fn)
        except Exception as exc:  # unresolvable annotations are a registration bug
            raise ToolError(f"tool {self.name!r}: cannot resolve type hints: {exc}") from None
        fields: list[tuple] = []
        for param in inspect.signature(self.fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ToolError(f"tool {self.name!r}: *args/**kwargs cannot be described to a model")
            hint = hints.get(param.name, Any)
            if hint is ToolContext or ToolContext in get_args(hint):
                self._context_param = param.name
                continue
            if param.name in INJECTED or param.name in self.inject:
                self._injected.append(param.name)
                continue
            if param.default is param.empty:
                fields.append((param.name, hint))
            else:
                fields.append((param.name, hint, param.default))
        struct = msgspec.defstruct(f"{self.name}_arguments", fields, kw_only=True,
                                   forbid_unknown_fields=True)
        try:
            schema = msgspec.json.schema(struct)
        except TypeError as exc:
            raise ToolError(f"tool {self.name!r}: a parameter type has no JSON Schema: {exc}") from None
        defs = schema.pop("$defs", {})
        body = dict(defs.pop(struct.__name__))
        body.pop("title", None)
        for key, prop in body.get("properties", {}).items():
            if key in arg_docs and "description" not in prop:
                prop["description"] = arg_docs[key]
        body.setdefault("required", [])
        if defs:
            body["$defs"] = defs
        return struct, body

    def disabled_reason(self, context: ToolContext) -> str | None:
        """Why the tool may not run now (missing configuration, predicate says no), or ``None``."""
        missing = [v for v in self.requires_env if not os.environ.get(v)]
        if missing:
            return f"not configured: environment variable(s) {', '.join(missing)} not set"
        if self.enabled_predicate is not None:
            verdict = self.enabled_predicate(context)
            if verdict is False:
                return "disabled by its enablement check"
            if isinstance(verdict, str):
                return verdict
        return None

    def picks_up(self, progress: tuple[dict[str, Any], ...]) -> bool:
        """Whether a call an interrupted run left running may be run again because what it
        recorded (``progress``: its ``tool_progressed`` data) lets this tool pick it up
        where it was instead of doing it twice (an MCP task, followed by its id). Default:
        no (a side-effecting call is then answered as interrupted)."""
        return False

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments converted to the declared types, or ``ToolError`` saying what is wrong."""
        try:
            value = msgspec.convert(arguments, self._args_type)
        except msgspec.ValidationError as exc:
            raise ToolError(str(exc).replace("`$.", "`")) from None
        return {f: getattr(value, f) for f in value.__struct_fields__}

    def invoke(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        """Run the tool with validated ``arguments`` plus the injected context values."""
        kwargs = dict(arguments)
        for name in self._injected:
            kwargs[name] = (context.metadata.get(name) if name in self.inject
                            else getattr(context, name))
        if self._context_param:
            kwargs[self._context_param] = context
        return self.fn(**kwargs)

    def render(self, *, success: bool, data: Any, error: str | None,
               arguments: dict[str, Any]) -> str:
        """What the model reads as this call's result (the reference's rule, plus the hook)."""
        message = None
        if success and self.success_message is not None:
            message = self.success_message(self.name, data, arguments)
        return result_content(self.name, success=success, data=data, error=error,
                              handler=self.spec.handler, message=message,
                              display=self.spec.display_name)


def tool(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Make a ``Tool`` of ``fn``; usable bare (``@tool``) or with options (``@tool(handler=True)``).

    Options are ``Tool``'s keyword arguments: ``name``, ``description``,
    ``handler``, ``effect``, ``display_name``, ``enabled``, ``requires_env``,
    ``inject``, ``success_message``, ``needs_approval``, ``parallel_safe``.
    """
    if fn is not None:
        return Tool(fn, **options)
    return lambda f: Tool(f, **options)


class ToolRegistry:
    """Tools by name. Built from tools, registries or plain functions (wrapped with defaults).

    >>> reg = ToolRegistry([add])
    >>> "add" in reg, [s.name for s in reg.specs()]
    (True, ['add'])
    """

    def __init__(self, tools: Iterable[Tool | Callable[..., Any] | ToolRegistry] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            if isinstance(item, ToolRegistry):
                for t in item:
                    self.register(t)
            else:
                self.register(item)

    def register(self, item: Tool | Callable[..., Any]) -> Tool:
        """Add a tool (a plain function is wrapped with default options); names are unique."""
        t = item if isinstance(item, Tool) else Tool(item)
        if t.name in self._tools and self._tools[t.name] is not t:
            raise ToolError(f"a tool named {t.name!r} is already registered")
        self._tools[t.name] = t
        return t

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def specs(self) -> tuple[ToolSpec, ...]:
        """The model-facing specs, in registration order."""
        return tuple(t.spec for t in self._tools.values())

    def names(self) -> list[str]:
        """The registered names, in registration order."""
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)
