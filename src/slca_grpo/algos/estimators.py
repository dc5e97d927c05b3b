"""The built-in advantage estimators (docs/method.md §5): ``grpo``, ``slca``, ``toolpo``, ``rltr``,
``slca-turn`` (SLCA with one segment per tool turn, docs/algorithms.md), and ``slca-no-summary``
(SLCA with λ_summary = 0, the study's control arm).

Each one computes a few per-rollout scalars with the grouped helpers in :mod:`.grouping`, then
:func:`route_by_segment` (or :func:`route_table`) places them on the tokens in a single gather pass
over ``[B, T]``.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from slca_grpo.algos.grouping import group_zscore, stat_dtype
from slca_grpo.algos.registry import AdvantageConfig, RewardView, register_estimator
from slca_grpo.algos.segments import (
    NUM_SEGMENT_CODES,
    SEG_FIRST_TURN,
    SEG_SUMMARY,
    SEG_TOOL,
    segment_presence,
    turn_count,
)

__all__ = ["grpo", "rltr", "route_by_segment", "route_table", "slca", "slca_no_summary", "slca_turn", "toolpo"]


def route_table(segment_ids: Tensor, table: Tensor) -> Tensor:
    """``[B, T]`` float32: ``table[b, segment_ids[b, t]]``, for a ``[B, C]`` table of per-rollout
    values by segment code (column 0, code none, should be 0).

    One gather over the tokens whatever the number of segments, which is what keeps SLCA as cheap
    as GRPO.
    """
    table = table.to(torch.float32)
    if not bool(torch.isfinite(table).all()):
        raise ValueError("advantages are not finite (rewards too large for float32 after normalising?)")
    return table.gather(1, segment_ids.long())


def route_by_segment(segment_ids: Tensor, tool_values: Tensor, summary_values: Tensor) -> Tensor:
    """``[B, T]`` float32: ``tool_values[b]`` on tool tokens, ``summary_values[b]`` on summary tokens,
    0 elsewhere (role-layout segment ids)."""
    zeros = torch.zeros_like(tool_values)
    return route_table(segment_ids, torch.stack([zeros, tool_values, summary_values], dim=1))


def _as_float(values: Tensor) -> Tensor:
    return values.to(stat_dtype(values.device))


def _as_flag(values: Tensor) -> Tensor:
    return values if values.dtype == torch.bool else values != 0


@register_estimator("grpo", rewards=("score",))
def grpo(group_index: Tensor, segment_ids: Tensor, rewards: RewardView, config: AdvantageConfig) -> Tensor:
    """GRPO: one group z-score of the total score on every learnable token of the rollout."""
    advantage = group_zscore(
        _as_float(rewards["score"]),
        group_index,
        eps=config.eps,
        norm_std=config.norm_std,
        small_groups="unit",
    )
    return route_by_segment(segment_ids, advantage, advantage)


def _slca_penalty(rewards: RewardView) -> tuple[Tensor, Tensor]:
    """(penalty [B] bool, score [B]): SLCA's rule, the omission gate fired or the score is negative."""
    score = _as_float(rewards["score"])
    return _as_flag(rewards["no_call"]) | (score < 0), score


def _summary_advantage(
    group_index: Tensor, summary_present: Tensor, rewards: RewardView, config: AdvantageConfig
) -> tuple[Tensor, Tensor]:
    """(penalty [B], the summary segment's advantage [B]) of SLCA and SLCA-turn: the summary reward,
    or the score of a penalised rollout, z-scored over the rollouts with a summary segment."""
    penalty, score = _slca_penalty(rewards)
    # The omission / negative-score penalty reaches only the summary segment.
    summary_reward = torch.where(penalty, score, _as_float(rewards["summary"]))
    options = {"eps": config.eps, "norm_std": config.norm_std, "small_groups": "zero"}
    return penalty, group_zscore(summary_reward, group_index, summary_present, **options)  # type: ignore[arg-type]


@register_estimator("slca", rewards=("score", "tool", "summary", "no_call"))
def slca(group_index: Tensor, segment_ids: Tensor, rewards: RewardView, config: AdvantageConfig) -> Tensor:
    """SLCA: per-segment presence-filtered z-scores, each routed only to its own segment's tokens."""
    presence = segment_presence(segment_ids, NUM_SEGMENT_CODES)
    penalty, summary_advantage = _summary_advantage(group_index, presence[:, SEG_SUMMARY], rewards, config)
    tool_reward = torch.where(penalty, 0.0, _as_float(rewards["tool"]))
    options = {"eps": config.eps, "norm_std": config.norm_std, "small_groups": "zero"}
    tool_advantage = group_zscore(
        tool_reward,
        group_index,
        presence[:, SEG_TOOL],
        **options,  # type: ignore[arg-type]
    )
    return route_by_segment(
        segment_ids,
        tool_advantage * config.lambda_tool,
        summary_advantage * config.lambda_summary,
    )


@register_estimator("toolpo", rewards=("success", "action"))
def toolpo(group_index: Tensor, segment_ids: Tensor, rewards: RewardView, config: AdvantageConfig) -> Tensor:
    """ToolPO: GRPO z-score of success everywhere, plus the z-scored action reward on tool tokens."""
    global_advantage = group_zscore(
        _as_float(rewards["success"]),
        group_index,
        eps=config.eps,
        norm_std=config.norm_std,
        small_groups="unit",
    )
    tool_present = segment_presence(segment_ids, NUM_SEGMENT_CODES)[:, SEG_TOOL]
    action_advantage = group_zscore(
        _as_float(rewards["action"]),
        group_index,
        tool_present,
        eps=config.eps,
        norm_std=config.norm_std,
    )
    return route_by_segment(segment_ids, global_advantage + config.toolpo_lambda * action_advantage, global_advantage)


@register_estimator("rltr", rewards=("planner",))
def rltr(group_index: Tensor, segment_ids: Tensor, rewards: RewardView, config: AdvantageConfig) -> Tensor:
    """RLTR: z-scored planner reward on tool tokens only (summary tokens get 0)."""
    tool_present = segment_presence(segment_ids, NUM_SEGMENT_CODES)[:, SEG_TOOL]
    planner_advantage = group_zscore(
        _as_float(rewards["planner"]),
        group_index,
        tool_present,
        eps=config.eps,
        norm_std=config.norm_std,
    )
    return route_by_segment(segment_ids, planner_advantage, torch.zeros_like(planner_advantage))


def discounted_returns(rewards: Tensor, present: Tensor, discount: float) -> Tensor:
    """``[B, K]``: ``G_k = r_k + γ·G_{k+1}`` over the turns each rollout has (absent turns add 0)."""
    rewards = torch.where(present, rewards, 0.0)
    if discount == 0 or rewards.shape[1] < 2:
        return rewards
    returns = rewards.clone()
    for k in range(rewards.shape[1] - 2, -1, -1):  # K is the number of turns: a handful
        returns[:, k] += discount * returns[:, k + 1]
    return torch.where(present, returns, 0.0)


@register_estimator("slca-turn", rewards=("score", "summary", "no_call", "turn"), segmentation="turn")
def slca_turn(group_index: Tensor, segment_ids: Tensor, rewards: RewardView, config: AdvantageConfig) -> Tensor:
    """SLCA with one segment per tool turn: turn k's reward z-scored over the rollouts that have turn k."""
    turns = turn_count(segment_ids)
    presence = segment_presence(segment_ids, SEG_FIRST_TURN + turns)
    penalty, summary_advantage = _summary_advantage(group_index, presence[:, SEG_SUMMARY], rewards, config)
    options = {"eps": config.eps, "norm_std": config.norm_std, "small_groups": "zero"}
    turn_present = presence[:, SEG_FIRST_TURN:]
    per_turn = rewards.per_turn("turn", turn_present.sum(dim=1))
    # As in SLCA, the omission / negative-score penalty reaches only the summary segment.
    turn_reward = torch.where(penalty[:, None], 0.0, per_turn[:, :turns].to(summary_advantage.dtype))
    returns = discounted_returns(turn_reward, turn_present, config.turn_discount)
    turn_advantage = returns
    if returns.numel():
        # Every (group, turn) pair is a group of its own, so one call normalises all turns.
        num_groups = int(group_index.max()) + 1
        turn_groups = (group_index[:, None] * turns + torch.arange(turns, device=group_index.device)).flatten()
        turn_advantage = group_zscore(
            returns.flatten(),
            turn_groups,
            turn_present.flatten(),
            num_groups=num_groups * turns,
            **options,  # type: ignore[arg-type]
        ).reshape(returns.shape)
    zeros = torch.zeros_like(summary_advantage)
    table = torch.cat(
        [
            torch.stack([zeros, zeros, summary_advantage * config.lambda_summary], dim=1),
            turn_advantage * config.lambda_tool,
        ],
        dim=1,
    )
    return route_table(segment_ids, table)


# It reads score and summary only for SLCA's penalty rule, which the summary noise never triggers.
@register_estimator("slca-no-summary", rewards=("score", "tool", "summary", "no_call"), ignores_summary=True)
def slca_no_summary(group_index: Tensor, segment_ids: Tensor, rewards: RewardView, config: AdvantageConfig) -> Tensor:
    """SLCA with λ_summary = 0: tool tokens as in SLCA, summary tokens get no advantage (a control arm)."""
    # The study's control: it reads no summary reward at all, so summary noise cannot reach it; read
    # against slca it says what SLCA's summary channel adds, against grpo what noise costs GRPO.
    return slca(group_index, segment_ids, rewards, dataclasses.replace(config, lambda_summary=0.0))
