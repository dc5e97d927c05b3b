"""Pure parts of the τ² harness (no τ² import): pass^k, user-LLM specs, batching of agent turns."""

import itertools
import threading
import time
from math import comb

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slca_grpo.endpoints import EndpointSpecError
from slca_grpo.eval.agent import AgentRequest
from slca_grpo.eval.tau2.batching import AgentBatcher, AgentOutputError, respond_one
from slca_grpo.eval.tau2.metrics import (
    average_pass_hat,
    is_success,
    mean_reward,
    pass_hat_k,
    score_tasks,
)
from slca_grpo.eval.tau2.spec import parse_user_llm

# ---------------------------------------------------------------- pass^k


def test_pass_hat_k_hand_values():
    # 4 trials, 3 successes: pass^1 = 3/4, pass^2 = C(3,2)/C(4,2) = 3/6, pass^3 = 1/4, pass^4 = 0.
    assert pass_hat_k(4, 3, 1) == pytest.approx(0.75)
    assert pass_hat_k(4, 3, 2) == pytest.approx(0.5)
    assert pass_hat_k(4, 3, 3) == pytest.approx(0.25)
    assert pass_hat_k(4, 3, 4) == 0.0
    assert pass_hat_k(5, 5, 5) == 1.0
    assert pass_hat_k(3, 0, 1) == 0.0


@pytest.mark.parametrize("n,c,k", [(2, 1, 3), (2, 3, 1), (2, 1, 0), (2, -1, 1)])
def test_pass_hat_k_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


@given(st.integers(1, 12).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_pass_hat_k_properties(nc):
    n, c = nc
    values = [pass_hat_k(n, c, k) for k in range(1, n + 1)]
    assert values[0] == pytest.approx(c / n)  # pass^1 is the success rate
    assert all(a >= b - 1e-12 for a, b in itertools.pairwise(values))  # non-increasing in k
    assert values[-1] == (1.0 if c == n else 0.0)  # pass^n: all n trials must succeed


def test_score_tasks_and_average_hand_values():
    # task a: rewards 1,1,0 -> c=2; task b: 1,1,1 -> c=3 (0.9999995 counts: τ²'s 1e-6 tolerance).
    rewards = [("a", 1.0), ("b", 1.0), ("a", 1.0), ("b", 0.9999995), ("a", 0.0), ("b", 1.0)]
    scores = {s.task_id: s for s in score_tasks(rewards)}
    assert (scores["a"].num_trials, scores["a"].num_successes) == (3, 2)
    assert scores["a"].pass_hat == pytest.approx({1: 2 / 3, 2: 1 / 3, 3: 0.0})
    assert scores["b"].pass_hat == pytest.approx({1: 1.0, 2: 1.0, 3: 1.0})
    averaged = average_pass_hat(scores.values())
    assert averaged == pytest.approx({1: (2 / 3 + 1) / 2, 2: (1 / 3 + 1) / 2, 3: 0.5})
    assert mean_reward(scores.values()) == pytest.approx((2 + 2.9999995) / 6)


def test_score_tasks_caps_k_at_the_fewest_trials():
    scores = score_tasks([("a", 1.0), ("a", 1.0), ("a", 0.0), ("b", 1.0), ("b", 0.5)])
    assert all(set(s.pass_hat) == {1, 2} for s in scores)
    by_id = {s.task_id: s for s in scores}
    assert by_id["b"].pass_hat == {1: 0.5, 2: 0.0}  # a partial reward is a failure
    assert by_id["a"].pass_hat[2] == pytest.approx(comb(2, 2) / comb(3, 2))
    assert score_tasks([]) == [] and average_pass_hat([]) == {}


def test_is_success_tolerance():
    assert is_success(1.0) and is_success(1 - 5e-7) and not is_success(0.999) and not is_success(0.0)


# ---------------------------------------------------------------- user LLM spec


def test_parse_user_llm_spec(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    spec = parse_user_llm("openai:http://localhost:8000/v1/#Qwen/Qwen2.5-7B-Instruct")
    assert (spec.base_url, spec.model, spec.api_key) == (
        "http://localhost:8000/v1",
        "Qwen/Qwen2.5-7B-Instruct",
        "EMPTY",
    )
    assert spec.litellm_model == "openai/Qwen/Qwen2.5-7B-Instruct"
    assert spec.litellm_args()["api_base"] == "http://localhost:8000/v1"
    assert spec.litellm_args()["temperature"] == 0.0
    assert parse_user_llm("openai:https://h:1/v1/chat/completions#m").base_url == "https://h:1/v1"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert parse_user_llm("openai:http://h/v1#m").api_key == "sk-test"


@pytest.mark.parametrize(
    "bad,fragment",
    [
        ("http://localhost:8000/v1#m", "does not start with 'openai:'"),
        ("anthropic:http://h#m", "does not start with 'openai:'"),
        ("openai:http://localhost:8000/v1", "names no model"),
        ("openai:http://h/v1#  ", "names no model"),
        ("openai:localhost:8000#m", "not an http(s) URL"),
        ("", "does not start with 'openai:'"),
    ],
)
def test_parse_user_llm_errors_say_what_is_wrong(bad, fragment):
    with pytest.raises(EndpointSpecError) as error:
        parse_user_llm(bad)
    assert fragment in str(error.value) and "expected openai:BASE_URL#MODEL" in str(error.value)


# ---------------------------------------------------------------- batching


class EchoAgent:
    name = "echo"

    def __init__(self, delay: float = 0.0):
        self.calls: list[list[str]] = []
        self.delay = delay
        self.threads: set[str] = set()

    def respond(self, requests):
        self.threads.add(threading.current_thread().name)
        self.calls.append([r.key for r in requests])
        time.sleep(self.delay)
        return [f"{r.key}:{r.step}" for r in requests]


def test_batcher_groups_waiting_simulations_and_routes_answers():
    agent = EchoAgent()
    results: dict[str, str] = {}
    start = threading.Barrier(4)

    with AgentBatcher(agent, max_batch=4, max_wait_s=5.0) as batcher:

        def simulate(key):
            with batcher.simulation():
                start.wait()
                results[key] = batcher.respond(AgentRequest(messages=[], tools=[], key=key, step=7))

        threads = [threading.Thread(target=simulate, args=(f"t{i}",)) for i in range(4)]
        began = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - began
    assert results == {f"t{i}": f"t{i}:7" for i in range(4)}
    # All four active simulations were waiting, so one batch went out without the 5 s wait.
    assert [sorted(c) for c in agent.calls] == [["t0", "t1", "t2", "t3"]]
    assert elapsed < 2.0
    assert agent.threads == {"tau2-agent-batcher"}  # one thread owns the agent


def test_batcher_respects_max_batch_and_waits_for_stragglers_only_max_wait():
    agent = EchoAgent()
    with AgentBatcher(agent, max_batch=2, max_wait_s=0.05) as batcher:
        out = []

        def one(key):
            with batcher.simulation():
                out.append(batcher.respond(AgentRequest(messages=[], tools=[], key=key)))

        threads = [threading.Thread(target=one, args=(f"k{i}",)) for i in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(out) == sorted(f"k{i}:0" for i in range(5))
    assert all(len(c) <= 2 for c in agent.calls) and sum(len(c) for c in agent.calls) == 5
    assert batcher.batch_sizes == [len(c) for c in agent.calls]


class ShortAgent:
    name = "short"

    def respond(self, requests):
        return ["only one"]


class BrokenAgent:
    name = "broken"

    def respond(self, requests):
        raise RuntimeError("model server is down")


def test_agent_contract_violations_are_clear_errors():
    with pytest.raises(AgentOutputError, match="1 texts for 2 requests"):
        from slca_grpo.eval.tau2.batching import checked_respond

        checked_respond(ShortAgent(), [AgentRequest([], []), AgentRequest([], [])])
    with AgentBatcher(BrokenAgent(), max_batch=1) as batcher:
        with batcher.simulation():
            with pytest.raises(RuntimeError, match="model server is down"):
                batcher.respond(AgentRequest([], [], key="x"))
    assert respond_one(EchoAgent(), AgentRequest([], [], key="z", step=2)) == "z:2"
