"""The gate's decision rule on synthetic paired samples."""

from __future__ import annotations

import math
import random

import pytest

from rlperf.bench.stats import (
    OK,
    REGRESSION,
    UNDECIDED,
    binom_cdf_half,
    decide,
    median_ci,
    min_rounds,
    sign_test_rank,
)


def log_ratios(shift: float, noise: float, n: int, seed: int) -> list[float]:
    """n paired log-ratios of a head ``shift`` slower than the base, lognormal noise."""
    rng = random.Random(seed)
    return [math.log1p(shift) + rng.gauss(0.0, noise) for _ in range(n)]


def test_sign_test_rank_matches_binomial_coverage() -> None:
    assert binom_cdf_half(0, 6) == pytest.approx(1 / 64)
    assert sign_test_rank(5, 0.95) is None  # the best interval, min..max, covers 93.75%
    assert sign_test_rank(6, 0.95) == 1  # min..max covers 1 - 2/64 = 96.9%
    assert sign_test_rank(9, 0.95) == 2
    assert min_rounds(0.95) == 6
    for n in range(6, 40):
        k = sign_test_rank(n, 0.95)
        assert 1 - 2 * binom_cdf_half(k - 1, n) >= 0.95 > 1 - 2 * binom_cdf_half(k, n)


def test_median_ci_is_order_statistics() -> None:
    assert median_ci([5.0, 1.0, 4.0, 2.0, 3.0, 6.0], 0.95) == (1.0, 6.0)
    assert median_ci([1.0, 2.0], 0.95) is None


@pytest.mark.parametrize("seed", range(5))
def test_equal_distributions_pass(seed: int) -> None:
    verdict = decide(log_ratios(0.0, 0.03, 12, seed), threshold=0.10, confidence=0.95)
    assert verdict.decision == OK
    assert verdict.low < 1.0 < verdict.high < 1.10


@pytest.mark.parametrize("seed", range(5))
def test_fifteen_percent_shift_fails(seed: int) -> None:
    verdict = decide(log_ratios(0.15, 0.01, 12, seed), threshold=0.10, confidence=0.95)
    assert verdict.decision == REGRESSION
    assert 1.0 < verdict.low <= 1.15 <= verdict.high and verdict.ratio > 1.10


def test_one_wild_round_does_not_flip_the_decision() -> None:
    samples = log_ratios(0.0, 0.02, 12, seed=0)
    samples[3] = math.log(3.0)  # a neighbour's burst hit one side of one round
    assert decide(samples, 0.10, 0.95).decision == OK


def test_too_few_samples_is_undecided() -> None:
    verdict = decide(log_ratios(0.5, 0.0, 5, seed=0), threshold=0.10, confidence=0.95)
    assert verdict.decision == UNDECIDED
    assert verdict.low is None and "too few" in verdict.reason


def test_a_noisy_slowdown_that_may_be_nothing_is_undecided() -> None:
    samples = [math.log(r) for r in (0.9, 0.95, 1.12, 1.2, 1.25, 1.3)]
    verdict = decide(samples, threshold=0.10, confidence=0.95)
    assert verdict.decision == UNDECIDED and verdict.ratio > 1.10 and verdict.low < 1.0


def test_a_slowdown_near_the_threshold_is_undecided() -> None:
    samples = [math.log(r) for r in (1.02, 1.05, 1.07, 1.09, 1.11, 1.14)]
    verdict = decide(samples, threshold=0.10, confidence=0.95)
    assert verdict.decision == UNDECIDED and verdict.ratio < 1.10 < verdict.high


def test_non_finite_samples_are_rejected() -> None:
    with pytest.raises(ValueError, match="finite"):
        decide([0.0] * 5 + [math.nan], 0.10, 0.95)
