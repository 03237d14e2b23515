"""When a pytest-benchmark case's spread makes a compare meaningless (``rlperf.bench.spread``,
used by ``benchmarks/conftest.py``): hand-made statistics, nothing timed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from rlperf.bench.spread import Bounds, Spread, case_warnings, warning_lines

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def stats(median: float, iqr: float, low: float, high: float, rounds: int = 20) -> dict:
    """A case's statistics as pytest-benchmark's JSON holds them (extra fields ignored)."""
    return {"median": median, "iqr": iqr, "min": low, "max": high, "rounds": rounds,
            "mean": median, "stddev": iqr}  # fmt: skip


TIGHT = stats(1.0e-3, 0.05e-3, 0.95e-3, 1.2e-3, rounds=5)


def test_a_tight_case_is_not_flagged() -> None:
    assert Spread.of(TIGHT).reasons() == []
    assert case_warnings(TIGHT) == []
    assert case_warnings(TIGHT, TIGHT, ("process_time", "process_time")) == []


def test_each_bound_flags_on_its_own_and_says_by_how_much() -> None:
    assert Spread.of(stats(1.0, 0.2, 0.9, 1.3)).reasons() == ["IQR 20% of the median"]
    assert Spread.of(stats(1.0, 0.05, 0.5, 2.0, rounds=5)).reasons() == [
        "slowest round 4.0x the fastest"
    ]
    # Many rounds: one stray slow round moves neither the median nor the IQR.
    assert Spread.of(stats(1.0, 0.05, 0.5, 2.0, rounds=20)).reasons() == []
    assert Spread.of(stats(1.0, 0.05, 0.95, 1.1, rounds=2)).reasons() == ["2 rounds"]
    # At the bounds exactly: not flagged.
    assert Spread.of(stats(1.0, 0.1, 1.0, 3.0, rounds=5)).reasons() == []


def test_bounds_can_be_chosen() -> None:
    wide = stats(1.0, 0.2, 0.9, 1.3)
    assert Spread.of(wide).reasons(Bounds(iqr_over_median=0.25)) == []
    assert Spread.of(TIGHT).reasons(Bounds(max_over_min=1.1)) == ["slowest round 1.3x the fastest"]


def test_the_issues_case_is_flagged_on_whichever_side_spread() -> None:
    # lstm_recurrence[compiled] beside other work: a median of 1.37 ms stored, 31.9 ms now,
    # the rounds of the second run spread from 1.4 ms to 60 ms.
    stored = stats(1.37e-3, 0.04e-3, 1.30e-3, 1.6e-3, rounds=15)
    now = stats(31.9e-3, 25.0e-3, 1.4e-3, 60.0e-3, rounds=15)
    assert case_warnings(now, stored) == [
        "this run: IQR 78% of the median",
        "this run: slowest round 42.9x the fastest",
    ]
    assert case_warnings(stored, now) == [
        "stored run: IQR 78% of the median",
        "stored run: slowest round 42.9x the fastest",
    ]


def test_runs_timed_with_different_clocks_are_flagged() -> None:
    assert case_warnings(TIGHT, TIGHT, ("process_time", "perf_counter")) == [
        "timed with process_time, the stored run with perf_counter"
    ]


def test_the_summary_lists_each_flagged_case_then_what_to_do() -> None:
    assert warning_lines({}, compared=True) == []
    lines = warning_lines({"gae[num_steps=32,num_envs=64]": ["this run: 2 rounds",
                                                             "stored run: IQR 20% of the median"]},
                          compared=True)  # fmt: skip
    assert lines[0].startswith("1 case(s) spread too widely for a meaningful compare")
    assert "IQR <= 10% of the median" in lines[0] and "under 20 rounds" in lines[0]
    assert lines[1] == ("  gae[num_steps=32,num_envs=64]: this run: 2 rounds; "
                        "stored run: IQR 20% of the median")  # fmt: skip
    assert "rlperf gate" in lines[-1]
    alone = warning_lines({"x": ["this run: 2 rounds"]}, compared=False)
    assert "against another run" in alone[0]


SPREADY = """
calls = [0]


def work():
    calls[0] += 1
    total = 0
    for i in range(100_000 if calls[0] % 2 else 1_000):  # every other round 100x the work
        total += i


def test_spready(benchmark):
    benchmark.pedantic(work, rounds=10)
"""


def run_suite(tmp_path: Path, *flags: str) -> str:
    """The suite's conftest over one deliberately spread case, in a fresh pytest."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--benchmark-only",
         f"--benchmark-storage=file://{tmp_path / 'store'}", *flags, str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_suite_times_cpu_and_warns_after_the_run_and_beside_a_compare(tmp_path) -> None:
    shutil.copy(BENCHMARKS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_spready.py").write_text(SPREADY)
    out = run_suite(tmp_path, "--benchmark-autosave")
    summary = out.split("benchmark spread")[1]
    assert "test_spready: this run: IQR" in summary and "x the fastest" in summary
    (saved,) = (tmp_path / "store").rglob("*.json")
    assert json.loads(saved.read_text())["benchmarks"][0]["options"]["timer"] == "process_time"
    # A flag wins over the suite's timer; the compare says the clocks differ.
    out = run_suite(tmp_path, "--benchmark-timer", "time.perf_counter", "--benchmark-compare=0001")
    summary = out.split("benchmark spread")[1]
    assert "meaningful compare" in summary
    assert "timed with perf_counter, the stored run with process_time" in summary
    assert "stored run: IQR" in summary
