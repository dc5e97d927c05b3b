"""BFCL docs -> OpenAI tools, calls -> checker format, and the safe call-string builder.

These tests need no bfcl-eval install: they exercise our own conversion and validation code.
"""

from __future__ import annotations

import ast
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from slca_grpo.data.bfcl.calls import UnsafeCallError, bind_positional, build_call_string, parse_call_string
from slca_grpo.data.bfcl.convert import (
    calls_to_checker_format,
    convert_schema,
    doc_to_tool,
    docs_to_tools,
    exposed_names,
    to_checker_value,
)
from slca_grpo.datatypes import ToolCall

HAND_DOC = {
    "name": "geo.distance",
    "description": "Distance between two points.",
    "parameters": {
        "type": "dict",
        "properties": {
            "origin": {
                "type": "dict",
                "description": "Start point.",
                "properties": {"lat": {"type": "float"}, "lon": {"type": "float"}},
                "required": ["lat", "lon"],
            },
            "via": {"type": "tuple", "items": {"type": "integer"}, "description": "Waypoint ids."},
            "unit": {"type": "string", "enum": ["km", "mi"], "default": "km", "optional": True},
            "payload": {"type": "any", "description": "Anything."},
            "weights": {"type": "HashMap", "description": "Java map."},
            "count": {"type": "long"},
            "odd": {"type": "Matrix", "description": "Unknown type."},
        },
        "required": ["origin"],
    },
}


def test_hand_written_doc_converts_to_json_schema():
    tool = doc_to_tool(HAND_DOC, "geo_distance")
    assert tool["type"] == "function"
    function = tool["function"]
    assert function["name"] == "geo_distance"
    assert function["description"] == "Distance between two points."
    params = function["parameters"]
    assert params["type"] == "object"
    assert params["required"] == ["origin"]
    props = params["properties"]
    assert props["origin"] == {
        "type": "object",
        "description": "Start point.",
        "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
        "required": ["lat", "lon"],
    }
    assert props["via"] == {"type": "array", "description": "Waypoint ids.", "items": {"type": "integer"}}
    # Non-standard "optional" is dropped; enum and default are kept.
    assert props["unit"] == {"type": "string", "enum": ["km", "mi"], "default": "km"}
    assert props["payload"] == {"description": "Anything."}  # any: no type constraint
    assert props["weights"] == {"type": "object", "description": "Java map."}
    assert props["count"] == {"type": "integer"}
    assert props["odd"] == {"description": "Unknown type. (type: Matrix)"}
    Draft202012Validator.check_schema(params)


def test_convert_schema_ignores_malformed_input():
    assert convert_schema(None) == {}
    assert convert_schema({"type": "dict", "required": "origin"}) == {"type": "object"}
    assert convert_schema({"type": ""}) == {}


def test_exposed_names_are_valid_unique_and_deterministic():
    docs = [{"name": "a.b"}, {"name": "a_b"}, {"name": "a.b"}, {"name": "x" * 70}, {"name": "ok-name"}]
    names = exposed_names(docs)
    assert names == {"a.b": "a_b", "a_b": "a_b_2", "x" * 70: "x" * 64, "ok-name": "ok-name"}
    assert exposed_names(docs) == names
    tools = docs_to_tools([{"name": "a.b", "parameters": {"type": "dict", "properties": {}}}], names)
    assert tools[0]["function"]["name"] == "a_b"


def test_calls_map_back_to_original_names_in_checker_format():
    original = {"a_b": "a.b"}
    calls = [ToolCall("a_b", {"x": 1}), ToolCall("plain", {"y": [1, 2]})]
    assert calls_to_checker_format(calls, original) == [{"a.b": {"x": 1}}, {"plain": {"y": [1, 2]}}]


def test_java_and_javascript_values_become_source_text():
    # The Java/JS checker parses strings itself; JSON scalars are the same token in source.
    assert to_checker_value(True, "java") == "true"
    assert to_checker_value(False, "javascript") == "false"
    assert to_checker_value(42, "java") == "42"
    assert to_checker_value(2.5, "javascript") == "2.5"
    assert to_checker_value(None, "java") == "null"
    assert to_checker_value("new int[]{1, 2}", "java") == "new int[]{1, 2}"
    assert to_checker_value([1, 2], "java") == [1, 2]  # left for the checker to reject
    assert to_checker_value(True, "python") is True
    calls = [ToolCall("f", {"flag": True, "name": "x"})]
    assert calls_to_checker_format(calls, {}, "javascript") == [{"f": {"flag": "true", "name": "x"}}]


ALLOWED = {"cd", "mkdir", "ls"}


def test_call_string_for_a_valid_call():
    text = build_call_string("cd", {"folder": "docs"}, ALLOWED)
    assert text == "cd(folder='docs')"
    text = build_call_string(
        "mkdir", {"dir_name": "a'); import os; ('", "parents": [1, 2.5, None, True, {"k": "v"}]}, ALLOWED
    )
    name, positional, keywords = parse_call_string(text)
    assert (name, positional) == ("mkdir", [])
    assert keywords == {"dir_name": "a'); import os; ('", "parents": [1, 2.5, None, True, {"k": "v"}]}
    assert build_call_string("ls", {}, ALLOWED) == "ls()"


@pytest.mark.parametrize(
    "name",
    [
        "__import__('os').system",
        "os.system",
        "exit",
        "eval",
        "ls()",
        "ls; import os",
        "",
        "cd\n",
        "lambda",
        "cd\u0430",
    ],
)
def test_call_string_rejects_unknown_or_non_identifier_names(name):
    with pytest.raises(UnsafeCallError):
        build_call_string(name, {}, ALLOWED | {"lambda", "cd\u0430"})


class _Sneaky:
    def __repr__(self) -> str:
        return "__import__('os').system('echo pwned')"


class _SneakyInt(int):
    def __repr__(self) -> str:
        return "__import__('os').getcwd()"


@pytest.mark.parametrize(
    "arguments",
    [
        {"folder": _Sneaky()},
        {"folder": _SneakyInt(3)},
        {"folder": ("a", "b")},
        {"folder": {"a", "b"}},
        {"folder": b"bytes"},
        {"folder": float("nan")},
        {"folder": float("inf")},
        {"folder": {1: "non-string key"}},
        {"folder": [[[_Sneaky()]]]},
        {"x=1, y": 1},
        {"__import__('os')": 1},
        {"class": 1},
    ],
)
def test_call_string_rejects_non_literal_arguments(arguments):
    with pytest.raises(UnsafeCallError):
        build_call_string("cd", arguments, ALLOWED)


def test_call_string_rejects_absurd_nesting():
    value: list = []
    for _ in range(40):
        value = [value]
    with pytest.raises(UnsafeCallError, match="nested deeper"):
        build_call_string("cd", {"folder": value}, ALLOWED)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True), json_values, max_size=5))
def test_call_strings_round_trip_json_literals(arguments):
    arguments = {k: v for k, v in arguments.items() if not __import__("keyword").iskeyword(k)}
    text = build_call_string("cd", arguments, ALLOWED)
    tree = ast.parse(text, mode="eval").body
    assert isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and not tree.args
    name, positional, keywords = parse_call_string(text)
    assert name == "cd" and positional == []
    assert keywords == arguments
    for key, value in arguments.items():  # floats stay floats (repr is exact)
        if isinstance(value, float):
            assert math.copysign(1, keywords[key]) == math.copysign(1, value)


def test_parse_call_string_reads_literals_only():
    assert parse_call_string("sort('final_report.pdf')") == ("sort", ["final_report.pdf"], {})
    assert parse_call_string("mv(source='a', destination='b')") == (
        "mv",
        [],
        {"source": "a", "destination": "b"},
    )
    for bad in ["os.system('ls')", "f(x=g())", "f(**{'a': 1})", "f(x=__import__('os'))", "1 + 1", "f("]:
        with pytest.raises(ValueError):
            parse_call_string(bad)


def test_bind_positional_uses_the_callee_order():
    assert bind_positional(["file_name", "lines"], ["a.txt"], {"lines": 3}) == {
        "file_name": "a.txt",
        "lines": 3,
    }
    with pytest.raises(ValueError):
        bind_positional(["a"], [1, 2], {})
    with pytest.raises(ValueError):
        bind_positional(["a"], [1], {"a": 2})
