"""What a study measures beyond the held-out outcome table: its pre-registered primary family, how
episodes ended, and BFCL.

- **Primary family** (``StudyBudget.primary``, computed in ``study/report.py``): on one held-out
  metric named before the runs, each estimator − the start and each estimator − the baseline,
  paired by seed with the exact sign-flip p, Holm-corrected over the family; beside each, the
  task-level paired permutation test here (per task, the seed mean of the difference; its signs
  flipped task by task), which asks whether the change holds across tasks rather than across seeds.
- **Episode endings**: the held-out shares cut off and forced to answer and the repeated calls per
  task, final and changed from the start (exact p, Holm over the table), with the training shares.
- **BFCL** (``StudyBudget.bfcl``): each model's accuracy per category and overall, scored by
  bfcl-eval's checkers (``study/bfcl.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from slca_grpo.study.metrics import BFCL_PREFIX
from slca_grpo.study.stats import sign_flip_p

START_FOLDER = "start"  # OUT/start/: what a study measures of its start beyond the runs' own records
BFCL_FOLDER = "bfcl"  # <model's folder>/bfcl/: its BFCL scoring (study/bfcl.py)
BFCL_SUMMARY_FILE = "summary.json"  # written by the BFCL report (eval/bfcl/report.py)
ENDING_METRICS = ("truncated", "forced_answer", "repeat_calls")  # held out, greedy
TRAINING_FORCED = "train_forced_answer"  # the run's rollout/forced_answer, mean over its steps
TRAIN_FORCED = "rollout/forced_answer"
BFCL_OVERALL = "bfcl/overall"


def read_items(path: Path) -> dict[str, dict[str, Any]] | None:
    """task id → item of an evaluation's ``*_items.jsonl``, or None when it is missing or damaged."""
    try:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return {str(row["task_id"]): row for row in rows}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_bfcl(folder: Path) -> dict[str, Any] | None:
    """The BFCL summary scored into ``folder`` (``<model's folder>/bfcl``), or None when it was not,
    or when the file is not such a summary (damaged or edited: a study then scores the model again)."""
    try:
        summary = json.loads((folder / BFCL_FOLDER / BFCL_SUMMARY_FILE).read_text(encoding="utf-8"))
        float(summary["overall_accuracy"])
        for score in summary["categories"].values():
            float(score["accuracy"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return summary


def bfcl_scores(summary: Mapping[str, Any] | None) -> dict[str, float]:
    """``bfcl/<category>`` accuracies and ``bfcl/overall`` (their unweighted mean) of a BFCL summary."""
    if not summary:
        return {}
    scores = {f"{BFCL_PREFIX}{name}": float(score["accuracy"]) for name, score in summary["categories"].items()}
    return {**scores, BFCL_OVERALL: float(summary["overall_accuracy"])}


def task_level_p(
    treatment: Sequence[Mapping[str, Mapping[str, Any]]],
    baseline: Sequence[Mapping[str, Mapping[str, Any]]],
    metric: str,
) -> dict[str, Any] | None:
    """The task-level paired permutation test of ``metric``: per task, the mean over seeds of
    treatment − baseline (the i-th treatment item set is paired with the i-th baseline one), and the
    sign-flip p over tasks. None when no task is in every item set."""
    sets = [*treatment, *baseline]
    if not treatment or len(treatment) != len(baseline) or any(items is None for items in sets):
        return None
    tasks = sorted(set.intersection(*(set(items) for items in sets)))
    if not tasks:
        return None
    differences = [
        sum(float(t[task][metric]) - float(b[task][metric]) for t, b in zip(treatment, baseline)) / len(treatment)
        for task in tasks
    ]
    return {
        "tasks": len(tasks),
        "mean": sum(differences) / len(differences),
        "tasks_up": sum(d > 0 for d in differences),
        "tasks_down": sum(d < 0 for d in differences),
        "p": sign_flip_p(differences),
    }
