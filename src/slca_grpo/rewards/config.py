"""Typed configuration of every reward (HierR, ToolPO, RLTR) and of the judges (docs/method.md §4, §5),
and of each registered reward family's own settings (``reward.<family>.*``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from slca_grpo.config import ConfigError, fill_subsections, subsections_field
from slca_grpo.registry import Registry

TOOLPO_SUCCESS_MODES = ("gold", "judge")


def _check_finite(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")


@dataclass
class ExecutionWeights:
    """Weights of the execution reward ``R_tool`` (docs/method.md §4); the defaults sum to 1 so R_tool ∈ [0, 1]."""

    fmt: float = 0.10
    name: float = 0.25
    key: float = 0.15
    value: float = 0.20
    parallel: float = 0.30

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            _check_finite(f.name, value)
            if value < 0:
                raise ConfigError(f"{f.name} must be >= 0, got {value!r}")

    @property
    def total(self) -> float:
        return self.fmt + self.name + self.key + self.value + self.parallel


# The settings dataclass of each reward family that has one, by family name (``reward.<family>.*``):
# kept by ``register_reward_family`` beside its registry, so that this section knows its subsections.
FAMILY_SETTINGS: Registry[type] = Registry("reward family settings")


@dataclass
class RewardConfig:
    """Settings of all rewards. ``weights`` may be given as a plain dict (e.g. from YAML).

    Judge and checker specs are strings: ``"rule"`` (offline) or ``"openai:BASE_URL#MODEL"``; the API key
    comes from the variable named by ``api_key_env``, else $OPENAI_API_KEY (``slca_grpo.keys``), so no
    secret sits in a config.
    """

    weights: ExecutionWeights = field(default_factory=ExecutionWeights)
    omission_penalty: float = -0.5
    min_answer_chars: int = 10
    # Beyond the paper (docs/method.md §4): on irrelevant tasks, judge a correct abstention and give a call R_sum = 0.
    irrelevant_fix: bool = False
    # RLTR (docs/method.md §5)
    rltr_checks: int = 3
    rltr_repeat_penalty: float = -0.1
    rltr_error_penalty: float = -0.2
    rltr_format_penalty: float = -1.0
    # ToolPO (docs/method.md §5): R_succ by the gold rule or by the judge (rating >= threshold).
    toolpo_success: str = "gold"
    toolpo_judge_threshold: int = 4
    # Edge parts, built by ``slca_grpo.rewards.factory``.
    judge: str = "rule"
    judge_temperature: float = 0.0
    judge_timeout_s: float = 60.0
    judge_max_retries: int = 4
    judge_concurrency: int = 16
    checker: str = "rule"
    checker_temperature: float = 0.7
    api_key_env: str | None = "OPENAI_API_KEY"
    # Credit-assignment study (docs/study.md, rewards/noise.py): noise on every rollout's summary
    # reward, independent of the tool calls, in the RL training reward only (never in evaluation).
    # With probability ``summary_noise_prob`` R_sum is replaced by that of a uniform random rating
    # (1..5); then Gaussian noise of scale ``summary_noise_std`` (R_sum units, 0.25 = one rating
    # point) is added, and R_sum is clamped to the judge's scale [0, 1].
    summary_noise_std: float = 0.0
    summary_noise_prob: float = 0.0
    # The own settings of each reward family that declares them, by family name (``reward.<family>.*``).
    settings: dict[str, Any] = subsections_field()

    @classmethod
    def subsection_types(cls) -> dict[str, type]:
        """Family name -> its settings dataclass, for every registered family that has one."""
        return dict(zip(FAMILY_SETTINGS.names(), FAMILY_SETTINGS.values()))

    def __post_init__(self) -> None:
        if not isinstance(self.weights, ExecutionWeights):
            raise ConfigError(f"weights must be ExecutionWeights, got {self.weights!r}")
        for name in (
            "omission_penalty",
            "rltr_repeat_penalty",
            "rltr_error_penalty",
            "rltr_format_penalty",
            "judge_temperature",
            "checker_temperature",
            "judge_timeout_s",
        ):
            _check_finite(name, getattr(self, name))
        if self.min_answer_chars < 0:
            raise ConfigError(f"min_answer_chars must be >= 0, got {self.min_answer_chars}")
        if self.rltr_checks < 1:
            raise ConfigError(f"rltr_checks must be >= 1, got {self.rltr_checks}")
        if self.toolpo_success not in TOOLPO_SUCCESS_MODES:
            raise ConfigError(f"toolpo_success must be one of {TOOLPO_SUCCESS_MODES}, got {self.toolpo_success!r}")
        if not 1 <= self.toolpo_judge_threshold <= 5:
            raise ConfigError(f"toolpo_judge_threshold must be in 1..5, got {self.toolpo_judge_threshold}")
        if self.judge_max_retries < 0 or self.judge_concurrency < 1 or self.judge_timeout_s <= 0:
            raise ConfigError("judge_max_retries must be >= 0, judge_concurrency >= 1 and judge_timeout_s > 0")
        for name in ("summary_noise_std", "summary_noise_prob"):
            _check_finite(name, getattr(self, name))
        if self.summary_noise_std < 0:
            raise ConfigError(f"summary_noise_std must be >= 0, got {self.summary_noise_std}")
        if not 0 <= self.summary_noise_prob <= 1:
            raise ConfigError(f"summary_noise_prob must be in [0, 1], got {self.summary_noise_prob}")
        self.settings = fill_subsections(self, self.settings)

    @property
    def has_summary_noise(self) -> bool:
        """True when the training reward's R_sum is to be perturbed."""
        return self.summary_noise_std > 0 or self.summary_noise_prob > 0
