"""ToolPO rewards (docs/method.md §5, DeepAgent): task success R_succ ∈ {0, 1} and action accuracy R_action.

Pure except for the optional judge, which ``toolpo_rewards`` calls and batches route through
``rate_many`` (see ``batch.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from slca_grpo.chat import ParsedResponse
from slca_grpo.datatypes import Task
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.rewards.execution import parse_for_task
from slca_grpo.rewards.judge_base import Judge, JudgeRequest, JudgeVerdict
from slca_grpo.rewards.matching import max_bipartite_matching, strict_call_match
from slca_grpo.rewards.registry import Answers, FamilyResult, Planned, RewardFamily, register_reward_family


class ToolPOReward(NamedTuple):
    success: float
    action: float


def toolpo_action(parsed: ParsedResponse, task: Task) -> float:
    """Fraction of gold calls strictly matched one-to-one by the predicted (valid) calls.

    Strict: exact name, every gold key present with a loosely equal value (extra predicted keys
    are allowed). One-to-one by maximum bipartite matching, so call order does not matter.
    1.0 when there are no gold calls.
    """
    gold = task.flat_gold_calls
    if not gold:
        return 1.0
    partners = max_bipartite_matching(gold, parsed.calls, strict_call_match)
    return sum(1 for p in partners if p is not None) / len(gold)


def gold_success(parsed: ParsedResponse, task: Task, config: RewardConfig) -> float:
    """The gold rule for R_succ (1.0 or 0.0):

    - the final answer has at least ``min_answer_chars`` characters (a solved task tells the user);
    - a task with no gold calls (``irrelevant``) is solved iff no ``<tool_call>`` tag was written;
    - otherwise: every gold call is strictly matched (R_action = 1) and no call — valid or to an
      unknown tool — names a tool outside the gold names. Malformed blocks alone do not fail it.
    """
    if len(parsed.final_answer.strip()) < config.min_answer_chars:
        return 0.0
    gold = task.flat_gold_calls
    if not gold:
        return 0.0 if parsed.has_tool_call else 1.0
    gold_names = {c.name for c in gold}
    called = {c.name for block in parsed.blocks for c in block.calls}
    if not called <= gold_names:
        return 0.0
    return 1.0 if toolpo_action(parsed, task) == 1.0 else 0.0


def success_request(parsed: ParsedResponse, task: Task, config: RewardConfig) -> JudgeRequest | None:
    """What to ask the judge in ``"judge"`` mode; None when the answer is too short (R_succ = 0)."""
    if len(parsed.final_answer.strip()) < config.min_answer_chars:
        return None
    return JudgeRequest(task.question, tuple(parsed.tool_responses), parsed.final_answer)


def judge_success(verdict: JudgeVerdict | None, config: RewardConfig) -> float:
    """1 when the judge rated the answer at least ``toolpo_judge_threshold`` (default 4); a failed
    or missing verdict is 0."""
    if verdict is None or verdict.failed or verdict.rating is None:
        return 0.0
    return 1.0 if verdict.rating >= config.toolpo_judge_threshold else 0.0


def toolpo_rewards(
    text: str | ParsedResponse, task: Task, config: RewardConfig | None = None, judge: Judge | None = None
) -> ToolPOReward:
    """(R_succ, R_action) of one response; ``judge`` is needed only in ``"judge"`` success mode."""
    config = config or RewardConfig()
    parsed = parse_for_task(text, task)
    action = toolpo_action(parsed, task)
    if config.toolpo_success == "gold":
        return ToolPOReward(gold_success(parsed, task, config), action)
    request = success_request(parsed, task, config)
    if request is None:
        return ToolPOReward(0.0, action)
    if judge is None:
        raise ValueError("toolpo_success='judge' needs a judge")
    verdict = judge.rate(request.question, request.tool_responses, request.answer)
    return ToolPOReward(judge_success(verdict, config), action)


@dataclass(frozen=True)
class ToolPOFamily(RewardFamily):
    """ToolPO as registered rewards: ``success`` (R_succ) and ``action`` (R_action)."""

    def plan(self, parsed: ParsedResponse, task: Task, config: RewardConfig) -> Planned:
        action = toolpo_action(parsed, task)
        if config.toolpo_success == "gold":
            return Planned(state=ToolPOReward(gold_success(parsed, task, config), action))
        request = success_request(parsed, task, config)
        return Planned(state=action, judge=(request,) if request else ())

    def finish(self, state: Any, answers: Answers, config: RewardConfig) -> FamilyResult:
        if isinstance(state, ToolPOReward):
            reward = state
        else:  # judge mode: the answer's verdict, none when it was too short to ask about
            reward = ToolPOReward(judge_success(answers.judge[0] if answers.judge else None, config), state)
        return FamilyResult({"success": reward.success, "action": reward.action}, reward)

    def describe(self, result: FamilyResult) -> dict[str, Any]:
        return result.detail._asdict()


register_reward_family(ToolPOFamily(name="toolpo", provides=("success", "action")))
