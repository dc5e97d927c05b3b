"""What a credit-assignment study runs: noise levels, estimators, seeds and the per-run budget."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

NOISE_KEYS = {"std": "summary_noise_std", "prob": "summary_noise_prob"}
PLAN_FILE = "study.json"  # the plan of the study in a folder (its last invocation)
TIMINGS_FILE = "timings.json"  # seconds per RL run, by run name
BFCL_TIMINGS_FILE = "bfcl_timings.json"  # seconds per BFCL scoring, by model ("start" or a run name)


@dataclass(frozen=True)
class NoiseLevel:
    """One setting of the summary-reward noise knob (``RewardConfig.summary_noise_*``)."""

    std: float = 0.0
    prob: float = 0.0

    @property
    def name(self) -> str:
        """The folder name: ``none``, ``std0.5``, ``prob0.5`` or ``std0.25+prob0.5``."""
        parts = [f"{key}{value:g}" for key, value in (("std", self.std), ("prob", self.prob)) if value]
        return "+".join(parts) or "none"

    @property
    def label(self) -> str:
        """For tables and charts: ``none``, ``σ=0.5``, ``p=0.5``, ``σ=0.25+p=0.5``."""
        parts = [f"{key}={value:g}" for key, value in (("σ", self.std), ("p", self.prob)) if value]
        return "+".join(parts) or "none"

    def overrides(self) -> list[str]:
        return [f"reward.{NOISE_KEYS['std']}={self.std}", f"reward.{NOISE_KEYS['prob']}={self.prob}"]


@dataclass(frozen=True)
class StudyBudget:
    """The size of a study. ``preset`` is the demo preset read at run time (model, data, SFT,
    rollout and RL settings); the rest overrides it for every RL run."""

    preset: str
    seeds: int
    noise: str
    steps: int
    evals: int  # held-out evaluations after the start one, evenly spaced (the last at the end)
    eval_tasks: int  # also the size of a synthetic test split, so that this many exist
    prompts_per_step: int | None = None  # None: the preset's
    # BFCL categories (comma-separated) the start and every final model are scored on with
    # bfcl-eval's checkers, the first ``bfcl_limit`` entries of each; "": none.
    bfcl: str = ""
    bfcl_limit: int = 50
    # The held-out metric named before the runs as the study's primary outcome: each estimator −
    # the start and each estimator − the baseline on it form one family, Holm-corrected together,
    # with a task-level permutation test beside each. "": no primary family.
    primary: str = ""

    @property
    def eval_every(self) -> int:
        return max(1, math.ceil(self.steps / self.evals))


# Eight seeds: the smallest number at which the exact paired test can reach p < 0.01 (2/2⁸); at
# five it cannot go below 0.0625. Sized on the reader from measured costs (docs/study.md, "Cost"):
# four prompts × G = 8 per step keep a step near 10 s, so the default study and the per-turn study
# run side by side in about three hours of a 2-core machine.
QUICK_BUDGET = StudyBudget(
    preset="demo-quick", seeds=8, noise="none,prob=1", steps=8, evals=1, eval_tasks=40, prompts_per_step=4
)
DEFAULT_BUDGET = StudyBudget(
    preset="demo-quick", seeds=8, noise="none,prob=1", steps=16, evals=2, eval_tasks=64, prompts_per_step=4
)
# SmolLM2-135M-Instruct (the one model here that reads an unseen tool): GRPO and SLCA from the
# preset's SFT start, 8 seeds, no noise arm, scored on held-out tasks (greedy and sampled) and on
# BFCL. The primary outcome was named before any run (docs/study.md, "The study on SmolLM2"). A
# pilot run of this budget took 31 minutes of a 2-core CPU, so the study is planned at ~10 hours.
SMOLLM2_BUDGET = StudyBudget(
    preset="study-smollm2",
    seeds=8,
    noise="none",
    steps=10,
    evals=1,
    eval_tasks=64,
    bfcl="simple_python,multiple",
    bfcl_limit=50,
    primary="success@0.7",
)
SMOLLM2_ESTIMATORS = ("grpo", "slca")
# GRPO, SLCA, and SLCA without its summary channel: the control that tells "GRPO is hurt by the
# noise" apart from "SLCA's summary channel costs tool accuracy".
DEFAULT_ESTIMATORS = ("grpo", "slca", "slca-no-summary")


@dataclass(frozen=True)
class StudyModel:
    """What ``slca study --model NAME`` runs by default."""

    budget: StudyBudget
    estimators: tuple[str, ...]
    quick: StudyBudget | None = None  # --quick's budget, where the model has one


STUDY_MODELS = {
    "reader": StudyModel(DEFAULT_BUDGET, DEFAULT_ESTIMATORS, QUICK_BUDGET),
    "smollm2": StudyModel(SMOLLM2_BUDGET, SMOLLM2_ESTIMATORS),
}


@dataclass
class StudyPlan:
    """Everything a study's runs depend on; saved as ``study.json`` beside them."""

    budget: StudyBudget
    estimators: tuple[str, ...] = DEFAULT_ESTIMATORS
    levels: tuple[NoiseLevel, ...] = field(default_factory=lambda: (NoiseLevel(),))
    overrides: tuple[str, ...] = ()  # --set, applied to every run after the budget

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(range(self.budget.seeds))

    @property
    def baseline(self) -> str:
        """The estimator the others are compared with, seed by seed: GRPO when present."""
        return "grpo" if "grpo" in self.estimators else self.estimators[0]

    def budget_overrides(self) -> list[str]:
        budget = self.budget
        prompts = (
            []
            if budget.prompts_per_step is None
            else [
                f"rl.prompts_per_step={budget.prompts_per_step}",
                f"rl.mini_batch_prompts={budget.prompts_per_step}",
            ]
        )
        return [
            f"rl.steps={budget.steps}",
            *prompts,
            f"data.n_test={budget.eval_tasks}",
            f"train.eval_every={budget.eval_every}",
            f"train.eval_tasks={budget.eval_tasks}",
            "train.keep_last=1",
            "train.progress=false",
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget": asdict(self.budget),
            "estimators": list(self.estimators),
            "levels": [asdict(level) for level in self.levels],
            "overrides": list(self.overrides),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StudyPlan:
        return cls(
            StudyBudget(**data["budget"]),
            tuple(data["estimators"]),
            tuple(NoiseLevel(**level) for level in data["levels"]),
            tuple(data.get("overrides", ())),
        )


def reference_level(levels: tuple[NoiseLevel, ...] | list[NoiseLevel]) -> NoiseLevel:
    """The level the others are compared with: no noise when it was run, else the first."""
    return next((level for level in levels if level.name == "none"), levels[0])


def run_dir(out_dir: Path, level: NoiseLevel, estimator: str, seed: int) -> Path:
    """Where one RL run of a study lives: ``OUT/<level>/<estimator>/seed-<k>``."""
    return out_dir / level.name / estimator / f"seed-{seed}"


def read_json(path: Path, default: Any) -> Any:
    """A JSON file's content, or ``default`` when it is missing or unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return default
