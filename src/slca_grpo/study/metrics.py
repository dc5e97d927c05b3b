"""The names a study's report, tables and charts share: which metrics, their labels and scales."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from slca_grpo.report import COLUMN_LABELS, COLUMN_SCALES, HELD_OUT_SAMPLED, TRAIN_TRUNCATED

# Held-out outcomes: each is compared seed by seed and tested.
STUDY_METRICS = ("success@0.7", "success@0.9", "name_f1", "arg_match", "process", "r_sum")
# Shown beside the outcomes in every table, never tested: the share of held-out rollouts and of
# training rollouts cut off by max_turns or the token budget before an answer.
HELD_OUT_TRUNCATED = "truncated"
TRAINING_TRUNCATED = "train_truncated"
STEP_PREFIX = "step/"  # held-out score of gold step j's turn (eval/indomain.py), on multi-step tasks
SIGNIFICANCE = 0.05  # the level of the exact tests

GRAD_COSINE = "diag/grad_cosine_tool_summary"
TRAINING_KEYS = ("reward/tool", "reward/summary", TRAIN_TRUNCATED, GRAD_COSINE)
NOISE_KEYS = ("noise/mean", "noise/std", "noise/replaced_rate")


def study_metrics(runs: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The study's outcomes, ``step/<j>`` for every gold step the final evaluations score, and the
    sampled outcomes where the runs sampled their held-out tasks."""
    steps = sorted(
        {key for run in runs for key in run["final"] if key.startswith(STEP_PREFIX)},
        key=lambda key: int(key[len(STEP_PREFIX) :]),
    )
    # The sampled policy's held-out outcomes (train.eval_samples): whether RL's gain on what it
    # trains reaches tasks it never trained on.
    sampled = [m for m in HELD_OUT_SAMPLED if any(m in run["final"] for run in runs)]
    return (*STUDY_METRICS, *steps, *sampled)


BFCL_PREFIX = "bfcl/"  # BFCL accuracy of a category, or overall (study/outcomes.py)


def metric_label(metric: str) -> str:
    if metric.startswith(STEP_PREFIX):
        return f"Step {metric[len(STEP_PREFIX) :]}"
    if metric.startswith(BFCL_PREFIX):
        return f"BFCL {metric[len(BFCL_PREFIX) :]}"
    return COLUMN_LABELS[metric]


def metric_scale(metric: str) -> float:
    if metric.startswith((STEP_PREFIX, BFCL_PREFIX)):
        return 100.0
    return COLUMN_SCALES[metric]
