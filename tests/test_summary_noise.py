"""The study's noise knob: its distribution, reproducibility and independence from the tool calls."""

import re

import numpy as np
import pytest
import torch
from tool_schemas import WEATHER_RESPONSE, weather_tool

from slca_grpo.algos import SEG_SUMMARY, SEG_TOOL, compute_advantages
from slca_grpo.config import ConfigError, load_yaml_config
from slca_grpo.datatypes import Task, ToolCall
from slca_grpo.presets import resolve_config_path
from slca_grpo.rewards import RewardConfig, RuleJudge, compute_rewards
from slca_grpo.rewards.noise import noise_draws, noisy_summary_rewards, summary_noise
from slca_grpo.trainer.run import RunConfig

TOOLS = [weather_tool()]
ANSWER = "It is 22 degrees and sunny in Paris."


def weather_task() -> Task:
    return Task(
        id="w",
        messages=[{"role": "user", "content": "What's the weather in Paris?"}],
        tools=TOOLS,
        gold_calls=[[ToolCall("get_weather", {"city": "Paris"})]],
        subset="tool_call",
    )


def rollout(city: str, answer: str = ANSWER) -> str:
    call = f'<tool_call>{{"name": "get_weather", "arguments": {{"city": "{city}"}}}}</tool_call>'
    return f"{call}<tool_response>{WEATHER_RESPONSE}</tool_response>{answer}"


def test_the_config_keys_load_and_bad_values_name_the_key():
    config = load_yaml_config(
        RunConfig,
        resolve_config_path("demo-quick-tiny"),
        ["reward.summary_noise_std=0.5", "reward.summary_noise_prob=0.25"],
    )
    assert config.reward.summary_noise_std == 0.5 and config.reward.summary_noise_prob == 0.25
    assert config.reward.has_summary_noise and not RewardConfig().has_summary_noise
    for override, message in (
        ("reward.summary_noise_std=-0.1", "summary_noise_std must be >= 0"),
        ("reward.summary_noise_prob=1.5", "summary_noise_prob must be in [0, 1]"),
        ("reward.summary_noise_std=.nan", "summary_noise_std must be a finite number"),
    ):
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_yaml_config(RunConfig, resolve_config_path("demo-quick-tiny"), [override])


def test_draws_are_a_pure_function_of_seed_step_and_slot():
    many, few = noise_draws(3, 7, 12), noise_draws(3, 7, 5)
    for name in ("gaussian", "uniform", "rating"):
        assert np.array_equal(getattr(many, name)[:5], getattr(few, name))
    assert not np.array_equal(noise_draws(3, 8, 5).gaussian, few.gaussian)
    assert not np.array_equal(noise_draws(4, 7, 5).gaussian, few.gaussian)
    # The global RNGs neither feed nor are consumed by the draws.
    torch.manual_seed(0)
    np.random.seed(0)
    expected = torch.rand(1)
    again = noise_draws(3, 7, 5)
    torch.manual_seed(0)
    assert torch.equal(torch.rand(1), expected) and np.array_equal(again.gaussian, few.gaussian)


def test_draws_have_the_stated_distribution():
    draws = noise_draws(0, 0, 20_000)
    assert abs(draws.gaussian.mean()) < 0.03 and draws.gaussian.std() == pytest.approx(1.0, abs=0.03)
    assert draws.uniform.min() >= 0 and draws.uniform.max() < 1
    counts = np.bincount(draws.rating, minlength=6)[1:]
    assert counts.sum() == 20_000 and np.all(np.abs(counts / 20_000 - 0.2) < 0.015)
    clean = np.full(20_000, 0.5)  # mid-scale, so σ = 0.1 is (almost) never clamped
    noisy, replaced = noisy_summary_rewards(clean, draws, RewardConfig(summary_noise_std=0.1))
    assert not replaced.any()
    assert (noisy - clean).mean() == pytest.approx(0.0, abs=0.003) and (noisy - clean).std() == pytest.approx(
        0.1, rel=0.03
    )
    noisy, replaced = noisy_summary_rewards(clean, draws, RewardConfig(summary_noise_prob=0.3))
    assert replaced.mean() == pytest.approx(0.3, abs=0.015)
    assert np.array_equal(noisy[~replaced], clean[~replaced])
    assert set(np.round(noisy[replaced] * 4).astype(int)) == {0, 1, 2, 3, 4}
    # Replacement, then σ, then the judge's scale.
    noisy, _ = noisy_summary_rewards(
        np.zeros(20_000), draws, RewardConfig(summary_noise_std=1.0, summary_noise_prob=1.0)
    )
    assert noisy.min() == 0.0 and noisy.max() == 1.0


def test_noise_does_not_depend_on_the_tool_calls():
    task = weather_task()
    config = RewardConfig(summary_noise_std=0.3, summary_noise_prob=0.5)
    right = compute_rewards([rollout("Paris")] * 6, [task] * 6, RuleJudge(), config)
    wrong = compute_rewards([rollout("London")] * 6, [task] * 6, RuleJudge(), config)
    assert right.records[0].detail("hierr").r_tool > wrong.records[0].detail("hierr").r_tool  # the calls differ …
    assert (
        right.records[0].detail("hierr").r_sum == wrong.records[0].detail("hierr").r_sum
    )  # … the judged answer does not
    a, b = summary_noise(right, config, seed=5, step=2), summary_noise(wrong, config, seed=5, step=2)
    assert np.array_equal(a.shift, b.shift) and np.array_equal(a.replaced, b.replaced)
    assert np.any(a.shift != 0)
    # Not calling at all (the gate) or calling without getting a response changes nothing either:
    # rollouts with the same clean R_sum (0 here) get the same perturbation.
    gated = compute_rewards(["It is sunny in Paris."] * 6, [task] * 6, RuleJudge(), config)
    broken = compute_rewards(["<tool_call>{broken</tool_call>"] * 6, [task] * 6, RuleJudge(), config)
    assert gated.records[0].detail("hierr").no_call and broken.records[0].detail("hierr").reason == "no_tool_response"
    assert np.array_equal(
        summary_noise(gated, config, seed=5, step=2).shift, summary_noise(broken, config, seed=5, step=2).shift
    )


GROUP = [
    rollout("Paris"),
    "It is sunny in Paris.",
    "<tool_call>{broken</tool_call>",
    rollout("Paris", "ok"),
    rollout("London"),
    rollout("Paris", "It is 30 degrees and raining in Paris."),
]


def test_every_rollout_is_perturbed_and_only_summary_and_score_move():
    rewards = compute_rewards(GROUP, [weather_task()] * 6, RuleJudge(), RewardConfig())
    assert [r.detail("hierr").reason for r in rewards.records] == [
        "judged",
        "omission",
        "no_tool_response",
        "short_answer",
        "judged",
        "judged",
    ]
    noise = summary_noise(rewards, RewardConfig(summary_noise_std=0.5), seed=0, step=0)
    r_sum = np.array([r.detail("hierr").r_sum for r in rewards.records])
    expected = np.clip(r_sum + 0.5 * noise_draws(0, 0, 6).gaussian, 0, 1) - r_sum  # gated slot 1 included
    assert np.allclose(noise.shift, expected) and np.count_nonzero(noise.shift) >= 3
    clean = rewards.tensors()
    noisy = noise.apply(clean)
    shift = torch.tensor(noise.shift, dtype=torch.float32)
    assert torch.equal(noisy["tool"], clean["tool"]) and torch.equal(noisy["no_call"], clean["no_call"])
    assert torch.allclose(noisy["summary"] - clean["summary"], shift) and torch.allclose(
        noisy["score"] - clean["score"], shift
    )
    assert float(noisy["summary"].min()) >= 0.0 and float(noisy["summary"].max()) <= 1.0
    # A rollout that passed the gate keeps a score >= 0, so SLCA's penalty rule sees only the gate.
    assert bool((noisy["score"][~clean["no_call"]] >= 0).all())
    metrics = noise.metrics()
    assert metrics["noise/mean"] == pytest.approx(noise.shift.mean()) and metrics["noise/replaced_rate"] == 0.0
    assert summary_noise(rewards, RewardConfig(), seed=0, step=0).shift.tolist() == [0.0] * 6


@pytest.mark.parametrize(
    "config",
    [
        RewardConfig(summary_noise_prob=1.0),
        RewardConfig(summary_noise_std=1.0),
        RewardConfig(summary_noise_std=0.5, summary_noise_prob=0.5),
    ],
)
def test_the_knob_reaches_grpo_everywhere_but_slca_only_on_summary_tokens(config):
    rewards = compute_rewards(GROUP, [weather_task()] * 6, RuleJudge(), RewardConfig())
    clean = rewards.tensors()
    noisy = summary_noise(rewards, config, seed=1, step=4).apply(clean)
    group = torch.zeros(6, dtype=torch.long)
    segments = torch.tensor([[SEG_TOOL, SEG_TOOL, SEG_SUMMARY]] * 6)
    for estimator in ("grpo", "slca"):
        before = compute_advantages(estimator, group_ids=group, segment_ids=segments, rewards=clean)
        after = compute_advantages(estimator, group_ids=group, segment_ids=segments, rewards=noisy)
        assert torch.allclose(before[:, :2], after[:, :2]) == (estimator == "slca"), estimator
        assert not torch.allclose(before[:, 2], after[:, 2])
