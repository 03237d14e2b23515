"""benchmarks/gate_experiment.py's summary, on made-up gate runs (nothing is timed)."""

from __future__ import annotations

import math
import subprocess
import sys
import time

from benchmark_scripts import load_script


def row(kind: str, index: int, code: int, wall_s: float, ratio: float) -> dict:
    """One run of two cases; the first decided by ``code``, the second always ok."""
    verdict = {"decision": {0: "ok", 1: "regression", 2: "undecided"}[code], "ratio": ratio}
    ok = {"decision": "ok", "ratio": 1.0}
    logs = [math.log(ratio) + d for d in (-0.02, 0.0, 0.02, 0.0, 0.02, -0.02)]
    phase = {"name": "update/backward"} if kind == "planted" else None
    return {
        "kind": kind, "index": index, "exit": code, "exit_wall": code, "wall_s": wall_s,
        "stdout": "",
        "cases": {
            "e2e_a": {"verdicts": {"cpu": verdict}, "rounds": 6, "round_log_ratios": logs,
                      "moved_phase": phase},
            "e2e_b": {"verdicts": {"cpu": ok}, "rounds": 6, "round_log_ratios": [0.0] * 6,
                      "moved_phase": None},
        },
    }  # fmt: skip


def test_summary_has_rates_durations_noise_and_phase() -> None:
    script = load_script("gate_experiment.py")
    rows = [
        row("A/A", 0, 0, 61.0, 1.00),
        row("planted", 0, 1, 75.0, 1.05),
        row("A/A", 1, 2, 300.0, 1.00),
        row("planted", 1, 1, 90.0, 1.06),
    ]
    text = script.summarise(rows, 0.05)
    assert "| cpu (gate default) | 0/2 | 1/2 | 2/2 | 0/2 | 0/2 |" in text
    assert "A/A run durations (s): 61, 300" in text
    assert "planted run durations (s): 75, 90" in text
    assert "e2e_a: regression in 0/2 A/A and 2/2 planted runs, undecided in 1/2 and 0/2" in text
    assert "targets: A/A exit 0 in 1/2 (below 95%), planted caught in 2/2 (meets >= 95%)" in text
    assert "undecided A/A run 1: e2e_a: undecided" in text
    assert "A/A round noise sd 0.030" in text  # 1.4826 x MAD of the +-0.02 rounds
    assert "phase named in planted runs: update/backward (2/2)" in text
    assert "e2e_b: regression in 0/2 A/A and 0/2 planted runs, undecided in 0/2" in text


def test_rates_are_family_wise_over_the_cases() -> None:
    """An A/A run in which only the second case was flagged is a false alarm of the run (exit 1);
    a planted run that flagged one case of two is a catch, but not one that flagged every case."""
    script = load_script("gate_experiment.py")
    false_alarm = row("A/A", 0, 0, 61.0, 1.00)
    false_alarm["exit"] = false_alarm["exit_wall"] = 1
    false_alarm["cases"]["e2e_b"]["verdicts"]["cpu"] = {"decision": "regression", "ratio": 1.03}
    both = row("planted", 0, 1, 320.0, 1.05)
    both["cases"]["e2e_b"]["verdicts"]["cpu"] = {"decision": "regression", "ratio": 1.05}
    rows = [false_alarm, both, row("A/A", 1, 0, 70.0, 1.00), row("planted", 1, 1, 80.0, 1.05)]
    text = script.summarise(rows, 0.05)
    assert text.startswith("2 cases, family-wise: a run counts as a false alarm")
    assert "| cpu (gate default) | 1/2 | 0/2 | 2/2 | 0/2 | 0/2 |" in text
    assert "e2e_b: regression in 1/2 A/A and 1/2 planted runs" in text
    assert "planted runs that flagged every case: 1/2" in text
    assert "runs over 5 minutes: 1/4" in text


def test_busy_processes_run_through_the_block_and_are_gone_after() -> None:
    import psutil

    from rlperf.bench.harness import busy_processes

    before = {p.pid for p in psutil.Process().children()}
    with busy_processes(2):
        spinners = [p for p in psutil.Process().children() if p.pid not in before]
        assert len(spinners) == 2 and all(p.is_running() for p in spinners)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in spinners)


def test_busy_processes_end_when_their_parent_is_killed() -> None:
    """A parent stopped by SIGKILL never reaches the block's end: its spinners notice they were
    orphaned and exit, instead of loading every measurement that follows."""
    import psutil

    script = (
        "import time\n"
        "from rlperf.bench.harness import busy_processes\n"
        "with busy_processes(1):\n"
        "    print('up', flush=True)\n"
        "    time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "up"
        (spinner,) = psutil.Process(parent.pid).children()
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10.0
        # Orphaned, it is reaped by whoever adopts it, or stays a zombie where that is no one.
        while spinner.is_running() and spinner.status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "the spinner outlived its parent by 10 s"
            time.sleep(0.05)
    finally:
        parent.kill()
