"""Which trainer phase moved: per-section head/base ratios from the gate's paired samples.

A sample of a case that trains carries ``sections_s``, the seconds each section of the trainer's
process-wide profiler spent in the timed calls (``rollout``, ``rollout/env_step``,
``update/backward``, ...: wall time, as the profiler measures it). A 5% slowdown of the whole
may be a 30% slowdown of one phase; naming that phase is what a reader of a red gate needs.

A section's ratio is computed exactly as the gate's own statistic: per round, the median over
its pairs of ``log(head_section_s / base_section_s)``; over rounds, the median of those. Pairs
ran back to back, so a burst of load between them cancels, and the medians drop the pairs and
rounds a burst hit. Only sections holding at least ``min_share`` of the sample's time are
candidates: a section of 0.1 ms may double from noise alone and explains nothing.

Parents and children are both candidates. When one child moved, it shows the largest ratio (its
parent's is diluted by the siblings that did not move), so the most specific phase is named;
when every child moved alike, whichever is largest within noise is named. The direction follows
the case's: where the head took longer overall the slowest section is named, where it was faster
the one that sped up most (naming the "most slowed" phase of a faster head named a phase that
had not moved, 1.00x, beside an update 25% faster).

The named phase's own direction comes from its interval, the gate's interval on the median of
its rounds: ``slower`` or ``faster`` only where the whole interval is above or below 1, else
``unchanged within noise``. A slower head whose largest section ratio is 0.99x has no phase
that slowed, and "0.99x faster" would say the opposite of the verdict beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rlperf.bench.stats import median, median_ci

MIN_SHARE = 0.05  # fraction of the sample's wall time a section must hold to be named
CONFIDENCE = 0.95  # of a phase's interval: the gate's default


@dataclass
class PhaseShift:
    """The section whose time moved most, head against base."""

    name: str  # full section name, e.g. "update/backward"
    ratio: float  # head/base time of the section (> 1: slower on the head)
    share: float  # the section's fraction of the base sample's wall time
    rounds: int  # rounds the ratio is the median of
    low: float | None = None  # the ratio's interval (None: too few rounds for one)
    high: float | None = None

    def direction(self) -> str:
        """``slower`` / ``faster`` where the whole interval is above / below 1, else
        ``unchanged within noise`` (or too few rounds to tell)."""
        if self.low is None or self.high is None:
            return f"in {self.rounds} rounds, too few to tell"
        if self.low > 1.0:
            return "slower"
        if self.high < 1.0:
            return "faster"
        return "unchanged within noise"

    def describe(self) -> str:
        """``update/backward 1.31x slower (34% of the time)``,
        ``update/backward 0.99x unchanged within noise (34% of the time)``."""
        return f"{self.name} {self.ratio:.2f}x {self.direction()} ({self.share:.0%} of the time)"


def section_ratios(rounds: list[dict[str, list[dict[str, Any]]]]) -> dict[str, list[float]]:
    """Section -> per-round median over pairs of ``log(head_s / base_s)``, for sections timed
    on both sides of at least one pair of the round."""
    per_round: dict[str, list[float]] = {}
    for samples in rounds:
        pair_logs: dict[str, list[float]] = {}
        for base, head in zip(samples["base"], samples["head"], strict=True):
            base_s, head_s = base.get("sections_s", {}), head.get("sections_s", {})
            for name, b in base_s.items():
                h = head_s.get(name, 0.0)
                if b > 0 and h > 0:
                    pair_logs.setdefault(name, []).append(math.log(h / b))
        for name, logs in pair_logs.items():
            per_round.setdefault(name, []).append(median(logs))
    return per_round


def section_shares(rounds: list[dict[str, list[dict[str, Any]]]]) -> dict[str, float]:
    """Section -> median over base samples of its fraction of the sample's wall time."""
    shares: dict[str, list[float]] = {}
    for samples in rounds:
        for base in samples["base"]:
            for name, seconds in base.get("sections_s", {}).items():
                shares.setdefault(name, []).append(seconds / base["wall_s"])
    return {name: median(values) for name, values in shares.items()}


def whole_log_ratio(rounds: list[dict[str, list[dict[str, Any]]]]) -> float:
    """The samples' ``log(head wall_s / base wall_s)``, median over pairs then rounds (0.0
    without any)."""
    per_round = []
    for samples in rounds:
        logs = [
            math.log(head["wall_s"] / base["wall_s"])
            for base, head in zip(samples["base"], samples["head"], strict=True)
            if base.get("wall_s", 0) > 0 and head.get("wall_s", 0) > 0
        ]
        if logs:
            per_round.append(median(logs))
    return median(per_round) if per_round else 0.0


def moved_phase(
    rounds: list[dict[str, list[dict[str, Any]]]],
    min_share: float = MIN_SHARE,
    confidence: float = CONFIDENCE,
) -> PhaseShift | None:
    """Among the sections holding at least ``min_share`` of the time, the one with the
    largest head/base ratio where the head was slower as a whole (or as fast), the smallest
    where it was faster, with its ``confidence`` interval; None when the samples carry no
    such section."""
    shares = section_shares(rounds)
    faster = whole_log_ratio(rounds) < 0.0
    best: PhaseShift | None = None
    for name, logs in section_ratios(rounds).items():
        share = shares.get(name, 0.0)
        if share < min_share:
            continue
        interval = median_ci(logs, confidence)
        low, high = (None, None) if interval is None else (math.exp(v) for v in interval)
        shift = PhaseShift(name, math.exp(median(logs)), share, len(logs), low, high)
        if best is None or (shift.ratio < best.ratio if faster else shift.ratio > best.ratio):
            best = shift
    return best
