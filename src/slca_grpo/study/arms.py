"""Which runs a study trains: an arm the summary noise cannot reach is trained at one level only.

Kept apart from :mod:`slca_grpo.study.plan`, which the command line reads to build its parser: the
estimator registry brings in torch.
"""

from __future__ import annotations

from collections.abc import Iterator

from slca_grpo.algos import estimator_spec
from slca_grpo.study.plan import NoiseLevel, StudyPlan, reference_level


def trained_level(plan: StudyPlan, level: NoiseLevel, estimator: str) -> NoiseLevel:
    """The level whose run stands for (level, estimator): the level itself, or for an estimator the
    summary noise cannot reach (``Estimator.noise_blind``) the reference level, since its runs at
    every level are the same run."""
    return reference_level(plan.levels) if estimator_spec(estimator).noise_blind else level


def trained_runs(plan: StudyPlan) -> Iterator[tuple[int, NoiseLevel, str]]:
    """(seed, level, estimator) of every run to train, seed by seed so a partial study has every
    cell at the same depth; an arm the noise cannot reach is trained at one level only."""
    for seed in plan.seeds:
        for level in plan.levels:
            for estimator in plan.estimators:
                if trained_level(plan, level, estimator) == level:
                    yield seed, level, estimator


def run_count(plan: StudyPlan) -> int:
    """How many RL runs the study trains."""
    return sum(1 for _ in trained_runs(plan))


def trained_once(plan: StudyPlan) -> list[str]:
    """The estimators trained at one level only (empty with a single level)."""
    if len(plan.levels) < 2:
        return []
    return [e for e in plan.estimators if estimator_spec(e).noise_blind]
