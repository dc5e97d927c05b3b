"""The built-in advantage estimators (docs/method.md §5): ``grpo``, ``slca``, ``toolpo``, ``rltr``.

Each one computes a few per-rollout scalars with the grouped helpers in :mod:`.grouping`, then
:func:`route_by_segment` places them on the tokens in a single gather pass over ``[B, T]``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from slca_grpo.algos.grouping import group_zscore, stat_dtype
from slca_grpo.algos.registry import AdvantageConfig, RewardView, register_estimator
from slca_grpo.algos.segments import SEG_SUMMARY, SEG_TOOL, segment_presence

__all__ = ["grpo", "rltr", "route_by_segment", "slca", "toolpo"]


def route_by_segment(segment_ids: Tensor, tool_values: Tensor, summary_values: Tensor) -> Tensor:
    """``[B, T]`` float32: ``tool_values[b]`` on tool tokens, ``summary_values[b]`` on summary tokens,
    0 elsewhere.

    A ``[B, 3]`` lookup table gathered by the segment codes: one pass over the tokens whatever the
    number of segments, which is what keeps SLCA as cheap as GRPO.
    """
    zeros = torch.zeros_like(tool_values)
    table = torch.stack([zeros, tool_values, summary_values], dim=1).to(torch.float32)
    if not bool(torch.isfinite(table).all()):
        raise ValueError("advantages are not finite (rewards too large for float32 after normalising?)")
    return table.gather(1, segment_ids.long())


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


@register_estimator("slca", rewards=("score", "tool", "summary", "no_call"))
def slca(group_index: Tensor, segment_ids: Tensor, rewards: RewardView, config: AdvantageConfig) -> Tensor:
    """SLCA: per-segment presence-filtered z-scores, each routed only to its own segment's tokens."""
    score = _as_float(rewards["score"])
    penalty = _as_flag(rewards["no_call"]) | (score < 0)
    # The omission / negative-score penalty reaches only the summary segment.
    tool_reward = torch.where(penalty, 0.0, _as_float(rewards["tool"]))
    summary_reward = torch.where(penalty, score, _as_float(rewards["summary"]))
    presence = segment_presence(segment_ids)
    options = {"eps": config.eps, "norm_std": config.norm_std, "small_groups": "zero"}
    tool_advantage = group_zscore(
        tool_reward,
        group_index,
        presence[:, SEG_TOOL],
        **options,  # type: ignore[arg-type]
    )
    summary_advantage = group_zscore(
        summary_reward,
        group_index,
        presence[:, SEG_SUMMARY],
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
    tool_present = segment_presence(segment_ids)[:, SEG_TOOL]
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
    tool_present = segment_presence(segment_ids)[:, SEG_TOOL]
    planner_advantage = group_zscore(
        _as_float(rewards["planner"]),
        group_index,
        tool_present,
        eps=config.eps,
        norm_std=config.norm_std,
    )
    return route_by_segment(segment_ids, planner_advantage, torch.zeros_like(planner_advantage))
