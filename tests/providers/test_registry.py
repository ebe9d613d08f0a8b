"""The provider registry: one module per wire, one interface, consulted by every consumer."""

from __future__ import annotations

import subprocess
import sys

import pytest

from turnlog.engine.choices import PROVIDERS
from turnlog.engine.errors import AuthenticationError, UnknownProviderError
from turnlog.engine.model.events import ToolSpec
from turnlog.engine.formats.detect import FORMATS, PROVIDER_FORMATS
from turnlog.engine.formats.exporter import EXPORT_FORMATS
from turnlog.engine.model.messages import Message, Text, ToolCall, ToolResult
from turnlog.engine.providers import PROVIDER_NAMES, get_provider
from turnlog.engine.providers._stream import Assembler
from turnlog.engine.providers.registry import WIRES, by_key, genai_name, price_key, wire

INTERFACE = ("NAME", "KEY_ENV", "PRICE_KEY", "GENAI_NAME", "GENAI_OPERATION", "SYSTEM_KEY",
             "ASSEMBLER", "create_provider", "map_messages", "unmap_messages", "map_tools",
             "unmap_tools", "map_request", "map_response", "map_usage", "export_body",
             "read_request", "read_response")
HISTORY = (Message(role="user", parts=(Text(text="What is 2 + 3?"),)),
           Message(role="assistant", parts=(Text(text="Adding."), ToolCall(
               id="c1", name="add", arguments={"a": 2, "b": 3}, raw_arguments='{"a": 2, "b": 3}'))),
           Message(role="tool", parts=(ToolResult(call_id="c1", name="add", content="5"),)),
           Message(role="assistant", parts=(Text(text="5"),)))


@pytest.mark.parametrize("name", WIRES)
def test_every_wire_module_has_the_whole_interface_public(name):
    module = wire(name)
    assert module.NAME == name
    missing = [attr for attr in INTERFACE if not hasattr(module, attr)]
    assert not missing
    assert set(INTERFACE) <= set(module.__all__), "the interface is public"
    assert issubclass(module.ASSEMBLER, Assembler)
    assert module.__name__ == WIRES[name]


@pytest.mark.parametrize("name", WIRES)
def test_map_and_unmap_messages_have_one_signature_and_invert_each_other(name):
    module = wire(name)
    system, messages = module.unmap_messages(*module.map_messages("Be brief.", HISTORY))
    assert system == "Be brief."
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1].parts[1].arguments == {"a": 2, "b": 3}
    assert messages[2].parts[0].content == "5"


@pytest.mark.parametrize("name", WIRES)
def test_tools_map_back_through_the_wire(name):
    spec = ToolSpec(name="add", description="Add two numbers", parameters={
        "type": "object", "properties": {"a": {"type": "number"}}})
    module = wire(name)
    back = module.unmap_tools(module.map_tools([spec]))
    assert [(t.name, t.description) for t in back] == [("add", "Add two numbers")]
    assert back[0].parameters["properties"]["a"]["type"].lower() == "number"


@pytest.mark.parametrize("name", WIRES)
def test_every_consumer_offers_each_wire(name):
    assert name in PROVIDER_NAMES and name in PROVIDERS
    assert name in FORMATS and name in PROVIDER_FORMATS and name in EXPORT_FORMATS
    assert genai_name(name) == wire(name).GENAI_NAME
    assert price_key(name) == wire(name).PRICE_KEY


def test_names_outside_the_registry_pass_through_and_unknown_wires_are_refused():
    assert genai_name("scripted") == "scripted" and price_key("mine") == "mine"
    with pytest.raises(UnknownProviderError, match="unknown provider 'nope'"):
        wire("nope")
    with pytest.raises(UnknownProviderError, match="scripted"):
        get_provider("nope")


@pytest.mark.parametrize("name", WIRES)
def test_a_missing_key_names_the_wires_own_variable(name, monkeypatch):
    variable = by_key("KEY_ENV")[name]
    monkeypatch.delenv(variable, raising=False)
    with pytest.raises(AuthenticationError, match=variable):
        get_provider(name)


def test_mapping_a_wire_never_imports_an_sdk():
    # export --format anthropic and import need the mapping only; the SDKs load with a client
    code = ("import sys\n"
            "from turnlog.engine.providers.registry import WIRES, wire\n"
            "for name in WIRES: wire(name).export_body('s', ())\n"
            "print(sorted(m for m in ('anthropic', 'openai', 'botocore') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("name", [*WIRES, "registry"])
def test_the_examples_in_each_wire_module_and_the_registry_hold(name):
    import doctest
    import importlib

    module = importlib.import_module("turnlog.engine.providers.registry") if name == "registry" \
        else wire(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
