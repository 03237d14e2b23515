"""The learning gate's statistics: Gehan's test on censored samples, looked at a few times.

A learning run yields the env steps (or CPU seconds) it took to reach a return threshold, or,
if it had not reached it by the step cap, only a lower bound: it is *censored* at what it had
spent. Dropping such runs would hide the worst ones; giving them the cap as a value would
pretend to know when they would have learned. Gehan's generalised Wilcoxon test (Gehan 1965,
"A generalized Wilcoxon test for comparing arbitrarily singly-censored samples") uses only
what is known: for each pair of runs, whether one *certainly* took longer than the other.

- Run ``a`` certainly took longer than run ``b`` when ``b`` reached the threshold (an exact
  value) and ``a``'s value is larger, or ``a`` is censored at a value at least ``b``'s (it
  needed more than that). Two censored runs, or equal exact values, are a tie (0).
- ``W`` = sum over (head run, base run) pairs of +1 (head certainly longer), -1 (base certainly
  longer) or 0. ``W > 0``: the head needs more steps to learn.
- Without censoring this is the Mann-Whitney statistic (``W = 2U - n_head n_base``, ties
  counted half); with every censored run at one common cap (the steps metric) it is the
  Mann-Whitney statistic with the censored runs tied above every reached one.

The p-value is the exact permutation distribution of ``W``: under "head and base learn
alike" the labels are exchangeable, so every split of the pooled runs into ``n_head`` and
``n_base`` is equally likely. ``W`` is a sum of per-run scores (Mantel 1967: ``W = sum over
head runs of u_i``, ``u_i`` = run i's +1/-1/0 against every pooled run), so the count of splits
with each value of ``W`` is a subset-sum count, computed exactly by dynamic programming
(:func:`permutation_tails`); ``tests/bench/test_censored.py`` checks it against enumerating
every split.

**Looking more than once.** The gate adds one run per side per round and looks at a few fixed
round counts (``looks``). A p-value read at several looks would be read several times; each
look ``k`` is instead given a share ``w_k`` of the false-alarm rate (an alpha-spending rule:
``w_k`` grows with the rounds the look adds, linear spending), and the workload's p-value is
``min_k p_k / w_k`` over the looks taken. By the union bound ``P(min_k p_k / w_k <= a) <=
sum_k a w_k = a`` for every ``a``, whatever the dependence between looks: a valid p-value,
however early the gate stops. Several workloads are decided together by Holm's step-down
procedure on these p-values (:func:`rlperf.bench.stats.holm_adjust`), so the chance that a
gate run flags any unchanged workload is at most ``alpha``.

**Stopping early for "ok"** (futility, non-binding): at a look before the last, a workload
whose head is no worse than its base at all (``W <= 0``) is called ok and stops. Stopping for
ok can only remove regressions the gate would call, so the false-alarm rate is untouched; what
it costs is power against a small regression that happens to look no worse at an early look
(simulated in the tests and in docs/gate.md).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from rlperf.bench.stats import OK, REGRESSION, UNDECIDED, false_alarm_level, holm_adjust


@dataclass(frozen=True)
class Obs:
    """One run: ``value`` (steps or CPU seconds) where it reached the threshold, or, when
    ``reached`` is False, what it had spent when it stopped (the true value is larger)."""

    value: float
    reached: bool = True


def longer(a: Obs, b: Obs) -> bool:
    """Whether run ``a`` certainly took longer to reach the threshold than run ``b``."""
    if not b.reached:
        return False  # b's own value is unknown: nothing is certainly below it
    return a.value > b.value or (not a.reached and a.value >= b.value)


def pair_score(a: Obs, b: Obs) -> int:
    """+1 if ``a`` certainly took longer than ``b``, -1 if certainly shorter, else 0."""
    return int(longer(a, b)) - int(longer(b, a))


def gehan_scores(runs: list[Obs]) -> list[int]:
    """Mantel's score of each pooled run: its pair scores against every run, summed
    (:func:`pair_score` over all pairs at once: ``longer[i, j]`` is :func:`longer`)."""
    value = np.array([r.value for r in runs], dtype=float)
    reached = np.array([r.reached for r in runs], dtype=bool)
    above = value[:, None] > value[None, :]
    at_least = value[:, None] >= value[None, :]
    longer_ij = reached[None, :] & (above | (~reached[:, None] & at_least))
    return (longer_ij.sum(1) - longer_ij.sum(0)).astype(int).tolist()


def gehan_w(head: list[Obs], base: list[Obs]) -> int:
    """Gehan's W: over every (head, base) pair, +1 head certainly longer, -1 shorter."""
    return sum(pair_score(h, b) for h in head for b in base)


def permutation_tails(scores: list[int], n_head: int, w: int) -> tuple[float, float]:
    """(P(W' >= w), P(W' <= w)) for W' the sum of ``n_head`` of ``scores`` drawn without
    replacement, every subset equally likely: exact, by counting subsets per sum.

    ``counts[k, s]`` is the number of subsets of the scores seen so far with ``k`` members
    summing to ``s - offset``; each score either joins a subset or not. Counts are float64,
    exact up to 2^53 (every split of up to 56 runs).
    """
    n = len(scores)
    if not 0 <= n_head <= n:
        raise ValueError(f"n_head {n_head} must be in [0, {n}]")
    offset = sum(abs(s) for s in scores)
    counts = np.zeros((n_head + 1, 2 * offset + 1))
    counts[0, offset] = 1.0
    width = counts.shape[1]
    for s in scores:
        before = counts[:-1].copy()  # each score joins a subset at most once
        # Subsets of k - 1 members summing to x, the score added, sum to x + s: no sum
        # reaches past +-offset, so nothing is cut off at either end.
        if s >= 0:
            counts[1:, s:] += before[:, : width - s]
        else:
            counts[1:, : width + s] += before[:, -s:]
    row = counts[n_head]
    total = row.sum()
    index = w + offset
    upper = row[max(index, 0) :].sum() if index <= 2 * offset else 0.0
    lower = row[: min(index, 2 * offset) + 1].sum() if index >= 0 else 0.0
    return float(upper / total), float(lower / total)


@dataclass
class GehanTest:
    """Gehan's test of one look: ``w`` and its exact one-sided permutation p-values."""

    w: int
    p_worse: float  # P(W' >= w): small when the head takes longer
    p_better: float  # P(W' <= w): small when the head is quicker


def gehan_test(head: list[Obs], base: list[Obs]) -> GehanTest:
    """Gehan's W of head against base and its exact permutation p-values."""
    if not head or not base:
        raise ValueError("gehan_test needs at least one run on each side")
    pooled = head + base
    scores = gehan_scores(pooled)
    w = sum(scores[: len(head)])  # = gehan_w(head, base): the head-head pairs cancel
    p_worse, p_better = permutation_tails(scores, len(head), w)
    return GehanTest(w, p_worse, p_better)


def km_median(runs: list[Obs]) -> tuple[float, bool]:
    """The Kaplan-Meier median: the smallest reached value at which the estimated fraction
    still learning falls to 1/2 or below; (value, True). When it never does (half or more of
    the runs censored before that), (the largest value, False): the median is beyond it.

    Without censoring this is the lower median, the ``ceil(n/2)``-th smallest value.
    """
    if not runs:
        raise ValueError("km_median needs runs")
    ordered = sorted(runs, key=lambda r: (r.value, not r.reached))  # a censored run after a
    at_risk, surviving = len(ordered), 1.0  # reached one of equal value: it went on longer
    i = 0
    while i < len(ordered):
        value = ordered[i].value
        j, events = i, 0
        while j < len(ordered) and ordered[j].value == value:
            events += ordered[j].reached
            j += 1
        if events:
            surviving *= 1.0 - events / at_risk
            if surviving <= 0.5 + 1e-12:
                return value, True
        at_risk -= j - i
        i = j
    return ordered[-1].value, False


@dataclass
class Ratio:
    """Head/base ratio of Kaplan-Meier medians; ``bound``: ``">="`` when only the head's
    median is beyond its runs (the ratio is at least this), ``"<="`` when only the base's,
    ``"?"`` when both are, ``""`` when exact."""

    value: float
    bound: str = ""

    def __str__(self) -> str:
        return (
            f"{self.bound}{self.value:.2f}x" if self.bound != "?" else "?x (both mostly censored)"
        )


def median_ratio(head: list[Obs], base: list[Obs]) -> Ratio:
    """The head's median over the base's (>1: the head needs more)."""
    (h, h_exact), (b, b_exact) = km_median(head), km_median(base)
    bound = "" if h_exact and b_exact else ">=" if b_exact else "<=" if h_exact else "?"
    return Ratio(h / b if b > 0 else math.inf, bound)


# -- the sequential decision ---------------------------------------------------------------
def look_rounds(first: int, last: int, count: int) -> list[int]:
    """``count`` round counts from ``first`` to ``last``, evenly spaced, rounded."""
    if count < 1 or first < 1 or last < first:
        raise ValueError(f"looks need 1 <= first <= last and count >= 1, got {first, last, count}")
    if count == 1:
        return [last]
    step = (last - first) / (count - 1)
    return sorted({round(first + k * step) for k in range(count)})


def spending_weights(looks: list[int]) -> list[float]:
    """Each look's share of the false-alarm rate: linear spending, the rounds it adds over
    the last look's (``w_1 = n_1 / n_K``, ``w_k = (n_k - n_{k-1}) / n_K``; they sum to 1)."""
    previous, weights = 0, []
    for n in looks:
        weights.append((n - previous) / looks[-1])
        previous = n
    return weights


@dataclass
class LookResult:
    """One look at one workload: rounds, Gehan's test and the median ratio then."""

    rounds: int
    w: int
    p_worse: float
    p_better: float
    ratio: float
    bound: str


@dataclass
class LearningVerdict:
    """The decision on one workload: decision, the look it was made at, and why."""

    decision: str
    rounds: int
    ratio: float | None
    bound: str
    reason: str
    p_value: float | None = None  # Holm-adjusted sequential p of "the head learns no slower"
    limit: float | None = None
    looks: list[LookResult] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def decide_learning(
    runs: dict[str, tuple[list[Obs], list[Obs]]],
    looks: list[int],
    threshold: float,
    confidence: float,
    runs_per_round: dict[str, int] | None = None,
) -> dict[str, LearningVerdict]:
    """Decisions on every workload, replaying the looks in order as the gate took them.

    Args:
        runs: workload -> (head runs, base runs), one of each per round, in round order.
        looks: the round counts at which the gate looks (ascending; the last is the horizon).
        threshold: the fraction more steps (or seconds) to the return that is a regression.
        confidence: the family-wise false-alarm rate is ``(1 - confidence) / 2``.
        runs_per_round: workload -> runs per side a round (default 1): a workload with k
            looks at ``k * looks[j]`` runs a side, with the same spending weights.

    At each look, each undecided workload with that many rounds is tested on its first
    ``looks[k]`` rounds; its sequential p-value (``min p_k / w_k``) joins the others' (frozen
    where decided) in Holm's procedure. A workload is a ``regression`` when its adjusted p is
    <= alpha and its median ratio exceeds ``1 + threshold``; ``ok`` when, before the last look,
    its head is no worse (W <= 0), or at the last look when it is not shown worse; at the last
    look, shown worse but by no more than the threshold, ``undecided``. A workload with fewer
    rounds than its next look is ``undecided`` (the gate stopped, or the file is partial).
    """
    alpha = false_alarm_level(confidence)
    limit = 1.0 + threshold
    weights = spending_weights(looks)
    names = list(runs)
    per_round = {name: (runs_per_round or {}).get(name, 1) for name in names}
    p_seq = dict.fromkeys(names, 1.0)
    history: dict[str, list[LookResult]] = {name: [] for name in names}
    verdicts: dict[str, LearningVerdict] = {}
    for k, n in enumerate(looks):
        active = [m for m in names if m not in verdicts and len(runs[m][0]) >= n * per_round[m]]
        for name in active:
            head, base = (side[: n * per_round[name]] for side in runs[name])
            test, ratio = gehan_test(head, base), median_ratio(head, base)
            history[name].append(
                LookResult(n, test.w, test.p_worse, test.p_better, ratio.value, ratio.bound)
            )
            p_seq[name] = min(p_seq[name], min(1.0, test.p_worse / weights[k]))
        adjusted = dict(zip(names, holm_adjust([p_seq[m] for m in names]), strict=True))
        last = k == len(looks) - 1
        for name in active:
            look = history[name][-1]
            p = adjusted[name]
            ratio_text = str(Ratio(look.ratio, look.bound))
            exceeds = look.ratio > limit and look.bound not in ("<=", "?")
            if p <= alpha and exceeds:
                decision, reason = REGRESSION, f"median above {limit:.2f}, worse: p={p:.2g}"
            elif not last and look.w <= 0:
                decision, reason = OK, f"no worse at round {n}: W={look.w}"
            elif last and p <= alpha:
                decision = UNDECIDED
                reason = f"worse (p={p:.2g}) but median {ratio_text} not above {limit:.2f}"
            elif last:
                decision, reason = OK, f"not shown worse: p={p:.2g}"
            else:
                continue
            verdicts[name] = LearningVerdict(decision, n, look.ratio, look.bound, reason, p,
                                             limit, history[name])  # fmt: skip
    for name in names:
        if name not in verdicts:
            done = len(runs[name][0]) // per_round[name]
            nxt = next((n for n in looks if n > done), looks[-1])
            seen = history[name][-1] if history[name] else None
            verdicts[name] = LearningVerdict(
                UNDECIDED, done, seen.ratio if seen else None, seen.bound if seen else "",
                f"{done} rounds, stopped before the look at {nxt}", p_seq[name], limit,
                history[name],
            )  # fmt: skip
    return verdicts
