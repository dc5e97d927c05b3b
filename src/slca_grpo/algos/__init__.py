"""The math of SLCA-GRPO and its baselines: segments, advantage estimators, the policy loss.

Pure functions over tensors, no I/O. The usual path::

    estimator = estimator_spec("slca")  # looked up once: rewards, segment layout, settings, math
    segment_ids = estimator.segment_ids(response_mask)  # the layout the estimator reads
    advantages = estimator.advantages(group_ids=uids, segment_ids=segment_ids, rewards=r)
    loss, metrics = policy_loss(logp, old_logp, ref_logp, advantages, response_mask)
"""

from __future__ import annotations

from slca_grpo.algos.estimators import (  # importing the module registers the built-ins
    discounted_returns,
    route_by_segment,
    route_table,
)
from slca_grpo.algos.grouping import GroupStats, group_index_from_ids, group_stats, group_zscore
from slca_grpo.algos.loss import k3_kl, policy_loss
from slca_grpo.algos.registry import (
    AdvantageConfig,
    Estimator,
    EstimatorFn,
    MissingRewardError,
    RewardView,
    UnknownEstimatorError,
    compute_advantages,
    estimator_spec,
    get_estimator,
    list_estimators,
    register_estimator,
    segment_ids_for,
    unregister_estimator,
)
from slca_grpo.algos.segments import (
    NUM_SEGMENT_CODES,
    SEG_FIRST_TURN,
    SEG_NONE,
    SEG_SUMMARY,
    SEG_TOOL,
    SEGMENT_NAMES,
    SEGMENTATIONS,
    learnable_runs,
    segment_ids_from_mask,
    segment_presence,
    segment_roles,
    segment_token_counts,
    segments_from_mask,
    turn_count,
    turn_segments_from_mask,
    validate_segment_ids,
)

__all__ = [
    "AdvantageConfig",
    "Estimator",
    "EstimatorFn",
    "GroupStats",
    "MissingRewardError",
    "NUM_SEGMENT_CODES",
    "RewardView",
    "SEGMENTATIONS",
    "SEGMENT_NAMES",
    "SEG_FIRST_TURN",
    "SEG_NONE",
    "SEG_SUMMARY",
    "SEG_TOOL",
    "UnknownEstimatorError",
    "compute_advantages",
    "discounted_returns",
    "estimator_spec",
    "get_estimator",
    "group_index_from_ids",
    "group_stats",
    "group_zscore",
    "k3_kl",
    "learnable_runs",
    "list_estimators",
    "policy_loss",
    "register_estimator",
    "route_by_segment",
    "route_table",
    "segment_ids_for",
    "segment_ids_from_mask",
    "segment_presence",
    "segment_roles",
    "segment_token_counts",
    "segments_from_mask",
    "turn_count",
    "turn_segments_from_mask",
    "unregister_estimator",
    "validate_segment_ids",
]
