"""The simulator under abuse: schemas that reach outside themselves, pathological patterns and
sizes, memory growth, malformed bodies. Each case is a clear error, and the service stays up."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest
from simulator_helpers import running_app, tool

from slca_grpo.datatypes import ToolCall
from slca_grpo.simulator import Simulator, SimulatorConfig, create_app
from slca_grpo.simulator.base import Backend, BackendResult
from slca_grpo.simulator.checks import ToolChecker
from slca_grpo.simulator.safety import MAX_GENERATED_UNITS
from slca_grpo.simulator.sessions import MAX_SESSION_RECORDS


@pytest.fixture
def listener():
    """A loopback socket that records every connection made to it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.05)
    connections: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                continue
            connections.append(connection)
            connection.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], connections
    stop.set()
    thread.join(timeout=2)
    server.close()


def observe(sim: Simulator, parameters: dict, arguments: dict, *, returns: dict | None = None):
    spec = tool("probe", {}, returns=returns, extra=parameters)
    return sim.simulate(ToolCall("probe", arguments), [spec], "episode")


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"x": {"$ref": "http://127.0.0.1:{port}/s.json"}}},
        {"$id": "http://127.0.0.1:{port}/root.json", "properties": {"x": {"$ref": "other.json"}}},
        {"properties": {"x": {"$dynamicRef": "http://127.0.0.1:{port}/d.json#meta"}}},
        {"$schema": "http://127.0.0.1:{port}/meta.json", "properties": {"x": {"type": "string"}}},
    ],
)
def test_schemas_never_make_the_simulator_connect_anywhere(listener, schema):
    port, connections = listener
    sim = Simulator(SimulatorConfig(seed=0))
    parameters = json.loads(json.dumps(schema).replace("{port}", str(port)))
    observation = observe(sim, parameters, {"x": "value"})
    if "$schema" not in schema:
        assert observation.error.kind == "invalid_schema" and "refers outside itself" in observation.error.message
    time.sleep(0.2)  # a connection attempt, had one been made, would have landed by now
    assert connections == []


def test_a_file_reference_is_refused_without_reading_the_file(tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text('{"type": "string", "description": "TOP-SECRET-CONTENT"}')
    observation = observe(Simulator(SimulatorConfig()), {"properties": {"x": {"$ref": secret.as_uri()}}}, {"x": 1})
    assert observation.error.kind == "invalid_schema" and "TOP-SECRET" not in observation.text


def test_references_inside_the_schema_still_work():
    parameters = {
        "$defs": {"city": {"type": "string", "minLength": 2}},
        "properties": {"city": {"$ref": "#/$defs/city"}},
    }
    sim = Simulator(SimulatorConfig())
    assert observe(sim, parameters, {"city": "Oslo"}).error is None
    assert observe(sim, parameters, {"city": "O"}).error.kind == "invalid_arguments"


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("^(a+)+$", "a" * 40 + "b"),
        ("^(a|aa)+$", "a" * 60 + "b"),
        (r"^(\w+\s?)+$", "an example of a long sentence " * 3 + "!"),
    ],
)
def test_pathological_patterns_cost_milliseconds_not_the_server(pattern, text):
    sim = Simulator(SimulatorConfig())
    started = time.perf_counter()
    observation = observe(sim, {"properties": {"x": {"type": "string", "pattern": pattern}}}, {"x": text})
    assert time.perf_counter() - started < 2.0
    assert observation.error is not None and observation.error.kind in ("invalid_arguments", "invalid_schema")


@pytest.mark.parametrize(
    "returns",
    [
        {"type": "string", "minLength": 1_000_000},
        {"type": "array", "minItems": 1000, "items": {"type": "array", "minItems": 1000, "items": {"type": "string"}}},
        {"type": "object", "minProperties": 5_000_000},
        {"$defs": {"n": {"type": "object", "required": ["a", "b"], "properties": {"a": {"$ref": "#/$defs/n"},
                                                                                     "b": {"$ref": "#/$defs/n"}}}},
         "$ref": "#/$defs/n"},
    ],
)  # fmt: skip
def test_schemas_asking_for_huge_values_are_refused_before_generating(returns):
    started = time.perf_counter()
    observation = observe(Simulator(SimulatorConfig()), {}, {}, returns=returns)
    assert time.perf_counter() - started < 2.0 and observation.error.kind == "invalid_schema"
    assert "refused" in observation.error.message


def test_a_schema_at_the_size_limit_is_still_served():
    returns = {"type": "array", "minItems": 10, "items": {"type": "string", "minLength": 5}}
    assert 10 * 5 < MAX_GENERATED_UNITS
    observation = observe(Simulator(SimulatorConfig()), {}, {}, returns=returns)
    assert observation.error is None and len(json.loads(observation.text)) >= 10


def test_the_compiled_tool_cache_is_bounded_in_bytes():
    checker = ToolChecker(max_cached_bytes=200_000)
    for index in range(60):
        big = tool(f"t{index}", {f"field_{i}": {"type": "string", "description": "x" * 100} for i in range(40)})
        checker.spec(big)
    assert 0 < checker.cached_bytes <= 200_000


def test_one_session_cannot_grow_without_bound():
    sim = Simulator(SimulatorConfig())
    create = tool("create_note", {"title": {"type": "string"}}, ["title"], description="Create a note.")
    for index in range(MAX_SESSION_RECORDS + 500):
        sim.simulate(ToolCall("create_note", {"title": f"note {index}"}), [create], "one-session")
    state = sim.sessions.peek("one-session")
    assert 0 < len(state.entities) <= MAX_SESSION_RECORDS


def test_nan_in_arguments_is_an_error_and_every_observation_is_json():
    sim = Simulator(SimulatorConfig())
    spec = tool("get_weather", {"city": {"type": "string"}, "days": {"type": "number"}})
    for value in (float("nan"), float("inf")):
        observation = sim.simulate(ToolCall("get_weather", {"city": "Oslo", "days": value}), [spec], "s")
        assert observation.error.kind == "invalid_arguments"
        json.loads(observation.text, parse_constant=lambda name: pytest.fail(f"{name} in an observation"))


class SlowBackend(Backend):
    name = "slow"

    def generate(self, request):
        time.sleep(3.0)
        return BackendResult(text="{}", data={})


def test_healthz_answers_while_a_slow_request_runs_and_the_slow_one_gets_its_budget():
    app = create_app(Simulator(SimulatorConfig(), backend=SlowBackend()), token="t", request_timeout_s=1.0)
    spec = tool("probe", {})
    with running_app(app) as url:
        outcome = {}

        def slow() -> None:
            outcome["response"] = httpx.post(
                f"{url}/v1/simulate",
                json={"tools": [spec], "call": {"name": "probe", "arguments": {}}},
                headers={"Authorization": "Bearer t"},
                timeout=10,
            )

        worker = threading.Thread(target=slow)
        worker.start()
        time.sleep(0.2)  # the slow request is in the service now
        started = time.perf_counter()
        assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
        assert time.perf_counter() - started < 1.0
        worker.join(timeout=10)
    body = outcome["response"].json()
    assert outcome["response"].status_code == 200 and body["error"]["kind"] == "over_budget"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[" * 10_000 + b"]" * 10_000, "nested deeper than"),
        (b'{"tools": [], "call": {"name": "x", "arguments": {"n": ' + b"9" * 5000 + b"}}}", "not valid JSON"),
        (b'{"tools": [], "call": {"name": "x", "arguments": {"n": NaN}}}', "NaN is not a JSON number"),
        (json.dumps({"tools": [], "call": {"name": "x", "arguments": {"a": [[[[[]]]]] * 1}}}).encode(), None),
        (json.dumps({"deep": json.loads("[" * 150 + "]" * 150)}).encode(), "nested deeper than"),
    ],
)
def test_malformed_bodies_get_400_not_500(body, message):
    app = create_app(Simulator(SimulatorConfig()), token="t")
    with running_app(app) as url:
        response = httpx.post(
            f"{url}/v1/simulate",
            content=body,
            headers={"Authorization": "Bearer t", "Content-Type": "application/json"},
        )
    if message is None:
        assert response.status_code == 200
    else:
        assert response.status_code == 400 and message in response.json()["error"]
