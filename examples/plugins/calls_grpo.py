"""A new reward and a new estimator that reads it, in one file.

    slca --plugin examples/plugins/calls_grpo.py estimators
    slca --plugin examples/plugins/calls_grpo.py train demo-quick --set rl.estimator=calls_grpo

The trainer computes only what the estimator declares: here ``valid_calls``, so no HierR and no
judge requests.
"""

from slca_grpo.algos import group_zscore, register_estimator, route_by_segment
from slca_grpo.rewards import register_reward


@register_reward("valid_calls")
def valid_calls(parsed, task, config):
    """Valid tool calls, up to the number of gold calls (more earns nothing)."""
    return float(min(len(parsed.calls), len(task.flat_gold_calls)))


@register_estimator("calls_grpo", rewards=("valid_calls",))
def calls_grpo(group_index, segment_ids, rewards, config):
    """GRPO on the count of valid calls, routed to the tool tokens only."""
    advantage = group_zscore(rewards["valid_calls"], group_index, eps=config.eps, norm_std=config.norm_std)
    return route_by_segment(segment_ids, advantage, advantage.new_zeros(advantage.shape))
