"""Per-turn segments and the ``slca-turn`` estimator: hand-computed advantages, properties, errors.

Notation: group mean and unbiased std written out by hand, EPS = 1e-6. Segment codes of the turn
layout: 0 none, 2 summary, 3 turn 1, 4 turn 2, 5 turn 3.
"""

from __future__ import annotations

import math

import pytest
import torch
from advantage_helpers import per_rollout
from hypothesis import given, settings
from hypothesis import strategies as st
from scripted import scripted_loop, two_step_setup

from slca_grpo.algos import (
    SEG_FIRST_TURN,
    SEG_SUMMARY,
    AdvantageConfig,
    MissingRewardError,
    UnknownEstimatorError,
    compute_advantages,
    discounted_returns,
    estimator_spec,
    register_estimator,
    segment_ids_for,
    segment_presence,
    segment_roles,
    segments_from_mask,
    turn_count,
    turn_segments_from_mask,
)
from slca_grpo.config import ConfigError

EPS = 1e-6
TURN1, TURN2, TURN3 = SEG_FIRST_TURN, SEG_FIRST_TURN + 1, SEG_FIRST_TURN + 2

# Rows of the turn layout (T = 8): two tool turns and a summary, one tool turn, summary only.
TWO_TURNS = [3, 3, 0, 4, 4, 0, 2, 2]
ONE_TURN = [3, 3, 0, 2, 2, 0, 0, 0]
THREE_TURNS = [3, 0, 4, 0, 5, 0, 2, 2]
SUMMARY_ONLY = [2, 2, 2, 0, 0, 0, 0, 0]


def approx(values: list[float | None]) -> list:
    return [None if v is None else pytest.approx(v, rel=1e-6, abs=1e-7) for v in values]


def rewards(turns, summary=None, score=None, no_call=None) -> dict:
    n = len(turns)
    return {
        "turn": turns,
        "summary": summary if summary is not None else [0.0] * n,
        "score": score if score is not None else [1.0] * n,
        "no_call": no_call if no_call is not None else [False] * n,
    }


# --------------------------------------------------------------------------- segments


def test_turn_segments_number_the_tool_runs():
    mask = torch.tensor(
        [
            [1, 1, 0, 1, 0, 0, 1, 1, 0],  # three runs: turn 1, turn 2, summary
            [0, 1, 1, 1, 0, 0, 0, 0, 0],  # one run: all summary
            [0, 0, 0, 0, 0, 0, 0, 0, 0],  # nothing learnable
            [1, 0, 1, 0, 1, 0, 1, 0, 1],  # four tool turns and a one-token summary
        ]
    )
    expected = [
        [3, 3, 0, 4, 0, 0, 2, 2, 0],
        [0, 2, 2, 2, 0, 0, 0, 0, 0],
        [0] * 9,
        [3, 0, 4, 0, 5, 0, 6, 0, 2],
    ]
    segments = turn_segments_from_mask(mask)
    assert segments.dtype == torch.long and segments.tolist() == expected
    assert turn_segments_from_mask(mask[0]).tolist() == expected[0]  # 1-D in, 1-D out
    assert turn_segments_from_mask(torch.zeros(2, 0)).shape == (2, 0)
    assert turn_count(segments) == 4 and turn_count(segments_from_mask(mask)) == 0
    assert segment_presence(segments)[3].tolist() == [True, False, True, True, True, True, True]


def test_each_estimator_declares_its_layout():
    mask = torch.tensor([[1, 1, 0, 1, 0, 1]])
    assert segment_ids_for("slca", mask).tolist() == [[1, 1, 0, 1, 0, 2]]
    assert segment_ids_for("grpo", mask).tolist() == [[1, 1, 0, 1, 0, 2]]
    assert segment_ids_for("slca-turn", mask).tolist() == [[3, 3, 0, 4, 0, 2]]
    assert estimator_spec("slca-turn").segmentation == "turn" and estimator_spec("rltr").segmentation == "role"
    with pytest.raises(UnknownEstimatorError):
        segment_ids_for("nope", mask)
    with pytest.raises(ValueError, match="segmentation must be one of"):
        register_estimator("bad-layout", segmentation="token")


masks = st.integers(1, 5).flatmap(
    lambda rows: st.integers(0, 30).flatmap(
        lambda cols: st.lists(st.lists(st.booleans(), min_size=cols, max_size=cols), min_size=rows, max_size=rows)
    )
)


@settings(max_examples=80, deadline=None)
@given(masks)
def test_turn_layout_has_the_runs_of_the_role_layout(rows: list[list[bool]]) -> None:
    mask = torch.tensor(rows, dtype=torch.bool).reshape(len(rows), -1)
    turns = turn_segments_from_mask(mask)
    assert torch.equal(segment_roles(turns), segments_from_mask(mask))
    for row_mask, row in zip(mask.tolist(), turns.tolist()):
        # Tool-turn codes rise by one per run, in order, from turn 1.
        codes = [code for t, code in enumerate(row) if code >= SEG_FIRST_TURN and (t == 0 or not row_mask[t - 1])]
        assert codes == list(range(SEG_FIRST_TURN, SEG_FIRST_TURN + len(codes)))


# --------------------------------------------------------------------------- hand-computed advantages


def test_only_step_two_wrong_keeps_a_positive_advantage_on_step_one():
    segments = torch.tensor([TWO_TURNS] * 3)
    # rollout 0: step 1 right, step 2 wrong; rollout 1: both wrong; rollout 2: both right.
    # turn 1 [1, 0, 1]: mean 2/3, std sqrt(((1/3)² + (2/3)² + (1/3)²) / 2) = sqrt(1/3)
    # turn 2 [0, 0, 1]: mean 1/3, std sqrt(1/3)
    adv = compute_advantages(
        "slca-turn",
        group_ids=[0, 0, 0],
        segment_ids=segments,
        rewards=rewards([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]], summary=[0.5, 0.0, 1.0]),
    )
    std = math.sqrt(1 / 3)
    assert per_rollout(adv, segments, TURN1) == approx(
        [(1 / 3) / (std + EPS), -(2 / 3) / (std + EPS), (1 / 3) / (std + EPS)]
    )
    assert per_rollout(adv, segments, TURN2) == approx(
        [-(1 / 3) / (std + EPS), -(1 / 3) / (std + EPS), (2 / 3) / (std + EPS)]
    )
    # summary [0.5, 0, 1]: mean 0.5, std 0.5
    assert per_rollout(adv, segments, SEG_SUMMARY) == approx([0.0, -0.5 / (0.5 + EPS), 0.5 / (0.5 + EPS)])
    assert torch.all(adv[segments == 0] == 0)
    # SLCA, with the same calls scored as one R_tool (the mean of the turns), blames step 1 of rollout 0 too.
    slca = compute_advantages(
        "slca",
        group_ids=[0, 0, 0],
        segment_ids=segment_roles(segments),
        rewards={"tool": [0.5, 0.0, 1.0], "summary": [0.5, 0.0, 1.0], "score": [1.0] * 3, "no_call": [False] * 3},
    )
    assert float(slca[0, 0]) == 0.0 and float(adv[0, 0]) > 0


def test_more_turns_than_gold_steps_and_a_turn_only_one_rollout_has():
    segments = torch.tensor([THREE_TURNS, TWO_TURNS, TWO_TURNS])
    # Rollout 0 made an extra third call (its per-turn reward is 0); turn 3 is in one rollout only,
    # so it gets 0 (SLCA's rule for a segment present in fewer than two rollouts).
    adv = compute_advantages(
        "slca-turn",
        group_ids=[0, 0, 0],
        segment_ids=segments,
        rewards=rewards([[1.0, 1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]),
    )
    # turn 1 [1, 1, 0]: mean 2/3, std sqrt(1/3); turn 2 [1, 0, 1]: the same, mirrored
    std = math.sqrt(1 / 3)
    assert per_rollout(adv, segments, TURN1) == approx(
        [(1 / 3) / (std + EPS), (1 / 3) / (std + EPS), -(2 / 3) / (std + EPS)]
    )
    assert per_rollout(adv, segments, TURN2) == approx(
        [(1 / 3) / (std + EPS), -(2 / 3) / (std + EPS), (1 / 3) / (std + EPS)]
    )
    assert per_rollout(adv, segments, TURN3) == [0.0, None, None]
    assert per_rollout(adv, segments, SEG_SUMMARY) == [0.0, 0.0, 0.0]  # equal summaries


def test_truncated_rollout_and_rollouts_without_the_turn():
    # Rollout 0 was cut by the turn limit after its second call: it has no answer, so that last run
    # is its turn 2 (not a summary) and the per-turn reward of turn 2 (1.0) is read; it has no
    # summary segment. Rollout 2 answered at once.
    mask = torch.tensor([[1, 1, 0, 1, 1, 0, 0, 0], [1, 1, 0, 1, 1, 0, 1, 1], [1, 1, 1, 0, 0, 0, 0, 0]])
    mask = torch.cat([mask, mask[1:2]])
    segments = segment_ids_for("slca-turn", mask, answered=[False, True, True, True])
    assert segments[0].tolist() == [3, 3, 0, 4, 4, 0, 0, 0] and segments[1].tolist() == TWO_TURNS
    adv = compute_advantages(
        "slca-turn",
        group_ids=[0, 0, 0, 0],
        segment_ids=segments,
        rewards=rewards([[0.0, 1.0], [1.0, 0.5], [0.0], [1.0, 1.0]], summary=[0.0, 0.25, 0.5, 0.75]),
    )
    # turn 1 over rollouts 0, 1, 3: [0, 1, 1] mean 2/3, std sqrt(1/3)
    std = math.sqrt(1 / 3)
    assert per_rollout(adv, segments, TURN1) == approx(
        [-(2 / 3) / (std + EPS), (1 / 3) / (std + EPS), None, (1 / 3) / (std + EPS)]
    )
    # turn 2 over rollouts 0, 1, 3: [1, 0.5, 1] mean 5/6, std sqrt(((1/6)² + (1/3)² + (1/6)²) / 2) = sqrt(1/12)
    std2 = math.sqrt(1 / 12)
    assert per_rollout(adv, segments, TURN2) == approx(
        [(1 / 6) / (std2 + EPS), -(1 / 3) / (std2 + EPS), None, (1 / 6) / (std2 + EPS)]
    )
    # summary over rollouts 1, 2, 3 (0 has none): [0.25, 0.5, 0.75] mean 0.5, std 0.25
    assert per_rollout(adv, segments, SEG_SUMMARY) == approx([None, -0.25 / (0.25 + EPS), 0.0, 0.25 / (0.25 + EPS)])


def test_groups_are_normalised_apart_and_a_lone_turn_gets_zero():
    segments = torch.tensor([TWO_TURNS, ONE_TURN, TWO_TURNS, ONE_TURN, TWO_TURNS])
    groups = ["a", "a", "b", "b", "b"]
    adv = compute_advantages(
        "slca-turn",
        group_ids=groups,
        segment_ids=segments,
        rewards=rewards([[1.0, 0.3], [0.0], [0.5, 0.9], [0.5], [1.0, 0.1]]),
    )
    # group a: turn 1 [1, 0] mean 0.5, std sqrt(0.5); turn 2 only in rollout 0 -> 0
    # group b: turn 1 [0.5, 0.5, 1] mean 2/3, std sqrt((1/36 + 1/36 + 4/36) / 2) = sqrt(1/12);
    #          turn 2 [0.9, 0.1] mean 0.5, std sqrt(0.32)
    a, b = math.sqrt(0.5), math.sqrt(1 / 12)
    assert per_rollout(adv, segments, TURN1) == approx(
        [0.5 / (a + EPS), -0.5 / (a + EPS), -(1 / 6) / (b + EPS), -(1 / 6) / (b + EPS), (1 / 3) / (b + EPS)]
    )
    t2 = math.sqrt(0.32)
    assert per_rollout(adv, segments, TURN2) == approx([0.0, None, 0.4 / (t2 + EPS), None, -0.4 / (t2 + EPS)])


def test_the_omission_penalty_reaches_only_the_summary():
    segments = torch.tensor([TWO_TURNS, TWO_TURNS])
    adv = compute_advantages(
        "slca-turn",
        group_ids=[0, 0],
        segment_ids=segments,
        rewards=rewards([[1.0, 1.0], [1.0, 0.0]], summary=[0.5, 0.5], score=[1.5, -0.5], no_call=[False, True]),
    )
    # The penalised rollout's turns count as 0: turn 1 [1, 0], turn 2 [1, 0] -> ±0.5 / sqrt(0.5).
    # Its summary reward is its score: [0.5, -0.5], mean 0, std sqrt(0.5).
    r = math.sqrt(0.5)
    for code in (TURN1, TURN2, SEG_SUMMARY):
        assert per_rollout(adv, segments, code) == approx([0.5 / (r + EPS), -0.5 / (r + EPS)])


def test_discounting_credits_a_turn_with_the_later_ones():
    segments = torch.tensor([TWO_TURNS, TWO_TURNS, ONE_TURN])
    turns = [[1.0, 0.0], [0.0, 1.0], [0.5]]
    # γ = 0.5: returns turn 1 = [1 + 0, 0 + 0.5, 0.5] = [1, 0.5, 0.5]: mean 2/3, std sqrt(1/12);
    #          turn 2 = [0, 1] (rollout 2 has no turn 2): mean 0.5, std sqrt(0.5)
    adv = compute_advantages(
        "slca-turn", group_ids=[0] * 3, segment_ids=segments, rewards=rewards(turns), config={"turn_discount": 0.5}
    )
    b, r = math.sqrt(1 / 12), math.sqrt(0.5)
    assert per_rollout(adv, segments, TURN1) == approx(
        [(1 / 3) / (b + EPS), -(1 / 6) / (b + EPS), -(1 / 6) / (b + EPS)]
    )
    assert per_rollout(adv, segments, TURN2) == approx([-0.5 / (r + EPS), 0.5 / (r + EPS), None])
    present = torch.tensor([[True, True, False], [True, False, False]])
    returns = discounted_returns(torch.tensor([[1.0, 2.0, 4.0], [1.0, 9.0, 9.0]]), present, 0.5)
    assert returns.tolist() == [[2.0, 2.0, 0.0], [1.0, 0.0, 0.0]]  # absent turns add nothing


def test_lambdas_scale_and_std_normalisation_can_be_off():
    segments = torch.tensor([TWO_TURNS, TWO_TURNS])
    config = {"lambda_tool": 2.0, "lambda_summary": 0.5, "norm_std": False}
    adv = compute_advantages(
        "slca-turn",
        group_ids=[0, 0],
        segment_ids=segments,
        rewards=rewards([[1.0, 0.2], [0.0, 0.4]], summary=[1.0, 0.0]),
        config=config,
    )
    assert per_rollout(adv, segments, TURN1) == approx([1.0, -1.0])  # 2 · ±0.5
    assert per_rollout(adv, segments, TURN2) == approx([-0.2, 0.2])  # 2 · ∓0.1
    assert per_rollout(adv, segments, SEG_SUMMARY) == approx([0.25, -0.25])  # 0.5 · ±0.5


# --------------------------------------------------------------------------- properties


def group_case(max_turns: int = 3):
    """(runs per row, per-turn rewards [n, 3], summaries, group ids) for 2-6 rollouts."""
    return st.integers(2, 6).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(1, max_turns + 1), min_size=n, max_size=n),
            st.lists(st.lists(st.floats(0, 1), min_size=3, max_size=3), min_size=n, max_size=n),
            st.lists(st.floats(0, 1), min_size=n, max_size=n),
            st.lists(st.integers(0, 1), min_size=n, max_size=n),
        )
    )


def rows_of_runs(runs: list[int]) -> torch.Tensor:
    """Segment ids with ``runs[b]`` runs in row b, two tokens each, one gap token between runs."""
    mask = []
    width = 3 * max(runs)
    for count in runs:
        row = ([1, 1, 0] * count) + [0] * (width - 3 * count)
        mask.append(row)
    return turn_segments_from_mask(torch.tensor(mask))


@settings(max_examples=60, deadline=None)
@given(group_case(), st.integers(0, 2), st.floats(-5, 5))
def test_without_discount_a_turn_ignores_the_other_turns_rewards(case, other, value) -> None:
    runs, turns, summary, groups = case
    segments = rows_of_runs(runs)
    base = compute_advantages("slca-turn", group_ids=groups, segment_ids=segments, rewards=rewards(turns, summary))
    changed = [row[:other] + [value] + row[other + 1 :] for row in turns]
    moved = compute_advantages("slca-turn", group_ids=groups, segment_ids=segments, rewards=rewards(changed, summary))
    keep = segments != SEG_FIRST_TURN + other
    assert torch.equal(base[keep], moved[keep])


@settings(max_examples=60, deadline=None)
@given(group_case(), st.integers(0, 2), st.floats(-5, 5), st.floats(0, 1))
def test_a_rollout_without_a_turn_does_not_enter_its_statistics(case, turn, value, discount) -> None:
    runs, turns, summary, groups = case
    segments = rows_of_runs(runs)
    config = {"turn_discount": discount}
    base = compute_advantages(
        "slca-turn", group_ids=groups, segment_ids=segments, rewards=rewards(turns, summary), config=config
    )
    # Rewrite turn `turn` (and every later one) of the rollouts that do not have it as a tool turn.
    has = segment_presence(segments, SEG_FIRST_TURN + 3)[:, SEG_FIRST_TURN + turn].tolist()
    changed = [row if present else row[:turn] + [value] * (3 - turn) for row, present in zip(turns, has)]
    moved = compute_advantages(
        "slca-turn", group_ids=groups, segment_ids=segments, rewards=rewards(changed, summary), config=config
    )
    assert torch.equal(base, moved)


@settings(max_examples=60, deadline=None)
@given(group_case(max_turns=1), st.floats(0, 1))
def test_with_one_tool_turn_per_rollout_it_is_slca(case, discount) -> None:
    runs, turns, summary, groups = case
    segments = rows_of_runs(runs)
    tool = [row[0] for row in turns]
    score = [t + s for t, s in zip(tool, summary)]
    per_turn = compute_advantages(
        "slca-turn",
        group_ids=groups,
        segment_ids=segments,
        rewards=rewards(turns, summary, score),
        config={"turn_discount": discount},
    )
    slca = compute_advantages(
        "slca",
        group_ids=groups,
        segment_ids=segment_roles(segments),
        rewards={"tool": tool, "summary": summary, "score": score, "no_call": [False] * len(tool)},
    )
    assert torch.equal(per_turn, slca)


@settings(max_examples=40, deadline=None)
@given(group_case(), st.sampled_from(["grpo", "slca", "toolpo", "rltr"]))
def test_role_estimators_read_turn_ids_as_their_roles(case, name) -> None:
    runs, turns, summary, groups = case
    segments = rows_of_runs(runs)
    values = {
        "score": summary,
        "tool": [row[0] for row in turns],
        "summary": summary,
        "no_call": [False] * len(summary),
        "success": [float(s > 0.5) for s in summary],
        "action": [row[1] for row in turns],
        "planner": [row[2] for row in turns],
    }
    from_turns = compute_advantages(name, group_ids=groups, segment_ids=segments, rewards=values)
    from_roles = compute_advantages(name, group_ids=groups, segment_ids=segment_roles(segments), rewards=values)
    assert torch.equal(from_turns, from_roles)


# --------------------------------------------------------------------------- errors


def test_bad_inputs_raise_clearly():
    segments = torch.tensor([TWO_TURNS, TWO_TURNS])
    good = rewards([[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match="reads per-turn segment ids"):
        compute_advantages("slca-turn", group_ids=[0, 0], segment_ids=segment_roles(segments), rewards=good)
    with pytest.raises(ValueError, match="1 column"):
        compute_advantages("slca-turn", group_ids=[0, 0], segment_ids=segments, rewards=rewards([[1.0], [0.0]]))
    with pytest.raises(ValueError, match=r"shape \[2, K\]"):
        compute_advantages(
            "slca-turn", group_ids=[0, 0], segment_ids=segments, rewards={**good, "turn": torch.zeros(3, 2)}
        )
    with pytest.raises(ValueError, match=r"non-finite.*rollouts \[1\]"):
        compute_advantages(
            "slca-turn", group_ids=[0, 0], segment_ids=segments, rewards={**good, "turn": [[0.0], [float("nan")]]}
        )
    with pytest.raises(ValueError, match="one sequence per rollout"):
        compute_advantages("slca-turn", group_ids=[0, 0], segment_ids=segments, rewards={**good, "turn": [1.0, 2.0]})
    with pytest.raises(MissingRewardError, match="'turn'"):
        compute_advantages("slca-turn", group_ids=[0, 0], segment_ids=segments, rewards={"score": [1, 1]})
    with pytest.raises(ConfigError, match="turn_discount must be in"):
        AdvantageConfig(turn_discount=1.5)
    with pytest.raises(ConfigError, match="turn_discount must be a number"):
        AdvantageConfig(turn_discount="high")  # type: ignore[arg-type]
    # A tensor of per-turn rewards and ragged lists agree; summary-only batches need no turn column.
    as_tensor = {**good, "turn": torch.tensor([[1.0, 0.0], [0.0, 1.0]])}
    assert torch.equal(
        compute_advantages("slca-turn", group_ids=[0, 0], segment_ids=segments, rewards=as_tensor),
        compute_advantages("slca-turn", group_ids=[0, 0], segment_ids=segments, rewards=good),
    )
    summaries = torch.tensor([SUMMARY_ONLY, SUMMARY_ONLY])
    adv = compute_advantages(
        "slca-turn", group_ids=[0, 0], segment_ids=summaries, rewards=rewards([[], []], summary=[1.0, 0.0])
    )
    assert per_rollout(adv, summaries, SEG_SUMMARY) == approx(
        [0.5 / (math.sqrt(0.5) + EPS), -0.5 / (math.sqrt(0.5) + EPS)]
    )


# --------------------------------------------------------------------------- the pipeline


def test_rollouts_of_a_two_step_task_through_rewards_and_advantages():
    """Real rollouts (a scripted policy in the agent loop): per-turn rewards and the estimator's
    segments from the same mask; only step 2 wrong keeps step 1's advantage positive."""
    from slca_grpo.rewards import RuleJudge, compute_rewards
    from slca_grpo.trainer.batch import trajectory_batch
    from slca_grpo.trainer.rl import check_turns_match_runs

    task, tokenizer, formatter, environment, scripts = two_step_setup()
    trajectories = []
    for name, turns in scripts.items():
        loop = scripted_loop(tokenizer, formatter, environment, turns)
        trajectories += loop.run([task], session_prefix=name.replace(" ", "-"))
    check_turns_match_runs(trajectories)
    assert [len(t.turns) for t in trajectories] == [3, 3, 3]

    batch = compute_rewards(
        [t.response_text for t in trajectories],
        [task] * 3,
        RuleJudge(),
        names=("score", "tool", "summary", "no_call", "turn"),
        turns=[t.turns for t in trajectories],
    )
    values = batch.as_dict()
    assert values["turn"][0][:2] == [1.0, 1.0]
    assert values["turn"][1][0] == 1.0 and values["turn"][1][1] < 1.0
    assert values["turn"][2][0] < 1.0 and values["turn"][2][1] == 1.0

    tokens = trajectory_batch(trajectories, formatter.pad_id, estimator="slca-turn")
    assert torch.equal(tokens.segment_ids, segment_ids_for("slca-turn", tokens.loss_mask))
    adv = compute_advantages("slca-turn", group_ids=[0, 0, 0], segment_ids=tokens.segment_ids, rewards=values)
    step1, step2 = per_rollout(adv, tokens.segment_ids, TURN1), per_rollout(adv, tokens.segment_ids, TURN2)
    assert step1[1] > 0 and step2[1] < 0  # "step 2 wrong": its right first call keeps a positive advantage
    assert step1[2] < 0 and step2[2] > 0
    roles = trajectory_batch(trajectories, formatter.pad_id, estimator="slca").segment_ids
    slca = compute_advantages("slca", group_ids=[0, 0, 0], segment_ids=roles, rewards=values)
    tool_values = slca[1][roles[1] == 1]
    assert torch.all(tool_values == tool_values[0])  # SLCA: one advantage for both calls


def test_a_rollout_the_turn_limit_cuts_off_ends_on_a_tool_segment():
    """Through the agent loop: a policy that only calls is cut off by max_turns; its last call is a
    tool turn (slca-turn) and a tool segment (slca), and its summary segment is absent."""
    from slca_grpo.trainer.batch import ends_with_answer, trajectory_batch

    task, tokenizer, formatter, environment, scripts = two_step_setup()
    calls_only = scripts["both right"][:2] + [scripts["both right"][1]]  # a third call where the answer was due
    cut = scripted_loop(tokenizer, formatter, environment, calls_only).run([task], session_prefix="cut")
    done = scripted_loop(tokenizer, formatter, environment, scripts["both right"]).run([task], session_prefix="ok")
    assert cut[0].truncated and not ends_with_answer(cut[0]) and ends_with_answer(done[0])
    turns = trajectory_batch(cut + done, formatter.pad_id, estimator="slca-turn").segment_ids
    assert sorted(set(turns[0].tolist())) == [0, TURN1, TURN2, TURN3]
    assert SEG_SUMMARY in turns[1].tolist() and TURN3 not in turns[1].tolist()
    roles = trajectory_batch(cut + done, formatter.pad_id, estimator="slca").segment_ids
    assert SEG_SUMMARY not in roles[0].tolist() and SEG_SUMMARY in roles[1].tolist()


def test_a_trainer_step_with_slca_turn(monkeypatch):
    from slca_grpo.rewards.config import RewardConfig
    from slca_grpo.rewards.rule_judge import RuleJudge
    from slca_grpo.trainer import rl
    from slca_grpo.trainer.rl import RLConfig, RLTrainer

    task, tokenizer, formatter, environment, scripts = two_step_setup()
    loop = scripted_loop(tokenizer, formatter, environment, scripts["step 2 wrong"], group_size=2)
    config = RLConfig(estimator="slca-turn", steps=1, prompts_per_step=1, mini_batch_prompts=1, kl_coef=0.0)
    trainer = RLTrainer(loop.model, None, loop, RuleJudge(), RewardConfig(), config)
    assert trainer.reward_names() == ("score", "summary", "no_call", "turn")
    checked = []
    real_check = rl.check_turns_match_runs
    monkeypatch.setattr(rl, "check_turns_match_runs", lambda ts: (checked.append(len(ts)), real_check(ts)))
    metrics, trajectories = trainer.step([task], 0)
    assert checked == [2]
    assert metrics["reward/turn_step_1"] == 1.0 and metrics["reward/turn_step_2"] < 1.0
    assert metrics["adv/turn1_present"] == 1.0 and metrics["adv/turn2_present"] == 1.0
    assert metrics["adv/tool_present"] == 1.0 and metrics["train/tool_tokens"] > 0
    # Two identical rollouts: every advantage is 0, so nothing moves.
    assert metrics["adv/turn1_abs_mean"] == 0.0 and metrics["train/pg_loss"] == 0.0


def test_turns_that_do_not_match_the_runs_are_refused():
    from slca_grpo.datatypes import Trajectory, Turn
    from slca_grpo.trainer.rl import check_turns_match_runs

    fine = Trajectory("t", [1], response_ids=[5, 6, 7, 8], response_mask=[1, 0, 1, 1], turns=[Turn("a"), Turn("b")])
    check_turns_match_runs([fine])
    broken = Trajectory("t", [1], response_ids=[5, 6, 7], response_mask=[1, 1, 1], turns=[Turn("a"), Turn("b")])
    with pytest.raises(RuntimeError, match="rollout 1 .* 2 turns but 1 runs"):
        check_turns_match_runs([fine, broken])


def test_learnable_runs_are_the_segments_runs():
    from slca_grpo.algos import learnable_runs

    assert learnable_runs([1, 1, 0, 1, 0, 0, 1]) == [(0, 2), (3, 4), (6, 7)]
    assert learnable_runs(torch.tensor([0, 0])) == [] and learnable_runs([]) == []
    segments = turn_segments_from_mask(torch.tensor([0, 1, 1, 0, 1, 1, 0, 1]))
    assert [int(segments[start]) for start, _ in learnable_runs([0, 1, 1, 0, 1, 1, 0, 1])] == [3, 4, SEG_SUMMARY]


def test_a_ragged_row_shorter_than_its_rollouts_turns_is_refused_not_padded():
    segments = torch.tensor([TWO_TURNS, TWO_TURNS])
    with pytest.raises(ValueError, match=r"holds 1 value\(s\) for rollout 0, which has 2 tool turns"):
        compute_advantages("slca-turn", group_ids=[0, 0], segment_ids=segments, rewards=rewards([[1.0], [0.0, 0.0]]))
    # A row may hold more values than tool turns (the summary turn's value comes along).
    compute_advantages("slca-turn", group_ids=[0, 0], segment_ids=segments, rewards=rewards([[1, 0, 0], [0, 1]]))


def test_a_turn_code_no_mask_can_make_is_refused_before_anything_is_allocated():
    huge = torch.tensor([[3, 10**6, 2]])
    with pytest.raises(ValueError, match="rows of 3 tokens have at most 3 turns"):
        compute_advantages("slca-turn", group_ids=[0], segment_ids=huge, rewards=rewards([[1.0, 1.0]]))


def test_learnable_runs_reads_one_mask_and_refuses_what_the_segmenters_refuse():
    from slca_grpo.algos.segments import learnable_runs

    assert learnable_runs(torch.tensor([1, 1, 0, 1])) == learnable_runs([1, 1, 0, 1]) == [(0, 2), (3, 4)]
    with pytest.raises(ValueError, match=r"one response's \[T\] mask"):
        learnable_runs(torch.ones(2, 3))
    with pytest.raises(ValueError, match="non-finite"):
        learnable_runs(torch.tensor([1.0, float("nan")]))
