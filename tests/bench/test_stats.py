"""The gate's decision rule on synthetic paired samples: the interval, the sign-flip test and
max-T against brute-force references, Holm (the learning gate's), sample sizes and the
family-wise false-alarm rate."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from rlperf.bench.gate import Settings
from rlperf.bench.registry import gate_case_names
from rlperf.bench.stats import (
    OK,
    REGRESSION,
    UNDECIDED,
    binom_cdf_half,
    decide,
    decide_family,
    false_alarm_level,
    family_false_alarm_rate,
    fewest_rounds_to_flag,
    flip_patterns,
    holm_adjust,
    maxt_adjusted_pvalues,
    median_ci,
    min_rounds,
    min_rounds_to_flag,
    sign_flip_pvalue,
    sign_test_rank,
    smallest_sign_flip_pvalue,
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


# -- the sign-flip test and Holm ---------------------------------------------------------
def brute_force_sign_flip(samples: list[float]) -> float:
    """The reference: every pattern of signs, its sum compared with the observed one."""
    observed = sum(samples)
    patterns = list(itertools.product((1, -1), repeat=len(samples)))
    at_least = sum(
        sum(s * abs(d) for s, d in zip(signs, samples, strict=True)) >= observed - 1e-12
        for signs in patterns
    )
    return at_least / len(patterns)


@pytest.mark.parametrize("n", [1, 2, 5, 9, 10, 13])
@pytest.mark.parametrize("seed", range(4))
def test_sign_flip_pvalue_matches_brute_force(n: int, seed: int) -> None:
    rng = random.Random(seed)
    samples = [rng.gauss(0.01, 0.02) for _ in range(n)]
    samples[0] = 0.0  # a round exactly even: either sign is the same sum
    if n > 2:
        samples[2] = -samples[1]  # two rounds of equal size: tied sums
    assert sign_flip_pvalue(samples) == pytest.approx(brute_force_sign_flip(samples), abs=1e-12)


def test_sign_flip_weighs_the_rounds_by_their_size() -> None:
    """Nine rounds 2% slower and one 0.3% faster: 2/1024 (all slower, or only the small one
    faster), where the sign test's 9 of 10 gives 11/1024; one large faster round counts more."""
    nine = [0.02 + 0.001 * i for i in range(9)]
    assert sign_flip_pvalue([*nine, -0.003]) == 2 / 1024
    assert sign_flip_pvalue([*nine, -0.05]) > 11 / 1024
    assert sign_flip_pvalue([0.02] * 10) == smallest_sign_flip_pvalue(10) == 1 / 1024
    assert sign_flip_pvalue([]) == 1.0
    # One burst, either way, cannot make an unchanged head look slower.
    burst = [0.01, -0.01, 0.02, -0.015, 0.005, -0.002, 0.5, 0.01, -0.02, 0.0]
    assert sign_flip_pvalue(burst) > 0.25  # half the patterns flip the burst; the rest decide


def holm_reference(p_values: list[float], alpha: float) -> list[bool]:
    """Holm's procedure as written: step down until the first failure."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] > alpha / (len(p_values) - rank):
            break
        rejected[i] = True
    return rejected


@pytest.mark.parametrize("seed", range(20))
def test_holm_adjusted_pvalues_reject_as_holm_does(seed: int) -> None:
    rng = random.Random(seed)
    p_values = [rng.random() ** 3 for _ in range(rng.randint(1, 8))]
    adjusted = holm_adjust(p_values)
    for alpha in (0.01, 0.025, 0.05, 0.2):
        assert [a <= alpha for a in adjusted] == holm_reference(p_values, alpha)


def test_one_case_one_look_is_the_intervals_own_test() -> None:
    """Rounds of one size: "interval above 1" and "sign-flip p <= alpha" are the same test."""
    for n in range(6, 30):
        for positives in range(n + 1):
            samples = [0.01] * positives + [-0.01] * (n - positives)
            verdict = decide(samples, 0.0001, 0.95, first_look=n, horizon=n)
            assert (verdict.low > 1.0) == (verdict.p_value <= false_alarm_level(0.95))


def test_fewest_rounds_to_flag() -> None:
    """The horizon, where the one test is taken, when 2^-horizon clears alpha, for any number
    of cases (max-T)."""
    assert fewest_rounds_to_flag(0.95, 6, 8) == 8
    assert fewest_rounds_to_flag(0.95, 6, 20) == 20
    assert fewest_rounds_to_flag(0.95, 6, 6) == 6  # 1/64 <= 0.025
    assert fewest_rounds_to_flag(0.99, 6, 7) is None  # 1/128 > 0.005
    assert min_rounds_to_flag(0.95, 6) == 6
    assert min_rounds_to_flag(0.95, 1) == 6  # 1/32 > 0.025 >= 1/64
    assert min_rounds_to_flag(0.99, 6) == 8  # 1/128 > 0.005 >= 1/256
    assert min_rounds_to_flag(0.95, 11) == 11
    assert fewest_rounds_to_flag(0.95, 6, 5) is None  # fewer rounds than an early look


def maxt_reference(series: list[list[float]]) -> list[float]:
    """Westfall and Young's step-down max-T as written: every sign pattern of the rounds, the
    tests ranked by their observed T, each compared with the largest T among itself and the
    tests ranked below it, made monotone down the ranking."""
    n, tests = len(series[0]), range(len(series))

    def t_stat(values: list[float], signs: tuple[int, ...]) -> float:
        scale = math.sqrt(sum(d * d for d in values)) or 1.0
        return sum(s * d for s, d in zip(signs, values, strict=True)) / scale

    patterns = list(itertools.product((1, -1), repeat=n))
    observed = [t_stat(series[k], patterns[0]) for k in tests]
    ranked = sorted(tests, key=lambda k: -observed[k])
    adjusted, running = [1.0] * len(series), 0.0
    for rank, k in enumerate(ranked):
        below = ranked[rank:]
        hits = sum(
            max(t_stat(series[j], signs) for j in below) >= observed[k] - 1e-9 for signs in patterns
        )
        running = max(running, hits / len(patterns))
        adjusted[k] = running
    return adjusted


@pytest.mark.parametrize(("tests", "n"), [(1, 7), (3, 6), (4, 9), (8, 8)])
@pytest.mark.parametrize("seed", range(3))
def test_maxt_matches_brute_force(tests: int, n: int, seed: int) -> None:
    rng = random.Random(seed)
    shared = [rng.gauss(0.0, 0.01) for _ in range(n)]  # a round's load hits every case
    series = [[0.005 * k + shared[r] + rng.gauss(0.0, 0.02) for r in range(n)]
              for k in range(tests)]  # fmt: skip
    series[0][1] = 0.0  # a round exactly even
    fast = maxt_adjusted_pvalues(series)
    assert fast == pytest.approx(maxt_reference(series), abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_maxt_of_one_series_is_the_sign_flip_test(seed: int) -> None:
    rng = random.Random(seed)
    samples = [rng.gauss(0.01, 0.02) for _ in range(11)]
    assert maxt_adjusted_pvalues([samples]) == [pytest.approx(sign_flip_pvalue(samples))]


def test_maxt_flags_a_shared_slowdown_that_holm_cannot_at_nine_rounds() -> None:
    """Seven cases 2% slower in 8 of 9 rounds, one round 0.2% faster in each (and their pooled
    rounds): Holm needs p <= 0.025 / 8 and an exact test over 9 rounds gives 2/512 at best
    here; max-T compares with the family's own flips and flags them."""
    rng = random.Random(3)
    series = [[0.02 + rng.uniform(-0.005, 0.005) for _ in range(8)] + [-0.002]
              for _ in range(8)]  # fmt: skip
    raw = [sign_flip_pvalue(s) for s in series]
    assert min(holm_adjust(raw)) > false_alarm_level(0.95)
    assert max(maxt_adjusted_pvalues(series)) <= false_alarm_level(0.95)


def test_maxt_keeps_the_family_wise_rate_for_dependent_unchanged_cases() -> None:
    """Unchanged cases whose rounds share a burst of load (correlated across cases) and have
    heavy tails: the share of seeded runs in which any test reaches alpha stays at or below it
    (exact: at most floor(alpha 2^n) / 2^n of the equally likely patterns)."""
    alpha, runs, n = false_alarm_level(0.95), 1500, 8
    rng = random.Random(99)
    alarms = 0
    for _ in range(runs):
        shared = [rng.gauss(0.0, 0.02) * (5.0 if rng.random() < 0.1 else 1.0) for _ in range(n)]
        series = [[shared[r] + rng.gauss(0.0, 0.02) for r in range(n)] for _ in range(7)]
        series.append([sum(s[r] for s in series) / 7 for r in range(n)])  # pooled
        alarms += min(maxt_adjusted_pvalues(series)) <= alpha
    assert alarms / runs <= family_false_alarm_rate(0.95, 6, n) + 0.01  # 3 sd of 1,500 runs
    assert family_false_alarm_rate(0.95, 6, n) == 6 / 256


def test_flip_patterns_enumerate_or_draw_reproducibly() -> None:
    exact = flip_patterns(5)
    assert exact.shape == (32, 5) and (exact[0] == 1.0).all()
    assert len({tuple(row) for row in exact}) == 32
    drawn = flip_patterns(20)
    assert (drawn[0] == 1.0).all() and drawn.shape[1] == 20
    assert (drawn == flip_patterns(20)).all()  # a verdict does not change on re-reading


def test_maxt_refuses_series_of_different_lengths() -> None:
    with pytest.raises(ValueError, match="one length"):
        maxt_adjusted_pvalues([[0.1, 0.2], [0.1]])
    assert maxt_adjusted_pvalues([]) == []
    assert maxt_adjusted_pvalues([[0.0] * 6, [0.0] * 6]) == [1.0, 1.0]


# The documented sample size (docs/gate.md): a 5% slowdown, round noise sd 0.02 (the sd of one
# round's log-ratio), threshold 2%, tested at the horizon: flagged in >= 95% of runs by 10
# rounds alone and by 12 among 4 cases.
DOC_NOISE, DOC_THRESHOLD, DOC_HORIZON = 0.02, 0.02, 20


@pytest.mark.parametrize(("num_cases", "rounds"), [(1, 10), (4, 12)])
def test_five_percent_is_flagged_at_the_documented_sample_size(num_cases: int, rounds: int) -> None:
    caught = false_alarms = 0
    for seed in range(200):
        family = {"slow": log_ratios(0.05, DOC_NOISE, rounds, seed)}
        family.update({f"same{i}": log_ratios(0.0, DOC_NOISE, rounds, 1000 * seed + i)
                       for i in range(num_cases - 1)})  # fmt: skip
        verdicts = decide_family(family, DOC_THRESHOLD, 0.95, 6, rounds)
        caught += verdicts["slow"].decision == REGRESSION
        false_alarms += any(v.decision == REGRESSION for c, v in verdicts.items() if c != "slow")
    assert caught / 200 >= 0.95
    assert false_alarms / 200 <= false_alarm_level(0.95)  # Holm's family-wise level


@pytest.mark.parametrize("seed", range(5))
def test_equal_distributions_pass_at_the_documented_sample_size(seed: int) -> None:
    verdict = decide(log_ratios(0.0, DOC_NOISE, DOC_HORIZON, seed), DOC_THRESHOLD, 0.95, 6, 20)
    assert verdict.decision == OK


@pytest.mark.parametrize("horizon", [5, 8, 12, 16, 20, 30])
def test_exact_family_false_alarm_rate_is_at_most_alpha(horizon: int) -> None:
    """The worst case exactly: every case unchanged, run to the horizon, threshold ignored."""
    rate = family_false_alarm_rate(0.95, 1, horizon)
    assert rate <= false_alarm_level(0.95)
    # Zero only where no run of rounds could flag anything (5 rounds: 1/32 > 2.5%).
    assert (rate > 0.0) == (fewest_rounds_to_flag(0.95, 1, horizon) is not None)


def run_sequential(rng: random.Random, num_cases: int, rule: str, horizon: int = 20) -> bool:
    """One synthetic gate run of ``num_cases`` unchanged cases (round noise sd 0.03, and a
    neighbour's 5x burst in about one round in ten), threshold 2%, rounds 6..horizon taken one
    at a time, each case stopped once decided, as the gate does; True if any case was called a
    regression. ``rule``: "gate" (:func:`decide_family`) or "naive" (each case alone, the
    fixed-n test read at every look: the rule without the sequential and Holm corrections).
    """
    rounds: dict[str, list[float]] = {f"case{i}": [] for i in range(num_cases)}
    pending = sorted(rounds)
    for n in range(1, horizon + 1):
        for case in pending:
            burst = rng.random() < 0.1
            rounds[case].append(rng.gauss(0.0, 0.03 * (5.0 if burst else 1.0)))
        if n < 6:
            continue
        if rule == "gate":
            verdicts = decide_family(rounds, 0.02, 0.95, 6, horizon)
        else:
            verdicts = {c: decide(rounds[c], 0.02, 0.95, first_look=n, horizon=n) for c in rounds}
        if any(v.decision == REGRESSION for v in verdicts.values()):
            return True
        pending = [c for c in pending if verdicts[c].decision == UNDECIDED]
    return False


# 4 cases over 20 rounds (docs/benchmarks.md), and the gate's default case set at its default
# horizon (the five workloads over 30 rounds).
@pytest.mark.parametrize(
    ("num_cases", "horizon", "runs"),
    [(4, 20, 1000), (len(gate_case_names()), Settings().max_rounds, 1000)],
)
def test_family_wise_false_alarms_stay_below_the_level_in_simulated_gate_runs(
    num_cases: int, horizon: int, runs: int
) -> None:
    """Seeded synthetic gate runs of unchanged cases: the share with any false alarm stays
    <= alpha (2.5%); the rule without the corrections exceeds it (so the simulation can tell)."""
    alpha = false_alarm_level(0.95)
    rng = random.Random(12345)
    gate = sum(run_sequential(rng, num_cases, "gate", horizon) for _ in range(runs)) / runs
    rng = random.Random(12345)
    naive = sum(run_sequential(rng, num_cases, "naive", horizon) for _ in range(runs)) / runs
    assert gate <= alpha
    assert naive > 2 * alpha


def test_the_default_case_set_holds_the_family_wise_rate_and_can_flag() -> None:
    """The default cases at the default settings: the exact family-wise false-alarm rate (every
    case unchanged, run to max_rounds) is at most alpha, and a case slower in every round is
    flagged well before max_rounds."""
    settings, num_cases = Settings(), len(gate_case_names())
    assert num_cases >= 5
    rate = family_false_alarm_rate(settings.confidence, settings.min_rounds, settings.max_rounds)
    assert 0.0 < rate <= false_alarm_level(settings.confidence)
    settings.check_family(num_cases)  # GateError if max_rounds could never flag one
    # And at the 9-10 rounds the time budget gives the default set (docs/gate.md), and the
    # fewest the pace may cut it to.
    for rounds in (6, 9, 10):
        assert fewest_rounds_to_flag(settings.confidence, settings.min_rounds, rounds) == rounds


# -- the gate decides: undecided runs are a red CI for the user ---------------------------------
def test_a_case_not_shown_slower_at_the_horizon_is_ok_when_its_median_is_within() -> None:
    """Equal distributions whose interval still reaches the limit at the last round: ok when the
    gate closes at its horizon, undecided otherwise; a median above the limit stays undecided."""
    rng = random.Random(7)
    same = [rng.gauss(0.0, 0.05) for _ in range(25)]
    assert math.exp(sorted(same)[12]) <= 1.02
    open_ = decide_family({"a": same}, 0.02, 0.95, 6, 25)["a"]
    closed = decide_family({"a": same}, 0.02, 0.95, 6, 25, close_at_horizon=True)["a"]
    assert open_.decision == UNDECIDED and open_.high > 1.02
    assert closed.decision == OK and "not shown slower in 25 rounds" in closed.reason
    early = decide_family({"a": same[:20]}, 0.02, 0.95, 6, 25, close_at_horizon=True)["a"]
    assert early.decision == UNDECIDED  # rounds left: keep measuring
    above = [d + 0.03 for d in same]  # median above the limit, not significant
    verdict = decide_family({"a": above}, 0.02, 0.95, 6, 25, close_at_horizon=True)["a"]
    assert verdict.decision != OK


def test_a_median_above_the_limit_is_ok_at_the_horizon_when_not_shown_slower() -> None:
    """No evidence of any change after the last round: ok, though the median landed above the
    limit; with rounds left it stays undecided, and shown slower it is a regression."""
    rng = random.Random(4)
    noisy = [rng.gauss(0.0, 0.05) + 0.01 for _ in range(25)]
    closed = decide_family({"a": noisy}, 0.02, 0.95, 6, 25, close_at_horizon=True)["a"]
    assert closed.ratio > 1.02 and closed.p_value > false_alarm_level(0.95)
    assert closed.decision == OK and "not shown slower in 25 rounds: p=" in closed.reason
    assert decide_family({"a": noisy}, 0.02, 0.95, 6, 25)["a"].decision == UNDECIDED
    early = decide_family({"a": noisy[:20]}, 0.02, 0.95, 6, 25, close_at_horizon=True)["a"]
    assert early.decision == UNDECIDED and "tested at round 25" in early.reason
    slower = [d + 0.03 for d in noisy]
    shown = decide_family({"a": slower}, 0.02, 0.95, 6, 25, close_at_horizon=True)["a"]
    assert shown.decision == REGRESSION


def gate_run_exit(rng: random.Random, shift: float, noise: float, close: bool) -> int:
    """Exit status of one synthetic run of the default set at the default settings: every case
    shifted by ``shift`` (log-ratio), Gaussian round noise, each case stopped once decided."""
    settings, names = Settings(), [f"case{i}" for i in range(len(gate_case_names()))]
    rounds: dict[str, list[float]] = {name: [] for name in names}
    pending = names
    verdicts: dict = {}
    for n in range(1, settings.max_rounds + 1):
        for name in pending:
            rounds[name].append(rng.gauss(shift, noise))
        if n < settings.min_rounds:
            continue
        verdicts = decide_family(rounds, settings.threshold, settings.confidence,
                                 settings.min_rounds, settings.max_rounds, close)  # fmt: skip
        pending = [name for name in names if verdicts[name].decision == UNDECIDED]
        if not pending:
            break
    decisions = {v.decision for v in verdicts.values()}
    return 1 if REGRESSION in decisions else 2 if UNDECIDED in decisions else 0


def test_the_default_gate_decides_at_the_measured_noise() -> None:
    """The issue's targets on synthetic rounds at round noise 0.02 (the top of the 0.008-0.015
    measured per case on an idle box): an unchanged commit exits 0 in >= 95% of 200 seeded
    runs (only with the horizon rule: without it, runs end undecided), a 5% slowdown of every
    case exits 1 in >= 95%."""
    runs = 200
    for close, at_least in ((True, 0.95), (False, 0.0)):
        rng = random.Random(2026)
        exits = [gate_run_exit(rng, 0.0, 0.02, close) for _ in range(runs)]
        assert exits.count(0) / runs >= at_least
        if not close:
            assert exits.count(2) / runs > 0.05  # so the rule is what makes the gate decide
    rng = random.Random(2027)
    planted = [gate_run_exit(rng, math.log(1.05), 0.02, True) for _ in range(runs)]
    assert planted.count(1) / runs >= 0.95
