"""Statistics of a multi-seed study: confidence intervals of means, and paired differences with an
exact test.

Pure functions on numbers (no files, no torch). The interval is the percentile bootstrap of the
mean, by default *expanded* for small samples (Hesterberg 2015, "What teachers should know about
the bootstrap", §5.1): with n seeds the plain percentile interval is as narrow as a z-interval
with the plug-in standard deviation and covers only ~85% at n = 5 for normal data; the expanded
one reads the bootstrap distribution at the tail levels ``Φ(±√(n/(n−1))·t_{n−1})`` and so widens
the interval as a t-interval would, while keeping the bootstrap's shape.

No percentile interval can leave the range of its n values, so at a handful of seeds it is a
description, not a test. A paired difference therefore also carries the paired t-interval and
the exact sign-flip (permutation) p-value, which is what decides significance; over a table of
such tests, :func:`holm_adjust` gives the Holm–Bonferroni adjusted p-values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
from scipy.stats import t as student_t

DEFAULT_RESAMPLES = 10_000


@dataclass(frozen=True)
class Interval:
    """A mean with its confidence interval (``low``/``high`` are NaN with fewer than two values)."""

    mean: float
    low: float
    high: float
    n: int

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def to_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


def tail_levels(n: int, confidence: float, expanded: bool) -> tuple[float, float]:
    """The (lower, upper) quantile levels of the bootstrap distribution to read the interval at."""
    alpha = 1 - confidence
    if not expanded:
        return alpha / 2, 1 - alpha / 2
    z = math.sqrt(n / (n - 1)) * float(student_t.ppf(1 - alpha / 2, n - 1))
    lower = NormalDist().cdf(-z)
    return lower, 1 - lower


def _as_samples(values: Sequence[float] | np.ndarray) -> np.ndarray:
    samples = np.asarray(values, dtype=float)
    if samples.ndim == 0 or samples.shape[0] == 0:
        raise ValueError("a confidence interval needs at least one value")
    if not np.isfinite(samples).all():
        raise ValueError("confidence intervals need finite values")
    return samples


def _bootstrap_means(samples: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``[resamples, ...]`` means of rows drawn with replacement along axis 0 (one vectorised draw)."""
    rows = rng.integers(0, samples.shape[0], size=(resamples, samples.shape[0]))
    return samples[rows].mean(axis=1)


def _check(confidence: float, resamples: int) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    expanded: bool = True,
) -> Interval | list[Interval]:
    """Bootstrap CI of the mean over axis 0 (seeds). 1-D input: one ``Interval``; 2-D input
    ``[seeds, points]`` (a learning curve): one per point, from the same resampled seeds."""
    _check(confidence, resamples)
    samples = _as_samples(values)
    n = samples.shape[0]
    mean = samples.mean(axis=0)
    if n < 2:
        lows = highs = np.full_like(mean, np.nan)
    else:
        means = _bootstrap_means(samples, resamples, np.random.default_rng(seed))
        lows, highs = np.quantile(means, tail_levels(n, confidence, expanded), axis=0)
    if samples.ndim == 1:
        return Interval(float(mean), float(lows), float(highs), n)
    return [Interval(float(m), float(lo), float(hi), n) for m, lo, hi in zip(mean, lows, highs)]


def t_interval(values: Sequence[float] | np.ndarray, *, confidence: float = 0.95) -> Interval:
    """The Student t-interval of the mean, ``mean ± t_{n−1}·s/√n`` (NaN bounds below two values)."""
    _check(confidence, 1)
    samples = _as_samples(values)
    n = samples.shape[0]
    mean = float(samples.mean())
    if n < 2:
        return Interval(mean, math.nan, math.nan, n)
    half = float(student_t.ppf(0.5 + confidence / 2, n - 1)) * float(samples.std(ddof=1)) / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n)


EXACT_SIGN_FLIP_MAX = 20  # up to 2**20 sign patterns are enumerated; more seeds are sampled
SIGN_FLIP_RESAMPLES = 200_000
SIGN_FLIP_CHUNK = 4_000_000  # signs drawn at once (32 MB of float64)


def sign_flip_p(
    differences: Sequence[float] | np.ndarray, *, resamples: int = SIGN_FLIP_RESAMPLES, seed: int = 0
) -> float:
    """Two-sided p-value of the paired sign-flip (permutation) test of "mean difference = 0".

    Under the null each difference is as likely negative as positive, so every pattern of signs is
    equally likely; p is the share of patterns whose |sum| reaches the observed one. Exact (all
    2ⁿ patterns) up to ``EXACT_SIGN_FLIP_MAX`` values; beyond that, ``resamples`` random patterns
    with the add-one estimate ``(k + 1) / (N + 1)``. The smallest exact p is ``2 / 2ⁿ`` when no
    difference is 0: 0.0625 at n = 5, 0.0078 at n = 8.
    """
    samples = _as_samples(differences)
    if samples.ndim != 1:
        raise ValueError("sign_flip_p takes one difference per seed")
    n = samples.shape[0]
    observed = abs(float(samples.sum()))
    tolerance = 1e-12 * max(1.0, float(np.abs(samples).sum()))  # sums equal up to rounding count as reached
    if n <= EXACT_SIGN_FLIP_MAX:
        reached = 0
        chunk = 1 << min(n, 16)
        low_bits = (np.arange(chunk)[:, None] >> np.arange(min(n, 16))) & 1
        low_signs = 1 - 2 * low_bits  # [chunk, min(n, 16)] of ±1
        low_sums = low_signs @ samples[: min(n, 16)]
        for high in range(1 << max(0, n - 16)):  # the remaining (at most four) signs, pattern by pattern
            high_signs = 1 - 2 * ((high >> np.arange(max(0, n - 16))) & 1)
            sums = low_sums + float(high_signs @ samples[16:])
            reached += int((np.abs(sums) >= observed - tolerance).sum())
        return reached / float(1 << n)
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    rng, reached = np.random.default_rng(seed), 0
    chunk = max(1, SIGN_FLIP_CHUNK // n)  # patterns per draw, so memory stays bounded whatever n is
    for start in range(0, resamples, chunk):
        signs = rng.choice((-1.0, 1.0), size=(min(chunk, resamples - start), n))
        reached += int((np.abs(signs @ samples) >= observed - tolerance).sum())
    return (reached + 1) / (resamples + 1)


def holm_adjust(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm–Bonferroni adjusted p-values of a family of tests (``None`` entries are not tests):
    a test is significant at level α after the correction when its adjusted p is below α."""
    tested = sorted((p, index) for index, p in enumerate(p_values) if p is not None)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, index) in enumerate(tested):
        running = max(running, min(1.0, (len(tested) - rank) * p))  # keep the adjusted values monotone
        adjusted[index] = running
    return adjusted


@dataclass(frozen=True)
class PairedDifference:
    """Treatment − baseline, seed by seed: the mean difference with its bootstrap interval, its
    paired t-interval, the exact sign-flip p-value, and the seeds won, lost and tied."""

    interval: Interval
    seeds: tuple[int, ...]
    differences: tuple[float, ...]
    t: Interval
    p: float

    @property
    def wins(self) -> int:
        return sum(d > 0 for d in self.differences)

    @property
    def losses(self) -> int:
        return sum(d < 0 for d in self.differences)

    @property
    def ties(self) -> int:
        return sum(d == 0 for d in self.differences)

    def to_dict(self) -> dict[str, Any]:
        t_bounds = self.t.to_dict()
        return {
            **self.interval.to_dict(),
            "t_low": t_bounds["low"],
            "t_high": t_bounds["high"],
            "p": self.p,
            "seeds": list(self.seeds),
            "differences": list(self.differences),
            "wins": self.wins,
            "losses": self.losses,
            "ties": self.ties,
        }


def paired_difference_ci(
    treatment: Mapping[int, float], baseline: Mapping[int, float], **options: Any
) -> PairedDifference:
    """(treatment − baseline) over the seeds both have: a shared per-seed effect (the seed's
    prompts, its start) cancels before any statistic. ``options`` go to :func:`bootstrap_ci`."""
    seeds = tuple(sorted(set(treatment) & set(baseline)))
    if not seeds:
        raise ValueError("a paired difference needs seeds present in both runs")
    differences = tuple(float(treatment[s]) - float(baseline[s]) for s in seeds)
    interval = bootstrap_ci(differences, **options)
    assert isinstance(interval, Interval)
    confidence = options.get("confidence", 0.95)
    return PairedDifference(
        interval, seeds, differences, t_interval(differences, confidence=confidence), sign_flip_p(differences)
    )
