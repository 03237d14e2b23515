"""The gate's statistics: an interval on the median head/base log-ratio, and a sequential sign
test whose false-alarm rate holds for a whole family of cases (Holm).

Each round of the gate yields one paired sample ``d = log(head_s / base_s)`` per case, measured
in fresh processes, interleaved in time, so slow drifts of the machine's load cancel within the
pair. Rounds are independent. Everything here rests on the signs and ranks of the ``d``, never
on their sizes, so nothing is assumed about the noise's shape: one round hit by a neighbour's
burst moves a result by one rank, not by the size of the burst.

Two questions per case, with ``limit = 1 + threshold``:

- *Is the head slower at all?* The sign test of "the median ``d`` is <= 0": under it each round
  is positive with probability at most 1/2, whatever the noise, so the count of positive rounds
  is (at most) a Binomial(n, 1/2) random walk. The gate looks after every round from
  ``first_look`` to ``horizon`` (its min and max rounds) and stops when decided, so a fixed-n
  p-value would be read up to 15 times; :func:`sequential_sign_pvalue` is instead the exact
  probability, under that walk, that *any* look in ``[first_look, horizon]`` shows a pointwise
  p-value as small as the smallest one seen (computed by dynamic programming over the walk).
  It is valid however many looks are taken and whenever the gate stops.
- *Is any slowdown smaller than the threshold?* The distribution-free confidence interval on the
  median (order statistics of a Binomial(n, 1/2), :func:`median_ci`).

With several cases, the per-case sequential p-values are adjusted by Holm's step-down procedure
(:func:`holm_adjust`), so the probability that a gate run calls *any* unchanged case a
regression is at most ``alpha = (1 - confidence) / 2`` (2.5% at the default 95%), for the whole
run: every case, every look. With one case and one look this is exactly the one-sided test the
interval's lower end makes (the interval's lower end is above 1 exactly when the pointwise
p-value is <= alpha).

The decision has three outcomes per case:
- ``regression``: the Holm-adjusted sequential p-value is <= alpha (the head is slower, and the
  family-wise chance that this is noise is controlled) *and* the median ratio is above the limit
  (the slowdown is large enough to matter);
- ``ok``: the whole interval lies below the limit (any slowdown is smaller than the threshold);
- ``undecided``: neither, or too few rounds for any interval (6 at 95%).

With ``close_at_horizon`` (as the gate decides), a case still undecided after the last round
it may take is ``ok`` when its median ratio is at or below the limit: it was not shown slower,
and its best estimate is within the threshold. A user reads an undecided gate as a red CI to
re-run; an unchanged case whose interval merely still reaches the limit (round noise above
about 0.03 takes more than the budget's rounds to narrow it below a 2% limit) is not a
regression. The false-alarm rate is untouched (a regression still needs the p-value); what it
costs is the power against a slowdown near the threshold: a case whose median after every
round is below the limit passes. For a 5% slowdown at a 2% limit the median of 25 rounds with
round noise sd 0.036 sits 3 of its standard errors (1.25 sd / sqrt(25) = 0.009) above the
limit. A case whose median is above the limit is ``ok`` at the horizon too when its interval
still holds 1 (no evidence that it changed at all: an unchanged noisy case's median lands
above a 2% limit in a few percent of runs, 1 of 2 A/A runs of the grid case on 2026-11-25);
one shown slower than 1 but not beyond the threshold stays ``undecided``.

Asking the whole interval to clear the limit for a regression (not just 1) would need the
interval's half-width below ``true ratio - limit``: 5% for a 15% slowdown at a 10% threshold,
which a loaded 2-core machine did not reach in 20 rounds (docs/benchmarks.md).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from fractions import Fraction
from functools import cache, lru_cache
from typing import Any

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


# -- the sequential sign test ------------------------------------------------------------
@cache
def _upper_tails(n: int) -> tuple[int, ...]:
    """``t[c]`` = #{paths of n fair coin flips with >= c heads}, c = 0 .. n + 1."""
    tails = [0] * (n + 2)
    for c in range(n, -1, -1):
        tails[c] = tails[c + 1] + math.comb(n, c)
    return tuple(tails)


def pointwise_sign_pvalue(positives: int, n: int) -> Fraction:
    """P(Binomial(n, 1/2) >= positives), exactly: the fixed-n one-sided sign test."""
    return Fraction(_upper_tails(n)[positives], 2**n)


@lru_cache(maxsize=4096)
def crossing_probability(q: Fraction, first_look: int, horizon: int) -> float:
    """P, for a fair coin-flip walk, that some look n in [first_look, horizon] has a pointwise
    sign-test p-value <= q (i.e. #heads after n flips >= the smallest c with tail <= q).

    Dynamic programming over (#flips, #heads) with the paths that crossed removed, O(horizon^2).
    """
    crossed = 0.0
    alive = [1.0]  # alive[s]: P(s heads so far and no crossing yet)
    for n in range(1, horizon + 1):
        nxt = [0.0] * (n + 1)
        for s, p in enumerate(alive):
            nxt[s] += 0.5 * p
            nxt[s + 1] += 0.5 * p
        alive = nxt
        if n >= first_look:
            tails = _upper_tails(n)
            bound = next(c for c in range(n + 2) if Fraction(tails[c], 2**n) <= q)
            crossed += sum(alive[bound:])
            alive[bound:] = [0.0] * (n + 1 - bound)
    return min(1.0, crossed)


def sequential_sign_pvalue(log_ratios: list[float], first_look: int, horizon: int) -> float:
    """p-value of "the head is not slower" (median log-ratio <= 0) from rounds seen one at a time.

    The statistic is the smallest pointwise sign-test p-value over the looks taken so far
    (rounds ``first_look`` .. ``len(log_ratios)``); its p-value is the probability that a null
    walk reaches one as small at *any* look up to ``horizon``. That covers every look the gate
    may take, so stopping early (or not) cannot inflate the false-alarm rate. A round exactly
    equal to 0 counts as not slower. 1.0 before the first look.

    Args:
        log_ratios: ``log(head_s / base_s)``, one per round, in the order they were measured.
        first_look: the first round count at which the gate may decide.
        horizon: the most rounds the gate may take (>= ``len(log_ratios)`` for validity).
    """
    if horizon < len(log_ratios):
        raise ValueError(f"horizon {horizon} is below the {len(log_ratios)} rounds given")
    smallest, positives = Fraction(1), 0
    for n, d in enumerate(log_ratios, start=1):
        positives += d > 0
        if n >= first_look:
            smallest = min(smallest, pointwise_sign_pvalue(positives, n))
    if smallest == 1:
        return 1.0
    return crossing_probability(smallest, first_look, horizon)


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


def fewest_rounds_to_flag(
    num_cases: int, confidence: float, first_look: int, horizon: int
) -> int | None:
    """Fewest rounds after which a case that was slower in every round is flagged, when it is
    the only regression among ``num_cases`` (Holm compares it with alpha / num_cases); None if
    ``horizon`` rounds are not enough."""
    level = false_alarm_level(confidence) / num_cases
    for n in range(max(first_look, 1), horizon + 1):
        if crossing_probability(pointwise_sign_pvalue(n, n), first_look, horizon) <= level:
            return n
    return None


def family_false_alarm_rate(
    num_cases: int, confidence: float, first_look: int, horizon: int
) -> float:
    """The exact chance that a gate run of ``num_cases`` unchanged, independent cases calls any
    of them slower, when every case runs to ``horizon`` (stopping a case early, as the gate does
    once it is ok, can only lower it). Under "all unchanged" Holm rejects anything exactly when
    the smallest p-value is <= alpha / num_cases, so the rate is ``1 - (1 - g)^num_cases`` with
    ``g`` the largest attainable ``P(p <= alpha / num_cases)`` of one case. Always <= alpha.
    """
    level = false_alarm_level(confidence) / num_cases
    attainable = {
        pointwise_sign_pvalue(s, n) for n in range(first_look, horizon + 1) for s in range(n + 1)
    }
    reach = [crossing_probability(q, first_look, horizon) for q in attainable]
    per_case = max((g for g in reach if g <= level), default=0.0)
    return 1.0 - (1.0 - per_case) ** num_cases


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
    p_value: float | None = None  # Holm-adjusted sequential p of "the head is not slower"
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
        threshold: fractional slowdown that counts as a regression (0.10: head 10% slower).
        confidence: coverage of the interval on the median ratio (0.95); the family-wise
            false-alarm level is ``(1 - confidence) / 2``.
        first_look: first round count at which the gate may stop (default: the fewest rounds
            with an interval, 6 at 95%).
        horizon: most rounds the gate may take (default: the most rounds given).
        close_at_horizon: a case with ``horizon`` rounds, not a regression, and its median
            ratio at or below the limit or its interval holding 1, is ``ok`` (not shown
            slower), not ``undecided``.
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
    raw = [sequential_sign_pvalue(log_ratios[c], first, last) for c in names]
    adjusted = dict(zip(names, holm_adjust(raw), strict=True))
    family = f"Holm over {len(names)} cases, " if len(names) > 1 else ""
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
        slower = f"p={p:.2g} ({family}looks {first}..{last})"
        if ratio > limit and p <= alpha:
            decision, reason = REGRESSION, f"median above {limit:.2f}, slower: {slower}"
        elif high < limit:
            decision, reason = OK, f"whole interval below {limit:.2f}"
        elif close_at_horizon and n >= last and ratio <= limit:
            decision, reason = OK, f"not shown slower in {n} rounds, median below {limit:.2f}"
        elif close_at_horizon and n >= last and low <= 1.0:
            decision, reason = OK, f"not shown slower in {n} rounds, interval holds 1.00"
        elif ratio > limit:
            decision, reason = UNDECIDED, f"median above the limit, not yet shown slower: {slower}"
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
