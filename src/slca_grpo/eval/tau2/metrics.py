"""pass^k over τ² trials (Yao et al., 2024): per task C(c, k) / C(n, k), averaged over tasks.

Pure arithmetic, no τ² import. A trial succeeds when its reward is 1 within τ²'s tolerance.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

SUCCESS_TOLERANCE = 1e-6  # τ²'s ``is_successful``: reward within 1e-6 of 1.0


def is_success(reward: float) -> bool:
    return abs(float(reward) - 1.0) <= SUCCESS_TOLERANCE


def pass_hat_k(num_trials: int, num_successes: int, k: int) -> float:
    """Probability that k trials drawn without replacement from n all succeed: C(c,k)/C(n,k)."""
    if not 0 <= num_successes <= num_trials:
        raise ValueError(f"successes {num_successes} must lie in [0, trials={num_trials}]")
    if not 1 <= k <= num_trials:
        raise ValueError(f"k={k} must lie in [1, trials={num_trials}]")
    return math.comb(num_successes, k) / math.comb(num_trials, k)


@dataclass(frozen=True)
class TaskScore:
    """Trials of one task: how many ran, how many succeeded, and pass^k for k = 1..max_k."""

    task_id: str
    num_trials: int
    num_successes: int
    mean_reward: float
    pass_hat: dict[int, float]


def score_tasks(rewards: Iterable[tuple[str, float]], max_k: int | None = None) -> list[TaskScore]:
    """Group ``(task_id, reward)`` pairs by task; pass^k for k up to the fewest trials of any task
    (τ² does the same when trial counts differ), capped at ``max_k``."""
    by_task: dict[str, list[float]] = defaultdict(list)
    for task_id, reward in rewards:
        by_task[str(task_id)].append(float(reward))
    if not by_task:
        return []
    top_k = min(len(v) for v in by_task.values())
    if max_k is not None:
        top_k = min(top_k, max_k)
    scores = []
    for task_id, values in by_task.items():
        successes = sum(is_success(r) for r in values)
        scores.append(
            TaskScore(
                task_id=task_id,
                num_trials=len(values),
                num_successes=successes,
                mean_reward=sum(values) / len(values),
                pass_hat={k: pass_hat_k(len(values), successes, k) for k in range(1, top_k + 1)},
            )
        )
    return scores


def average_pass_hat(scores: Iterable[TaskScore]) -> dict[int, float]:
    """pass^k averaged over tasks, for every k that all tasks report."""
    scores = list(scores)
    if not scores:
        return {}
    ks = set.intersection(*(set(s.pass_hat) for s in scores))
    return {k: sum(s.pass_hat[k] for s in scores) / len(scores) for k in sorted(ks)}


def mean_reward(scores: Iterable[TaskScore]) -> float:
    """Reward averaged over all simulations (τ²'s ``avg_reward``)."""
    scores = list(scores)
    total = sum(s.mean_reward * s.num_trials for s in scores)
    count = sum(s.num_trials for s in scores)
    return total / count if count else 0.0
