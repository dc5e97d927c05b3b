"""The math of SLCA-GRPO and its baselines: segments, advantage estimators, the policy loss.

Pure functions over tensors, no I/O. The usual path::

    segment_ids = segments_from_mask(response_mask)
    advantages = compute_advantages("slca", group_ids=uids, segment_ids=segment_ids, rewards=r)
    loss, metrics = policy_loss(logp, old_logp, ref_logp, advantages, response_mask)
"""

from __future__ import annotations

import importlib
from typing import Any

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'slca_grpo.algos' has no attribute {name!r}")
    importlib.import_module("slca_grpo.algos.estimators")  # registers the built-in estimators
    value = getattr(importlib.import_module(f"slca_grpo.algos.{module}"), name)
    globals()[name] = value
    return value
