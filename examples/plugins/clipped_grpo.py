"""An estimator with a setting of its own, in one file: GRPO with every advantage clipped.

    slca --plugin examples/plugins/clipped_grpo.py estimators
    slca --plugin examples/plugins/clipped_grpo.py train demo-quick \
        --set rl.estimator=clipped_grpo --set rl.advantage.clipped_grpo.clip=1.5

On verl: ``+slca.plugins=[examples/plugins/clipped_grpo.py] algorithm.adv_estimator=clipped_grpo
+slca.advantage.clipped_grpo.clip=1.5``.
"""

from dataclasses import dataclass

from slca_grpo.algos import group_zscore, register_estimator, route_by_segment
from slca_grpo.config import ConfigError


@dataclass(frozen=True)
class ClipSettings:
    """``rl.advantage.clipped_grpo.*``."""

    clip: float = 2.0  # every advantage is cut to [-clip, clip]

    def __post_init__(self) -> None:
        if not self.clip > 0:  # the message names the whole key: rl.advantage.clipped_grpo.clip
            raise ConfigError(f"clip must be > 0, got {self.clip!r}")


@register_estimator("clipped_grpo", rewards=("score",), settings=ClipSettings)
def clipped_grpo(group_index, segment_ids, rewards, config, settings):
    """GRPO with every advantage clipped to [-clip, clip] (rl.advantage.clipped_grpo.clip)."""
    advantage = group_zscore(
        rewards["score"], group_index, eps=config.eps, norm_std=config.norm_std, small_groups="unit"
    )
    advantage = advantage.clamp(-settings.clip, settings.clip)
    return route_by_segment(segment_ids, advantage, advantage)
