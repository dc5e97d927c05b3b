"""The study's statistics on constructed inputs whose answers are known."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slca_grpo.study.stats import (
    DEFAULT_RESAMPLES,
    Interval,
    _as_samples,
    _bootstrap_means,
    _check,
    bootstrap_ci,
    holm_adjust,
    paired_difference_ci,
    sign_flip_p,
    t_interval,
    tail_levels,
)


def unpaired_difference_ci(
    treatment, baseline, *, confidence=0.95, resamples=DEFAULT_RESAMPLES, seed=0, expanded=True
) -> Interval:
    """CI of mean(treatment) − mean(baseline) resampling the two independently (ignores pairing;
    the expansion uses the smaller sample's size): what pairing is compared with below."""
    _check(confidence, resamples)
    a, b = _as_samples(treatment), _as_samples(baseline)
    mean = float(a.mean() - b.mean())
    n = min(a.shape[0], b.shape[0])
    if n < 2:
        return Interval(mean, math.nan, math.nan, n)
    rng_a, rng_b = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    differences = _bootstrap_means(a, resamples, rng_a) - _bootstrap_means(b, resamples, rng_b)
    low, high = np.quantile(differences, tail_levels(n, confidence, expanded))
    return Interval(mean, float(low), float(high), n)


def test_constant_values_give_a_zero_width_interval_at_the_value():
    for expanded in (True, False):
        interval = bootstrap_ci([0.42] * 5, expanded=expanded)
        assert interval.mean == pytest.approx(0.42)
        assert interval.low == pytest.approx(0.42) and interval.high == pytest.approx(0.42)
        assert interval.n == 5


def test_the_interval_holds_the_mean_is_seeded_and_widens_when_expanded():
    values = [0.1, 0.5, 0.3, 0.9, 0.4]
    interval = bootstrap_ci(values, seed=3)
    assert interval.low <= np.mean(values) <= interval.high
    assert interval == bootstrap_ci(values, seed=3)  # reproducible
    plain = bootstrap_ci(values, seed=3, expanded=False)
    assert interval.low < plain.low and interval.high > plain.high
    # Never beyond the range of the values: a bootstrap mean cannot leave it.
    assert min(values) <= interval.low and interval.high <= max(values)


def test_one_value_has_no_interval_and_bad_input_is_refused():
    interval = bootstrap_ci([0.7])
    assert interval.mean == 0.7 and math.isnan(interval.low) and math.isnan(interval.high)
    assert interval.to_dict() == {"mean": 0.7, "low": None, "high": None, "n": 1}
    for bad in ([], [1.0, float("nan")]):
        with pytest.raises(ValueError):
            bootstrap_ci(bad)
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci([1.0, 2.0], confidence=1.5)


def test_curves_get_one_interval_per_point_from_the_same_resampled_seeds():
    rows = np.random.default_rng(0).normal(size=(6, 4))
    per_point = bootstrap_ci(rows, seed=11)
    assert len(per_point) == 4
    for column, interval in enumerate(per_point):
        assert interval == bootstrap_ci(rows[:, column], seed=11)


def test_a_known_shift_is_inside_the_paired_interval_which_excludes_zero():
    rng = np.random.default_rng(1)
    baseline = {seed: float(v) for seed, v in enumerate(rng.normal(0.4, 0.1, 10))}
    treatment = {seed: v + 0.05 + float(rng.normal(0, 0.01)) for seed, v in baseline.items()}
    difference = paired_difference_ci(treatment, baseline)
    assert difference.interval.low < 0.05 < difference.interval.high
    assert difference.interval.excludes_zero and difference.wins == 10
    assert difference.seeds == tuple(range(10))


def test_pairing_cancels_a_shared_per_seed_offset_that_the_unpaired_interval_keeps():
    rng = np.random.default_rng(2)
    offsets = rng.normal(0, 1.0, 8)  # what a seed's prompts do to both estimators alike
    baseline = {s: float(o) for s, o in enumerate(offsets)}
    treatment = {s: float(o) + 0.2 + float(rng.normal(0, 0.02)) for s, o in enumerate(offsets)}
    paired = paired_difference_ci(treatment, baseline).interval
    unpaired = unpaired_difference_ci(list(treatment.values()), list(baseline.values()))
    assert paired.mean == pytest.approx(unpaired.mean)
    assert paired.excludes_zero and not unpaired.excludes_zero
    assert (paired.high - paired.low) < 0.1 * (unpaired.high - unpaired.low)


def test_paired_differences_use_only_the_seeds_both_have():
    difference = paired_difference_ci({0: 1.0, 1: 2.0, 2: 5.0}, {1: 1.0, 2: 1.0, 3: 9.0})
    assert difference.seeds == (1, 2) and difference.differences == (1.0, 4.0)
    with pytest.raises(ValueError, match="seeds present in both"):
        paired_difference_ci({0: 1.0}, {1: 1.0})


def coverage(n: int, expanded: bool, trials: int = 600) -> float:
    rng = np.random.default_rng(n)
    covered = 0
    for trial in range(trials):
        interval = bootstrap_ci(rng.normal(3.0, 2.0, n), resamples=2000, seed=trial, expanded=expanded)
        covered += interval.low <= 3.0 <= interval.high
    return covered / trials


def test_coverage_on_normal_samples():
    # With 5 seeds the plain percentile interval covers ~85%; the expanded one ~92%, close to the
    # most any percentile interval of 5 values can (1 − 2·2⁻⁵ = 93.75%: it cannot leave their
    # range, and the true mean lies outside it that often). With 12 seeds it is ~95%.
    plain, expanded = coverage(5, expanded=False), coverage(5, expanded=True)
    assert 0.78 <= plain <= 0.90
    assert 0.87 <= expanded <= 0.97
    assert expanded - plain >= 0.04
    assert 0.91 <= coverage(12, expanded=True) <= 0.98


def test_expanded_tail_levels_match_hand_computed_values():
    # n = 5: z = sqrt(5/4) * t_{4, 0.975} = 1.1180 * 2.7764 = 3.1041, and Φ(−3.1041) = 0.000954.
    lower, upper = tail_levels(5, 0.95, expanded=True)
    assert lower == pytest.approx(0.000954, abs=2e-6) and upper == pytest.approx(1 - lower)
    assert tail_levels(5, 0.95, expanded=False) == pytest.approx((0.025, 0.975))


# -- the exact paired test and the t-interval ------------------------------------------------------


def brute_force_sign_flip(differences: list[float]) -> float:
    """Sums compared exactly: the tests use eighths, which add up without rounding."""
    observed = abs(sum(differences))
    patterns = list(itertools.product((-1, 1), repeat=len(differences)))
    reached = sum(abs(sum(s * d for s, d in zip(signs, differences))) >= observed for signs in patterns)
    return reached / len(patterns)


def test_sign_flip_hand_values():
    # All n differences one way: only the all-plus and all-minus patterns reach the sum: 2/2ⁿ.
    assert sign_flip_p([0.1, 0.2, 0.3, 0.4, 0.5]) == pytest.approx(2 / 32)  # 5 seeds: never below 0.0625
    assert sign_flip_p([1.0] * 8) == pytest.approx(2 / 256)
    # One of four against: |sum| = 2 + 3 + 4 − 1 = 8. Flipping a set S of the absolute values moves
    # the sum 10 by −2·sum(S); |10 − 2·sum(S)| ≥ 8 needs sum(S) ≤ 1 ({}, {1}) or ≥ 9 (their
    # complements): 4 of the 16 patterns.
    assert sign_flip_p([2.0, 3.0, 4.0, -1.0]) == pytest.approx(4 / 16)
    # No effect at all: every pattern reaches 0.
    assert sign_flip_p([0.0, 0.0, 0.0]) == 1.0 and sign_flip_p([0.5, -0.5]) == 1.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-40, 40).map(lambda k: k / 8), min_size=1, max_size=10))
def test_sign_flip_matches_brute_force(differences: list[float]):
    assert sign_flip_p(differences) == pytest.approx(brute_force_sign_flip(differences))


def test_sign_flip_beyond_enumeration_samples_and_stays_a_valid_p():
    # 17 and 19 values are still enumerated (in chunks); 24 are sampled with the add-one estimate.
    rng = np.random.default_rng(5)
    ones = [1.0] * 17
    assert sign_flip_p(ones) == pytest.approx(2 / 2**17)
    null = rng.normal(0, 1, 19)
    assert 0 < sign_flip_p(null) <= 1
    sampled = sign_flip_p([1.0] * 24, resamples=5_000)
    assert sampled == pytest.approx(1 / 5_001)  # no sampled pattern reaches it: (0 + 1) / (N + 1)
    with pytest.raises(ValueError, match="finite"):
        sign_flip_p([1.0, float("nan")])


def test_sign_flip_is_a_valid_test_under_the_null():
    # Symmetric noise around 0: the rejection rate at 0.05 stays at or under 0.05 (exact test).
    rng = np.random.default_rng(7)
    rejected = sum(sign_flip_p(rng.normal(0, 1, 8)) < 0.05 for _ in range(400))
    assert rejected / 400 <= 0.07


def test_t_interval_hand_values():
    interval = t_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    # mean 3, s = sqrt(2.5), t(4, 0.975) = 2.776445: half-width 2.776445 · 1.581139 / sqrt(5) = 1.963243
    assert interval.mean == pytest.approx(3.0)
    assert (interval.low, interval.high) == pytest.approx((3 - 1.963243, 3 + 1.963243), abs=1e-6)
    assert math.isnan(t_interval([0.3]).low)


def test_holm_adjusted_p_values():
    # Sorted 0.01, 0.03, 0.04 of three tests: 3·0.01, max(0.03, 2·0.03), max(0.06, 1·0.04).
    assert holm_adjust([0.01, None, 0.04, 0.03]) == pytest.approx([0.03, None, 0.06, 0.06])
    assert holm_adjust([0.5, 0.9]) == [1.0, 1.0]
    assert holm_adjust([]) == []


def test_a_paired_difference_carries_t_interval_exact_p_and_ties():
    difference = paired_difference_ci({s: 1.0 + (s % 3) for s in range(8)}, {s: 1.0 for s in range(8)})
    # differences 0, 1, 2, 0, 1, 2, 0, 1: five won, three tied; the zeros do not change any sum.
    assert (difference.wins, difference.losses, difference.ties) == (5, 0, 3)
    assert difference.p == pytest.approx(2 / 2**5)
    record = difference.to_dict()
    assert record["t_low"] < record["mean"] < record["t_high"] and record["p"] == difference.p
    assert (record["wins"], record["losses"], record["ties"]) == (5, 0, 3)
