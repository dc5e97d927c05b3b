"""Reading ``--noise`` levels, each checked as the reward config checks its summary-noise settings.

Apart from ``plan`` so that building the command line (which reads the plan's defaults) does not import
the rewards.
"""

from __future__ import annotations

from slca_grpo.config import ConfigError
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.study.plan import NOISE_KEYS, NoiseLevel


def parse_noise_level(text: str) -> NoiseLevel:
    """``none``, ``std=0.5``, ``prob=0.5`` or both joined by ``+`` (``std=0.25+prob=0.5``)."""
    text = text.strip()
    if text == "none":
        return NoiseLevel()
    values: dict[str, float] = {}
    for part in text.split("+"):
        key, sep, raw = part.partition("=")
        key = key.strip()
        if not sep or key not in NOISE_KEYS:
            raise ConfigError(f"--noise: cannot read {part.strip()!r} (use none, std=S, prob=P or std=S+prob=P)")
        if key in values:
            raise ConfigError(f"--noise: {key} given twice in {text!r}")
        try:
            values[key] = float(raw)
        except ValueError:
            raise ConfigError(f"--noise: {key}={raw.strip()!r} is not a number") from None
    level = NoiseLevel(**values)
    try:
        RewardConfig(summary_noise_std=level.std, summary_noise_prob=level.prob)
    except ValueError as exc:
        raise ConfigError(f"--noise {text}: {exc}") from None
    return level


def parse_noise_levels(spec: str) -> list[NoiseLevel]:
    """Comma-separated levels, e.g. ``none,prob=0.5,prob=1``; each distinct, at least one."""
    levels = [parse_noise_level(part) for part in spec.split(",") if part.strip()]
    if not levels:
        raise ConfigError("--noise: give at least one level (e.g. none,prob=0.5,prob=1)")
    names = [level.name for level in levels]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"--noise: level {repeated[0]} given twice")
    return levels
