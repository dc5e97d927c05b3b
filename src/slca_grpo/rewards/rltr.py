"""RLTR planner reward (docs/method.md §5): ``-1`` on invalid format, else ``R_comp + R_repeat + R_error``.

Definitions (documented in docs/rewards.md):

- **format valid**: as many ``<tool_call>`` as ``</tool_call>`` tags, every tag in a closed block
  (no stray or nested tags), and every block body is JSON. A response without any call is valid.
- **R_comp**: mean of ``rltr_checks`` (N = 3) verdicts of a completeness checker on the plan, the
  calls of the valid blocks in order.
- **R_repeat** = ``rltr_repeat_penalty`` (−0.1) × the number of plan calls identical (name and
  arguments) to the call just before them.
- **R_error** = ``rltr_error_penalty`` (−0.2) × (blocks that are JSON but invalid — unknown tool,
  bad arguments, bad structure — plus tool responses that are error observations, i.e. a JSON
  object with a non-empty ``"error"`` key).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from slca_grpo.chat import BlockStatus, ParsedResponse
from slca_grpo.datatypes import Task, ToolCall, call_signature
from slca_grpo.rewards.completeness import CompletenessChecker, CompletenessVerdict, RuleCompletenessChecker
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.rewards.execution import parse_for_task
from slca_grpo.rewards.registry import Answers, FamilyResult, Planned, RewardFamily, register_reward_family


@dataclass(frozen=True)
class RLTRReward:
    planner: float
    format_ok: bool
    completeness: float
    repeat_penalty: float
    error_penalty: float

    def to_dict(self) -> dict[str, float | bool]:
        return asdict(self)


@dataclass(frozen=True)
class RLTRPlan:
    """The checker-free part; ``calls`` is the plan to check when the format is valid."""

    format_ok: bool
    calls: tuple[ToolCall, ...]
    repeats: int
    errors: int


def format_valid(parsed: ParsedResponse) -> bool:
    balanced = parsed.n_open == parsed.n_close == len(parsed.blocks)
    return balanced and all(block.status is not BlockStatus.BAD_JSON for block in parsed.blocks)


def consecutive_repeats(calls: Sequence[ToolCall]) -> int:
    signatures = [call_signature(c) for c in calls]
    return sum(1 for previous, current in zip(signatures, signatures[1:]) if previous == current)


def is_error_observation(text: str) -> bool:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and data.get("error") not in (None, False, "", {}, [])


def error_count(parsed: ParsedResponse) -> int:
    invalid_blocks = sum(1 for b in parsed.blocks if not b.is_valid and b.status is not BlockStatus.BAD_JSON)
    return invalid_blocks + sum(1 for r in parsed.tool_responses if is_error_observation(r))


def plan_rltr(text_or_parsed: str | ParsedResponse, task: Task) -> RLTRPlan:
    parsed = parse_for_task(text_or_parsed, task)
    calls = tuple(parsed.calls)
    if not format_valid(parsed):
        return RLTRPlan(False, calls, 0, 0)
    return RLTRPlan(True, calls, consecutive_repeats(calls), error_count(parsed))


def finish_rltr(
    plan: RLTRPlan, verdicts: Sequence[CompletenessVerdict], config: RewardConfig | None = None
) -> RLTRReward:
    config = config or RewardConfig()
    if not plan.format_ok:
        return RLTRReward(config.rltr_format_penalty, False, 0.0, 0.0, 0.0)
    completeness = sum(v.score for v in verdicts) / len(verdicts) if verdicts else 0.0
    repeat = config.rltr_repeat_penalty * plan.repeats
    error = config.rltr_error_penalty * plan.errors
    return RLTRReward(completeness + repeat + error, True, completeness, repeat, error)


def rltr_reward(
    text: str | ParsedResponse,
    task: Task,
    config: RewardConfig | None = None,
    checker: CompletenessChecker | None = None,
) -> RLTRReward:
    """RLTR planner reward of one response; the rule checker is used when none is given."""
    config = config or RewardConfig()
    plan = plan_rltr(text, task)
    if not plan.format_ok:
        return finish_rltr(plan, (), config)
    checker = checker or RuleCompletenessChecker()
    verdicts = checker.check(task, plan.calls, config.rltr_checks)
    return finish_rltr(plan, verdicts, config)


@dataclass(frozen=True)
class RLTRFamily(RewardFamily):
    """RLTR as a registered reward: ``planner``; format-valid plans go to the completeness checker."""

    def plan(self, parsed: ParsedResponse, task: Task, config: RewardConfig) -> Planned:
        plan = plan_rltr(parsed, task)
        return Planned(state=plan, check=plan.calls if plan.format_ok else None)

    def finish(self, state: RLTRPlan, answers: Answers, config: RewardConfig) -> FamilyResult:
        reward = finish_rltr(state, answers.check, config)
        return FamilyResult({"planner": reward.planner}, reward)

    def metrics(self, results: Sequence[FamilyResult]) -> dict[str, float]:
        plans: list[RLTRReward] = [r.detail for r in results]
        if not plans:
            return {}
        count = len(plans)
        return {
            "planner": sum(p.planner for p in plans) / count,
            "rltr_format_ok": sum(float(p.format_ok) for p in plans) / count,
            "rltr_completeness": sum(p.completeness for p in plans) / count,
            "rltr_repeat": sum(p.repeat_penalty for p in plans) / count,
            "rltr_error": sum(p.error_penalty for p in plans) / count,
        }

    def describe(self, result: FamilyResult) -> dict[str, Any]:
        return result.detail.to_dict()


register_reward_family(RLTRFamily(name="rltr", provides=("planner",)))
