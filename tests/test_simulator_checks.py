"""Checks made before any model call: unknown tool, missing/invalid arguments, broken schemas."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simulator_helpers import ALL_TOOLS, STRING, WEATHER_TOOL, tool

from slca_grpo.datatypes import ToolCall
from slca_grpo.simulator import Simulator, SimulatorConfig
from slca_grpo.simulator.base import Backend, BackendResult


class CountingBackend(Backend):
    """Records whether the backend was reached at all."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def generate(self, request):  # type: ignore[no-untyped-def]
        self.calls += 1
        return BackendResult(text='{"ok": true}', data={"ok": True})


@pytest.fixture
def sim_and_backend():
    backend = CountingBackend()
    return Simulator(SimulatorConfig(), backend=backend), backend


def body(obs):  # type: ignore[no-untyped-def]
    return json.loads(obs.text)["error"]


def test_unknown_tool_names_the_tool_and_lists_the_available_ones(sim_and_backend):
    sim, backend = sim_and_backend
    obs = sim.simulate(ToolCall("get_wether", {"city": "Paris"}), [WEATHER_TOOL])
    assert obs.error.kind == "unknown_tool"
    assert body(obs) == {
        "type": "unknown_tool",
        "message": "Tool 'get_wether' not found.",
        "tool": "get_wether",
        "available_tools": ["get_weather"],
    }
    assert backend.calls == 0


def test_missing_required_lists_every_missing_parameter(sim_and_backend):
    sim, backend = sim_and_backend
    t = tool("book", {"a": STRING, "b": STRING, "c": STRING}, ["a", "b", "c"])
    obs = sim.simulate(ToolCall("book", {"b": "x"}), [t])
    assert obs.error.kind == "missing_required"
    assert body(obs)["missing"] == ["a", "c"]
    assert obs.error.message == "Missing required parameters: a, c."
    assert backend.calls == 0


@pytest.mark.parametrize(
    ("arguments", "path", "validator"),
    [
        ({"city": 42}, "$.city", "type"),
        ({"city": "Paris", "unit": "kelvin"}, "$.unit", "enum"),
        ({"city": "Paris", "days": 0}, "$.days", "minimum"),
        ({"city": "Paris", "days": 8}, "$.days", "maximum"),
        ({"city": "Paris", "days": 2.5}, "$.days", "type"),
        ({"city": "Paris", "country": "FR"}, "$", "additionalProperties"),
    ],
)
def test_schema_violations_give_a_structured_validation_error(sim_and_backend, arguments, path, validator):
    sim, backend = sim_and_backend
    obs = sim.simulate(ToolCall("get_weather", arguments), [WEATHER_TOOL])
    assert obs.error.kind == "invalid_arguments"
    err = body(obs)
    assert err["type"] == "invalid_arguments"
    assert err["path"] == path
    assert err["validator"] == validator
    assert backend.calls == 0


def test_formats_are_checked(sim_and_backend):
    sim, _ = sim_and_backend
    t = tool(
        "schedule",
        {"day": {"type": "string", "format": "date"}, "email": {"type": "string", "format": "email"}},
    )
    assert sim.simulate(ToolCall("schedule", {"day": "2025-02-30"}), [t]).error.kind == "invalid_arguments"
    assert sim.simulate(ToolCall("schedule", {"day": "tomorrow"}), [t]).error.kind == "invalid_arguments"
    assert sim.simulate(ToolCall("schedule", {"email": "not-an-address"}), [t]).error.kind == "invalid_arguments"
    assert sim.simulate(ToolCall("schedule", {"day": "2025-02-28", "email": "a@example.com"}), [t]).error is None


def test_non_object_arguments_are_rejected(sim_and_backend):
    sim, _ = sim_and_backend
    obs = sim.simulate(ToolCall("get_weather", ["Paris"]), [WEATHER_TOOL])  # type: ignore[arg-type]
    assert obs.error.kind == "invalid_arguments"
    assert body(obs)["path"] == "$"


@pytest.mark.parametrize(
    "broken",
    [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "objekt"}}},
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "required": "x"}}},
        {"type": "function", "function": {"name": "f", "parameters": "not a schema"}},
        {
            "type": "function",
            "function": {"name": "f", "parameters": {"type": "object"}, "returns": {"type": 5}},
        },
        {
            "type": "function",
            "function": {"name": "f", "parameters": {"properties": {"x": {"$ref": "#/nowhere"}}}},
        },
    ],
)
def test_a_broken_tool_schema_gives_an_error_observation_not_a_crash(sim_and_backend, broken):
    sim, backend = sim_and_backend
    obs = sim.simulate(ToolCall("f", {"x": 1}), [broken])
    assert obs.error.kind == "invalid_schema"
    assert body(obs)["type"] == "invalid_schema"
    assert backend.calls == 0


def test_bare_schemas_and_returns_at_the_outer_level_are_accepted():
    sim = Simulator(SimulatorConfig())
    bare = {"name": "get_time", "parameters": {"type": "object", "properties": {"tz": STRING}}}
    outer = {
        "type": "function",
        "function": {"name": "ping", "parameters": {"type": "object"}},
        "returns": {"type": "object", "properties": {"pong": {"const": True}}, "required": ["pong"]},
    }
    assert sim.simulate(ToolCall("get_time", {"tz": "UTC"}), [bare]).error is None
    assert json.loads(sim.simulate(ToolCall("ping", {}), [outer]).text) == {"pong": True}


def test_calls_given_as_dicts_and_string_arguments_work():
    sim = Simulator(SimulatorConfig())
    obs = sim.simulate({"name": "get_weather", "arguments": '{"city": "Oslo"}'}, [WEATHER_TOOL])
    assert obs.error is None and json.loads(obs.text)["city"] == "Oslo"
    assert sim.simulate({"arguments": {}}, [WEATHER_TOOL]).error.kind == "unknown_tool"
    assert sim.simulate("nonsense", ALL_TOOLS).error.kind == "unknown_tool"  # type: ignore[arg-type]
    not_a_list: Any = "not a list"
    assert sim.simulate(ToolCall("get_weather", {"city": "x"}), not_a_list).error.kind == "unknown_tool"


def test_error_counters_and_latency_are_recorded(sim_and_backend):
    sim, _ = sim_and_backend
    sim.simulate(ToolCall("nope", {}), [WEATHER_TOOL])
    obs = sim.simulate(ToolCall("get_weather", {}), [WEATHER_TOOL])
    assert sim.stats.errors == {"unknown_tool": 1, "missing_required": 1}
    assert sim.stats.calls == 2
    assert obs.latency_ms > 0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=10,
)
schema_like = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["object", "string", "integer", "array", "bogus", 3]),
        "properties": st.dictionaries(st.sampled_from(["a", "b", "id", "city"]), json_values, max_size=3),
        "required": st.one_of(st.lists(st.sampled_from(["a", "b", "id"]), max_size=3), json_values),
        "additionalProperties": st.booleans(),
        "$ref": st.sampled_from(["#/nowhere", "http://example.com/s.json", "#"]),
    },
)
tool_like = st.one_of(
    st.builds(
        lambda n, p, r: {"type": "function", "function": {"name": n, "parameters": p, "returns": r}},
        st.sampled_from(["f", "g"]),
        schema_like,
        st.one_of(st.none(), schema_like),
    ),
    st.builds(lambda n, p: {"name": n, "parameters": p}, st.sampled_from(["f", "g"]), json_values),
    json_values,
)


@settings(max_examples=150, deadline=None)
@given(
    tools=st.lists(tool_like, max_size=3),
    name=st.sampled_from(["f", "g", "h"]),
    arguments=json_values,
    session=st.sampled_from([None, "s"]),
)
def test_no_tool_list_or_call_makes_the_simulator_raise(tools, name, arguments, session):
    sim = Simulator(SimulatorConfig())
    obs = sim.simulate(ToolCall(name, arguments), tools, session)  # type: ignore[arg-type]
    assert isinstance(obs.text, str) and obs.text
    if obs.error is None:
        json.loads(obs.text)


def test_a_backend_that_answers_nothing_is_refused_when_defined():
    with pytest.raises(TypeError, match="must override Backend.generate"):

        class Silent(Backend):  # noqa: F841  (the class statement itself must fail)
            name = "silent"

    class AsyncOnly(Backend):
        async def agenerate(self, request):
            return BackendResult(text="{}", data={})

    assert AsyncOnly().generate(None).data == {}  # the sync default runs the async one
