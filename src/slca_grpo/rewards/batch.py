"""The batch entry point the trainer and the evaluator call: named per-rollout rewards.

Each text is parsed once; only the reward families that provide the names asked for are computed
(see ``registry.py``); every judge request of the batch, from every family, goes through one
de-duplicated ``rate_many`` call so an endpoint judge runs them concurrently; every completeness
check (one per distinct task and plan) goes through one ``check_many`` call.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slca_grpo.chat import ParsedResponse
from slca_grpo.datatypes import Task, call_signature
from slca_grpo.rewards.completeness import CompletenessChecker, RuleCompletenessChecker
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.rewards.execution import parse_for_task
from slca_grpo.rewards.hierarchical import HIERR_NAMES
from slca_grpo.rewards.judge_base import Judge, JudgeRequest, JudgeVerdict
from slca_grpo.rewards.registry import (
    Answers,
    FamilyResult,
    RewardFamily,
    family_providing,
    get_reward_family,
    pad_rows,
)

if TYPE_CHECKING:
    import torch

DEFAULT_REWARDS = HIERR_NAMES


@dataclass(frozen=True)
class RolloutReward:
    """One rollout's rewards: every value computed, by name, and each family's result."""

    results: dict[str, FamilyResult] = field(default_factory=dict)

    def value(self, name: str) -> float | bool:
        for result in self.results.values():
            if name in result.values:
                return result.values[name]
        raise KeyError(name)

    def detail(self, family: str) -> Any:
        """The detail record of ``family`` (e.g. ``HierReward`` for ``"hierr"``); None if not computed."""
        result = self.results.get(family)
        return result.detail if result is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {name: get_reward_family(name).describe(result) for name, result in self.results.items()}


@dataclass
class RewardBatch:
    """Per-rollout rewards of a batch, by name, with aggregate metrics."""

    names: tuple[str, ...]
    records: list[RolloutReward]
    families: tuple[str, ...] = ()
    judge_requests: int = 0
    judge_failures: int = 0
    checker_verdicts: int = 0
    checker_failures: int = 0
    # Per rollout, the families whose judge or checker failed on it (not the policy's doing).
    failed: list[tuple[str, ...]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.records)

    def failed_for(self, names: Iterable[str]) -> list[bool]:
        """Per rollout: whether a reward in ``names`` came from a judge or checker that failed on
        it, so its value is no measurement of the policy (the trainer leaves it out: void)."""
        families = {family_providing(name).name for name in names}
        return [bool(families.intersection(failed)) for failed in (self.failed or [()] * len(self.records))]

    def as_dict(self) -> dict[str, list[float] | list[bool] | list[list[float]]]:
        """Name → one value per rollout (floats; flags such as ``no_call`` as bools; per-turn
        rewards as one list of floats per rollout)."""
        out: dict[str, Any] = {}
        for name in self.names:
            values = [r.value(name) for r in self.records]
            flags = bool(values) and all(isinstance(v, bool) for v in values)
            if flags:
                out[name] = values
            elif any(isinstance(v, tuple) for v in values):
                out[name] = [[float(x) for x in v] for v in values]
            else:
                out[name] = [float(v) for v in values]
        return out

    def tensors(self, device: torch.device | str | None = None) -> dict[str, torch.Tensor]:
        """Name → 1-D tensor (float32; flags bool); per-turn rewards ``[B, K]`` float32, K the most
        turns of a rollout, shorter rows padded with 0."""
        import torch

        out = {}
        for name, values in self.as_dict().items():
            if values and isinstance(values[0], list):
                width = max(len(row) for row in values)
                out[name] = torch.tensor(pad_rows(values, width), dtype=torch.float32, device=device).reshape(
                    len(values), width
                )
                continue
            flags = bool(values) and isinstance(values[0], bool)
            out[name] = torch.tensor(values, dtype=torch.bool if flags else torch.float32, device=device)
        return out

    def metrics(self, prefix: str = "reward/") -> dict[str, float]:
        """Each computed family's metrics, and the judge and checker counts of this batch."""
        metrics: dict[str, float] = {}
        for name in self.families:
            metrics.update(get_reward_family(name).metrics([r.results[name] for r in self.records]))
        metrics.update(
            judge_requests=float(self.judge_requests),
            judge_failures=float(self.judge_failures),
            judge_failure_rate=self.judge_failures / self.judge_requests if self.judge_requests else 0.0,
            checker_verdicts=float(self.checker_verdicts),
            checker_failures=float(self.checker_failures),
        )
        return {prefix + k: float(v) for k, v in metrics.items()}


def families_for(names: Iterable[str]) -> list[RewardFamily]:
    """The families that compute ``names`` (each once, in the order first needed)."""
    families: dict[str, RewardFamily] = {}
    for name in names:
        family = family_providing(name)
        families.setdefault(family.name, family)
    return list(families.values())


def compute_rewards(
    texts: Sequence[str | ParsedResponse],
    tasks: Sequence[Task],
    judge: Judge | None,
    config: RewardConfig | None = None,
    *,
    names: Iterable[str] = DEFAULT_REWARDS,
    checker: CompletenessChecker | None = None,
    turns: Sequence[Sequence[Any]] | None = None,
) -> RewardBatch:
    """Rewards of a batch of responses, one task per response.

    ``names`` are registered reward names (``list_rewards()``); only their families run. ``judge``
    may be None only when no rollout asks one (e.g. ToolPO in gold mode); ``checker`` defaults to
    the rule checker. ``turns`` (optional, one sequence per response: its turns' texts or ``Turn``
    records) feeds the per-turn rewards; without it they cut each text at its ``</tool_call>`` tags.
    """
    config = config or RewardConfig()
    names = tuple(dict.fromkeys(names))
    families = families_for(names)
    if len(texts) != len(tasks):
        raise ValueError(f"compute_rewards got {len(texts)} texts for {len(tasks)} tasks")
    if turns is not None and len(turns) != len(texts):
        raise ValueError(f"compute_rewards got {len(turns)} turn lists for {len(texts)} texts")
    parsed = [parse_for_task(text, task) for text, task in zip(texts, tasks)]
    # Each family plans the whole batch (a batched reward sees it at once); plans[i][j] is rollout
    # i's plan from family j. Plans need no service, so their order does not matter.
    by_family = [family.plan_batch(parsed, tasks, config, turns) for family in families]
    for family, family_plans in zip(families, by_family):
        if len(family_plans) != len(tasks):
            raise ValueError(f"reward family {family.name!r} planned {len(family_plans)} of {len(tasks)} rollouts")
    plans = [[family_plans[i] for family_plans in by_family] for i in range(len(tasks))]

    unique = list(dict.fromkeys(r for row in plans for plan in row for r in plan.judge))
    verdicts: dict[JudgeRequest, JudgeVerdict] = {}
    judge_failures = 0
    if unique:
        if judge is None:
            raise ValueError("these rewards need a judge (pass RuleJudge() for an offline one)")
        rated = judge.rate_many(unique)
        verdicts = dict(zip(unique, rated))
        judge_failures = sum(1 for v in rated if v.failed)

    # Completeness checks, de-duplicated like the judge's: one per distinct (task, plan).
    check_keys: dict[tuple[int, int], tuple] = {}
    unique_checks: dict[tuple, tuple[Task, tuple]] = {}
    for i, row in enumerate(plans):
        for j, plan in enumerate(row):
            if plan.check is not None:
                key = (id(tasks[i]), tuple(call_signature(c) for c in plan.check))
                check_keys[(i, j)] = key
                unique_checks.setdefault(key, (tasks[i], plan.check))
    checked: dict[tuple, tuple] = {}
    checker_verdicts = checker_failures = 0
    if unique_checks:
        checker = checker or RuleCompletenessChecker()
        results = checker.check_many(list(unique_checks.values()), config.rltr_checks)
        checked = {key: tuple(result) for key, result in zip(unique_checks, results)}
        checker_verdicts = sum(len(r) for r in results)
        checker_failures = sum(1 for r in results for v in r if v.failed)

    records, failed = [], []
    for i, row in enumerate(plans):
        results, broken = {}, []
        for j, (family, plan) in enumerate(zip(families, row)):
            answers = Answers(
                judge=tuple(verdicts[r] for r in plan.judge),
                check=checked[check_keys[(i, j)]] if (i, j) in check_keys else (),
            )
            results[family.name] = family.finish(plan.state, answers, config)
            if any(v.failed for v in answers.judge) or any(v.failed for v in answers.check):
                broken.append(family.name)
        records.append(RolloutReward(results))
        failed.append(tuple(broken))
    return RewardBatch(
        names=names,
        records=records,
        families=tuple(f.name for f in families),
        judge_requests=len(unique),
        judge_failures=judge_failures,
        checker_verdicts=checker_verdicts,
        checker_failures=checker_failures,
        failed=failed,
    )
