"""The @tool decorator: schema from hints and docstring, injection, validation, registration."""

from __future__ import annotations

from typing import Literal

import pytest

from turnlog.engine.errors import ToolError
from turnlog.engine.tools import ToolContext, ToolRegistry, tool


@tool(effect="idempotent", display_name="Web Search")
def search(query: str, limit: int = 5, kind: Literal["web", "news"] = "web",
           context: ToolContext | None = None, conversation_id: str = "") -> list:
    """Search the web.

    Longer text that is not the description.

    Args:
        query: what to look for
        limit (int): how many results,
            at most 10
    """
    return [query, limit, kind, context.turn if context else None, conversation_id]


def test_schema_comes_from_type_hints_and_the_docstring():
    p = search.spec.parameters
    assert search.spec.description == "Search the web."
    assert p["required"] == ["query"]
    assert p["properties"]["query"] == {"type": "string", "description": "what to look for"}
    assert p["properties"]["limit"]["description"] == "how many results, at most 10"
    assert p["properties"]["limit"]["default"] == 5
    assert p["properties"]["kind"]["enum"] == ["news", "web"]
    assert set(p["properties"]) == {"query", "limit", "kind"}  # injected parameters hidden
    assert search.spec.effect == "idempotent" and search.spec.display_name == "Web Search"


def test_validation_names_the_wrong_argument():
    with pytest.raises(ToolError, match="`limit`"):
        search.validate({"query": "x", "limit": "many"})
    with pytest.raises(ToolError, match="unknown field `lang`"):
        search.validate({"query": "x", "lang": "fr"})
    with pytest.raises(ToolError, match="missing required field `query`"):
        search.validate({})


def test_injected_values_are_merged_at_call_time():
    ctx = ToolContext(conversation_id="c9", turn=4)
    assert search.invoke(search.validate({"query": "q"}), ctx) == ["q", 5, "web", 4, "c9"]


def test_registry_refuses_two_tools_with_one_name():
    @tool(name="search")
    def other() -> None:
        """Other."""

    with pytest.raises(ToolError, match="already registered"):
        ToolRegistry([search, other])


def test_args_and_kwargs_cannot_be_described():
    def bad(*args):
        """Bad."""

    with pytest.raises(ToolError, match=r"\*args"):
        tool(bad)


def test_a_plain_function_registers_with_defaults():
    def ping(host: str) -> str:
        """Ping a host."""
        return host

    reg = ToolRegistry([ping])
    assert reg.get("ping").effect == "side_effecting" and not reg.get("ping").handler
