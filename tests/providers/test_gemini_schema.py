"""Gemini's tool schema rules: the fake refuses what the real API refuses; the adapter never sends it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnlog.engine.model.events import ToolSpec
from turnlog.engine.loop import Loop
from turnlog.engine.providers import get_provider
from turnlog.engine.providers._gemini_schema import gemini_schema, parameters_for
from turnlog.engine.providers.gemini import map_tools
from turnlog.engine.tools import tool
from tests.fakeapi import reply
from tests.fakerules import _gemini_schema_problem, check_gemini

CONTENTS = [{"role": "user", "parts": [{"text": "hi"}]}]


def _body(parameters=None, **declaration):
    d = {"name": "f", "description": "d", **declaration}
    if parameters is not None:
        d["parameters"] = parameters
    return {"contents": CONTENTS, "tools": [{"functionDeclarations": [d]}]}


@pytest.mark.parametrize(("parameters", "problem"), [
    ({"type": "object", "properties": {}}, "should be non-empty for OBJECT type"),
    ({"type": "object"}, "should be non-empty for OBJECT type"),
    ({"type": "object", "properties": {"a": {"type": "object"}}},
     "properties[a].properties: should be non-empty"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False},
     'Unknown name "additionalProperties"'),
    ({"$schema": "x", "type": "object", "properties": {"a": {"type": "string"}}},
     'Unknown name "$schema"'),
    ({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}, 'Unknown name "$ref"'),
    ({"type": "object", "properties": {"a": {"type": "string", "default": "x"}}},
     'Unknown name "default"'),
    ({"type": "object", "properties": {"a": {"type": "string", "const": "x"}}},
     'Unknown name "const"'),
    ({"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
     "Proto field is not repeating"),
    ({"type": "object", "properties": {"a": {"type": "array"}}}, "items: missing field"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]},
     "required[0]: property is not defined"),
    ({"type": "object", "properties": {"a": {"type": "integer", "enum": [1, 2]}}},
     "enum values must be strings"),
    ({"type": "object", "properties": {"a": {"type": "string", "format": "uri"}}},
     "format: only"),
    ({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"oneOf": []}]}}},
     'Unknown name "oneOf"'),
    ({"type": "object", "properties": {"a": {"type": "thing"}}}, "Invalid value"),
])
def test_the_fake_refuses_what_gemini_refuses_in_a_tool_schema(parameters, problem):
    assert problem in (check_gemini(_body(parameters)) or "")


def test_the_fake_accepts_a_declaration_without_parameters_and_a_rich_valid_schema():
    assert check_gemini(_body()) is None
    rich = {"type": "OBJECT", "properties": {
        "when": {"type": "string", "format": "date-time", "nullable": True},
        "n": {"type": "integer", "format": "int64", "minimum": 0, "maximum": 9},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]},
                 "minItems": "1", "maxItems": 3},
        "either": {"anyOf": [{"type": "string"}, {"type": "number"}]}},
        "required": ["n"], "propertyOrdering": ["when", "n", "tags", "either"]}
    assert check_gemini(_body(rich)) is None
    assert "Unknown name" in check_gemini(_body(strict=True))


def test_a_tool_without_parameters_declares_none():
    specs = [ToolSpec(name="now", description="The time."),
             ToolSpec(name="ping", description="", parameters={"type": "object",
                                                               "properties": {}})]
    (entry,) = map_tools(specs)
    assert all("parameters" not in d for d in entry["functionDeclarations"])


def test_a_no_argument_tool_runs_through_gemini_against_the_fake(fake_api, journal):
    @tool
    def now() -> str:
        """The time."""
        return "noon"

    fake_api.script("gemini", [reply("gemini", tool_calls=[("now", {})]),
                               reply("gemini", text="It is noon.")])
    provider = get_provider("gemini", model="m", api_key="k", base_url=fake_api.base_url("gemini"))
    result = Loop(journal, provider, [now]).start("time?", conversation_id="c")
    assert fake_api.refusals() == []
    assert result.status == "completed" and result.final_content == "It is noon."
    declaration = fake_api.requests[0].body["tools"][0]["functionDeclarations"][0]
    assert declaration == {"name": "now", "description": "The time."}


def test_json_schema_features_are_rewritten_into_the_subset():
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}},
                            "required": ["x"], "additionalProperties": False},
                  "Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "properties": {
            "p": {"$ref": "#/$defs/Point", "description": "a point"},
            "node": {"$ref": "#/$defs/Node"},
            "mode": {"const": "fast"},
            "level": {"type": "integer", "enum": [1, 2, 3], "description": "Level."},
            "maybe": {"type": ["string", "null"], "format": "uri", "default": "x"},
            "multi": {"type": ["string", "integer"]},
            "one": {"oneOf": [{"type": "string"}, {"type": "boolean"}]},
            "both": {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}}]},
            "bag": {"type": "object", "additionalProperties": True},
            "list": {"type": "array"},
        },
        "required": ["p", "ghost"], "additionalProperties": False}
    mapped = parameters_for(schema)
    assert _gemini_schema_problem(mapped, "parameters") is None
    props = mapped["properties"]
    assert props["p"] == {"type": "object", "properties": {"x": {"type": "number"}},
                          "required": ["x"], "description": "a point"}
    assert props["mode"] == {"type": "string", "enum": ["fast"]}
    assert props["level"] == {"type": "integer", "description": "Level. one of: 1, 2, 3"}
    assert props["maybe"] == {"type": "string", "nullable": True, "description": "format: uri"}
    assert props["multi"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert props["one"] == {"anyOf": [{"type": "string"}, {"type": "boolean"}]}
    assert props["both"]["properties"] == {"a": {"type": "string"}}
    assert props["bag"]["type"] == "string" and "JSON object" in props["bag"]["description"]
    assert props["list"] == {"type": "array", "items": {"type": "string"}}
    assert mapped["required"] == ["p"]


# --- the law: whatever JSON Schema a tool has, the adapter sends what Gemini accepts -----------

_leaf = st.fixed_dictionaries({"type": st.sampled_from(
    ["string", "integer", "number", "boolean", "null", ["string", "null"], ["integer", "string"]])},
    optional={"format": st.sampled_from(["uri", "date-time", "int32", "float", "email"]),
              "enum": st.lists(st.one_of(st.integers(), st.text(max_size=3)), max_size=3),
              "const": st.integers(), "default": st.integers(), "title": st.text(max_size=3),
              "description": st.text(max_size=5), "exclusiveMinimum": st.integers(),
              "$ref": st.sampled_from(["#/$defs/A", "#/nowhere", "other.json"])})


def _extend(children):
    names = st.text("abc", min_size=1, max_size=3)
    return st.one_of(
        st.fixed_dictionaries({"type": st.just("object"),
                               "properties": st.dictionaries(names, children, max_size=3)},
                              optional={"required": st.lists(names, max_size=3),
                                        "additionalProperties": st.booleans(),
                                        "propertyOrdering": st.lists(names, max_size=3)}),
        st.fixed_dictionaries({"type": st.just("array")}, optional={"items": children}),
        st.fixed_dictionaries({"anyOf": st.lists(children, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"oneOf": st.lists(children, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"allOf": st.lists(children, min_size=1, max_size=2)}),
    )


schemas = st.recursive(_leaf, _extend, max_leaves=12)


@settings(max_examples=300)
@given(root=schemas, defs=schemas)
def test_every_mapped_schema_passes_the_fakes_gemini_rules(root, defs):
    schema = {"type": "object", "properties": {"x": root, "y": {"$ref": "#/$defs/A"}},
              "$defs": {"A": defs}}
    mapped = parameters_for(schema)
    assert mapped is not None
    assert _gemini_schema_problem(mapped, "parameters") is None
    assert _gemini_schema_problem(gemini_schema({"type": "object", "properties": {"r": root}}),
                                  "p") is None
