"""The gate's statistics: a distribution-free interval on the median head/base log-ratio.

Each round of the gate yields one paired sample ``d = log(head_s / base_s)`` measured in fresh
processes, interleaved in time, so slow drifts of the machine's load cancel within the pair.
Rounds are independent; their median's confidence interval comes from the sign test (order
statistics of a Binomial(n, 1/2)), which assumes nothing about the noise's shape: one round
hit by a neighbour's burst moves the interval by one order statistic, not by its size.

The decision has three outcomes, with ``limit = 1 + threshold``:
- ``regression``: the median ratio is above the limit and the whole interval above 1 (the head
  is slower beyond the threshold, and the slowdown is not noise);
- ``ok``: the whole interval lies below the limit (any slowdown is smaller than the threshold);
- ``undecided``: neither, or too few rounds for any interval at the requested confidence
  (6 at 95%).

Asking the whole interval to clear the limit for a regression (not just 1) would need the
interval's half-width below ``true ratio - limit``: 5% for a 15% slowdown at a 10% threshold,
which a loaded 2-core machine did not reach in 20 rounds (docs/benchmarks.md).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
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


@dataclass
class Verdict:
    """Head/base time ratio of one case: point estimate, interval and decision."""

    decision: str
    rounds: int
    ratio: float | None
    low: float | None
    high: float | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def decide(log_ratios: list[float], threshold: float, confidence: float) -> Verdict:
    """Decision on paired log-ratios ``log(head_s / base_s)`` (one per round).

    Args:
        log_ratios: one value per round; finite.
        threshold: fractional slowdown that counts as a regression (0.10: head 10% slower).
        confidence: coverage of the interval on the median ratio (0.95).
    """
    n = len(log_ratios)
    if not all(math.isfinite(d) for d in log_ratios):
        raise ValueError("log-ratios must be finite")
    ratio = math.exp(median(log_ratios)) if n else None
    interval = median_ci(log_ratios, confidence)
    if interval is None:
        need = min_rounds(confidence)
        reason = f"{n} rounds is too few for a {confidence:.0%} interval (need {need})"
        return Verdict(UNDECIDED, n, ratio, None, None, reason)
    low, high = (math.exp(v) for v in interval)
    limit = 1.0 + threshold
    if ratio > limit and low > 1.0:
        decision, reason = REGRESSION, f"median above {limit:.2f}, whole interval above 1"
    elif high < limit:
        decision, reason = OK, f"whole interval below {limit:.2f}"
    elif ratio > limit:
        decision, reason = UNDECIDED, "median above the limit but the interval includes 1"
    else:
        decision, reason = UNDECIDED, f"interval reaches {limit:.2f}"
    return Verdict(decision, n, ratio, low, high, reason)


def min_rounds(confidence: float) -> int:
    """Fewest rounds for which an interval at ``confidence`` exists."""
    return next(m for m in range(1, 200) if sign_test_rank(m, confidence) is not None)
