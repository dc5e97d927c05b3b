"""Rewards: HierR (execution + judged summary), ToolPO and RLTR rewards, judges and checkers.

The arithmetic is pure; judges and checkers (``RuleJudge``/``OpenAIJudge``,
``RuleCompletenessChecker``/``OpenAICompletenessChecker``) are the edge. The trainer calls
``compute_rewards``. Names load lazily (PEP 562) so ``slca --help`` and light importers such as
``slca_grpo.rewards.matching`` do not pay for httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slca_grpo.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "REWARD_NAMES": "batch",
    "RewardBatch": "batch",
    "RolloutReward": "batch",
    "compute_rewards": "batch",
    "CompletenessChecker": "completeness",
    "CompletenessVerdict": "completeness",
    "RuleCompletenessChecker": "completeness",
    "rule_complete": "completeness",
    "OpenAICompletenessChecker": "openai_checker",
    "ExecutionWeights": "config",
    "RewardConfig": "config",
    "ExecutionReward": "execution",
    "execution_reward": "execution",
    "name_f1": "execution",
    "parse_for_task": "execution",
    "make_checker": "factory",
    "make_judge": "factory",
    "parse_endpoint_spec": "factory",
    "HierReward": "hierarchical",
    "finish_hierr": "hierarchical",
    "hierr": "hierarchical",
    "plan_hierr": "hierarchical",
    "Judge": "judge_base",
    "JudgeRequest": "judge_base",
    "JudgeVerdict": "judge_base",
    "loose_equal": "matching",
    "strict_call_match": "matching",
    "ChatEndpoint": "openai_chat",
    "EndpointError": "openai_chat",
    "OpenAIJudge": "openai_judge",
    "parse_rating": "rating",
    "parse_yes_no": "rating",
    "RLTRReward": "rltr",
    "rltr_reward": "rltr",
    "RuleJudge": "rule_judge",
    "RuleJudgeReport": "rule_judge",
    "ToolPOReward": "toolpo",
    "toolpo_rewards": "toolpo",
}

__all__ = [
    "ChatEndpoint",
    "CompletenessChecker",
    "CompletenessVerdict",
    "EndpointError",
    "ExecutionReward",
    "ExecutionWeights",
    "HierReward",
    "Judge",
    "JudgeRequest",
    "JudgeVerdict",
    "OpenAICompletenessChecker",
    "OpenAIJudge",
    "REWARD_NAMES",
    "RLTRReward",
    "RewardBatch",
    "RewardConfig",
    "RolloutReward",
    "RuleCompletenessChecker",
    "RuleJudge",
    "RuleJudgeReport",
    "ToolPOReward",
    "compute_rewards",
    "execution_reward",
    "finish_hierr",
    "hierr",
    "loose_equal",
    "make_checker",
    "make_judge",
    "name_f1",
    "parse_endpoint_spec",
    "parse_for_task",
    "parse_rating",
    "parse_yes_no",
    "plan_hierr",
    "rltr_reward",
    "rule_complete",
    "strict_call_match",
    "toolpo_rewards",
]

if TYPE_CHECKING:  # static analysers see the real names
    from slca_grpo.rewards.batch import REWARD_NAMES, RewardBatch, RolloutReward, compute_rewards
    from slca_grpo.rewards.completeness import CompletenessChecker, CompletenessVerdict, RuleCompletenessChecker, rule_complete
    from slca_grpo.rewards.openai_checker import OpenAICompletenessChecker
    from slca_grpo.rewards.config import ExecutionWeights, RewardConfig
    from slca_grpo.rewards.execution import ExecutionReward, execution_reward, name_f1, parse_for_task
    from slca_grpo.rewards.factory import make_checker, make_judge, parse_endpoint_spec
    from slca_grpo.rewards.hierarchical import HierReward, finish_hierr, hierr, plan_hierr
    from slca_grpo.rewards.judge_base import Judge, JudgeRequest, JudgeVerdict
    from slca_grpo.rewards.matching import loose_equal, strict_call_match
    from slca_grpo.rewards.openai_chat import ChatEndpoint, EndpointError
    from slca_grpo.rewards.openai_judge import OpenAIJudge
    from slca_grpo.rewards.rating import parse_rating, parse_yes_no
    from slca_grpo.rewards.rltr import RLTRReward, rltr_reward
    from slca_grpo.rewards.rule_judge import RuleJudge, RuleJudgeReport
    from slca_grpo.rewards.toolpo import ToolPOReward, toolpo_rewards


__getattr__ = lazy_exports(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
