"""benchmarks/signal_noise.py's arithmetic and arguments (the measurement itself is the lead's:
it times, so no test runs it)."""

from __future__ import annotations

import math

import pytest
from benchmark_scripts import load_script

script = load_script("signal_noise.py")


def test_rounds_needed_is_the_one_sided_normal_sample_size() -> None:
    # (2 x 1.645 x 0.02 / 0.02)^2 = 10.8 rounds; a shift of 0 or less is never seen.
    assert script.rounds_needed(0.02, 0.02) == pytest.approx(10.82, abs=0.01)
    assert script.rounds_needed(0.02, 0.0) == math.inf


def test_the_table_reads_each_signals_rounds() -> None:
    rounds = [{"aa": {"cpu": d}, "planted": {"cpu": 0.02 + d}} for d in (-0.01, 0.0, 0.01)]
    header, rule, cpu = script.table(rounds, 0.02)
    assert "rounds to see 2%" in header and rule.startswith("|---")
    cells = [c.strip() for c in cpu.strip("|").split("|")]
    assert cells[:5] == ["cpu", "1.0000", "0.0100", f"{math.exp(0.02):.4f}", "3/3"]


def test_bad_arguments_are_refused() -> None:
    for argv in (["--busy", "x"], ["--case", "nope"], ["--plant", "2"], ["--rounds", "1"]):
        with pytest.raises(SystemExit):
            script.parse_args(argv)
    args = script.parse_args(["--busy", "0,2", "--case", "gae[num_steps=32,num_envs=64]"])
    assert args.busy == [0, 2] and args.case == "gae[num_steps=32,num_envs=64]"
