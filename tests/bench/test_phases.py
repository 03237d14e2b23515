"""Naming the phase that moved: synthetic samples, and the worker's sections end to end."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from tiny_repo import BACKWARD, FAST, TinyRepo

from rlperf.bench.gate import Side, Worker, exit_code, report, run_rounds
from rlperf.bench.phases import PhaseShift, moved_phase
from rlperf.bench.worktree import checked_out
from rlperf.cli import main


def sample(wall: float, sections: dict[str, float]) -> dict:
    return {"wall_s": wall, "cpu_s": wall, "sections_s": sections}


BASE = {"rollout": 0.50, "update": 0.45, "update/loss": 0.15, "update/backward": 0.30,
        "logging": 0.004}  # fmt: skip


def head_with(backward: float, logging: float = 0.004) -> dict[str, float]:
    """Head sections: backward scaled by ``backward``, its parent by the same seconds."""
    extra = BASE["update/backward"] * (backward - 1.0)
    return {**BASE, "update/backward": BASE["update/backward"] * backward,
            "update": BASE["update"] + extra, "logging": logging}  # fmt: skip


def rounds_of(base: dict, head: dict, n: int = 6, pairs: int = 3) -> list[dict]:
    return [
        {"base": [sample(1.0, base)] * pairs, "head": [sample(1.1, head)] * pairs} for _ in range(n)
    ]


def test_names_the_section_that_moved_most() -> None:
    shift = moved_phase(rounds_of(BASE, head_with(1.31)))
    assert shift is not None
    assert shift.name == "update/backward" and math.isclose(shift.ratio, 1.31)
    assert math.isclose(shift.share, 0.30) and shift.rounds == 6
    assert shift.describe() == "update/backward 1.31x slower (30% of the time)"


def test_a_tiny_section_is_not_named_however_much_it_moved() -> None:
    """logging (0.4% of the time) tripled: noise in a section that small explains nothing."""
    shift = moved_phase(rounds_of(BASE, head_with(1.10, logging=0.012)))
    assert shift is not None and shift.name == "update/backward"


def test_one_burst_does_not_name_a_phase() -> None:
    """A neighbour's burst in one pair of each round: the medians drop it."""
    rounds = rounds_of(BASE, head_with(1.0))
    burst = {**BASE, "rollout": 5.0}
    for r in rounds:
        r["head"] = [sample(1.0, burst), *r["head"][1:]]
    shift = moved_phase(rounds)
    assert shift is not None and math.isclose(shift.ratio, 1.0)


def test_no_sections_no_phase() -> None:
    rounds = [{"base": [{"wall_s": 1.0, "cpu_s": 1.0}], "head": [{"wall_s": 1.0, "cpu_s": 1.0}]}]
    assert moved_phase(rounds) is None


def test_a_faster_head_names_the_phase_that_sped_up() -> None:
    """The head faster as a whole: the section that gained most is named, not the one that
    lost most (here logging and rollout, which did not move)."""
    head = head_with(0.5)
    rounds = [{"base": [sample(1.0, BASE)] * 3, "head": [sample(0.85, head)] * 3}
              for _ in range(6)]  # fmt: skip
    shift = moved_phase(rounds)
    assert shift is not None
    assert shift.name == "update/backward" and math.isclose(shift.ratio, 0.5)
    assert shift.describe() == "update/backward 0.50x faster (30% of the time)"


@pytest.mark.parametrize(
    ("ratio", "low", "high", "reads"),
    [
        (0.8, 0.7, 0.9, "rollout 0.80x faster (50% of the time)"),
        (1.2, 1.1, 1.3, "rollout 1.20x slower (50% of the time)"),
        (0.99, 0.97, 1.01, "rollout 0.99x unchanged within noise (50% of the time)"),
        (1.01, 0.99, 1.03, "rollout 1.01x unchanged within noise (50% of the time)"),
        (0.99, None, None, "rollout 0.99x in 6 rounds, too few to tell (50% of the time)"),
    ],
    ids=["faster", "slower", "0.99x-within-noise", "1.01x-within-noise", "no-interval"],
)
def test_a_phase_reads_the_direction_its_interval_shows(
    ratio: float, low: float | None, high: float | None, reads: str
) -> None:
    assert PhaseShift("rollout", ratio, 0.5, 6, low, high).describe() == reads


def noisy_rounds(factors: list[float], head_wall: float) -> list[dict]:
    """Every head section ``factor`` times the base's in its round (one factor per round)."""
    return [{"base": [sample(1.0, BASE)] * 3,
             "head": [sample(head_wall, {k: v * f for k, v in BASE.items()})] * 3}
            for f in factors]  # fmt: skip


def test_a_slower_head_with_no_phase_shown_slower_does_not_read_faster(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The head slower as a whole, every section 0.99x within noise: the issue's
    "update/backward 0.99x faster" beside a slowdown check reads unchanged."""
    factors = [0.96, 1.02, 0.98, 1.01, 0.97, 0.99, 1.03, 0.98, 0.99, 1.0]
    shift = moved_phase(noisy_rounds(factors, head_wall=1.05))
    assert shift is not None and shift.ratio < 1.0 and shift.low < 1.0 < shift.high
    assert "x unchanged within noise (" in shift.describe()
    data = {"cases": [{"name": "e2e", "calls_per_sample": 1,
                       "rounds": noisy_rounds(factors, head_wall=1.05)}]}  # fmt: skip
    path = tmp_path / "gate.json"
    path.write_text(json.dumps(data))
    main(["gate", "--from-json", str(path), "--threshold", "0.02"])
    out = capsys.readouterr().out
    assert "x unchanged within noise (" in out and "x faster" not in out, out


def test_gate_report_names_the_phase(tiny_repo: TinyRepo) -> None:
    """The worker records the tree's sections around the timed calls; the report names
    update/backward, which the head made 3x longer (the whole step about 1.7x)."""
    base_sha = tiny_repo.commit("base")
    tiny_repo.commit("slow backward", backward=3 * BACKWARD)
    head = Side("head", "working tree", "", tiny_repo.root / "src")
    with checked_out(base_sha, tiny_repo.root) as tree:
        base = Side("base", "base", base_sha, tree / "src")
        worker = Worker(tiny_repo.registry, preload=())
        try:
            results = run_rounds(base, head, ["step"], FAST, lambda _: None, worker)
        finally:
            worker.close()
    (res,) = results
    assert exit_code(results, FAST.metric) == 1
    shift = res.moved_phase()
    assert shift is not None and shift.name == "update/backward" and shift.ratio > 2.0
    assert "phase that moved most: update/backward" in report(results, FAST)
    assert res.to_dict()["moved_phase"]["name"] == "update/backward"
    sample0 = res.rounds[0]["head"][0]
    assert set(sample0["sections_s"]) >= {"rollout", "update", "update/loss", "update/backward"}


def test_from_json_keeps_sections_and_names_the_phase(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    rounds = rounds_of(BASE, head_with(1.31), n=8)
    data = {
        "settings": {"min_rounds": 6, "max_rounds": 8},  # tested at its last round
        "cases": [{"name": "e2e", "calls_per_sample": 1, "rounds": rounds}],
    }
    path = tmp_path / "gate.json"
    path.write_text(json.dumps(data))
    assert main(["gate", "--from-json", str(path), "--threshold", "0.05"]) == 1
    out = capsys.readouterr().out
    assert "phase that moved most: update/backward 1.31x slower (30% of the time)" in out
    assert "REGRESSION beyond 5% in e2e (update/backward 1.31x slower" in out


def test_the_verdict_names_the_phase_of_every_regressed_case(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Several e2e cases, as in the default set: each regressed case is named with its own
    phase, decided as one family (max-T), and the unchanged case is not named."""
    same = [{"base": [sample(1.0, BASE)] * 3, "head": [sample(1.0, BASE)] * 3}] * 12
    slow_rollout = {**BASE, "rollout": BASE["rollout"] * 1.2}
    data = {"settings": {"min_rounds": 6, "max_rounds": 12}, "cases": [
        {"name": "e2e_a", "calls_per_sample": 1, "rounds": rounds_of(BASE, head_with(1.31), 12)},
        {"name": "e2e_b", "calls_per_sample": 1, "rounds": rounds_of(BASE, slow_rollout, 12)},
        {"name": "e2e_c", "calls_per_sample": 1, "rounds": same},
    ]}  # fmt: skip
    path = tmp_path / "gate.json"
    path.write_text(json.dumps(data))
    assert main(["gate", "--from-json", str(path), "--threshold", "0.05"]) == 1
    out = capsys.readouterr().out
    assert "over 3 cases and their pooled rounds (max-T)" in out
    verdict = out.strip().splitlines()[-1]
    assert verdict == (
        "gate: REGRESSION beyond 5% in e2e_a (update/backward 1.31x slower (30% of the time)), "
        "e2e_b (rollout 1.20x slower (50% of the time)) (exit 1)"
    )
