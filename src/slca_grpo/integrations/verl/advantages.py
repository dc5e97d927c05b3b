"""Advantages of a verl batch from our estimators: pure functions over tensors, no verl import.

verl hands a registered advantage estimator only token-level rewards, the response mask and the
group ids, so the trainer override (``trainer.py``) looks our estimator up once, fetches the
per-rollout rewards our reward function stored (``reward_extra_info``) and calls
:func:`batch_advantages` with it: the same :class:`Estimator` object our own trainer calls.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Hashable, Mapping, Sequence
from typing import Any

from torch import Tensor

from slca_grpo.algos import AdvantageConfig, Estimator, estimator_spec
from slca_grpo.algos.registry import ESTIMATORS
from slca_grpo.config import ConfigError

# Our reward names whose reward_extra_info keys read differently (HierR's R_tool and R_sum).
EXTRA_KEYS = {"tool": "r_tool", "summary": "r_sum"}
# Whether a rollout's last turn is its answer (compute_score reads it from the last turn's text).
ANSWERED_KEY = "answered"
# Whether the simulator or the judge failed on a rollout (not the policy): our estimators leave it out.
VOID_KEY = "void"

__all__ = [
    "ANSWERED_KEY",
    "EXTRA_KEYS",
    "VOID_KEY",
    "batch_advantages",
    "check_no_clash_with_verl",
    "extra_key",
    "rewards_from_extras",
    "rollout_segments",
    "void_flags",
]


def extra_key(reward: str) -> str:
    """The ``reward_extra_info`` key that carries our reward ``reward``."""
    return EXTRA_KEYS.get(reward, reward)


def check_no_clash_with_verl(verl_estimators: Collection[str]) -> None:
    """ConfigError when a plugin registered an estimator under one of verl's estimator names.

    On verl, ``algorithm.adv_estimator`` naming one of verl's estimators runs verl's; a plugin's of
    the same name would be silently passed over, so it is refused instead. Our built-ins that share
    a name with verl's (``grpo``) stay verl's there, as documented.
    """
    for name in ESTIMATORS.names():
        if name in verl_estimators and not ESTIMATORS.is_builtin(name):
            raise ConfigError(
                f"estimator {name!r} of the plugin {ESTIMATORS.origin(name)} has the name of one of verl's "
                f"estimators, which verl runs for algorithm.adv_estimator={name}; give it another name"
            )


def rollout_segments(
    estimator: Estimator | str, response_mask: Tensor, answered: Sequence[bool] | None = None
) -> Tensor:
    """Segment ids ``[B, T]`` of verl responses in the layout ``estimator`` reads (tool/summary, or
    one segment per turn for ``slca-turn``): the one place the verl path derives segments.

    verl's ``response_mask`` is 1 on generated tokens and 0 on tool responses and chat headers,
    which is exactly the mask our segments are defined on; ``answered`` (from the reward's extras)
    says whether each response's last run is its answer or a call cut off unanswered.
    """
    return estimator_spec(estimator).segment_ids(response_mask, answered)


def rewards_from_extras(
    reward_infos: Sequence[Mapping[str, Any] | None], names: Sequence[str], rollouts: Sequence[str]
) -> dict[str, list[Any]]:
    """Reward name → one value per rollout, read from each rollout's ``reward_extra_info``.

    ``rollouts`` names the rows (verl's batch keys) for the error a missing value raises.
    """
    rewards: dict[str, list[Any]] = {}
    for name in names:
        key = extra_key(name)
        values = []
        for info, rollout in zip(reward_infos, rollouts, strict=True):
            if not isinstance(info, Mapping) or key not in info:
                present = sorted(info) if isinstance(info, Mapping) else "no reward_extra_info"
                raise KeyError(
                    f"rollout {rollout}: reward_extra_info has no {key!r} (has {present}); set "
                    "reward.custom_reward_function to slca_grpo.integrations.verl.reward.compute_score "
                    "and its reward_kwargs.estimator to algorithm.adv_estimator"
                )
            value = info[key]
            # Per-turn rewards travel as JSON lists (verl's extras hold one scalar or string each).
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except ValueError:
                    raise ValueError(
                        f"rollout {rollout}: reward_extra_info[{key!r}] is not JSON: {value[:80]!r}"
                    ) from None
            values.append(value)
        rewards[name] = values
    return rewards


def void_flags(reward_infos: Sequence[Mapping[str, Any] | None]) -> list[bool]:
    """Per rollout, whether its reward marked it void (rows scored before void existed are not)."""
    return [bool(info.get(VOID_KEY, False)) if isinstance(info, Mapping) else False for info in reward_infos]


def batch_advantages(
    estimator: Estimator | str,
    *,
    group_ids: Sequence[Hashable],
    response_mask: Tensor,
    reward_infos: Sequence[Mapping[str, Any] | None],
    rollouts: Sequence[str],
    config: AdvantageConfig | None = None,
) -> tuple[Tensor, Tensor]:
    """``(advantages, segment_ids)``, both ``[B, T]`` over verl's response tokens. A void rollout
    (``void`` in its reward's extras) is out of its group's statistics and gets advantage 0."""
    estimator = estimator_spec(estimator)
    rewards = rewards_from_extras(reward_infos, [*estimator.rewards, ANSWERED_KEY], rollouts)
    answered = [bool(flag) for flag in rewards.pop(ANSWERED_KEY)]
    segment_ids = rollout_segments(estimator, response_mask, answered)
    void = void_flags(reward_infos)
    advantages = estimator.advantages(
        group_ids=list(group_ids),
        segment_ids=segment_ids,
        rewards=rewards,
        config=config,
        valid=[not flag for flag in void] if any(void) else None,
    )
    return advantages, segment_ids
