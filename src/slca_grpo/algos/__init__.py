"""The math of SLCA-GRPO and its baselines: segments, advantage estimators, the policy loss.

Pure functions over tensors, no I/O. The usual path::

    segment_ids = segments_from_mask(response_mask)
    advantages = compute_advantages("slca", group_ids=uids, segment_ids=segment_ids, rewards=r)
    loss, metrics = policy_loss(logp, old_logp, ref_logp, advantages, response_mask)
"""

from __future__ import annotations

from slca_grpo.lazy import lazy_exports

# Names load on first use, so ``slca --help`` does not import torch.
_EXPORTS = {
    "AdvantageConfig": "registry",
    "EstimatorFn": "registry",
    "EstimatorSpec": "registry",
    "GroupStats": "grouping",
    "MissingRewardError": "registry",
    "NUM_SEGMENT_CODES": "segments",
    "RewardView": "registry",
    "SEGMENT_NAMES": "segments",
    "SEG_NONE": "segments",
    "SEG_SUMMARY": "segments",
    "SEG_TOOL": "segments",
    "UnknownEstimatorError": "registry",
    "compute_advantages": "registry",
    "estimator_spec": "registry",
    "get_estimator": "registry",
    "group_index_from_ids": "grouping",
    "group_stats": "grouping",
    "group_zscore": "grouping",
    "k3_kl": "loss",
    "list_estimators": "registry",
    "policy_loss": "loss",
    "register_estimator": "registry",
    "route_by_segment": "estimators",
    "segment_presence": "segments",
    "segment_token_counts": "segments",
    "segments_from_mask": "segments",
    "unregister_estimator": "registry",
    "validate_segment_ids": "segments",
}
__all__ = sorted(_EXPORTS)


# Any name first imports the estimators module, which registers the built-in estimators.
__getattr__ = lazy_exports(__name__, _EXPORTS, load_first="estimators")
