"""Error injection rates and determinism; truncation of long observations."""

from __future__ import annotations

import json
import math

import pytest
from simulator_helpers import SEARCH_TOOL, WEATHER_TOOL

from slca_grpo.config import ConfigError
from slca_grpo.datatypes import ToolCall
from slca_grpo.simulator import (
    ErrorInjectionConfig,
    Simulator,
    SimulatorConfig,
    truncate_middle_to_tokens,
)
from slca_grpo.simulator.config import SimulatorConfig as Config
from slca_grpo.simulator.injection import ErrorInjector

N = 10_000


def test_injection_rate_is_within_binomial_tolerance_and_deterministic():
    config = ErrorInjectionConfig(timeout_rate=0.2)
    draws = [ErrorInjector(config, seed=3).draw(f"ep-{i // 10}", '{"name":"f"}', i % 10)[0] for i in range(N)]
    again = [ErrorInjector(config, seed=3).draw(f"ep-{i // 10}", '{"name":"f"}', i % 10)[0] for i in range(N)]
    other_seed = [ErrorInjector(config, seed=4).draw(f"ep-{i // 10}", '{"name":"f"}', i % 10)[0] for i in range(N)]
    hits = sum(d == "timeout" for d in draws)
    sd = math.sqrt(N * 0.2 * 0.8)  # 40
    assert abs(hits - 0.2 * N) < 4.5 * sd
    assert set(draws) == {"timeout", None}
    assert draws == again
    assert draws != other_seed


def test_several_kinds_share_one_draw_in_proportion():
    config = ErrorInjectionConfig(timeout_rate=0.1, server_error_rate=0.1, rate_limit_rate=0.05, empty_result_rate=0.05)
    injector = ErrorInjector(config, seed=0)
    kinds = [injector.draw("s", f"call-{i}", 0)[0] for i in range(N)]
    for kind, rate in (
        ("timeout", 0.1),
        ("server_error", 0.1),
        ("rate_limited", 0.05),
        ("empty_result", 0.05),
    ):
        count = kinds.count(kind)
        assert abs(count - rate * N) < 4.5 * math.sqrt(N * rate * (1 - rate)), kind
    assert abs(kinds.count(None) - 0.7 * N) < 4.5 * math.sqrt(N * 0.21)


def test_simulator_injects_the_same_errors_on_two_runs_and_a_retry_can_succeed():
    config = SimulatorConfig(seed=5, errors=ErrorInjectionConfig(server_error_rate=0.2, rate_limit_rate=0.1))

    def run() -> list[str | None]:
        sim = Simulator(config)
        kinds = []
        for episode in range(40):
            for _ in range(5):  # the same call retried within an episode
                obs = sim.simulate(ToolCall("get_weather", {"city": "Oslo"}), [WEATHER_TOOL], f"ep-{episode}")
                kinds.append(obs.error.kind if obs.error else None)
        return kinds

    first, second = run(), run()
    assert first == second
    assert 20 < sum(k is not None for k in first) < 100  # ~30% of 200
    assert set(first) == {None, "server_error", "rate_limited"}
    per_episode = [first[i : i + 5] for i in range(0, 200, 5)]
    assert any(e[0] is not None and None in e for e in per_episode)  # fails, then a retry goes through


def test_injected_error_texts_are_realistic_json():
    injector = ErrorInjector(ErrorInjectionConfig(), seed=0)
    timeout = json.loads(injector.observation("timeout", "get_weather", 0.5).text)["error"]
    assert timeout["status"] == 504 and "Timeout" in timeout["message"] and timeout["retryable"] is True
    limited = json.loads(injector.observation("rate_limited", "get_weather", 0.99).text)["error"]
    assert limited["status"] == 429 and limited["retry_after"] == 5 and "get_weather" in limited["message"]
    server = json.loads(injector.observation("server_error", "f", 0.0).text)["error"]
    assert server["status"] == 500
    empty = injector.observation("empty_result", "f", 0.0)
    assert json.loads(empty.text)["results"] == [] and empty.error.kind == "empty_result"


def test_rates_must_be_probabilities_that_add_up_to_at_most_one():
    with pytest.raises(ConfigError, match="timeout_rate"):
        Config(errors=ErrorInjectionConfig(timeout_rate=1.5))
    with pytest.raises(ConfigError, match="add up"):
        Config(errors=ErrorInjectionConfig(timeout_rate=0.6, server_error_rate=0.6))
    config = Config()
    config.errors.timeout_rate = 2.0  # changed after construction: validate() checks again
    with pytest.raises(ConfigError, match="timeout_rate"):
        config.validate()


# -- truncation ---------------------------------------------------------------------------------


def test_truncate_middle_keeps_head_and_tail_within_the_budget():
    text = "HEAD-" + "x" * 10_000 + "-TAIL"
    out = truncate_middle_to_tokens(text, 100)  # default: ~4 characters a token
    assert (len(out) + 3) // 4 <= 100
    assert out.startswith("HEAD-") and out.endswith("-TAIL")
    assert "[truncated" in out and "characters]" in out
    omitted = int(out.split("[truncated ")[1].split(" ")[0])
    kept = len(out) - len(out[out.index("\n...[") : out.index("]...\n") + 5])
    assert omitted + kept == len(text)
    assert truncate_middle_to_tokens("short", 100) == "short"
    assert truncate_middle_to_tokens(text, None) == text


def test_truncate_middle_with_a_custom_token_counter():
    words = " ".join(f"w{i}" for i in range(1000))

    def count(s):
        return len(s.split())

    out = truncate_middle_to_tokens(words, 50, count)
    assert count(out) <= 50 and out.startswith("w0 w1") and out.endswith("w998 w999")
    assert count(out) >= 45  # the budget is used, not wasted


def test_the_simulator_truncates_long_observations_with_its_token_counter():
    counted: list[int] = []

    def counter(text: str) -> int:
        counted.append(len(text))
        return len(text) // 2

    sim = Simulator(SimulatorConfig(max_observation_tokens=64), count_tokens=counter)
    obs = sim.simulate(ToolCall("search_hotels", {"city": "Paris", "limit": 5}), [SEARCH_TOOL])
    assert counter(obs.text) <= 64 and "[truncated" in obs.text
    assert sim.stats.truncated == 1
    full = Simulator(SimulatorConfig(max_observation_tokens=None)).simulate(
        ToolCall("search_hotels", {"city": "Paris", "limit": 5}), [SEARCH_TOOL]
    )
    assert obs.text.startswith(full.text[:40]) and obs.text.endswith(full.text[-20:])
