"""HierR (docs/method.md §4): the omission gate, the execution reward R_tool and the preference reward R_sum.

Split in two pure steps around the judge so that a batch can send all its judge requests at once:
``plan_hierr`` decides everything that needs no judge and says what (if anything) to ask it;
``finish_hierr`` turns the judge's verdict into R_sum. ``hierr`` chains them for one response.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from slca_grpo.chat import ParsedResponse
from slca_grpo.datatypes import SUBSET_IRRELEVANT, Task
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.rewards.execution import ExecutionReward, execution_reward, parse_for_task
from slca_grpo.rewards.judge_base import Judge, JudgeRequest, JudgeVerdict
from slca_grpo.rewards.registry import Answers, FamilyResult, Planned, RewardFamily, register_reward_family

# Why R_sum has the value it has.
REASON_OMISSION = "omission"  # gate: a call was expected and no <tool_call> tag was written
REASON_NO_TOOL_RESPONSE = "no_tool_response"  # no tool response in the text: nothing to summarise
REASON_SHORT_ANSWER = "short_answer"  # final answer shorter than min_answer_chars
REASON_IRRELEVANT_CALL = "irrelevant_call"  # fix on: a call on an irrelevant task earns no R_sum
REASON_JUDGE_FAILED = "judge_failed"
REASON_JUDGED = "judged"

HIERR_NAMES = ("score", "tool", "summary", "no_call")


@dataclass(frozen=True)
class HierReward:
    """One rollout's HierR: ``score = r_tool + r_sum`` (or the omission penalty)."""

    r_tool: float
    r_sum: float
    score: float
    no_call: bool
    execution: ExecutionReward  # computed even under the gate, for metrics (Name-F1, ArgMatch)
    rating: int | None
    judge_failed: bool
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {
            "r_tool": self.r_tool,
            "r_sum": self.r_sum,
            "score": self.score,
            "no_call": self.no_call,
            "execution": self.execution.to_dict(),
            "rating": self.rating,
            "judge_failed": self.judge_failed,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class HierPlan:
    """The judge-free part of HierR; ``request`` is what to ask the judge (None: nothing to ask)."""

    execution: ExecutionReward
    no_call: bool
    reason: str | None
    request: JudgeRequest | None


def summary_request(parsed: ParsedResponse, task: Task, config: RewardConfig) -> tuple[str | None, JudgeRequest | None]:
    """The summary rules before any judge call: (reason R_sum = 0, None) or (None, the request).

    Paper rules: no tool response → 0; answer shorter than ``min_answer_chars`` → 0; else judged.
    With ``irrelevant_fix`` on an ``irrelevant`` task the roles swap: a response that wrote a
    ``<tool_call>`` gets 0, one that did not has its answer judged with no tool responses.
    """
    answer = parsed.final_answer
    if config.irrelevant_fix and task.subset == SUBSET_IRRELEVANT:
        if parsed.has_tool_call:
            return REASON_IRRELEVANT_CALL, None
    elif not parsed.tool_responses:
        return REASON_NO_TOOL_RESPONSE, None
    if len(answer.strip()) < config.min_answer_chars:
        return REASON_SHORT_ANSWER, None
    return None, JudgeRequest(task.question, tuple(parsed.tool_responses), answer)


def plan_hierr(text_or_parsed: str | ParsedResponse, task: Task, config: RewardConfig | None = None) -> HierPlan:
    config = config or RewardConfig()
    parsed = parse_for_task(text_or_parsed, task)
    execution = execution_reward(parsed, task, config.weights)
    if task.expects_call and not parsed.has_tool_call:
        return HierPlan(execution, no_call=True, reason=REASON_OMISSION, request=None)
    reason, request = summary_request(parsed, task, config)
    return HierPlan(execution, no_call=False, reason=reason, request=request)


def finish_hierr(plan: HierPlan, verdict: JudgeVerdict | None, config: RewardConfig | None = None) -> HierReward:
    """R_sum = (rating − 1) / 4 from the verdict (0 on failure); the gate's penalty when it fired."""
    config = config or RewardConfig()
    if plan.no_call:
        return HierReward(0.0, 0.0, config.omission_penalty, True, plan.execution, None, False, REASON_OMISSION)
    r_tool = plan.execution.total
    if plan.request is None:
        return HierReward(r_tool, 0.0, r_tool, False, plan.execution, None, False, plan.reason or REASON_JUDGED)
    if verdict is None or verdict.failed or verdict.rating is None:
        return HierReward(r_tool, 0.0, r_tool, False, plan.execution, None, True, REASON_JUDGE_FAILED)
    r_sum = (verdict.rating - 1) / 4
    return HierReward(r_tool, r_sum, r_tool + r_sum, False, plan.execution, verdict.rating, False, REASON_JUDGED)


def hierr(
    text: str | ParsedResponse, task: Task, judge: Judge | None, config: RewardConfig | None = None
) -> HierReward:
    """HierR of one response. The judge is called only when the summary rules let the answer through;
    ``judge`` may be None only if no rollout needs it (otherwise a ValueError says so)."""
    config = config or RewardConfig()
    plan = plan_hierr(text, task, config)
    verdict = None
    if plan.request is not None:
        if judge is None:
            raise ValueError("hierr needs a judge to rate this answer (pass RuleJudge() for an offline one)")
        request = plan.request
        verdict = judge.rate(request.question, request.tool_responses, request.answer)
    return finish_hierr(plan, verdict, config)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class HierRFamily(RewardFamily):
    """HierR as registered rewards: ``score``, ``tool`` (R_tool), ``summary`` (R_sum), ``no_call`` (the gate)."""

    def plan(self, parsed: ParsedResponse, task: Task, config: RewardConfig) -> Planned:
        plan = plan_hierr(parsed, task, config)
        return Planned(state=plan, judge=(plan.request,) if plan.request else ())

    def finish(self, state: HierPlan, answers: Answers, config: RewardConfig) -> FamilyResult:
        reward = finish_hierr(state, answers.judge[0] if answers.judge else None, config)
        values = {"score": reward.score, "tool": reward.r_tool, "summary": reward.r_sum, "no_call": reward.no_call}
        return FamilyResult(values, reward)

    def metrics(self, results: Sequence[FamilyResult]) -> dict[str, float]:
        """Means of the components and of the execution parts, the gate's rate and each summary reason's."""
        hier: list[HierReward] = [r.detail for r in results]
        if not hier:
            return {}
        metrics = {
            "score": _mean([h.score for h in hier]),
            "tool": _mean([h.r_tool for h in hier]),
            "summary": _mean([h.r_sum for h in hier]),
            "no_call_rate": _mean([float(h.no_call) for h in hier]),
            "exec_fmt": _mean([h.execution.fmt for h in hier]),
            "exec_name_f1": _mean([h.execution.name_f1 for h in hier]),
            "exec_key": _mean([h.execution.key for h in hier]),
            "exec_value": _mean([h.execution.value for h in hier]),
            "exec_parallel": _mean([h.execution.parallel for h in hier]),
            "judge_rating": _mean([float(h.rating) for h in hier if h.rating is not None]),
        }
        for reason, count in sorted(Counter(h.reason for h in hier).items()):
            metrics[f"summary_reason/{reason}"] = count / len(hier)
        return {key: value for key, value in metrics.items() if value is not None}

    def describe(self, result: FamilyResult) -> dict[str, Any]:
        return result.detail.to_dict()


register_reward_family(HierRFamily(name="hierr", provides=HIERR_NAMES))
