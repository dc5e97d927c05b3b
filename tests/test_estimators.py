"""Advantage estimators (docs/method.md §5): hand-computed values, properties, the registry and its errors.

Notation in comments: mean and unbiased std of a group written out by hand, EPS = 1e-6.
"""

from __future__ import annotations

import argparse
import math

import pytest
import torch
from advantage_helpers import per_rollout
from hypothesis import given, settings
from hypothesis import strategies as st

from slca_grpo.algos import (
    SEG_SUMMARY,
    SEG_TOOL,
    AdvantageConfig,
    MissingRewardError,
    UnknownEstimatorError,
    compute_advantages,
    estimator_spec,
    get_estimator,
    group_index_from_ids,
    group_stats,
    group_zscore,
    list_estimators,
    register_estimator,
    route_by_segment,
    segments_from_mask,
    unregister_estimator,
)
from slca_grpo.cli import algos as commands
from slca_grpo.config import ConfigError

EPS = 1e-6

# Segment rows used by the hand-computed cases (T = 6).
TOOL_AND_SUMMARY = [1, 1, 0, 0, 2, 2]  # tokens 0-1 tool, 4-5 summary
SUMMARY_ONLY = [0, 0, 0, 2, 2, 0]  # no tool call
NOTHING = [0, 0, 0, 0, 0, 0]


def assert_values(actual: list[float | None], expected: list[float | None]) -> None:
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        if want is None:
            assert got is None
        else:
            assert got == pytest.approx(want, rel=1e-6, abs=1e-7)


# --------------------------------------------------------------------------- GRPO


def test_grpo_hand_values_one_group() -> None:
    segments = torch.tensor([TOOL_AND_SUMMARY, SUMMARY_ONLY, TOOL_AND_SUMMARY])
    # scores [1, 0, 0.5]: mean 0.5, unbiased std sqrt((0.25 + 0.25 + 0) / 2) = 0.5
    adv = compute_advantages(
        "grpo", group_ids=["q", "q", "q"], segment_ids=segments, rewards={"score": [1.0, 0.0, 0.5]}
    )
    assert adv.dtype == torch.float32 and adv.shape == (3, 6)
    expected = [0.5 / (0.5 + EPS), -0.5 / (0.5 + EPS), 0.0]
    for code in (SEG_TOOL, SEG_SUMMARY):
        got = [v for v in per_rollout(adv, segments, code) if v is not None]
        want = [expected[i] for i, row in enumerate(segments) if bool((row == code).any())]
        assert_values(got, want)
    assert torch.all(adv[segments == 0] == 0)


def test_grpo_interleaved_string_groups_and_singletons() -> None:
    segments = torch.tensor([TOOL_AND_SUMMARY] * 6)
    groups = ["b", "a", "b", "solo", "a", "b"]
    # group a: scores [2, 0] -> mean 1, std sqrt((1 + 1) / 1) = sqrt(2)
    # group b: scores [1, 1, 4] -> mean 2, std sqrt((1 + 1 + 4) / 2) = sqrt(3)
    # group solo (one rollout): mean 0, std 1 -> 3 / (1 + EPS)
    scores = [1.0, 2.0, 1.0, 3.0, 0.0, 4.0]
    adv = compute_advantages("grpo", group_ids=groups, segment_ids=segments, rewards={"score": scores})
    root2, root3 = math.sqrt(2), math.sqrt(3)
    expected = [
        -1 / (root3 + EPS),
        1 / (root2 + EPS),
        -1 / (root3 + EPS),
        3 / (1 + EPS),
        -1 / (root2 + EPS),
        2 / (root3 + EPS),
    ]
    assert_values(per_rollout(adv, segments, SEG_TOOL), expected)
    assert_values(per_rollout(adv, segments, SEG_SUMMARY), expected)
    # The same groups as a tensor of ids or as tuples give the same advantages.
    as_tensor = compute_advantages(
        "grpo",
        group_ids=torch.tensor([7, 3, 7, 11, 3, 7]),
        segment_ids=segments,
        rewards={"score": torch.tensor(scores)},
    )
    as_tuples = compute_advantages(
        "grpo",
        group_ids=[("p", 1), ("p", 0), ("p", 1), ("p", 2), ("p", 0), ("p", 1)],
        segment_ids=segments,
        rewards={"score": scores},
    )
    assert torch.equal(adv, as_tensor) and torch.equal(adv, as_tuples)


def test_grpo_without_std_normalisation() -> None:
    segments = torch.tensor([TOOL_AND_SUMMARY] * 4)
    # group g: [1, 0, 0.5] - mean 0.5; group of one keeps its score (mean 0, no division).
    adv = compute_advantages(
        "grpo",
        group_ids=["g", "g", "g", "one"],
        segment_ids=segments,
        rewards={"score": [1.0, 0.0, 0.5, -2.0]},
        config={"norm_std": False},
    )
    assert_values(per_rollout(adv, segments, SEG_TOOL), [0.5, -0.5, 0.0, -2.0])


@pytest.mark.parametrize("eps", [1e-6, 0.0])
def test_all_equal_rewards_give_exact_zeros(eps: float) -> None:
    segments = torch.tensor([TOOL_AND_SUMMARY, TOOL_AND_SUMMARY, SUMMARY_ONLY])
    rewards = {
        "score": [0.1, 0.1, 0.1],  # 0.1 is inexact in binary: the mean must still cancel exactly
        "tool": [0.7, 0.7, 0.7],
        "summary": [0.3, 0.3, 0.3],
        "no_call": [False, False, False],
        "success": [1.0, 1.0, 1.0],
        "action": [0.1, 0.1, 0.1],
        "planner": [-1.0, -1.0, -1.0],
    }
    for name in ("grpo", "slca", "toolpo", "rltr"):
        adv = compute_advantages(name, group_ids=[0, 0, 0], segment_ids=segments, rewards=rewards, config={"eps": eps})
        assert torch.equal(adv, torch.zeros_like(adv)), name


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_grpo_one_value_per_rollout(data: st.DataObject) -> None:
    rows = data.draw(st.integers(1, 8))
    cols = data.draw(st.integers(1, 12))
    mask = torch.tensor(data.draw(st.lists(st.booleans(), min_size=rows * cols, max_size=rows * cols)))
    segments = segments_from_mask(mask.reshape(rows, cols))
    groups = data.draw(st.lists(st.sampled_from("abc"), min_size=rows, max_size=rows))
    scores = data.draw(st.lists(st.floats(-5, 5), min_size=rows, max_size=rows))
    adv = compute_advantages("grpo", group_ids=groups, segment_ids=segments, rewards={"score": scores})
    expected = group_zscore(
        torch.tensor(scores, dtype=torch.float64),
        group_index_from_ids(groups)[0],
        small_groups="unit",
    ).float()
    learnable = segments != 0
    assert torch.all(adv[~learnable] == 0)
    assert torch.equal(adv, torch.where(learnable, expected[:, None], 0.0))


# --------------------------------------------------------------------------- SLCA

SLCA_SEGMENTS = torch.tensor([TOOL_AND_SUMMARY] * 3 + [SUMMARY_ONLY] + [TOOL_AND_SUMMARY] * 3)
SLCA_GROUPS = ["A", "B", "A", "A", "B", "A", "B"]
SLCA_REWARDS = {
    #          A0    B0    A1    A2(no call)  B1(neg.)  A3   B2
    "score": [1.8, 1.0, 0.9, -0.5, -0.2, 0.6, 1.3],
    "tool": [0.8, 0.5, 0.4, 0.0, 0.9, 0.6, 0.7],
    "summary": [1.0, 0.5, 0.5, 0.0, 0.3, 0.0, 0.6],
    "no_call": [False, False, False, True, False, False, False],
}


def test_slca_hand_values_with_penalties() -> None:
    adv = compute_advantages("slca", group_ids=SLCA_GROUPS, segment_ids=SLCA_SEGMENTS, rewards=SLCA_REWARDS)
    # Group A tool: present in A0, A1, A3 (A2 made no call) -> [0.8, 0.4, 0.6]: mean 0.6, std 0.2.
    # Group A summary: A2 is penalised (no call) so r_sum = score = -0.5
    #   -> [1.0, 0.5, -0.5, 0.0]: mean 0.25, std sqrt((0.5625 + 0.0625) * 2 / 3) = sqrt(5/12).
    # Group B: B1 has score < 0 -> r_tool = 0 (not 0.9), r_sum = score = -0.2 (not 0.3).
    #   tool [0.5, 0.0, 0.7]: mean 0.4, std sqrt((0.01 + 0.16 + 0.09) / 2) = sqrt(0.13)
    #   summary [0.5, -0.2, 0.6]: mean 0.3, std sqrt((0.04 + 0.25 + 0.09) / 2) = sqrt(0.19)
    std_a_sum, std_b_tool, std_b_sum = math.sqrt(5 / 12), math.sqrt(0.13), math.sqrt(0.19)
    tool = [
        0.2 / (0.2 + EPS),
        0.1 / (std_b_tool + EPS),
        -0.2 / (0.2 + EPS),
        None,
        -0.4 / (std_b_tool + EPS),
        0.0,
        0.3 / (std_b_tool + EPS),
    ]
    summary = [
        0.75 / (std_a_sum + EPS),
        0.2 / (std_b_sum + EPS),
        0.25 / (std_a_sum + EPS),
        -0.75 / (std_a_sum + EPS),
        -0.5 / (std_b_sum + EPS),
        -0.25 / (std_a_sum + EPS),
        0.3 / (std_b_sum + EPS),
    ]
    assert_values(per_rollout(adv, SLCA_SEGMENTS, SEG_TOOL), tool)
    assert_values(per_rollout(adv, SLCA_SEGMENTS, SEG_SUMMARY), summary)
    assert torch.all(adv[SLCA_SEGMENTS == 0] == 0)


def test_slca_no_call_flag_penalises_on_its_own() -> None:
    segments = torch.tensor([SUMMARY_ONLY] * 3)
    # r0 flagged no_call with score 0 (not negative): r_sum = score = 0, not its summary 0.9.
    # r_sum [0.0, 0.5, 1.0]: mean 0.5, std 0.5.
    adv = compute_advantages(
        "slca",
        group_ids=["g"] * 3,
        segment_ids=segments,
        rewards={
            "score": [0.0, 0.5, 1.0],
            "tool": [0.3, 0.0, 0.0],
            "summary": [0.9, 0.5, 1.0],
            "no_call": torch.tensor([1, 0, 0]),
        },
    )
    assert_values(per_rollout(adv, segments, SEG_SUMMARY), [-0.5 / (0.5 + EPS), 0.0, 0.5 / (0.5 + EPS)])


def test_slca_lambdas_scale_after_normalising() -> None:
    base = compute_advantages("slca", group_ids=SLCA_GROUPS, segment_ids=SLCA_SEGMENTS, rewards=SLCA_REWARDS)
    scaled = compute_advantages(
        "slca",
        group_ids=SLCA_GROUPS,
        segment_ids=SLCA_SEGMENTS,
        rewards=SLCA_REWARDS,
        config=AdvantageConfig(lambda_tool=0.5, lambda_summary=2.0),
    )
    tool, summary = SLCA_SEGMENTS == SEG_TOOL, SLCA_SEGMENTS == SEG_SUMMARY
    assert torch.allclose(scaled[tool], 0.5 * base[tool])
    assert torch.allclose(scaled[summary], 2.0 * base[summary])


def test_slca_absent_segments_and_small_groups() -> None:
    segments = torch.tensor([TOOL_AND_SUMMARY, SUMMARY_ONLY, SUMMARY_ONLY, TOOL_AND_SUMMARY, NOTHING, TOOL_AND_SUMMARY])
    groups = ["x", "x", "x", "solo", "y", "y"]
    rewards = {
        "score": [1.0, 0.3, 0.9, 2.0, 0.0, 0.4],
        "tool": [0.9, 0.0, 0.0, 1.0, 0.0, 0.2],
        "summary": [0.1, 0.3, 0.9, 1.0, 0.0, 0.2],
        "no_call": [False] * 6,
    }
    adv = compute_advantages("slca", group_ids=groups, segment_ids=segments, rewards=rewards)
    # x tool: only x0 has a tool segment (|P| = 1) -> 0.
    # x summary: [0.1, 0.3, 0.9]: mean 13/30, std sqrt(((1/3)^2 + (2/15)^2 + (7/15)^2) / 2)
    mean_x = (0.1 + 0.3 + 0.9) / 3
    std_x = math.sqrt(((0.1 - mean_x) ** 2 + (0.3 - mean_x) ** 2 + (0.9 - mean_x) ** 2) / 2)
    # solo: a group of one gets 0 for both segments (unlike GRPO).
    # y: y0 has no learnable token, so y1 is alone in both segments -> 0.
    assert_values(per_rollout(adv, segments, SEG_TOOL), [0.0, None, None, 0.0, None, 0.0])
    assert_values(
        per_rollout(adv, segments, SEG_SUMMARY),
        [
            (0.1 - mean_x) / (std_x + EPS),
            (0.3 - mean_x) / (std_x + EPS),
            (0.9 - mean_x) / (std_x + EPS),
            0.0,
            None,
            0.0,
        ],
    )
    assert torch.all(adv[4] == 0)


slca_cases = st.integers(2, 8).flatmap(
    lambda rows: st.fixed_dictionaries(
        {
            "mask": st.lists(st.lists(st.booleans(), min_size=10, max_size=10), min_size=rows, max_size=rows),
            "groups": st.lists(st.sampled_from(["p", "q"]), min_size=rows, max_size=rows),
            "score": st.lists(st.floats(-1, 2), min_size=rows, max_size=rows),
            "tool": st.lists(st.floats(0, 1), min_size=rows, max_size=rows),
            "summary": st.lists(st.floats(0, 1), min_size=rows, max_size=rows),
            "other": st.lists(st.floats(-3, 3), min_size=rows, max_size=rows),
            "no_call": st.lists(st.booleans(), min_size=rows, max_size=rows),
        }
    )
)


@settings(max_examples=80, deadline=None)
@given(slca_cases)
def test_slca_segments_are_locked(case: dict) -> None:
    segments = segments_from_mask(torch.tensor(case["mask"]))
    rewards = {key: case[key] for key in ("score", "tool", "summary", "no_call")}

    def run(**changes: list) -> torch.Tensor:
        return compute_advantages(
            "slca", group_ids=case["groups"], segment_ids=segments, rewards={**rewards, **changes}
        )

    base = run()
    tool, summary = segments == SEG_TOOL, segments == SEG_SUMMARY
    other_summary = run(summary=case["other"])
    other_tool = run(tool=case["other"])
    # Any change of the summary rewards leaves tool tokens untouched, and vice versa.
    assert torch.equal(other_summary[tool], base[tool])
    assert torch.equal(other_tool[summary], base[summary])
    assert torch.all(base[segments == 0] == 0)
    assert bool(torch.isfinite(base).all())


# --------------------------------------------------------------------------- ToolPO, RLTR


@pytest.mark.parametrize("toolpo_lambda", [1.0, 2.0])
def test_toolpo_hand_values(toolpo_lambda: float) -> None:
    segments = torch.tensor([TOOL_AND_SUMMARY, TOOL_AND_SUMMARY, SUMMARY_ONLY])
    rewards = {"success": [True, False, True], "action": [1.0, 0.5, 0.0]}
    adv = compute_advantages(
        "toolpo",
        group_ids=["g"] * 3,
        segment_ids=segments,
        rewards=rewards,
        config={"toolpo_lambda": toolpo_lambda},
    )
    # success [1, 0, 1]: mean 2/3, std sqrt((1/9 + 4/9 + 1/9) / 2) = sqrt(1/3)
    s = math.sqrt(1 / 3)
    global_adv = [(1 / 3) / (s + EPS), (-2 / 3) / (s + EPS), (1 / 3) / (s + EPS)]
    # action over rollouts with a tool segment only, [1.0, 0.5]: mean 0.75, std sqrt(0.125)
    a = math.sqrt(0.125)
    action_adv = [0.25 / (a + EPS), -0.25 / (a + EPS)]
    assert_values(
        per_rollout(adv, segments, SEG_TOOL),
        [
            global_adv[0] + toolpo_lambda * action_adv[0],
            global_adv[1] + toolpo_lambda * action_adv[1],
            None,
        ],
    )
    assert_values(per_rollout(adv, segments, SEG_SUMMARY), global_adv)


def test_toolpo_group_of_one_uses_grpo_rule() -> None:
    segments = torch.tensor([TOOL_AND_SUMMARY])
    adv = compute_advantages(
        "toolpo", group_ids=["solo"], segment_ids=segments, rewards={"success": [1], "action": [1.0]}
    )
    # Global: mean 0, std 1 -> 1 / (1 + EPS). Tool: |P| = 1 -> 0.
    assert_values(per_rollout(adv, segments, SEG_TOOL), [1 / (1 + EPS)])
    assert_values(per_rollout(adv, segments, SEG_SUMMARY), [1 / (1 + EPS)])


def test_rltr_hand_values() -> None:
    segments = torch.tensor([TOOL_AND_SUMMARY, TOOL_AND_SUMMARY, TOOL_AND_SUMMARY, SUMMARY_ONLY])
    # planner over rollouts with a tool segment, [1, -1, 0]: mean 0, std sqrt(2 / 2) = 1;
    # the summary-only rollout (planner 7) is left out of the statistics.
    adv = compute_advantages(
        "rltr", group_ids=[5, 5, 5, 5], segment_ids=segments, rewards={"planner": [1.0, -1.0, 0.0, 7.0]}
    )
    assert_values(per_rollout(adv, segments, SEG_TOOL), [1 / (1 + EPS), -1 / (1 + EPS), 0.0, None])
    assert torch.all(adv[segments != SEG_TOOL] == 0)


# --------------------------------------------------------------------------- grouped helpers


def test_group_zscore_options() -> None:
    values = torch.tensor([1.0, 0.0, 0.5, 9.0, 3.0], dtype=torch.float64)
    index = torch.tensor([0, 0, 0, 1, 2])
    present = torch.tensor([True, True, False, True, True])
    # Group 0 over present [1, 0]: mean 0.5, std sqrt(0.5); groups 1 and 2 have one rollout each.
    z = group_zscore(values, index, present)
    half = 0.5 / (math.sqrt(0.5) + EPS)
    assert z.tolist() == pytest.approx([half, -half, 0.0, 0.0, 0.0])
    z_unit = group_zscore(values, index, present, small_groups="unit")
    assert z_unit.tolist() == pytest.approx([half, -half, 0.0, 9 / (1 + EPS), 3 / (1 + EPS)])
    z_three = group_zscore(values, index, min_count=3)
    assert z_three.tolist() == pytest.approx([0.5 / (0.5 + EPS), -0.5 / (0.5 + EPS), 0, 0, 0])
    with pytest.raises(ValueError, match="small_groups"):
        group_zscore(values, index, small_groups="skip")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"\[B\]"):
        group_zscore(values, index[:3])
    with pytest.raises(ValueError, match="finite"):
        group_zscore(torch.tensor([1.0, float("nan")]), torch.tensor([0, 0]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(-100, 100), st.booleans()), min_size=1, max_size=20))
def test_group_stats_match_torch(rows: list[tuple[int, float, bool]]) -> None:
    index = torch.tensor([r[0] for r in rows])
    values = torch.tensor([r[1] for r in rows], dtype=torch.float64)
    present = torch.tensor([r[2] for r in rows])
    stats = group_stats(values, index, present, num_groups=4)
    for group in range(4):
        members = values[(index == group) & present]
        assert int(stats.count[group]) == members.numel()
        if members.numel():
            assert float(stats.mean[group]) == pytest.approx(float(members.mean()), abs=1e-9)
        if members.numel() >= 2:
            assert float(stats.std[group]) == pytest.approx(float(members.std()), abs=1e-9)


def test_group_index_from_ids() -> None:
    index, count = group_index_from_ids(["b", "a", "b", ("t", 1), "a"])
    assert index.tolist() == [0, 1, 0, 2, 1] and count == 3
    index, count = group_index_from_ids(torch.tensor([10, 4, 10]))
    assert index.tolist() == [1, 0, 1] and count == 2
    with pytest.raises(TypeError, match="hashable"):
        group_index_from_ids([["unhashable"], ["x"]])
    with pytest.raises(ValueError, match="2 group ids for a batch of 3"):
        group_index_from_ids(["a", "b"], batch_size=3)


def test_route_by_segment_rejects_non_finite() -> None:
    segments = torch.tensor([[1, 2]])
    with pytest.raises(ValueError, match="not finite"):
        route_by_segment(segments, torch.tensor([1e300], dtype=torch.float64), torch.tensor([0.0]))


# --------------------------------------------------------------------------- registry, errors


def test_builtins_are_registered_with_descriptions() -> None:
    assert {"grpo", "slca", "toolpo", "rltr"} <= set(list_estimators())
    assert estimator_spec("slca").rewards == ("score", "tool", "summary", "no_call")
    assert estimator_spec("grpo").description.startswith("GRPO")


def test_unknown_estimator_lists_known_names() -> None:
    with pytest.raises(UnknownEstimatorError) as info:
        get_estimator("ppo")
    assert isinstance(info.value, KeyError)
    assert "'ppo'" in str(info.value) and "grpo, slca, toolpo, rltr" in str(info.value)


def test_missing_reward_names_estimator_and_key() -> None:
    segments = torch.tensor([TOOL_AND_SUMMARY])
    with pytest.raises(MissingRewardError, match=r"estimator 'slca' needs reward\(s\) \['no_call'\]"):
        compute_advantages(
            "slca",
            group_ids=[0],
            segment_ids=segments,
            rewards={"score": [1.0], "tool": [1.0], "summary": [0.0]},
        )
    with pytest.raises(KeyError, match="'planner'"):
        compute_advantages("rltr", group_ids=[0], segment_ids=segments, rewards={"score": [1.0]})


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_rewards_raise(bad: float) -> None:
    segments = torch.tensor([TOOL_AND_SUMMARY] * 2)
    with pytest.raises(ValueError, match=r"reward 'score' \(estimator 'grpo'\).*rollouts \[1\]"):
        compute_advantages("grpo", group_ids=[0, 0], segment_ids=segments, rewards={"score": [0.0, bad]})


def test_malformed_inputs_raise_clearly() -> None:
    segments = torch.tensor([TOOL_AND_SUMMARY] * 2)
    with pytest.raises(ValueError, match=r"must have shape \[2\]"):
        compute_advantages("grpo", group_ids=[0, 0], segment_ids=segments, rewards={"score": [1.0]})
    with pytest.raises(ValueError, match="not numeric"):
        compute_advantages("grpo", group_ids=[0, 0], segment_ids=segments, rewards={"score": ["a", "b"]})
    with pytest.raises(ValueError, match="3 group ids for a batch of 2"):
        compute_advantages("grpo", group_ids=[0, 0, 1], segment_ids=segments, rewards={"score": [1, 2]})
    with pytest.raises(ValueError, match="codes"):
        compute_advantages("grpo", group_ids=[0], segment_ids=torch.tensor([[0, -1]]), rewards={"score": [1.0]})
    with pytest.raises(ValueError, match="mix the tool code 1"):
        compute_advantages("grpo", group_ids=[0], segment_ids=torch.tensor([[1, 5]]), rewards={"score": [1.0]})
    with pytest.raises(TypeError, match="mapping"):
        compute_advantages("grpo", group_ids=[0, 0], segment_ids=segments, rewards=[1.0, 2.0])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown setting"):
        compute_advantages(
            "grpo", group_ids=[0, 0], segment_ids=segments, rewards={"score": [1, 2]}, config={"epsilon": 1}
        )
    with pytest.raises(ConfigError, match="eps must be >= 0"):
        AdvantageConfig(eps=-1.0)
    with pytest.raises(ConfigError, match="lambda_tool must be finite"):
        AdvantageConfig(lambda_tool=float("nan"))
    with pytest.raises(ConfigError, match="norm_std must be a bool"):
        AdvantageConfig(norm_std="yes")  # type: ignore[arg-type]


def test_register_a_new_estimator_in_one_function() -> None:
    @register_estimator("tool_only_grpo", rewards=("score",))
    def tool_only_grpo(group_index, segment_ids, rewards, config):  # type: ignore[no-untyped-def]
        """GRPO advantage on tool tokens only."""
        advantage = group_zscore(rewards["score"].double(), group_index, eps=config.eps)
        return route_by_segment(segment_ids, advantage, torch.zeros_like(advantage))

    try:
        assert "tool_only_grpo" in list_estimators()
        assert get_estimator("tool_only_grpo") is tool_only_grpo
        segments = torch.tensor([TOOL_AND_SUMMARY, TOOL_AND_SUMMARY])
        adv = compute_advantages(
            "tool_only_grpo", group_ids=["g", "g"], segment_ids=segments, rewards={"score": [1, 0]}
        )
        # [1, 0]: mean 0.5, std sqrt(0.5)
        half = 0.5 / (math.sqrt(0.5) + EPS)
        assert_values(per_rollout(adv, segments, SEG_TOOL), [half, -half])
        assert_values(per_rollout(adv, segments, SEG_SUMMARY), [0.0, 0.0])
        with pytest.raises(ValueError, match="already registered"):
            register_estimator("tool_only_grpo")(tool_only_grpo)
    finally:
        unregister_estimator("tool_only_grpo")
    assert "tool_only_grpo" not in list_estimators()


def test_estimator_returning_wrong_shape_is_reported() -> None:
    @register_estimator("broken")
    def broken(group_index, segment_ids, rewards, config):  # type: ignore[no-untyped-def]
        """Returns one value per rollout instead of per token."""
        return torch.zeros(segment_ids.shape[0])

    try:
        with pytest.raises(ValueError, match="estimator 'broken' returned"):
            compute_advantages("broken", group_ids=[0], segment_ids=torch.tensor([[1, 2]]), rewards={})
    finally:
        unregister_estimator("broken")


def test_cli_lists_estimators(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="slca")
    commands.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["estimators"])
    assert args.func(args) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in lines]
    assert names[:4] == ["grpo", "slca", "toolpo", "rltr"]
    slca_line = lines[names.index("slca")]
    assert "SLCA:" in slca_line and "score, tool, summary, no_call" in slca_line


def test_slca_no_summary_is_slca_without_its_summary_channel() -> None:
    """The study's control arm: tool tokens exactly as SLCA's, summary tokens 0, whatever R_sum says."""
    base = compute_advantages("slca", group_ids=SLCA_GROUPS, segment_ids=SLCA_SEGMENTS, rewards=SLCA_REWARDS)
    control = compute_advantages(
        "slca-no-summary", group_ids=SLCA_GROUPS, segment_ids=SLCA_SEGMENTS, rewards=SLCA_REWARDS
    )
    tool = SLCA_SEGMENTS == SEG_TOOL
    assert torch.equal(control[tool], base[tool])
    assert torch.all(control[SLCA_SEGMENTS == SEG_SUMMARY] == 0) and torch.any(base[SLCA_SEGMENTS == SEG_SUMMARY] != 0)
    noisy = {**SLCA_REWARDS, "summary": [0.9, 0.1, 0.5, 0.0, 1.0, 0.3, 0.7]}
    assert torch.equal(
        compute_advantages("slca-no-summary", group_ids=SLCA_GROUPS, segment_ids=SLCA_SEGMENTS, rewards=noisy), control
    )
    # It is what `slca` gives with lambda_summary = 0, whatever lambda_summary it is handed.
    zeroed = compute_advantages(
        "slca", group_ids=SLCA_GROUPS, segment_ids=SLCA_SEGMENTS, rewards=SLCA_REWARDS, config={"lambda_summary": 0.0}
    )
    assert torch.equal(control, zeroed)
    assert torch.equal(
        compute_advantages(
            "slca-no-summary",
            group_ids=SLCA_GROUPS,
            segment_ids=SLCA_SEGMENTS,
            rewards=SLCA_REWARDS,
            config={"lambda_summary": 2.0},
        ),
        control,
    )
