"""A reward with a setting of its own, and an estimator that reads it, in one file.

    slca --plugin examples/plugins/brief_answers.py train demo-quick \
        --set rl.estimator=brief_grpo --set reward.brief_answer.max_words=20

On verl: ``+slca.plugins=[examples/plugins/brief_answers.py] algorithm.adv_estimator=brief_grpo
+slca.reward.brief_answer.max_words=20``.
"""

from dataclasses import dataclass

from slca_grpo.algos import group_zscore, register_estimator, route_by_segment
from slca_grpo.config import ConfigError
from slca_grpo.rewards import register_reward


@dataclass(frozen=True)
class BriefSettings:
    """``reward.brief_answer.*``."""

    max_words: int = 40  # answers up to this long score 1, twice as long 0

    def __post_init__(self) -> None:
        if self.max_words < 1:
            raise ConfigError(f"max_words must be >= 1, got {self.max_words!r}")


@register_reward("brief_answer", settings=BriefSettings)
def brief_answer(parsed, task, config, settings):
    """1 for a final answer of at most max_words words, falling to 0 at twice that."""
    words = len(parsed.final_answer.split())
    return max(0.0, min(1.0, 2.0 - words / settings.max_words))


@register_estimator("brief_grpo", rewards=("score", "brief_answer"))
def brief_grpo(group_index, segment_ids, rewards, config):
    """GRPO on HierR's score plus the brief-answer reward, on every learnable token."""
    total = rewards["score"].double() + rewards["brief_answer"].double()
    advantage = group_zscore(total, group_index, eps=config.eps, norm_std=config.norm_std, small_groups="unit")
    return route_by_segment(segment_ids, advantage, advantage)
