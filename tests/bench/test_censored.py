"""The learning gate's statistics on synthetic censored samples: Gehan's test against a worked
example and against enumerating every split, the Kaplan-Meier median, and the sequential
decision's false-alarm rate, power and early stopping. No training, all seeded."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from rlperf.bench.censored import (
    Obs,
    decide_learning,
    gehan_scores,
    gehan_test,
    gehan_w,
    km_median,
    look_rounds,
    median_ratio,
    pair_score,
    permutation_tails,
    spending_weights,
)
from rlperf.bench.stats import OK, REGRESSION, UNDECIDED

LOOKS = [6, 9, 12]  # the learning gate's default looks


def brute_force(head: list[Obs], base: list[Obs]) -> tuple[int, float, float]:
    """(W, P(W' >= W), P(W' <= W)) by relabelling the pooled runs every possible way and
    computing W from its definition (pairs), not from scores: the obviously-right reference."""
    pooled = head + base
    w = gehan_w(head, base)
    above = below = total = 0
    for chosen in itertools.combinations(range(len(pooled)), len(head)):
        h = [pooled[i] for i in chosen]
        b = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        w_perm = gehan_w(h, b)
        above += w_perm >= w
        below += w_perm <= w
        total += 1
    return w, above / total, below / total


def test_a_worked_example() -> None:
    """Head 5, 7 and 9+ (censored at 9) against base 3, 6 and 8, by hand:

    - pairs: 5 beats 3 (+1) and loses to 6 and 8 (-2); 7 beats 3 and 6, loses to 8 (+1); 9+
      needed more than 9, so it certainly took longer than 3, 6 and 8 (+3): W = 3;
    - Mantel's scores of the pooled runs (each against all six): 3 -> -5, 5 -> -3, 6 -> -1,
      7 -> +1, 8 -> +3, 9+ -> +5; W is the head's sum, -3 + 1 + 5 = 3;
    - of the 20 ways to pick three of the six scores, 7 sum to 3 or more ({-5,3,5}, {-3,1,5},
      {-1,1,3}: 3; {-3,3,5}, {-1,1,5}: 5; {-1,3,5}: 7; {1,3,5}: 9), and 16 to 3 or less.
    """
    head = [Obs(5), Obs(7), Obs(9, reached=False)]
    base = [Obs(3), Obs(6), Obs(8)]
    assert gehan_w(head, base) == 3
    assert gehan_scores(head + base) == [-3, 1, 5, -5, -1, 3]
    test = gehan_test(head, base)
    assert (test.w, test.p_worse, test.p_better) == (3, 7 / 20, 16 / 20)


def test_pair_scores_follow_what_is_known() -> None:
    assert pair_score(Obs(5), Obs(3)) == 1
    assert pair_score(Obs(5), Obs(5)) == 0  # a tie
    assert pair_score(Obs(5, False), Obs(5)) == 1  # needed more than 5: longer than 5
    assert pair_score(Obs(4, False), Obs(5)) == 0  # censored at 4: could be either side of 5
    assert pair_score(Obs(9, False), Obs(9, False)) == 0  # both censored: unknown
    assert pair_score(Obs(3), Obs(9, False)) == -1


@pytest.mark.parametrize("seed", range(40))
def test_gehan_test_equals_enumerating_every_split(seed: int) -> None:
    """Random small samples with ties and censoring (one common cap, as the steps metric, or
    censoring times of their own, as the CPU-seconds metric)."""
    rng = random.Random(seed)
    n_head, n_base = rng.randint(1, 6), rng.randint(1, 6)
    common_cap = rng.random() < 0.5

    def run() -> Obs:
        value = float(rng.randint(1, 8))
        cap = 6.0 if common_cap else float(rng.randint(2, 9))
        return Obs(cap, False) if value > cap else Obs(value)

    head, base = [run() for _ in range(n_head)], [run() for _ in range(n_base)]
    test = gehan_test(head, base)
    w, p_worse, p_better = brute_force(head, base)
    assert test.w == w
    assert test.p_worse == pytest.approx(p_worse, abs=1e-12)
    assert test.p_better == pytest.approx(p_better, abs=1e-12)


def test_without_censoring_it_is_mann_whitney() -> None:
    """No censoring, no ties: the exact one-sided Mann-Whitney p-value (scipy's, when here)."""
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = random.Random(3)
    for _ in range(20):
        head = [rng.random() + 0.3 for _ in range(rng.randint(3, 9))]
        base = [rng.random() for _ in range(rng.randint(3, 9))]
        ours = gehan_test([Obs(v) for v in head], [Obs(v) for v in base]).p_worse
        theirs = scipy_stats.mannwhitneyu(head, base, alternative="greater", method="exact")
        assert ours == pytest.approx(theirs.pvalue, rel=1e-9)


def test_permutation_tails_at_the_edges() -> None:
    assert permutation_tails([1, -1], 1, 1) == (0.5, 1.0)
    assert permutation_tails([1, -1], 1, 2) == (0.0, 1.0)  # above every attainable sum
    assert permutation_tails([1, -1], 1, -2) == (1.0, 0.0)
    assert permutation_tails([0, 0, 0], 2, 0) == (1.0, 1.0)
    with pytest.raises(ValueError):
        permutation_tails([1], 2, 0)


def test_every_head_run_longer_is_the_smallest_p() -> None:
    head = [Obs(float(v)) for v in range(10, 16)]
    base = [Obs(float(v)) for v in range(6)]
    assert gehan_test(head, base).p_worse == pytest.approx(1 / math.comb(12, 6))


def test_kaplan_meier_median() -> None:
    assert km_median([Obs(4), Obs(1), Obs(3), Obs(2)]) == (2, True)  # the lower median
    assert km_median([Obs(3), Obs(1), Obs(2)]) == (2, True)
    # 1 learned; 2+ stopped; of the two left at 3, one learned: 3/4 x 1/2 = 3/8 <= 1/2.
    assert km_median([Obs(1), Obs(2, False), Obs(3), Obs(4)]) == (3, True)
    assert km_median([Obs(1), Obs(5, False), Obs(5, False)]) == (5, False)  # beyond the runs
    # A run censored at the cap is longer than one that reached exactly at the cap.
    assert km_median([Obs(5, False), Obs(5), Obs(1)]) == (5, True)


def test_median_ratio_marks_bounds() -> None:
    base = [Obs(10), Obs(10), Obs(10)]
    assert median_ratio([Obs(20), Obs(20), Obs(20)], base).value == 2.0
    censored = median_ratio([Obs(30, False)] * 3, base)
    assert (censored.value, censored.bound, str(censored)) == (3.0, ">=", ">=3.00x")
    assert median_ratio(base, [Obs(30, False)] * 3).bound == "<="


def test_looks_and_their_alpha_shares() -> None:
    assert look_rounds(6, 12, 3) == [6, 9, 12]
    assert look_rounds(5, 14, 4) == [5, 8, 11, 14]
    assert look_rounds(6, 12, 1) == [12]
    assert spending_weights([6, 9, 12]) == [0.5, 0.25, 0.25]
    assert sum(spending_weights([5, 8, 11, 14])) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        look_rounds(6, 5, 2)


# -- the decision on simulated censored runs ----------------------------------------------
CAP = 250_000.0


def simulated(rng: random.Random, factor: float, n: int, sd: float) -> list[Obs]:
    """Steps to a return: lognormal around 100k steps (times ``factor``), spread ``sd`` in
    log, counted in 2,048-step iterations as the trainer checks, censored at :data:`CAP`."""
    runs = []
    for _ in range(n):
        steps = 1e5 * factor * math.exp(rng.gauss(0.0, sd))
        runs.append(Obs(CAP, False) if steps > CAP else Obs(2048 * math.ceil(steps / 2048)))
    return runs


def gate_run(rng: random.Random, factors: list[float], sds: list[float]) -> dict:
    runs = {
        f"w{i}": (simulated(rng, f, LOOKS[-1], sd), simulated(rng, 1.0, LOOKS[-1], sd))
        for i, (f, sd) in enumerate(zip(factors, sds, strict=True))
    }
    return decide_learning(runs, LOOKS, threshold=0.10, confidence=0.95)


# The default set's spreads of log steps across seeds (docs/gate.md: 0.08 to 0.2); with the
# cap, the noisiest workload censors ~0.6% of its runs.
SPREADS = [0.2, 0.08, 0.09, 0.08, 0.16]


def test_false_alarm_rate_of_one_distribution_is_held() -> None:
    """Head and base drawn alike for every workload: the gate flags any of the five in at most
    alpha = 2.5% of runs (the union bound over looks and Holm make it conservative: ~1% here).
    600 seeded gate runs; 2.5% of 600 would be 15."""
    rng = random.Random(2026)
    outcomes = [gate_run(rng, [1.0] * 5, SPREADS) for _ in range(600)]
    alarms = sum(any(v.decision == REGRESSION for v in o.values()) for o in outcomes)
    undecided = sum(any(v.decision == UNDECIDED for v in o.values()) for o in outcomes)
    assert alarms <= 15, alarms
    assert undecided <= 6, undecided  # shown worse by less than the threshold: rare


def test_a_25_percent_regression_is_caught() -> None:
    """Every workload 25% slower to learn (a planted bug hits them all): caught in >= 95% of
    runs; one workload alone at its own spread, in most."""
    rng = random.Random(7)
    caught = sum(
        any(v.decision == REGRESSION for v in gate_run(rng, [1.25] * 5, SPREADS).values())
        for _ in range(100)
    )
    assert caught >= 95, caught
    alone = sum(
        gate_run(rng, [1.0, 1.25, 1.0, 1.0, 1.0], SPREADS)["w1"].decision == REGRESSION
        for _ in range(100)
    )
    assert alone >= 90, alone


def test_a_large_regression_stops_at_the_first_look() -> None:
    rng = random.Random(1)
    verdicts = gate_run(rng, [2.0] * 5, SPREADS)
    assert all(v.decision == REGRESSION and v.rounds == LOOKS[0] for v in verdicts.values())
    assert all(v.looks is not None and len(v.looks) == 1 for v in verdicts.values())


def test_a_head_no_worse_stops_ok_at_the_first_look() -> None:
    base = [Obs(float(v)) for v in range(100, 112)]
    head = [Obs(float(v)) for v in range(90, 102)]  # quicker
    verdict = decide_learning({"w": (head, base)}, LOOKS, 0.10, 0.95)["w"]
    assert (verdict.decision, verdict.rounds) == (OK, 6)
    assert verdict.reason.startswith("no worse at round 6: W=")


def test_a_slightly_worse_head_goes_on_to_the_last_look() -> None:
    """W > 0 but not significant: neither stopping rule applies until the horizon, where not
    shown worse is ok."""
    base = [Obs(float(v)) for v in (10, 12, 14, 16, 18, 20) * 2]
    head = [Obs(float(v) + 1) for v in (10, 12, 14, 16, 18, 20) * 2]
    verdict = decide_learning({"w": (head, base)}, LOOKS, 0.10, 0.95)["w"]
    assert verdict.decision == OK and verdict.rounds == 12
    assert [look.rounds for look in verdict.looks or []] == LOOKS
    assert verdict.reason.startswith("not shown worse")


def test_fewer_rounds_than_the_next_look_is_undecided() -> None:
    base = [Obs(float(v)) for v in range(8)]
    head = [Obs(float(v) + 0.5) for v in range(8)]
    verdict = decide_learning({"w": (head, base)}, LOOKS, 0.10, 0.95)["w"]
    assert verdict.decision == UNDECIDED
    assert verdict.reason == "8 rounds, stopped before the look at 9"


def test_worse_by_less_than_the_threshold_is_undecided_at_the_horizon() -> None:
    """Shown worse (every head run longer) but its median only 5% above: not a regression
    beyond 10%, not ok either."""
    base = [Obs(100.0 + i) for i in range(12)]
    head = [Obs(105.0 + i + 0.5) for i in range(12)]
    verdict = decide_learning({"w": (head, base)}, [12], 0.10, 0.95)["w"]
    assert verdict.decision == UNDECIDED
    assert "not above 1.10" in verdict.reason


def test_runs_per_round_scales_the_looks() -> None:
    """A workload with two runs a side a round is tested at 2 x 6, 2 x 9, 2 x 12 runs with the
    same alpha shares: its first look sees 12 runs a side, and its rounds count rounds."""
    base = [Obs(float(v)) for v in range(100, 124)]
    head = [Obs(float(v) * 1.5) for v in range(100, 124)]
    one = decide_learning({"w": (head[:12], base[:12])}, LOOKS, 0.10, 0.95)["w"]
    two = decide_learning({"w": (head, base)}, LOOKS, 0.10, 0.95, {"w": 2})["w"]
    assert (two.decision, two.rounds) == (REGRESSION, 6)
    assert two.p_value is not None and one.p_value is not None and two.p_value < one.p_value
    cut = decide_learning({"w": (head[:16], base[:16])}, LOOKS, 0.10, 0.95, {"w": 2})["w"]
    assert cut.decision == REGRESSION and cut.rounds == 6  # 16 runs: the look at 6 rounds only
    few = decide_learning({"w": (head[:11], base[:11])}, LOOKS, 0.10, 0.95, {"w": 2})["w"]
    assert few.decision == UNDECIDED and few.reason == "5 rounds, stopped before the look at 6"


def test_two_runs_a_round_catch_what_one_misses() -> None:
    """A 1.35x slowdown at a spread of 0.21 (CartPole MLP under an off-by-one done mask) among
    four unchanged workloads: one run a round catches it in about half the gate runs, two in
    over 90% (29 and 55 of these 60)."""
    rng = random.Random(11)

    def caught(per_round: int) -> int:
        hits = 0
        for _ in range(60):
            runs = {f"w{i}": (simulated(rng, 1.0, 12, sd), simulated(rng, 1.0, 12, sd))
                    for i, sd in enumerate(SPREADS[1:])}  # fmt: skip
            n = 12 * per_round
            runs["cp"] = (simulated(rng, 1.35, n, 0.21), simulated(rng, 1.0, n, 0.21))
            verdicts = decide_learning(runs, LOOKS, 0.10, 0.95, {"cp": per_round})
            hits += verdicts["cp"].decision == REGRESSION
        return hits

    one, two = caught(1), caught(2)
    assert one <= 36 and two >= 54, (one, two)
