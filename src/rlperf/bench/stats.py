"""The gate's statistics: an interval on the median head/base log-ratio, and an exact
sign-flip test at the horizon whose false-alarm rate holds for a whole family of cases (max-T).

Each round of the gate yields one paired sample ``d = log(head_s / base_s)`` per case, measured
in fresh processes, interleaved in time, so slow drifts of the machine's load cancel within the
pair. Rounds are independent. Nothing is assumed about the noise's shape: under an unchanged
head the two sides of a round are exchangeable, so each round's ``d`` (all its cases at once)
is symmetric about 0.

Two questions per case, with ``limit = 1 + threshold``:

- *Is the head slower at all?* Asked once, when the case has its last round (the horizon,
  ``max_rounds`` as the budget set it): :func:`sign_flip_pvalue`, the share of the 2^n ways to
  flip the rounds' signs whose sum is at least the observed sum. Exact under the symmetric
  null, and it weighs each round by its size: nine rounds 2% slower and one 0.3% faster give
  p = 2/1024, where the sign test counts a 9-1 split, p = 11/1024. One look, so no correction
  for looking after every round; the rounds before the horizon can only end a case as ``ok``,
  which never adds a false alarm.
- *Is any slowdown smaller than the threshold?* The distribution-free confidence interval on the
  median (order statistics of a Binomial(n, 1/2), :func:`median_ci`), asked after every round
  from ``first_look`` on: a case whose whole interval is below the limit stops there.

With several cases (and their pooled rounds), the tests are adjusted together by the step-down
max-T procedure over the same sign flips of whole rounds (:func:`maxt_adjusted_pvalues`), so the
probability that a gate run calls *any* unchanged case a regression is at most
``alpha = (1 - confidence) / 2`` (2.5% at the default), for the whole run. Holm's procedure,
which adjusted them until 2026-12-03, asked the smallest p-value for alpha / tests: among 7
cases and the pooled test at 9 rounds only a test slower in all 9 passed (2^-9 <= 0.025 / 8),
and a 2% slowdown beside busy processes left one round below 0 in half the runs (docs/gate.md,
"2% on a busy runner").

The decision has three outcomes per case:
- ``regression``: the max-T adjusted p-value is <= alpha (the head is slower, and the
  family-wise chance that this is noise is controlled) *and* the median ratio is above the limit
  (the slowdown is large enough to matter);
- ``ok``: the whole interval lies below the limit (any slowdown is smaller than the threshold);
- ``undecided``: neither, or too few rounds for any interval (6 at 95%).

With ``close_at_horizon`` (as the gate decides), a case that reaches the last round it may take
without being a regression is ``ok``: its median ratio is at or below the limit (its best
estimate is within the threshold), or the test did not show it slower (no evidence that it
changed at all). So a gate that reaches its horizon always decides; a user reads an undecided
gate as a red CI to re-run, and an unchanged noisy case whose interval merely still reaches the
limit is not a regression. The false-alarm rate is untouched (a regression still needs the
p-value); what it costs is power against a slowdown near the threshold.

Asking the whole interval to clear the limit for a regression (not just 1) would need the
interval's half-width below ``true ratio - limit``: 5% for a 15% slowdown at a 10% threshold,
which a loaded 2-core machine did not reach in 20 rounds (docs/benchmarks.md).
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

REGRESSION, OK, UNDECIDED = "regression", "ok", "undecided"


def binom_cdf_half(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, i) for i in range(min(k, n) + 1)) / 2.0**n


def sign_test_rank(n: int, confidence: float) -> int | None:
    """Largest k with P(d_(k) <= median <= d_(n+1-k)) >= confidence; None if none exists."""
    best = None
    for k in range(1, n // 2 + 1):
        if 1.0 - 2.0 * binom_cdf_half(k - 1, n) >= confidence:
            best = k
        else:
            break
    return best


def median_ci(samples: list[float], confidence: float) -> tuple[float, float] | None:
    """(low, high) distribution-free interval on the median of ``samples``, or None (too few)."""
    k = sign_test_rank(len(samples), confidence)
    if k is None:
        return None
    ordered = sorted(samples)
    return ordered[k - 1], ordered[len(ordered) - k]


def median(samples: list[float]) -> float:
    ordered = sorted(samples)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


def min_rounds(confidence: float) -> int:
    """Fewest rounds for which an interval at ``confidence`` exists."""
    return next(m for m in range(1, 200) if sign_test_rank(m, confidence) is not None)


def false_alarm_level(confidence: float) -> float:
    """alpha: the family-wise false-alarm rate the regression decision holds, (1 - conf) / 2."""
    return (1.0 - confidence) / 2.0


# -- the sign-flip test at the horizon ----------------------------------------------------
# Exact enumeration of 2^n sign patterns, as two halves of 2^(n/2) sums each: 25 rounds are
# 4,096 x 8,192 sums, not 33 million patterns.
SIGN_FLIP_MAX_ROUNDS = 40


def _signed_sums(magnitudes: list[float]) -> np.ndarray:
    """Every sum of ``+-m`` over ``magnitudes`` (2^len of them)."""
    sums = np.zeros(1)
    for m in magnitudes:
        sums = np.concatenate((sums + m, sums - m))
    return sums


def sign_flip_pvalue(log_ratios: list[float]) -> float:
    """Exact one-sided p-value of "the head is not slower" from the rounds' log-ratios: the
    share of the 2^n ways to flip their signs whose sum is at least the observed sum (Fisher's
    and Pitman's sign-flip test of a symmetric null).

    Under an unchanged head the two sides of a round are exchangeable, so each round's
    log-ratio is as likely to have either sign whatever its size, and every pattern of signs
    is equally likely given the sizes: the p-value is exact for any noise shape, without a
    normal approximation. Unlike the sign test it weighs each round by its size, so a round
    barely below 0 among nine clearly above costs little; a neighbour's burst in one round
    moves the sum, but flipping that round's sign moves it as much, so one burst cannot make
    an unchanged head look slower. Sums within a rounding error of the observed one count as
    at least as large (conservative).

    Raises:
        ValueError: more than :data:`SIGN_FLIP_MAX_ROUNDS` rounds.
    """
    n = len(log_ratios)
    if n == 0:
        return 1.0
    if n > SIGN_FLIP_MAX_ROUNDS:
        raise ValueError(f"{n} rounds: the exact sign-flip test takes at most "
                         f"{SIGN_FLIP_MAX_ROUNDS}")  # fmt: skip
    magnitudes = [abs(d) for d in log_ratios]
    observed = math.fsum(log_ratios)
    tolerance = 1e-9 * max(math.fsum(magnitudes), 1e-300)
    low = np.sort(_signed_sums(magnitudes[: n // 2]))
    high = _signed_sums(magnitudes[n // 2 :])
    below = np.searchsorted(low, observed - high - tolerance, side="left")
    return float(len(low) * len(high) - int(below.sum())) / 2**n


def smallest_sign_flip_pvalue(n: int) -> float:
    """The smallest p-value :func:`sign_flip_pvalue` can give over ``n`` rounds (every round
    slower): 2^-n."""
    return 0.5**n


def pooled_log_ratios(log_ratios: dict[str, list[float]]) -> tuple[list[float], dict[str, float]]:
    """The cases' rounds averaged into one log-ratio a round, each case weighted by the
    inverse of the mean square of its rounds' log-ratios; returns (the pooled rounds, each
    case's weight, summing to 1).

    A change in code every case runs (the update, GAE) moves all of them: averaged with
    inverse-noise weights, the cases' independent noise shrinks and the shared shift stays.
    The weights use the mean square, not the variance, so that flipping a round's signs (all
    its cases at once: swapping the round's base and head) leaves them as they are, and the
    sign-flip test of the pooled rounds stays exact. Every case must have every round.

    Raises:
        ValueError: no case, or cases with different numbers of rounds.
    """
    if not log_ratios or len({len(v) for v in log_ratios.values()}) != 1:
        raise ValueError("pooling needs one or more cases with the same rounds")
    floor = 1e-12  # a case whose rounds are all exactly 0 (counted instructions): finite weight
    inverse = {c: 1.0 / max(math.fsum(d * d for d in v) / len(v), floor)
               for c, v in log_ratios.items()}  # fmt: skip
    total = math.fsum(inverse.values())
    weights = {c: w / total for c, w in inverse.items()}
    rounds = len(next(iter(log_ratios.values())))
    pooled = [math.fsum(weights[c] * v[r] for c, v in log_ratios.items()) for r in range(rounds)]
    return pooled, weights


def holm_adjust(p_values: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order.

    Rejecting every hypothesis whose adjusted p-value is <= alpha is Holm's procedure: the
    smallest p compared with alpha / m, the next with alpha / (m - 1), ..., stopping at the
    first that fails. Family-wise error <= alpha with no assumption on how the tests depend.
    """
    m = len(p_values)
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda j: p_values[j])):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


# -- the family: max-T over sign flips of whole rounds ----------------------------------
# Every pattern up to 16 rounds (65,536 of them); beyond, this many seeded random patterns
# (and the observed one), which keeps the p-value valid and the verdict reproducible.
MAXT_EXACT_ROUNDS = 16
MAXT_DRAWS = 2**16


@functools.lru_cache(maxsize=64)
def flip_patterns(n: int) -> np.ndarray:
    """Sign patterns over ``n`` rounds, one a row, the observed one (all +1) first: all 2^n
    up to :data:`MAXT_EXACT_ROUNDS` rounds, else that and :data:`MAXT_DRAWS` seeded draws.
    Read-only and cached: a gate run asks for the same ``n`` for every metric."""
    if n <= MAXT_EXACT_ROUNDS:
        codes = np.arange(2**n, dtype=np.int64)
        patterns = 1.0 - 2.0 * ((codes[:, None] >> np.arange(n)) & 1)
    else:
        draws = np.random.default_rng(0).choice([1.0, -1.0], size=(MAXT_DRAWS, n))
        patterns = np.vstack((np.ones((1, n)), draws))
    patterns.flags.writeable = False
    return patterns


def maxt_adjusted_pvalues(series: list[list[float]]) -> list[float]:
    """Family-wise adjusted one-sided p-values of "not slower" for tests whose rounds line up
    (the r-th value of every series from the same round): Westfall and Young's step-down
    max-T, with the signs of whole rounds flipped (every series at once).

    Each test's statistic is ``T = sum(d) / sqrt(sum(d^2))``: for one test it orders the sign
    patterns as the sum does (its sum of squares does not change under flips), so one series
    gets exactly :func:`sign_flip_pvalue`; across tests it puts a noisy case and a quiet one on
    one scale. The adjusted p-value of the test with the k-th largest observed T is the share
    of patterns whose largest T among the tests ranked k and below reaches it (and never less
    than the one ranked above). Swapping a round's base and head flips that round in every
    series at once, so under "nothing changed" every pattern is as likely as the observed one:
    the chance of any false alarm is at most alpha, exactly, for any noise shape and any
    dependence between the cases; a case that did change only raises the maxima the others
    are compared with. Holm's procedure needs the smallest p-value below alpha / tests, and an
    exact test over n rounds cannot go below 2^-n: among 8 tests at 9 rounds only the
    all-slower pattern passed. Max-T compares with the family's own flips, so one round
    barely below 0 no longer hides a slowdown.

    Args:
        series: one list of log-ratios a test, all of the same length n <= 40.

    Raises:
        ValueError: series of different lengths or more than :data:`SIGN_FLIP_MAX_ROUNDS`
            rounds.
    """
    if not series:
        return []
    n = len(series[0])
    if any(len(s) != n for s in series):
        raise ValueError("max-T needs series of one length (the same rounds)")
    if n > SIGN_FLIP_MAX_ROUNDS:
        raise ValueError(f"{n} rounds: the sign-flip test takes at most "
                         f"{SIGN_FLIP_MAX_ROUNDS}")  # fmt: skip
    if n == 0:
        return [1.0] * len(series)
    if len(series) == 1:  # the same p-value, without the patterns' matrix
        return [sign_flip_pvalue(series[0])]
    rounds = np.asarray(series, dtype=float).T  # n x tests
    scale = np.sqrt((rounds * rounds).sum(axis=0))
    scale[scale == 0.0] = 1.0  # an all-zero series (counted instructions): T = 0 always
    stats_ = (flip_patterns(n) @ rounds) / scale  # patterns x tests, the observed row first
    observed = stats_[0]
    order = np.argsort(-observed, kind="stable")
    # The largest T among the tests ranked k and below, for every pattern and k.
    tail_max = np.maximum.accumulate(stats_[:, order[::-1]], axis=1)[:, ::-1]
    tolerance = 1e-9 * max(float(np.abs(observed).max()), 1.0)
    adjusted, running = [1.0] * len(series), 0.0
    for rank, test in enumerate(order):
        share = float(np.mean(tail_max[:, rank] >= observed[test] - tolerance))
        running = max(running, share)
        adjusted[int(test)] = running
    return adjusted


def min_rounds_to_flag(confidence: float, first_look: int) -> int:
    """The shortest horizon at which a regression can be flagged: the fewest rounds, at least
    ``first_look``, whose smallest p-value (2^-n, every round slower) is at most alpha, for any
    number of cases (:func:`maxt_adjusted_pvalues`). ``confidence`` < 1."""
    level, rounds = false_alarm_level(confidence), max(first_look, 1)
    while smallest_sign_flip_pvalue(rounds) > level:
        rounds += 1
    return rounds


def fewest_rounds_to_flag(confidence: float, first_look: int, horizon: int) -> int | None:
    """Rounds after which a case can first be flagged: the horizon, where the regression test
    is taken, when it is at least :func:`min_rounds_to_flag`; None if ``horizon`` rounds are
    not enough."""
    return horizon if horizon >= min_rounds_to_flag(confidence, first_look) else None


def family_false_alarm_rate(confidence: float, first_look: int, horizon: int) -> float:
    """The exact chance that a gate run of unchanged cases, every one run to ``horizon``,
    calls any of them slower (stopping a case early as ok can only lower it): max-T rejects
    anything exactly when the observed pattern ranks among the top floor(alpha x 2^n) of the
    2^n equally likely ones, whatever the number of cases (ties only lower it). At most
    alpha."""
    if fewest_rounds_to_flag(confidence, first_look, horizon) is None:
        return 0.0
    return math.floor(false_alarm_level(confidence) * 2**horizon) / 2**horizon


# -- decisions ---------------------------------------------------------------------------
@dataclass
class Verdict:
    """Head/base time ratio of one case: point estimate, interval, p-value and decision."""

    decision: str
    rounds: int
    ratio: float | None
    low: float | None
    high: float | None
    reason: str
    p_value: float | None = None  # max-T adjusted sign-flip p of "the head is not slower"
    limit: float | None = None  # 1 + threshold, the ratio the decision was made against

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def decide_family(
    log_ratios: dict[str, list[float]],
    threshold: float,
    confidence: float,
    first_look: int | None = None,
    horizon: int | None = None,
    close_at_horizon: bool = False,
) -> dict[str, Verdict]:
    """Decisions on every case of one gate run, the false-alarm rate held for the family.

    Args:
        log_ratios: case -> ``log(head_s / base_s)`` per round, in measurement order; finite.
            The r-th round of every case is measured in the same round (its base and head
            processes), as the gate does, so that flipping a round flips it in every case.
        threshold: fractional slowdown that counts as a regression (0.10: head 10% slower).
        confidence: coverage of the interval on the median ratio (0.95); the family-wise
            false-alarm level is ``(1 - confidence) / 2``.
        first_look: first round count at which a case may stop as ok (default: the fewest
            rounds with an interval, 6 at 95%).
        horizon: most rounds the gate may take, where the regression test is taken (default:
            the most rounds given); a case with fewer rounds cannot be a regression yet.
        close_at_horizon: a case with ``horizon`` rounds that is not a regression is ``ok``
            (its median within the limit, or not shown slower), not ``undecided``.
    """
    for samples in log_ratios.values():
        if not all(math.isfinite(d) for d in samples):
            raise ValueError("log-ratios must be finite")
    need = min_rounds(confidence)
    first = need if first_look is None else max(first_look, need)
    longest = max((len(s) for s in log_ratios.values()), default=0)
    last = max(first, longest) if horizon is None else max(horizon, longest)
    alpha = false_alarm_level(confidence)
    names = list(log_ratios)
    # Only the rounds at the horizon are tested: one look, so no correction for looking often.
    at_horizon = [c for c in names if len(log_ratios[c]) >= last]
    adjusted = dict.fromkeys(names, 1.0)
    adjusted.update(zip(at_horizon, maxt_adjusted_pvalues([log_ratios[c] for c in at_horizon]),
                        strict=True))  # fmt: skip
    family = f", max-T over {len(at_horizon)} tests" if len(at_horizon) > 1 else ""
    verdicts = {}
    for case, samples in log_ratios.items():
        n, p = len(samples), adjusted[case]
        interval = median_ci(samples, confidence)
        if interval is None:
            reason = f"{n} rounds is too few for a {confidence:.0%} interval (need {need})"
            ratio = math.exp(median(samples)) if n else None
            verdicts[case] = Verdict(UNDECIDED, n, ratio, None, None, reason, p)
            continue
        ratio = math.exp(median(samples))  # an interval means there are rounds
        low, high = (math.exp(v) for v in interval)
        limit = 1.0 + threshold
        slower = f"p={p:.2g} (sign flips of {n} rounds{family})"
        if ratio > limit and p <= alpha:
            decision, reason = REGRESSION, f"median above {limit:.2f}, slower: {slower}"
        elif high < limit:
            decision, reason = OK, f"whole interval below {limit:.2f}"
        elif close_at_horizon and n >= last and ratio <= limit:
            decision, reason = OK, f"not shown slower in {n} rounds, median below {limit:.2f}"
        elif close_at_horizon and n >= last:
            decision, reason = OK, f"not shown slower in {n} rounds: {slower}"
        elif ratio > limit and n < last:
            decision, reason = UNDECIDED, f"median above the limit, tested at round {last}"
        elif ratio > limit:
            decision, reason = UNDECIDED, f"median above the limit, not shown slower: {slower}"
        else:
            decision, reason = UNDECIDED, f"interval reaches {limit:.2f}"
        verdicts[case] = Verdict(decision, n, ratio, low, high, reason, p, limit)
    return verdicts


def decide(
    log_ratios: list[float],
    threshold: float,
    confidence: float,
    first_look: int | None = None,
    horizon: int | None = None,
) -> Verdict:
    """:func:`decide_family` of one case."""
    return decide_family({"": log_ratios}, threshold, confidence, first_look, horizon)[""]
