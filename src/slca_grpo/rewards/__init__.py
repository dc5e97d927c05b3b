"""Rewards: HierR (execution + judged summary), the per-turn reward, ToolPO and RLTR rewards, judges and checkers.

The arithmetic is pure; judges and checkers (``RuleJudge``/``OpenAIJudge``,
``RuleCompletenessChecker``/``OpenAICompletenessChecker``) are the edge. Rewards are a registry
(``registry.py``): importing this package registers the built-in families (hierr, toolpo, rltr, turn),
and the trainer and evaluator call ``compute_rewards`` with the names they need.
"""

from __future__ import annotations

from slca_grpo.rewards.batch import DEFAULT_REWARDS, RewardBatch, RolloutReward, compute_rewards
from slca_grpo.rewards.completeness import (
    CompletenessChecker,
    CompletenessVerdict,
    RuleCompletenessChecker,
    rule_complete,
)
from slca_grpo.rewards.config import ExecutionWeights, RewardConfig
from slca_grpo.rewards.execution import ExecutionReward, execution_reward, name_f1, parse_for_task
from slca_grpo.rewards.factory import make_checker, make_judge
from slca_grpo.rewards.hierarchical import HIERR_NAMES, HierReward, finish_hierr, hierr, plan_hierr
from slca_grpo.rewards.judge_base import Judge, JudgeRequest, JudgeVerdict
from slca_grpo.rewards.matching import loose_equal, strict_call_match
from slca_grpo.rewards.openai_checker import OpenAICompletenessChecker
from slca_grpo.rewards.openai_judge import OpenAIJudge
from slca_grpo.rewards.rating import parse_rating, parse_yes_no
from slca_grpo.rewards.registry import (
    Answers,
    FamilyResult,
    Planned,
    RewardFamily,
    UnknownRewardError,
    family_providing,
    get_reward_family,
    list_reward_families,
    list_rewards,
    register_reward,
    register_reward_family,
    unregister_reward_family,
)
from slca_grpo.rewards.rltr import RLTRReward, rltr_reward
from slca_grpo.rewards.rule_judge import RuleJudge, RuleJudgeReport
from slca_grpo.rewards.toolpo import ToolPOReward, toolpo_rewards
from slca_grpo.rewards.turns import TURN_NAMES, TurnRewards, TurnScore, split_turns, turn_rewards

__all__ = [
    "Answers",
    "FamilyResult",
    "Planned",
    "RewardFamily",
    "UnknownRewardError",
    "family_providing",
    "get_reward_family",
    "list_reward_families",
    "list_rewards",
    "register_reward",
    "register_reward_family",
    "unregister_reward_family",
    "CompletenessChecker",
    "CompletenessVerdict",
    "ExecutionReward",
    "ExecutionWeights",
    "HierReward",
    "Judge",
    "JudgeRequest",
    "JudgeVerdict",
    "OpenAICompletenessChecker",
    "OpenAIJudge",
    "DEFAULT_REWARDS",
    "HIERR_NAMES",
    "RLTRReward",
    "RewardBatch",
    "RewardConfig",
    "RolloutReward",
    "RuleCompletenessChecker",
    "RuleJudge",
    "RuleJudgeReport",
    "ToolPOReward",
    "TURN_NAMES",
    "TurnRewards",
    "TurnScore",
    "compute_rewards",
    "execution_reward",
    "finish_hierr",
    "hierr",
    "loose_equal",
    "make_checker",
    "make_judge",
    "name_f1",
    "parse_for_task",
    "parse_rating",
    "parse_yes_no",
    "plan_hierr",
    "rltr_reward",
    "rule_complete",
    "strict_call_match",
    "split_turns",
    "toolpo_rewards",
    "turn_rewards",
]
