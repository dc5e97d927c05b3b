"""The `openai` backend against a scripted OpenAI-compatible server on localhost."""

from __future__ import annotations

import asyncio
import json
import threading
import time

from simulator_helpers import (
    BOOKING_TOOLS,
    WEATHER_TOOL,
    FakeChatServer,
    completion,
    free_port,
)

from slca_grpo.datatypes import ToolCall
from slca_grpo.simulator import OpenAIConfig, Simulator, SimulatorConfig
from slca_grpo.simulator.openai_backend import OpenAIBackend

GOOD = {"city": "Paris", "temperature": 18.5, "condition": "sunny"}
CALL = ToolCall("get_weather", {"city": "Paris"})


def make_sim(
    server: FakeChatServer | None = None,
    *,
    sleeps: list[float] | None = None,
    cache_path: str | None = None,
    **openai: object,
) -> Simulator:
    settings = {
        "base_url": server.base_url if server else f"http://127.0.0.1:{free_port()}/v1",
        "model": "sim-model",
        "backoff_s": 0.001,
        "max_backoff_s": 0.01,
        "timeout_s": 5.0,
        **openai,
    }
    openai_config = OpenAIConfig(**settings)  # type: ignore[arg-type]
    config = SimulatorConfig(backend="openai", cache_path=cache_path, openai=openai_config)

    async def fake_sleep(seconds: float) -> None:
        if sleeps is not None:
            sleeps.append(seconds)

    return Simulator(config, backend=OpenAIBackend(config.openai, config.seed, sleep=fake_sleep))


def ok(content: str) -> tuple[int, dict, float]:
    return 200, completion(content), 0.0


def test_prompt_carries_schema_request_and_settings():
    with FakeChatServer([ok(json.dumps(GOOD))]) as server:
        sim = make_sim(server, api_key="sk-test")
        obs = sim.simulate(CALL, [WEATHER_TOOL])
    assert obs.error is None and json.loads(obs.text) == GOOD
    body = server.requests[0]
    assert body["model"] == "sim-model" and body["temperature"] == 0.6 and body["seed"] == 0
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    assert '"name": "get_weather"' in system and '"enum": ["celsius", "fahrenheit"]' in system
    assert "must be valid against this JSON Schema" in system
    assert json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}}) in user
    assert server.headers[0]["authorization"] == "Bearer sk-test"


def test_seed_can_be_left_out_and_extra_body_is_merged():
    with FakeChatServer([ok(json.dumps(GOOD))]) as server:
        make_sim(server, send_seed=False, extra_body={"chat_template_kwargs": {"enable_thinking": False}}).simulate(
            CALL, [WEATHER_TOOL]
        )
    body = server.requests[0]
    assert "seed" not in body and body["chat_template_kwargs"] == {"enable_thinking": False}


def test_no_schema_ablation_drops_the_schema_from_the_prompt():
    with FakeChatServer([ok('{"temp": "mild"}')]) as server:
        obs = make_sim(server, no_schema=True).simulate(CALL, [WEATHER_TOOL])
    system = server.requests[0]["messages"][0]["content"]
    assert "get_weather" in system and "parameters" not in system and "JSON Schema" not in system
    assert obs.error is None  # without the schema, `returns` is not enforced either


def test_fences_think_blocks_and_tags_are_stripped():
    noisy = (
        "<think>the user wants weather</think>\n<tool_response>\n```json\n"
        + json.dumps(GOOD)
        + "\n```\n</tool_response>"
    )
    with FakeChatServer([ok(noisy)]) as server:
        obs = make_sim(server).simulate(CALL, [WEATHER_TOOL])
    assert json.loads(obs.text) == GOOD and len(server.requests) == 1


def test_json_inside_prose_is_extracted():
    with FakeChatServer([ok("Sure! Here is the response: " + json.dumps(GOOD) + " Hope that helps.")]) as server:
        obs = make_sim(server).simulate(CALL, [WEATHER_TOOL])
    assert json.loads(obs.text) == GOOD


def test_non_json_is_re_asked_once_then_accepted():
    with FakeChatServer([ok("It is sunny in Paris."), ok(json.dumps(GOOD))]) as server:
        sim = make_sim(server)
        obs = sim.simulate(CALL, [WEATHER_TOOL])
    assert json.loads(obs.text) == GOOD
    reask = server.requests[1]["messages"]
    assert reask[2] == {"role": "assistant", "content": "It is sunny in Paris."}
    assert "not valid JSON" in reask[3]["content"]
    assert sim.backend.counters["reasks"] == 1


def test_wrong_schema_is_re_asked_with_the_validation_error_then_fixed():
    wrong = json.dumps({"city": "Paris", "temperature": "warm", "condition": "sunny"})
    with FakeChatServer([ok(wrong), ok(json.dumps(GOOD))]) as server:
        obs = make_sim(server).simulate(CALL, [WEATHER_TOOL])
    assert json.loads(obs.text) == GOOD
    feedback = server.requests[1]["messages"][3]["content"]
    assert "$.temperature" in feedback and "'warm' is not of type 'number'" in feedback


def test_still_invalid_after_the_re_ask_gives_invalid_response_and_is_not_cached(tmp_path):
    with FakeChatServer([ok("nope"), ok("still nope")]) as server:
        sim = make_sim(server, cache_path=str(tmp_path / "c.sqlite"))
        obs = sim.simulate(CALL, [WEATHER_TOOL])
    assert obs.error.kind == "invalid_response" and json.loads(obs.text)["error"]["type"] == "invalid_response"
    assert len(server.requests) == 2 and len(sim.cache) == 0
    assert sim.stats.backend_errors == 1


def test_an_api_error_body_is_a_legitimate_answer_even_with_returns():
    error = {"error": {"code": 404, "message": "City not found"}}
    with FakeChatServer([ok(json.dumps(error))]) as server:
        obs = make_sim(server).simulate(CALL, [WEATHER_TOOL])
    assert json.loads(obs.text) == error and obs.error is None


def test_server_errors_and_rate_limits_are_retried_with_backoff():
    sleeps: list[float] = []
    script = [
        (500, {"error": "boom"}, 0.0),
        (503, "unavailable", 0.0),
        (429, {"error": "slow down"}, 0.0),
        ok(json.dumps(GOOD)),
    ]
    with FakeChatServer(script) as server:
        sim = make_sim(server, sleeps=sleeps, backoff_s=1.0, max_backoff_s=8.0, max_retries=3)
        obs = sim.simulate(CALL, [WEATHER_TOOL])
    assert json.loads(obs.text) == GOOD and len(server.requests) == 4
    assert len(sleeps) == 3
    assert 0.5 <= sleeps[0] <= 1.0 and 1.0 <= sleeps[1] <= 2.0 and 2.0 <= sleeps[2] <= 4.0  # exponential, jittered


def test_a_timeout_is_retried():
    with FakeChatServer([(200, completion(json.dumps(GOOD)), 1.0), ok(json.dumps(GOOD))]) as server:
        sim = make_sim(server, timeout_s=0.2)
        start = time.perf_counter()
        obs = sim.simulate(CALL, [WEATHER_TOOL])
    assert obs.error is None and json.loads(obs.text) == GOOD
    assert sim.backend.counters["retries"] == 1 and time.perf_counter() - start < 1.0


def test_exhausted_retries_give_backend_error_never_an_exception(tmp_path):
    with FakeChatServer([(500, {"error": "down"}, 0.0)]) as server:
        sim = make_sim(server, max_retries=2, cache_path=str(tmp_path / "c.sqlite"))
        obs = sim.simulate(CALL, [WEATHER_TOOL])
    assert obs.error.kind == "backend_error" and "after 3 attempts: HTTP 500" in obs.error.message
    assert len(server.requests) == 3 and len(sim.cache) == 0
    assert sim.stats.backend_errors == 1 and sim.backend.counters["failures"] == 1


def test_client_errors_are_not_retried_and_a_dead_endpoint_fails_cleanly():
    with FakeChatServer([(400, {"error": "bad model"}, 0.0)]) as server:
        obs = make_sim(server).simulate(CALL, [WEATHER_TOOL])
    assert obs.error.kind == "backend_error" and "HTTP 400" in obs.error.message and len(server.requests) == 1
    dead = make_sim(None, max_retries=1).simulate(CALL, [WEATHER_TOOL])
    assert dead.error.kind == "backend_error" and "ConnectError" in dead.error.message


def test_session_history_and_stored_record_reach_the_prompt():
    booked = {"booking_id": "BK-123456", "hotel": "Harbor Inn", "status": "CONFIRMED"}
    with FakeChatServer([ok(json.dumps(booked)), ok(json.dumps({**booked, "status": "CANCELED"}))]) as server:
        sim = make_sim(server)
        sim.simulate(ToolCall("book_hotel", {"hotel": "Harbor Inn", "check_in": "2025-10-01"}), BOOKING_TOOLS, "ep")
        obs = sim.simulate(ToolCall("cancel_booking", {"booking_id": "BK-123456"}), BOOKING_TOOLS, "ep")
    system = server.requests[1]["messages"][0]["content"]
    assert "Earlier requests in this session" in system and '"hotel": "Harbor Inn"' in system
    assert "Current state of the record this request refers to (booking_id=BK-123456)" in system
    assert json.loads(obs.text)["status"] == "CANCELED"


def test_batches_run_concurrently_within_the_limit_and_sessions_in_order():
    active = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def reply(body, index):
        with lock:
            active["now"] += 1
            active["peak"] = max(active["peak"], active["now"])
        time.sleep(0.15)
        with lock:
            active["now"] -= 1
        request = json.loads(body["messages"][1]["content"].split("\n")[1])
        return 200, completion(json.dumps({**GOOD, "city": request["arguments"]["city"]})), 0.0

    items = [(ToolCall("get_weather", {"city": f"C{i}"}), [WEATHER_TOOL], f"s{i % 3}") for i in range(9)]
    with FakeChatServer(reply) as server:
        sim = make_sim(server, concurrency=2)
        results = sim.simulate_many(items)
    assert [json.loads(o.text)["city"] for o in results] == [f"C{i}" for i in range(9)]
    assert active["peak"] == 2  # two in flight at once (concurrent), never more (bounded); no wall-clock race
    by_session = {}
    for body in server.requests:
        system = body["messages"][0]["content"]
        city = json.loads(body["messages"][1]["content"].split("\n")[1])["arguments"]["city"]
        by_session.setdefault(int(city[1:]) % 3, []).append((int(city[1:]), system.count("request:")))
    for calls in by_session.values():  # each session's calls ran in order, seeing all earlier ones
        assert sorted(calls) == calls and [n for _, n in calls] == [0, 1, 2]


def test_async_api_and_sync_api_inside_a_running_loop():
    with FakeChatServer([ok(json.dumps(GOOD))]) as server:
        sim = make_sim(server)

        async def main() -> tuple:
            a = await sim.asimulate(CALL, [WEATHER_TOOL])
            b = await sim.asimulate_many([(CALL, [WEATHER_TOOL], "x"), (CALL, [WEATHER_TOOL], "y")])
            c = sim.simulate(CALL, [WEATHER_TOOL])  # sync call from inside a loop still works
            return a, b, c

        a, b, c = asyncio.run(main())
    assert json.loads(a.text) == GOOD and len(b) == 2 and json.loads(c.text) == GOOD
    sim.close()
