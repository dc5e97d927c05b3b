"""The batch entry point the trainer and the evaluator call: named per-rollout rewards.

Each text is parsed once; only the reward families an estimator asks for are computed; every judge
request of the batch (HierR summaries and ToolPO judge-mode successes, de-duplicated) goes through
one ``rate_many`` call so an endpoint judge runs them concurrently; RLTR plans go through one
``check_many`` call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slca_grpo.chat import ParsedResponse
from slca_grpo.rewards.completeness import CompletenessChecker, RuleCompletenessChecker
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.rewards.execution import parse_for_task
from slca_grpo.rewards.hierarchical import HierReward, finish_hierr, plan_hierr
from slca_grpo.rewards.judge_base import Judge, JudgeRequest, JudgeVerdict
from slca_grpo.rewards.rltr import RLTRReward, finish_rltr, plan_rltr
from slca_grpo.rewards.toolpo import (
    ToolPOReward,
    gold_success,
    judge_success,
    success_request,
    toolpo_action,
)
from slca_grpo.types import Task

if TYPE_CHECKING:
    import torch

HIERR_NAMES = ("score", "tool", "summary", "no_call")
TOOLPO_NAMES = ("success", "action")
RLTR_NAMES = ("planner",)
REWARD_NAMES = HIERR_NAMES + TOOLPO_NAMES + RLTR_NAMES
DEFAULT_NEEDS = HIERR_NAMES


@dataclass(frozen=True)
class RolloutReward:
    """The detail of one rollout's rewards (families not asked for are None)."""

    hierr: HierReward | None = None
    toolpo: ToolPOReward | None = None
    rltr: RLTRReward | None = None

    def value(self, name: str) -> float | bool:
        if name in HIERR_NAMES:
            if self.hierr is None:
                raise KeyError(name)
            return {
                "score": self.hierr.score,
                "tool": self.hierr.r_tool,
                "summary": self.hierr.r_sum,
                "no_call": self.hierr.no_call,
            }[name]
        if name in TOOLPO_NAMES:
            if self.toolpo is None:
                raise KeyError(name)
            return self.toolpo.success if name == "success" else self.toolpo.action
        if name == "planner" and self.rltr is not None:
            return self.rltr.planner
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hierr": self.hierr.to_dict() if self.hierr else None,
            "toolpo": self.toolpo._asdict() if self.toolpo else None,
            "rltr": self.rltr.to_dict() if self.rltr else None,
        }


def _mean(values: Iterable[float]) -> float | None:
    items = list(values)
    return sum(items) / len(items) if items else None


@dataclass
class RewardBatch:
    """Per-rollout rewards of a batch, by name, with aggregate metrics."""

    names: tuple[str, ...]
    records: list[RolloutReward]
    judge_requests: int = 0
    judge_failures: int = 0
    checker_verdicts: int = 0
    checker_failures: int = 0

    def __len__(self) -> int:
        return len(self.records)

    def as_dict(self) -> dict[str, list[float] | list[bool]]:
        """Name → one value per rollout (floats; ``no_call`` as bools)."""
        out: dict[str, Any] = {}
        for name in self.names:
            values = [r.value(name) for r in self.records]
            out[name] = [bool(v) for v in values] if name == "no_call" else [float(v) for v in values]
        return out

    def tensors(self, device: torch.device | str | None = None) -> dict[str, torch.Tensor]:
        """Name → 1-D tensor (float32; ``no_call`` bool)."""
        import torch

        out = {}
        for name, values in self.as_dict().items():
            dtype = torch.bool if name == "no_call" else torch.float32
            out[name] = torch.tensor(values, dtype=dtype, device=device)
        return out

    def metrics(self, prefix: str = "reward/") -> dict[str, float]:
        """Means of every component computed, rates of the gate and of each summary reason, judge
        and checker counts of this batch."""
        metrics: dict[str, float | None] = {}
        hier = [r.hierr for r in self.records if r.hierr is not None]
        if hier:
            metrics.update(
                score=_mean(h.score for h in hier),
                tool=_mean(h.r_tool for h in hier),
                summary=_mean(h.r_sum for h in hier),
                no_call_rate=_mean(float(h.no_call) for h in hier),
                exec_fmt=_mean(h.execution.fmt for h in hier),
                exec_name_f1=_mean(h.execution.name_f1 for h in hier),
                exec_key=_mean(h.execution.key for h in hier),
                exec_value=_mean(h.execution.value for h in hier),
                exec_parallel=_mean(h.execution.parallel for h in hier),
                judge_rating=_mean(float(h.rating) for h in hier if h.rating is not None),
            )
            for reason, count in sorted(Counter(h.reason for h in hier).items()):
                metrics[f"summary_reason/{reason}"] = count / len(hier)
        toolpo = [r.toolpo for r in self.records if r.toolpo is not None]
        if toolpo:
            metrics.update(success=_mean(t.success for t in toolpo), action=_mean(t.action for t in toolpo))
        rltr = [r.rltr for r in self.records if r.rltr is not None]
        if rltr:
            metrics.update(
                planner=_mean(p.planner for p in rltr),
                rltr_format_ok=_mean(float(p.format_ok) for p in rltr),
                rltr_completeness=_mean(p.completeness for p in rltr),
                rltr_repeat=_mean(p.repeat_penalty for p in rltr),
                rltr_error=_mean(p.error_penalty for p in rltr),
            )
        metrics.update(
            judge_requests=float(self.judge_requests),
            judge_failures=float(self.judge_failures),
            judge_failure_rate=self.judge_failures / self.judge_requests if self.judge_requests else 0.0,
            checker_verdicts=float(self.checker_verdicts),
            checker_failures=float(self.checker_failures),
        )
        return {prefix + k: float(v) for k, v in metrics.items() if v is not None}


def _check_needs(needs: Iterable[str]) -> tuple[str, ...]:
    ordered = tuple(dict.fromkeys(needs))
    unknown = [n for n in ordered if n not in REWARD_NAMES]
    if unknown:
        raise ValueError(f"unknown reward name(s) {unknown}; known: {', '.join(REWARD_NAMES)}")
    return ordered


def compute_rewards(
    texts: Sequence[str | ParsedResponse],
    tasks: Sequence[Task],
    judge: Judge | None,
    config: RewardConfig | None = None,
    *,
    estimator_needs: Iterable[str] = DEFAULT_NEEDS,
    checker: CompletenessChecker | None = None,
) -> RewardBatch:
    """Rewards of a batch of responses, one task per response.

    ``estimator_needs`` names the per-rollout rewards to compute (from ``REWARD_NAMES``): HierR
    for score/tool/summary/no_call, ToolPO for success/action, RLTR for planner. ``judge`` may be
    None only when nothing asked for needs one (e.g. ToolPO in gold mode); ``checker`` defaults to
    the rule checker.
    """
    config = config or RewardConfig()
    names = _check_needs(estimator_needs)
    if len(texts) != len(tasks):
        raise ValueError(f"compute_rewards got {len(texts)} texts for {len(tasks)} tasks")
    want_hierr = any(n in HIERR_NAMES for n in names)
    want_toolpo = any(n in TOOLPO_NAMES for n in names)
    want_rltr = any(n in RLTR_NAMES for n in names)
    parsed = [parse_for_task(text, task) for text, task in zip(texts, tasks)]

    hier_plans = [plan_hierr(p, t, config) for p, t in zip(parsed, tasks)] if want_hierr else []
    succ_requests: list[JudgeRequest | None] = []
    if want_toolpo and config.toolpo_success == "judge":
        succ_requests = [success_request(p, t, config) for p, t in zip(parsed, tasks)]

    wanted = [plan.request for plan in hier_plans] + succ_requests
    unique = list(dict.fromkeys(r for r in wanted if r is not None))
    verdicts: dict[JudgeRequest, JudgeVerdict] = {}
    failures = 0
    if unique:
        if judge is None:
            raise ValueError("these rewards need a judge (pass RuleJudge() for an offline one)")
        rated = judge.rate_many(unique)
        verdicts = dict(zip(unique, rated))
        failures = sum(1 for v in rated if v.failed)

    rltr_plans = [plan_rltr(p, t) for p, t in zip(parsed, tasks)] if want_rltr else []
    check_results: dict[int, list[Any]] = {}
    checker_failures = checker_verdicts = 0
    to_check = [i for i, plan in enumerate(rltr_plans) if plan.format_ok]
    if to_check:
        checker = checker or RuleCompletenessChecker()
        results = checker.check_many([(tasks[i], rltr_plans[i].calls) for i in to_check], config.rltr_checks)
        check_results = dict(zip(to_check, results))
        checker_verdicts = sum(len(r) for r in results)
        checker_failures = sum(1 for r in results for v in r if v.failed)

    records = []
    for i, (p, task) in enumerate(zip(parsed, tasks)):
        hier = None
        if want_hierr:
            plan = hier_plans[i]
            hier = finish_hierr(plan, verdicts.get(plan.request) if plan.request else None, config)
        toolpo = None
        if want_toolpo:
            action = toolpo_action(p, task)
            if config.toolpo_success == "gold":
                success = gold_success(p, task, config)
            else:
                request = succ_requests[i]
                success = judge_success(verdicts.get(request) if request else None, config)
            toolpo = ToolPOReward(success, action)
        rltr = finish_rltr(rltr_plans[i], check_results.get(i, ()), config) if want_rltr else None
        records.append(RolloutReward(hier, toolpo, rltr))
    return RewardBatch(
        names=names,
        records=records,
        judge_requests=len(unique),
        judge_failures=failures,
        checker_verdicts=checker_verdicts,
        checker_failures=checker_failures,
    )
