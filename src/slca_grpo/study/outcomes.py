"""What a study measures beyond the held-out outcome table: its pre-registered primary family, how
episodes ended, and BFCL.

- **Primary family** (``StudyBudget.primary``): on one held-out metric named before the runs,
  each estimator − the start and each estimator − the baseline, paired by seed with the exact
  sign-flip p, Holm-corrected over the family; beside each, a task-level paired permutation test
  (per task, the seed mean of the difference; its signs flipped task by task), which asks whether
  the change holds across tasks rather than across seeds.
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
from slca_grpo.study.stats import holm_adjust, paired_difference_ci, sign_flip_p

START = "start"
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
    """The BFCL summary scored into ``folder`` (``<model's folder>/bfcl``), or None when it was not."""
    try:
        return json.loads((folder / BFCL_FOLDER / BFCL_SUMMARY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


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


def primary_family(runs: Mapping[str, Mapping[int, dict[str, Any]]], metric: str, baseline: str) -> dict[str, Any]:
    """The primary comparisons at one noise level (``runs``: estimator → seed → run record): each
    estimator − start, then each other estimator − ``baseline``; Holm over all of them."""
    tests: list[dict[str, Any]] = []
    for estimator, by_seed in runs.items():
        seeds = [s for s in sorted(by_seed) if _has(by_seed[s]["final"], metric) and _has(by_seed[s]["start"], metric)]
        if not seeds:
            continue
        difference = paired_difference_ci(
            {s: by_seed[s]["final"][metric] for s in seeds}, {s: by_seed[s]["start"][metric] for s in seeds}
        ).to_dict()
        tasks = task_level_p(
            [by_seed[s].get("items") for s in seeds], [by_seed[s].get("start_items") for s in seeds], metric
        )
        tests.append({"comparison": f"{estimator} - {START}", **difference, "task_level": tasks})
    for estimator, by_seed in runs.items():
        if estimator == baseline or baseline not in runs:
            continue
        base = runs[baseline]
        seeds = [s for s in sorted(by_seed) if s in base and _has(by_seed[s]["final"], metric)]
        seeds = [s for s in seeds if _has(base[s]["final"], metric)]
        if not seeds:
            continue
        difference = paired_difference_ci(
            {s: by_seed[s]["final"][metric] for s in seeds}, {s: base[s]["final"][metric] for s in seeds}
        ).to_dict()
        tasks = task_level_p([by_seed[s].get("items") for s in seeds], [base[s].get("items") for s in seeds], metric)
        tests.append({"comparison": f"{estimator} - {baseline}", **difference, "task_level": tasks})
    for test, adjusted in zip(tests, holm_adjust([test.get("p") for test in tests])):
        test["holm_p"] = adjusted
    return {"metric": metric, "tests": tests}


def _has(record: Mapping[str, Any], metric: str) -> bool:
    return record.get(metric) is not None
