"""When a pytest-benchmark case's spread makes a comparison meaningless.

A stored pytest-benchmark run compared with a new one (``--benchmark-compare``) puts two medians
side by side with no interval. On a shared machine a case's rounds can spread over several
times their median (another process held the core, or spun against torch's threads, in some
rounds), and then a difference between two medians says nothing about the code. The suite's
``benchmarks/conftest.py`` checks every case after a run with :func:`case_warnings` and prints
the cases whose spread is too wide, in the run's summary and again beside the comparison
table, with why: the interquartile range against the median (the middle half of the rounds is
wider than the changes one would compare), in a case of few rounds the slowest round against
the fastest (some rounds were several times slower: interference, not the code), and a stored
run timed with another clock (CPU time against wall time).

Pure functions of pytest-benchmark's statistics (a case's ``stats`` as its JSON holds them:
``median``, ``iqr``, ``min``, ``max``, ``rounds``), so the bounds are tested without timing
anything (``tests/bench/test_spread.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# A 10% change is what one looks for in a compare (docs/benchmarks.md's example fails at
# median:10%); a case whose middle half of rounds spans more than that cannot show it.
IQR_OVER_MEDIAN = 0.10
# A round several times slower than the fastest is the machine, not the code: in a case of few
# rounds (seconds a call) it moves the median. With many, a stray slow round (a page fault, a
# garbage collection) moves neither the median nor the IQR, so only the IQR is read there.
MAX_OVER_MIN = 3.0
FEW_ROUNDS = 20
# Fewer rounds than this give no spread worth the name (pytest-benchmark's own minimum is 5).
MIN_ROUNDS = 3


@dataclass(frozen=True)
class Bounds:
    """How wide a case's spread may be before a comparison of it is flagged."""

    iqr_over_median: float = IQR_OVER_MEDIAN
    max_over_min: float = MAX_OVER_MIN  # read below few_rounds rounds
    few_rounds: int = FEW_ROUNDS
    min_rounds: int = MIN_ROUNDS


@dataclass(frozen=True)
class Spread:
    """One run of one case: its rounds' median, interquartile range, fastest and slowest."""

    rounds: int
    median: float
    iqr: float
    fastest: float
    slowest: float

    @staticmethod
    def of(stats: Mapping[str, float]) -> Spread:
        """From pytest-benchmark's statistics of a case (its JSON's ``stats``, or the
        ``Stats`` object's fields)."""
        return Spread(
            int(stats["rounds"]), float(stats["median"]), float(stats["iqr"]),
            float(stats["min"]), float(stats["max"]),
        )  # fmt: skip

    def reasons(self, bounds: Bounds = Bounds()) -> list[str]:
        """Why this run's spread is too wide to compare (empty: it is not)."""
        out = []
        if self.rounds < bounds.min_rounds:
            out.append(f"{self.rounds} rounds")
        if self.median > 0 and self.iqr / self.median > bounds.iqr_over_median:
            out.append(f"IQR {self.iqr / self.median:.0%} of the median")
        few = self.rounds < bounds.few_rounds
        if few and self.fastest > 0 and self.slowest / self.fastest > bounds.max_over_min:
            out.append(f"slowest round {self.slowest / self.fastest:.1f}x the fastest")
        return out


def case_warnings(
    now: Mapping[str, float],
    stored: Mapping[str, float] | None = None,
    timers: tuple[str, str] | None = None,
    bounds: Bounds = Bounds(),
) -> list[str]:
    """Why a comparison of one case is not meaningful: ``now``, this run's statistics, and
    ``stored``, the run it is compared with (if any), each too wide (:meth:`Spread.reasons`);
    ``timers``, (this run's, the stored run's) clock, when they differ. Empty: nothing to say.
    """
    out = [f"this run: {r}" for r in Spread.of(now).reasons(bounds)]
    if stored is not None:
        out += [f"stored run: {r}" for r in Spread.of(stored).reasons(bounds)]
    if timers is not None and timers[0] != timers[1]:
        out.append(f"timed with {timers[0]}, the stored run with {timers[1]}")
    return out


def warning_lines(
    flagged: Mapping[str, list[str]], compared: bool, bounds: Bounds = Bounds()
) -> list[str]:
    """The summary printed after a run: one line per flagged case (its :func:`case_warnings`),
    then what to do; nothing when no case was flagged."""
    if not flagged:
        return []
    what = "compare" if compared else "compare of these cases against another run"
    lines = [
        f"{len(flagged)} case(s) spread too widely for a meaningful {what} "
        f"(bounds: IQR <= {bounds.iqr_over_median:.0%} of the median; under "
        f"{bounds.few_rounds} rounds, the slowest <= {bounds.max_over_min:g}x the fastest; "
        f">= {bounds.min_rounds} rounds):"
    ]
    lines += [f"  {name}: {'; '.join(reasons)}" for name, reasons in flagged.items()]
    lines.append(
        "  rerun them alone (-k NAME) on a quieter machine, or decide with `rlperf gate`, "
        "which times both commits interleaved (docs/benchmarks.md)"
    )
    return lines
