"""The HTTP service (uvicorn on a free localhost port) and SimulatorClient against it."""

from __future__ import annotations

import asyncio
import json
import re

import httpx
import pytest
from simulator_helpers import ORDER_TOOLS, WEATHER_TOOL, free_port, running_app

from slca_grpo.config import ConfigError
from slca_grpo.datatypes import ToolCall
from slca_grpo.simulator import (
    OpenAIConfig,
    Simulator,
    SimulatorClient,
    SimulatorConfig,
    SimulatorLike,
    SimulatorServiceConfig,
    create_app,
)
from slca_grpo.simulator.server import serve
from slca_grpo.simulator.sessions import SessionStore

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LIMIT = 20_000
GOOD = {
    "tools": [WEATHER_TOOL],
    "call": {"name": "get_weather", "arguments": {"city": "Paris"}},
    "session_id": "s1",
}


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    sim = Simulator(SimulatorConfig(seed=1, cache_path=str(tmp_path_factory.mktemp("svc") / "cache.sqlite")))
    with running_app(create_app(sim, token=TOKEN, max_body_bytes=LIMIT)) as url:
        yield url, sim


@pytest.fixture
def http(service):
    with httpx.Client(base_url=service[0], timeout=10) as client:
        yield client


def test_simulate_returns_the_observation(http):
    response = http.post("/v1/simulate", json=GOOD, headers=AUTH)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"observation", "error", "cached", "latency_ms"}
    assert json.loads(body["observation"])["city"] == "Paris" and body["error"] is None
    bad_call = {**GOOD, "call": {"name": "get_weather", "arguments": {}}}
    body = http.post("/v1/simulate", json=bad_call, headers=AUTH).json()
    assert body["error"] == {"kind": "missing_required", "message": "Missing required parameter: city."}


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}, {"Authorization": TOKEN}],
)
def test_a_missing_or_wrong_token_is_401(http, headers):
    for method, path in (
        ("POST", "/v1/simulate"),
        ("POST", "/v1/simulate_batch"),
        ("GET", "/metrics"),
        ("POST", "/v1/sessions/s1/reset"),
    ):
        response = http.request(method, path, json=GOOD, headers=headers)
        assert response.status_code == 401, path
        assert response.headers["www-authenticate"] == "Bearer"


def test_healthz_is_open(http):
    assert http.get("/healthz").json()["status"] == "ok"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "request body is not valid JSON"),
        (b"", "request body is empty"),
        (b"\xc3\x28 \xff", "not UTF-8"),
        (json.dumps([1, 2]).encode(), "body must be a JSON object"),
        (json.dumps({"call": GOOD["call"]}).encode(), "body.tools is required"),
        (json.dumps({**GOOD, "tools": {"a": 1}}).encode(), "body.tools must be a list"),
        (json.dumps({**GOOD, "tools": [WEATHER_TOOL, 3]}).encode(), "body.tools[1] must be an object"),
        (json.dumps({**GOOD, "call": None}).encode(), "body.call is required"),
        (json.dumps({**GOOD, "call": {"name": 5}}).encode(), "body.call.name must be a string"),
        (json.dumps({**GOOD, "call": {"name": "f", "arguments": "{oops"}}).encode(), "body.call.arguments"),
        (json.dumps({**GOOD, "session_id": 7}).encode(), "body.session_id must be a string"),
    ],
)
def test_malformed_requests_are_400_naming_the_problem(http, content, message):
    response = http.post("/v1/simulate", content=content, headers={**AUTH, "Content-Type": "application/json"})
    assert response.status_code == 400
    assert message in response.json()["error"]


def test_oversized_bodies_are_413_by_header_and_by_stream(http):
    big = {**GOOD, "call": {"name": "get_weather", "arguments": {"city": "x" * LIMIT}}}
    assert http.post("/v1/simulate", json=big, headers=AUTH).status_code == 413

    def chunks():  # no Content-Length: the server must count what it receives
        for _ in range(30):
            yield b" " * 1000

    response = http.post("/v1/simulate", content=chunks(), headers=AUTH)
    assert response.status_code == 413 and "exceeds" in response.json()["error"]
    assert http.post("/v1/simulate", json=GOOD, headers=AUTH).status_code == 200  # still serving


def test_batch_keeps_order_and_session_state(http):
    create = {
        "tools": ORDER_TOOLS,
        "call": {"name": "create_order", "arguments": {"customer_id": "C", "product_id": "P"}},
        "session_id": "batch-1",
    }
    response = http.post(
        "/v1/simulate_batch",
        json=[create, GOOD, {**GOOD, "call": {"name": "nope", "arguments": {}}}],
        headers=AUTH,
    )
    results = response.json()["results"]
    assert [r["error"] and r["error"]["kind"] for r in results] == [None, None, "unknown_tool"]
    order_id = json.loads(results[0]["observation"])["order_id"]
    cancel = {
        "tools": ORDER_TOOLS,
        "call": {"name": "cancel_order", "arguments": {"order_id": order_id}},
        "session_id": "batch-1",
    }
    get = {**cancel, "call": {"name": "get_order", "arguments": {"order_id": order_id}}}
    second = http.post("/v1/simulate_batch", json={"requests": [cancel, get]}, headers=AUTH).json()["results"]
    assert json.loads(second[1]["observation"])["status"] == "cancelled"
    bad = http.post("/v1/simulate_batch", json={"requests": [GOOD, {"tools": []}]}, headers=AUTH)
    assert bad.status_code == 400 and "requests[1].call is required" in bad.json()["error"]


def test_reset_endpoint_forgets_the_session(http):
    http.post("/v1/simulate", json={**GOOD, "session_id": "to-reset"}, headers=AUTH)
    assert http.post("/v1/sessions/to-reset/reset", headers=AUTH).json() == {
        "session_id": "to-reset",
        "reset": True,
    }
    assert http.post("/v1/sessions/to-reset/reset", headers=AUTH).json()["reset"] is False


def test_metrics_expose_requests_errors_cache_and_latency(http):
    http.post("/v1/simulate", json={**GOOD, "session_id": None}, headers=AUTH)
    http.post("/v1/simulate", json={**GOOD, "session_id": None}, headers=AUTH)  # a cache hit
    http.post("/v1/simulate", json={**GOOD, "call": {"name": "nope", "arguments": {}}}, headers=AUTH)
    response = http.get("/metrics", headers=AUTH)
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    lines = dict(line.rsplit(" ", 1) for line in response.text.splitlines() if not line.startswith("#"))
    assert int(lines['slca_sim_requests_total{endpoint="/v1/simulate",status="200"}']) >= 3
    assert int(lines['slca_sim_observation_errors_total{kind="unknown_tool"}']) >= 1
    assert int(lines["slca_sim_cache_hits_total"]) >= 1 and int(lines["slca_sim_cache_misses_total"]) >= 1
    count = int(lines["slca_sim_request_duration_seconds_count"])
    assert int(lines['slca_sim_request_duration_seconds_bucket{le="+Inf"}']) == count >= 3
    buckets = [int(v) for k, v in lines.items() if k.startswith("slca_sim_request_duration_seconds_bucket")]
    assert buckets == sorted(buckets)  # cumulative


# -- the client ---------------------------------------------------------------------------------


def test_client_has_the_simulator_interface(service):
    url, sim = service
    with SimulatorClient(SimulatorServiceConfig(url=url), token=TOKEN) as client:
        assert isinstance(client, SimulatorLike) and isinstance(sim, SimulatorLike)
        obs = client.simulate(ToolCall("get_weather", {"city": "Lima"}), [WEATHER_TOOL], "c1")
        assert obs.error is None and json.loads(obs.text)["city"] == "Lima"
        created = json.loads(
            client.simulate(ToolCall("create_order", {"customer_id": "C", "product_id": "P"}), ORDER_TOOLS, "c1").text
        )
        batch = client.simulate_many(
            [
                (ToolCall("cancel_order", {"order_id": created["order_id"]}), ORDER_TOOLS, "c1"),
                (ToolCall("get_order", {"order_id": created["order_id"]}), ORDER_TOOLS, "c1"),
                (ToolCall("get_weather", {}), [WEATHER_TOOL]),
                "not an item",
            ]
        )
        assert json.loads(batch[1].text)["status"] == "cancelled"
        assert batch[2].error.kind == "missing_required" and batch[3].error.kind == "invalid_arguments"
        assert client.reset_session("c1") is True

        async def both():
            one = await client.asimulate(ToolCall("get_weather", {"city": "Lima"}), [WEATHER_TOOL])
            many = await client.asimulate_many([(ToolCall("get_weather", {"city": "Quito"}), [WEATHER_TOOL])])
            await client.aclose()
            return one, many

        one, many = asyncio.run(both())
        assert json.loads(one.text)["city"] == "Lima" and json.loads(many[0].text)["city"] == "Quito"


def test_client_reads_the_token_from_the_environment_and_truncates(service, monkeypatch):
    monkeypatch.setenv("SLCA_SIM_TOKEN", TOKEN)
    with SimulatorClient(SimulatorServiceConfig(url=service[0]), max_observation_tokens=20) as client:
        obs = client.simulate(ToolCall("get_weather", {"city": "Lima"}), [WEATHER_TOOL])
    assert obs.error is None and "[truncated" in obs.text and (len(obs.text) + 3) // 4 <= 20


def test_client_failures_are_observations_not_exceptions(service):
    retrying = dict(max_retries=3, backoff_s=0.001, max_backoff_s=0.01)
    with SimulatorClient(SimulatorServiceConfig(url=service[0], **retrying), token="wrong") as client:
        obs = client.simulate(ToolCall("get_weather", {"city": "Lima"}), [WEATHER_TOOL])
        assert obs.error.kind == "backend_error" and "HTTP 401" in obs.error.message
        assert client.counters["requests"] == 1  # 4xx is not retried
    nowhere = SimulatorServiceConfig(url=f"http://127.0.0.1:{free_port()}", max_retries=2, backoff_s=0.001)
    with SimulatorClient(nowhere, token=TOKEN) as client:
        obs = client.simulate(ToolCall("get_weather", {"city": "Lima"}), [WEATHER_TOOL])
        many = client.simulate_many([(ToolCall("get_weather", {"city": "Lima"}), [WEATHER_TOOL])] * 3)
        assert obs.error.kind == "backend_error" and "after 3 attempts" in obs.error.message
        assert [o.error.kind for o in many] == ["backend_error"] * 3
        assert client.reset_session("x") is False


@pytest.mark.parametrize(
    "setting, value, named",
    [
        ("timeout_s", float("nan"), "timeout_s must be > 0"),
        ("concurrency", 0, "concurrency >= 1"),
        ("backoff_s", -1.0, "0 <= backoff_s <= max_backoff_s"),
        ("max_backoff_s", 0.1, "0 <= backoff_s <= max_backoff_s"),
        ("url", "127.0.0.1:8765", "url must be an http(s) URL"),
    ],
)
def test_bad_service_settings_are_one_line_errors(setting, value, named):
    with pytest.raises(ConfigError, match=re.escape(named)):
        SimulatorServiceConfig(**{"url": "http://127.0.0.1:8765", setting: value})


def test_a_client_needs_a_url():
    with pytest.raises(ValueError, match="needs the service's url"):
        SimulatorClient(SimulatorServiceConfig())


# -- settings where they enter the library: NaN and out-of-range values are refused -----------------

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("request_timeout_s", 0),
        ("request_timeout_s", -5.0),
        ("request_timeout_s", NAN),
        ("request_timeout_s", INF),
        ("max_body_bytes", -1),
        ("max_body_bytes", 0),
        ("max_batch", 0),
    ],
)
def test_create_app_refuses_bad_limits_naming_them(setting, value):
    with pytest.raises(ValueError, match=f"^{setting} must be"):
        create_app(Simulator(SimulatorConfig()), **{setting: value})


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("port", 70000),
        ("port", -1),
        ("port", 0),
        ("request_timeout_s", NAN),
        ("max_body_bytes", -1),
        ("header_timeout_s", NAN),
        ("header_timeout_s", 0),
        ("keep_alive_s", -1.0),
        ("keep_alive_s", INF),
        ("max_connections", 0),
    ],
)
def test_serve_refuses_bad_settings_before_anything_starts(monkeypatch, setting, value):
    import uvicorn

    monkeypatch.setattr(uvicorn.Server, "run", lambda self, *args, **kwargs: pytest.fail("the server started"))
    with pytest.raises(ValueError, match=f"^{setting} must be"):
        serve(Simulator(SimulatorConfig()), **{setting: value})


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"session_ttl_s": NAN}, "session_ttl_s must be > 0, got nan"),
        ({"session_ttl_s": 0}, "session_ttl_s must be > 0"),
        ({"max_sessions": NAN}, "max_sessions must be >= 1"),
        ({"max_observation_tokens": NAN}, "max_observation_tokens must be >= 16"),
        ({"openai": OpenAIConfig(timeout_s=NAN)}, "timeout_s > 0"),
        ({"openai": OpenAIConfig(temperature=NAN)}, "openai.temperature must be a finite number >= 0"),
        ({"openai": OpenAIConfig(backoff_s=NAN)}, "openai.backoff_s must be a finite number >= 0"),
        ({"openai": OpenAIConfig(max_backoff_s=INF)}, "openai.max_backoff_s must be a finite number >= 0"),
    ],
)
def test_nan_simulator_settings_are_refused(settings, named):
    with pytest.raises(ConfigError, match=re.escape(named)):
        SimulatorConfig(**settings)


def test_a_session_store_refuses_a_nan_time_to_live():
    for ttl in (NAN, 0.0, -1.0):
        with pytest.raises(ValueError, match="ttl_s must be > 0"):
            SessionStore(ttl, 10)
    for bound in (0, NAN):
        with pytest.raises(ValueError, match="max_sessions must be >= 1"):
            SessionStore(10.0, bound)
    assert len(SessionStore(INF, 10)) == 0  # an infinite TTL is a choice (sessions bounded by number only)
