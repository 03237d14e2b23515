"""``rlperf gate`` end to end on a tiny git repository, and its exit status on bad input."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from tiny_repo import FIVE_PERCENT, SLOWER_BY_5_PERCENT, TinyRepo
from tiny_repo import git as tiny_git

import rlperf
from rlperf.bench import counters
from rlperf.bench.commands import settings_from_args
from rlperf.bench.gate import (
    GateError,
    PooledResult,
    Settings,
    Side,
    Worker,
    analyse,
    begin_round,
    end_round,
    exit_code,
    format_verdict,
    pair_cpu,
    report,
    results_from_json,
    run_rounds,
)
from rlperf.bench.stats import (
    decide_family,
    fewest_rounds_to_flag,
    median,
    pooled_log_ratios,
)
from rlperf.bench.worktree import checked_out
from rlperf.cli import build_parser, main

GAE_CASE = "gae[num_steps=32,num_envs=64]"
# Small, fast rounds: the planted slowdown is 3x, the threshold 50%.
# (Base against itself is measured by benchmarks/gate_experiment.py: 20+ runs, too slow here.)
FAST = ["--cases", GAE_CASE, "--threshold", "0.5", "--pairs", "2", "--sample-s", "0.01",
        "--max-rounds", "8", "--warmup-s", "0.02"]  # fmt: skip

SLOW_GAE = '''

import time as _time

_fast_gae = gae


def gae(*args, **kwargs):
    """Planted by the test: twice the CPU time again, busy-waiting."""
    start = _time.process_time()
    out = _fast_gae(*args, **kwargs)
    spin_until = _time.process_time() + 2.0 * (_time.process_time() - start)
    while _time.process_time() < spin_until:
        pass
    return out
'''

BROKEN_GAE = """

def gae(*args, **kwargs):
    raise RuntimeError("planted crash")
"""


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@localhost", *args],
        cwd=repo, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout.strip()


def commit_gae(repo: Path, suffix: str, message: str) -> str:
    gae_py = repo / "src" / "rlperf" / "ppo" / "gae.py"
    gae_py.write_text(gae_py.read_text() + suffix)
    git(repo, "commit", "-qam", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path | str]:
    """A git repo holding a copy of rlperf: commits base, slow (3x gae) and broken (gae raises)."""
    root = tmp_path_factory.mktemp("tiny-repo")
    package = Path(rlperf.__file__).parent
    shutil.copytree(package, root / "src" / "rlperf", ignore=shutil.ignore_patterns("__pycache__"))
    git(root, "init", "-q")
    git(root, "add", "src")
    git(root, "commit", "-qm", "base")
    base = git(root, "rev-parse", "HEAD")
    slow = commit_gae(root, SLOW_GAE, "slow gae")
    git(root, "checkout", "-q", base)
    broken = commit_gae(root, BROKEN_GAE, "broken gae")
    return {"root": root, "base": base, "slow": slow, "broken": broken}


def gate(repo: dict, head: str, *args: str, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.chdir(repo["root"])
    git(repo["root"], "checkout", "-q", repo[head])  # the head is the working tree
    return main(["gate", *args])


def test_planted_slowdown_fails_with_ratio_and_interval(
    repo: dict, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    out_json = tmp_path / "gate.json"
    code = gate(repo, "slow", "--base", str(repo["base"]), "--json", str(out_json), *FAST,
                monkeypatch=monkeypatch)  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1, out
    assert f"{GAE_CASE}: REGRESSION" in out and "REGRESSION beyond 50%" in out
    saved = json.loads(out_json.read_text())
    verdict = saved["cases"][0]["verdicts"]["cpu"]
    assert saved["exit_code"] == 1 and verdict["decision"] == "regression"
    assert 1.5 < verdict["low"] <= verdict["ratio"] <= verdict["high"]
    # The same samples, decided again from the file, give the same answer.
    assert main(["gate", "--from-json", str(out_json), "--threshold", "0.5"]) == 1


def test_case_crash_on_head_is_exit_2(repo: dict, monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # noqa: ANN001
    code = gate(repo, "broken", "--base", str(repo["base"]), *FAST, monkeypatch=monkeypatch)
    err = capsys.readouterr().err
    assert code == 2
    assert "failed on head working tree: RuntimeError: planted crash" in err


def test_a_case_skipped_on_a_side_is_logged_and_left_out(
    repo: dict, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The transfer cases skip without CUDA (as a component missing from an older base does):
    the gate says so and decides on the rest; with nothing left it is exit 2."""
    if torch.cuda.is_available():
        pytest.skip("the transfer cases run on a machine with CUDA")
    transfer = "transfer[direction=d2h,memory=pinned,non_blocking=True,batch=1024]"
    fast = [a if a != GAE_CASE else f"{transfer},{GAE_CASE}" for a in FAST]
    gate(repo, "base", "--base", str(repo["base"]), *fast, monkeypatch=monkeypatch)
    captured = capsys.readouterr()
    # Base against itself with FAST's few 10 ms samples: the verdict itself is noise (A/A
    # false-alarm rates are measured by benchmarks/gate_experiment.py, not here). What matters:
    # the skipped case did not stop the gate, and the other case was timed and judged.
    assert "no case can be timed" not in captured.err, captured.err
    assert f"skipping {transfer} (not on base: CUDA not available" in captured.out + captured.err
    assert f"{GAE_CASE}: " in captured.out

    only = [a if a != GAE_CASE else transfer for a in FAST]
    code = gate(repo, "base", "--base", str(repo["base"]), *only, monkeypatch=monkeypatch)
    err = capsys.readouterr().err
    assert code == 2 and "no case can be timed on both base and head" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--base", "no-such-ref"], "unknown git ref 'no-such-ref'"),
        (["--base", "HEAD", "--head", "nope~9"], "unknown git ref 'nope~9'"),
        (["--base", "HEAD", "--cases", "nope"], "unknown benchmark case 'nope'"),
        (["--base", "HEAD", "--threshold", "-1"], "threshold must be in"),
        (["--base", "HEAD", "--max-rounds", "3"], "max_rounds 3 is below"),
        (["--base", "HEAD", "--pairing", "sideways"], "pairing must be one of together, turns"),
        (
            ["--base", "HEAD", "--metric", "wall", "--pairing", "together"],
            "--metric wall needs --pairing turns",
        ),
        (["--base", "HEAD", "--json", "/no/such/dir/out.json"], "does not exist"),
        (["--base", "HEAD", "--json", "/"], "/ is a directory, not a file"),
        ([], "--base REF is required"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    repo: dict, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
    args: list[str], message: str,
) -> None:  # fmt: skip
    code = gate(repo, "base", *args, monkeypatch=monkeypatch)
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("rlperf: error: ") and message in err


def test_outside_a_git_repository_is_exit_2(tmp_path: Path, monkeypatch, capsys) -> None:  # noqa: ANN001
    monkeypatch.chdir(tmp_path)
    assert main(["gate", "--base", "HEAD"]) == 2
    assert capsys.readouterr().err.startswith("rlperf: error: git rev-parse")


def synthetic(shift: float, rounds: int) -> dict:
    """Gate results with constant samples: head ``shift`` slower in every pair, the run's
    horizon its last round (a regression is tested there)."""
    pair = {"base": [{"wall_s": 1.0, "cpu_s": 1.0}],
            "head": [{"wall_s": 1.0 + shift, "cpu_s": 1.0 + shift}]}  # fmt: skip
    return {
        "settings": {"min_rounds": 6, "max_rounds": rounds},
        "cases": [{"name": "e2e", "calls_per_sample": 1, "rounds": [pair] * rounds}],
    }


@pytest.mark.parametrize(
    ("data", "code"),
    [(synthetic(0.0, 8), 0), (synthetic(0.15, 8), 1), (synthetic(0.15, 5), 2)],
    ids=["equal", "15pct-slower", "too-few-rounds"],
)
def test_from_json_decides_on_saved_samples(
    tmp_path: Path, capsys: pytest.CaptureFixture, data: dict, code: int
) -> None:
    path = tmp_path / "gate.json"
    path.write_text(json.dumps(data))
    assert main(["gate", "--from-json", str(path)]) == code
    if code == 1:
        assert "e2e: REGRESSION cpu ratio 1.150 [1.150, 1.150]" in capsys.readouterr().out


def verdict_text(log_ratios: list[float], close: bool = True) -> str:
    """format_verdict of one case at threshold 0.02, looks 6..25."""
    verdict = decide_family({"a": log_ratios}, 0.02, 0.95, 6, 25, close_at_horizon=close)["a"]
    return format_verdict(verdict)


def test_the_verdict_says_why_wherever_its_interval_does_not() -> None:
    """docs/gate.md's table, case by case: only a regression's p and an interval wholly below
    the limit stand alone; an ok at the horizon (here 1.006 [0.98, 1.03], the interval past
    1.02 as in the issue) and an undecided case say why."""
    rng7, rng4 = random.Random(7), random.Random(4)  # test_stats.py's horizon cases
    within = [rng7.gauss(0.0, 0.05) for _ in range(25)]
    holds_one = [rng4.gauss(0.0, 0.05) + 0.01 for _ in range(25)]
    below = verdict_text([math.log(0.99)] * 6)
    assert below.endswith("] ok"), below
    horizon = verdict_text(within)
    assert horizon.endswith("] ok (not shown slower in 25 rounds, median below 1.02)"), horizon
    holds = verdict_text(holds_one)
    assert "] ok (not shown slower in 25 rounds: p=" in holds, holds
    slower = verdict_text([math.log(1.1)] * 25)
    assert "] regression (p=" in slower, slower
    early = verdict_text([math.log(1.1)] * 12)
    assert early.endswith("] undecided (median above the limit, tested at round 25)"), early
    reaches = verdict_text(within, close=False)
    assert reaches.endswith("] undecided (interval reaches 1.02)"), reaches
    above = verdict_text(holds_one, close=False)
    assert "] undecided (median above the limit, not shown slower: p=" in above, above


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "is not JSON"),
        ("[1, 2]", "not an object"),
        ('{"cases": []}', "no cases"),
        ('{"cases": [{"name": "x"}]}', "malformed gate results: KeyError"),
        (
            json.dumps(
                {
                    "cases": [
                        {
                            "name": "x",
                            "calls_per_sample": 1,
                            "rounds": [
                                {
                                    "base": [{"wall_s": 1, "cpu_s": -1}],
                                    "head": [{"wall_s": 1, "cpu_s": 1}],
                                }
                            ],
                        }
                    ]
                }
            ),
            "not a positive number",
        ),
        (
            json.dumps(
                {
                    "cases": [
                        {
                            "name": "x",
                            "calls_per_sample": 1,
                            "rounds": [
                                {
                                    "base": [{"wall_s": 1, "cpu_s": 1}] * 2,
                                    "head": [{"wall_s": 1, "cpu_s": 1}],
                                }
                            ],
                        }
                    ]
                }
            ),  # fmt: skip
            "sample counts differ",
        ),
    ],
)
def test_malformed_json_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture, text: str, message: str
) -> None:
    path = tmp_path / "gate.json"
    path.write_text(text)
    assert main(["gate", "--from-json", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlperf: error: ") and message in err


def test_wall_time_is_decided_only_on_pairs_run_in_turns(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``--metric wall`` picks turns; a file of pairs run together has no wall verdict and is
    refused on wall time (one line, exit 2); a file from before pairing was recorded (turns)
    is decided on wall time as before."""
    for metric, pairing in (("wall", "turns"), ("cpu", "together")):
        args = build_parser().parse_args(["gate", "--base", "HEAD", "--metric", metric])
        assert settings_from_args(args).pairing == pairing
    assert Settings().pairing == "together"
    side = Side("base", "base", "", Path("."))
    for pairing in ("together", "turns"):
        results = run_rounds(side, replace(side, label="head"), ["a", "b"],
                             Settings(pairing=pairing), lambda _: None,
                             ScriptedWorker({"a"}))  # fmt: skip
        assert ("wall" in results[0].verdicts) == (pairing == "turns")
        path = tmp_path / f"{pairing}.json"
        saved = {"cases": [r.to_dict() for r in results if not isinstance(r, PooledResult)],
                 "settings": {"pairing": pairing} if pairing == "together" else {}}  # fmt: skip
        path.write_text(json.dumps(saved))
        code = main(["gate", "--from-json", str(path), "--metric", "wall"])
        err = capsys.readouterr().err
        if pairing == "together":
            assert code == 2 and err.count("\n") == 1 and "were paired together" in err
        else:
            assert code == 1, err  # the slow case, flagged on wall time


def test_missing_json_file_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["gate", "--from-json", str(tmp_path / "absent.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


# -- a 5% slowdown on a tiny repository (tests/bench/tiny_repo.py) -----------------------
def gate_tiny(
    repo: TinyRepo, base_sha: str, head_sha: str, settings: Settings,
    log: Callable[[str], None] = lambda _: None, started: float | None = None,
) -> list:  # fmt: skip
    """The gate's rounds, head checked out as the tiny repository's working tree."""
    tiny_git(repo.root, "checkout", "-q", head_sha)
    head = Side("head", "working tree", "", repo.root / "src")
    with checked_out(base_sha, repo.root) as tree:
        base = Side("base", "base", base_sha, tree / "src")
        worker = Worker(repo.registry, preload=())
        try:
            return run_rounds(base, head, ["step"], settings, log, worker, started)
        finally:
            worker.close()


def test_a_planted_five_percent_slowdown_is_caught(tiny_repo: TinyRepo) -> None:
    """The backward loop 15% longer: the whole step 5% slower."""
    base = tiny_repo.commit("base")
    slow = tiny_repo.commit("5% slower", backward=SLOWER_BY_5_PERCENT)
    (res,) = gate_tiny(tiny_repo, base, slow, FIVE_PERCENT)
    # The worker's round processes were pinned, pair by pair, to CPUs this process may use.
    pinned = {s["cpu"] for r in res.rounds for side in ("base", "head") for s in r[side]}
    assert pinned <= os.sched_getaffinity(0)
    verdict = res.verdicts["cpu"]
    assert verdict.decision == "regression", verdict
    # Near 1.05; the bound only rules out a wrong order of magnitude (a round median of 1.104
    # came out in a clean CI run on 2026-11-23, with 20 ms samples of this tiny case).
    assert 1.02 < verdict.ratio < 1.25
    # backward took 15% longer, update (its parent) 7.5%: on a loaded machine the wall-time
    # sections (a fraction of a millisecond a call) may name either; the 3x case in
    # test_phases.py names the child.
    assert res.moved_phase().name in ("update/backward", "update")


def test_the_two_samples_of_a_pair_are_pinned_to_one_cpu_and_the_cpus_take_turns() -> None:
    """Three pairs a round on two CPUs: 0 1 0, then 1 0 1; over two rounds each side runs
    three samples on each CPU. Without pinning (not Linux), no ``cpu`` field."""
    turns = [pair_cpu([0, 1], r, j, 3)["cpu"] for r in range(2) for j in range(3)]
    assert turns == [0, 1, 0, 1, 0, 1]
    assert pair_cpu(None, 0, 0, 3) == {} and pair_cpu([], 4, 2, 3) == {}
    assert [pair_cpu([3], r, j, 2)["cpu"] for r in range(2) for j in range(2)] == [3] * 4


@pytest.mark.parametrize("pairing", ["turns", "together"])
def test_the_gate_sends_both_sides_of_a_pair_the_same_cpu(
    monkeypatch: pytest.MonkeyPatch, pairing: str
) -> None:
    """run_rounds' measure requests: base and head of each pair name one CPU (in turns, two
    requests; together, one for both sides, started in alternating order), every allowed CPU
    is used, and the samples record it (so a saved run says where each pair ran)."""
    monkeypatch.setattr("rlperf.bench.gate.pinnable_cores", lambda: [2, 5])
    asked: list[dict] = []

    class Recording(ScriptedWorker):
        def ask(self, request: dict) -> dict:
            asked.append(request)
            return super().ask(request)

    side = Side("base", "base", "", Path("."))
    settings = Settings(pairing=pairing)
    (res,) = run_rounds(side, replace(side, label="head"), ["same"], settings, lambda _: None,
                        Recording(set()))  # fmt: skip
    setups = [r for r in asked if r["op"] == "setup"]
    assert setups and all(r["pairing"] == pairing for r in setups)
    if pairing == "turns":
        measured = [r for r in asked if r["op"] == "measure"]
        pairs = [(a["side"], b["side"], a["cpu"], b["cpu"])
                 for a, b in zip(measured[::2], measured[1::2], strict=True)]  # fmt: skip
    else:
        assert not any(r["op"] == "measure" for r in asked)
        pairs = [(*r["order"], r["cpu"], r["cpu"]) for r in asked if r["op"] == "measure_together"]
    assert pairs and all({a, b} == {"base", "head"} and ca == cb for a, b, ca, cb in pairs)
    assert {ca for *_, ca, _ in pairs} == {2, 5}
    assert {a for a, *_ in pairs} == {"base", "head"}  # each side starts first in some pairs
    for samples in res.rounds:
        assert [s["cpu"] for s in samples["base"]] == [s["cpu"] for s in samples["head"]]


def test_unchanged_code_is_not_called_slower(tiny_repo: TinyRepo) -> None:
    """Base against itself, at a 0.05% false-alarm level so that the test itself does not flake
    (the rate at the gate's own level is for the statistics tests and the experiment)."""
    base = tiny_repo.commit("base")
    strict = replace(FIVE_PERCENT, confidence=0.999, max_rounds=16)
    (res,) = gate_tiny(tiny_repo, base, base, strict)
    verdict = res.verdicts["cpu"]
    assert verdict.decision != "regression", verdict
    assert 0.9 < verdict.ratio < 1.1  # the planted 5% above measured 1.104 once


# -- several cases: one family -----------------------------------------------------------------
class ScriptedWorker:
    """Stands in for :class:`Worker`: answers every request at once, the head of ``slow`` cases
    10% slower in every sample and every other case exactly as fast as the base."""

    def __init__(self, slow: set[str]) -> None:
        self.slow = slow
        self.sides: dict = {}
        self.setup_answers: dict = {}

    def ask(self, request: dict) -> dict:
        op = request["op"]
        if op == "setup":
            side = {"items": {c: [1, "env_steps"] for c in request["cases"]}, "skipped": {}}
            return {"sides": {"base": side, "head": side}}
        if op == "calibrate":
            return {"calls": 1}
        if op == "measure":
            return self.sample(request["side"], request["case"])
        if op == "measure_together":
            return {
                "sides": {side: self.sample(side, request["case"]) for side in request["order"]}
            }
        return {"ended": True}

    def sample(self, side: str, case: str) -> dict:
        seconds = 1.1 if side == "head" and case in self.slow else 1.0
        return {"wall_s": seconds, "cpu_s": seconds}


@pytest.mark.parametrize("num_cases", [1, 5])
def test_the_gates_rounds_decide_the_cases_as_one_family(num_cases: int) -> None:
    """run_rounds, as ``rlperf gate`` runs it: a case slower in every round is flagged at the
    horizon (25 rounds by default), where its test is taken with max-T over the cases and
    their pooled rounds; every case runs every round (so that they pool), the unchanged
    ones ok; the pooled rounds, made of unchanged cases but for one, are not slower."""
    cases = ["slow"] + [f"same{i}" for i in range(num_cases - 1)]
    side = Side("base", "base", "", Path("."))
    settings = Settings()
    results = run_rounds(side, replace(side, label="head"), cases, settings, lambda _: None,
                         ScriptedWorker({"slow"}))  # fmt: skip
    verdicts = {r.name: r.verdicts["cpu"] for r in results}
    flagged_at = fewest_rounds_to_flag(settings.confidence, settings.min_rounds,
                                       settings.max_rounds)  # fmt: skip
    assert flagged_at == settings.max_rounds
    assert verdicts["slow"].decision == "regression" and verdicts["slow"].rounds == flagged_at
    for name in cases[1:]:
        assert verdicts[name].decision == "ok" and verdicts[name].rounds == flagged_at
    pooled = [r for r in results if isinstance(r, PooledResult)]
    assert len(pooled) == (num_cases > 1)
    if pooled:
        assert pooled[0].name == f"all {num_cases} cases, pooled"
        assert pooled[0].decision("cpu") == "ok"
    assert exit_code(results, "cpu") == 1


def test_unchanged_cases_stop_together_once_each_and_their_pooled_rounds_are_ok() -> None:
    cases = [f"same{i}" for i in range(4)]
    side = Side("base", "base", "", Path("."))
    settings = Settings()
    results = run_rounds(side, replace(side, label="head"), cases, settings, lambda _: None,
                         ScriptedWorker(set()))  # fmt: skip
    assert [r.verdicts["cpu"].rounds for r in results] == [settings.min_rounds] * 5
    assert all(r.decision("cpu") == "ok" for r in results)
    assert exit_code(results, "cpu") == 0


def test_a_slowdown_shared_by_every_case_is_flagged_in_their_pooled_rounds() -> None:
    """Each case 1.5% slower under noise of 2% a round (sd of the log-ratio) over 10 rounds:
    alone, a case is rarely slower in enough rounds to be shown so; the pooled rounds of 7 cases
    (noise / sqrt 7) do, and their median is above the 1% threshold."""
    rng = random.Random(5)
    family = {f"c{i}": [math.log(1.015) + rng.gauss(0.0, 0.02) for _ in range(10)]
              for i in range(7)}  # fmt: skip
    pooled, weights = pooled_log_ratios(family)
    assert sum(weights.values()) == pytest.approx(1.0)
    family["pooled"] = pooled
    verdicts = decide_family(family, 0.01, 0.95, 6, 10, close_at_horizon=True)
    assert verdicts["pooled"].decision == "regression"
    assert sum(verdicts[f"c{i}"].decision == "regression" for i in range(7)) < 7


def test_the_gate_says_up_front_how_long_it_may_take_and_a_round_in_one_short_line() -> None:
    """Five cases with names as long as the registry's, not in its cost table: the estimate
    first (configured CPU seconds: 2 sides x (0.1 s warm-up + 3 x 0.1 s) = 0.8 s a case and
    round), then one line of at most 120 characters a round, whatever the cases are called."""
    cases = ["transfer[direction=d2h,memory=pinned,non_blocking=True,batch=1024]"] + [
        f"e2e_train[workload=cartpole_{i},num_envs=64,num_steps=128,policy=mlp]" for i in range(4)
    ]
    side = Side("base", "base", "", Path("."))
    lines: list[str] = []
    run_rounds(side, replace(side, label="head"), cases, Settings(), lines.append,
               ScriptedWorker({cases[0]}))  # fmt: skip
    assert lines[0] == (
        "gate: 5 case(s) x 6-25 rounds: estimated 24 s to 1.7 min (timed CPU alone; a busy "
        "machine adds to it)"
    )
    rounds = lines[1:]
    assert rounds and all(len(line) <= 120 for line in lines), max(lines, key=len)
    first = "round 1/25: 5 undecided, pooled undecided; head/base up to 1.100; "
    assert rounds[0].startswith(first)
    assert rounds[-1].startswith(f"round {len(rounds)}/25: 4 ok, 1 regression, pooled ok; ")


# -- instructions: the signal where the kernel counts them ---------------------------------------
class CountingWorker(ScriptedWorker):
    """A worker whose round processes count instructions: the head of ``slow`` cases executes
    10% more instructions in every sample, its CPU time as the base's; ``no_instructions`` makes
    its setup say why it counts none, as on a VM without a PMU."""

    def __init__(self, slow: set[str], no_instructions: str | None = None) -> None:
        super().__init__(set())
        self.counted_slow, self.no_instructions = slow, no_instructions

    def ask(self, request: dict) -> dict:
        answer = super().ask(request)
        if request["op"] == "setup" and self.no_instructions is not None:
            answer["sides"] = {k: {**v, "no_instructions": self.no_instructions}
                               for k, v in answer["sides"].items()}  # fmt: skip
        return answer

    def sample(self, side: str, case: str) -> dict:
        answer = super().sample(side, case)
        if self.no_instructions is None:
            answer["instructions"] = 1.1e9 if side == "head" and case in self.counted_slow else 1e9
        return answer


def test_the_gate_decides_on_instructions_where_they_are_counted() -> None:
    side = Side("base", "base", "", Path("."))
    head = replace(side, label="head")
    on_count = Settings(metric="instructions")
    results = run_rounds(side, head, ["a", "b"], on_count, lambda _: None, CountingWorker({"a"}))
    assert results[0].decision("instructions") == "regression"
    assert results[0].decision("cpu") == "ok" and results[1].decision("instructions") == "ok"
    text = report(results, on_count)
    assert "decided on instructions" in text and "; cpu ratio 1.000" in text
    cases = [r.to_dict() for r in results if not isinstance(r, PooledResult)]
    again = results_from_json({"cases": json.loads(json.dumps(cases))})
    analyse(again, on_count)
    assert again[0].decision("instructions") == "regression"


def test_instructions_where_none_are_counted_is_exit_2_saying_why() -> None:
    side = Side("base", "base", "", Path("."))
    why = "perf_event_open(instructions): ENOENT (No such file or directory): no hardware PMU"
    with pytest.raises(GateError, match="--metric instructions on base: perf_event_open"):
        run_rounds(side, replace(side, label="head"), ["a"], Settings(metric="instructions"),
                   lambda _: None, CountingWorker(set(), no_instructions=why))  # fmt: skip
    # Samples without counts (a CPU-timed run's --json) cannot be re-decided on them.
    results = run_rounds(side, replace(side, label="head"), ["a"], Settings(), lambda _: None,
                         ScriptedWorker(set()))  # fmt: skip
    with pytest.raises(GateError, match="the samples have no instructions"):
        analyse(results, Settings(metric="instructions"))


def test_the_round_processes_count_instructions_or_say_why(tiny_repo: TinyRepo) -> None:
    """The real worker: each side's setup says why it counts no instructions (one line), or
    every sample carries its count."""
    base = tiny_repo.commit("base")
    (res,) = gate_tiny(tiny_repo, base, base, replace(FIVE_PERCENT, max_rounds=6))
    samples = [s for r in res.rounds for side in r.values() for s in side]
    why = counters.unavailable(("instructions",))
    if why is None:
        assert all(s["instructions"] > 0 for s in samples)
    else:
        assert not any("instructions" in s for s in samples)
        worker = Worker(tiny_repo.registry, preload=())
        try:
            worker.sides = {"base": Side("base", "base", "", tiny_repo.root / "src")}
            begin_round(worker, ["step"], 0.0)
            assert worker.setup_answers["base"]["no_instructions"] == why
        finally:
            worker.close()


def test_pairs_run_together_share_one_cpu_and_time_their_sections_on_it(
    tiny_repo: TinyRepo,
) -> None:
    """The real worker, pairing together: both sides of a pair are on the CPU at once, so each
    sample's wall time is about twice its CPU time (pinned to one CPU); the sections are timed
    on the thread's CPU clock, so they add up to the CPU time, not to the wall time that the
    other side's share inflates."""
    base = tiny_repo.commit("base")
    (res,) = gate_tiny(tiny_repo, base, base, replace(FIVE_PERCENT, max_rounds=6))
    samples = [s for r in res.rounds for side in r.values() for s in side]
    if not all("cpu" in s for s in samples):
        pytest.skip("no CPU can be pinned here: the two sides may run on two CPUs at once")
    assert median([s["wall_s"] / s["cpu_s"] for s in samples]) > 1.5
    top = [sum(t for name, t in s["sections_s"].items() if "/" not in name) / s["cpu_s"]
           for s in samples]  # fmt: skip
    assert 0.5 < median(top) < 1.1, top


def test_sections_on_the_cpu_clock_sleep_uncounted_and_drop_kernel_spans(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the round processes of pairs run together do to the tree's profiler: a section that
    sleeps gains (almost) no time, one that spins gains its CPU time, and spans a C kernel
    timed on its own wall clock are not recorded."""
    from rlperf.bench.worker import time_sections_on_cpu
    from rlperf.timing import sections

    monkeypatch.setattr(sections, "_perf_ns", sections._perf_ns)  # restored after the test
    monkeypatch.setattr(sections.Profiler, "record", sections.Profiler.record)
    time_sections_on_cpu()
    profiler = sections.Profiler()
    with profiler.section("sleep"):
        time.sleep(0.05)
    with profiler.section("spin"):
        end = time.thread_time() + 0.02
        while time.thread_time() < end:
            pass
    profiler.record("kernel", total_ns=10**9, calls=1, min_ns=10**9, max_ns=10**9)
    seconds = profiler.snapshot_ns()
    assert seconds["sleep"] < 5e6 and 2e7 <= seconds["spin"] < 5e7
    assert "kernel" not in seconds


def test_a_preload_marked_optional_is_skipped_where_missing(tiny_repo: TinyRepo) -> None:
    """``?name``: imported once where installed (the extras' modules), passed over where not;
    a required module that is missing stops the worker with its ImportError."""
    tiny_repo.commit("base")
    worker = Worker(tiny_repo.registry, preload=("json", "?rlperf_no_such_module"))
    try:
        worker.sides = {"base": Side("base", "base", "", tiny_repo.root / "src")}
        begin_round(worker, ["step"], 0.0)
        assert "step" in worker.setup_answers["base"]["items"]
        end_round(worker)
    finally:
        worker.close()
    worker = Worker(tiny_repo.registry, preload=("rlperf_no_such_module",))
    try:
        worker.sides = {"base": Side("base", "base", "", tiny_repo.root / "src")}
        with pytest.raises(GateError, match="rlperf_no_such_module"):
            begin_round(worker, ["step"], 0.0)
    finally:
        worker.close()


def test_the_first_round_sets_the_rounds_the_budget_holds_at_this_pace() -> None:
    """The rounds left after round 1 at its pace, never more than asked, never fewer than can
    flag a regression (6 at 95%: a case slower in all 6 clears 2^-6 <= 2.5%, max-T);
    nothing changes without a budget or when the plan already fits."""
    fits = Settings(max_rounds=11, budget_s=300.0)
    # Later rounds planned at 1.1x round 1's wall time (budget.LATER_ROUNDS).
    line = fits.fit_pace(7, spent_s=40.0, round_s=23.0)  # 1 + 260 // 25.3 = 11: as planned
    assert line is None and fits.max_rounds == 11
    slower = Settings(max_rounds=11, budget_s=300.0)
    line = slower.fit_pace(7, spent_s=40.0, round_s=26.0)  # 1 + 260 // 28.6 = 10
    assert slower.max_rounds == 10
    assert line == "gate: round 1 took 26 s: 10 rounds fit the 5.0 min budget (of 11 planned)"
    slowest = Settings(max_rounds=11, budget_s=300.0)
    line = slowest.fit_pace(7, spent_s=50.0, round_s=60.0)  # 1 + 250 // 66 = 4, too few
    assert slowest.max_rounds == 6
    assert line is not None and "holds 4 rounds" in line and "running the 6 that can" in line
    assert "~5.8 min" in line  # 50 s + 5 more rounds of 60 s
    unbudgeted = Settings(max_rounds=11, budget_s=0.0)
    assert unbudgeted.fit_pace(7, 290.0, 100.0) is None and unbudgeted.max_rounds == 11


def test_a_faster_pace_than_planned_spends_the_budget_on_more_rounds() -> None:
    """The plan scales measured costs to the slowest busy box; where round 1 runs faster the
    rounds that fit go up to the rounds asked for, not past them."""
    faster = Settings(max_rounds=11, budget_s=300.0)
    line = faster.fit_pace(7, spent_s=30.0, round_s=15.0, ceiling=25)  # 1 + 270 // 16.5 = 17
    assert faster.max_rounds == 17
    assert line == "gate: round 1 took 15 s: 17 rounds fit the 5.0 min budget (of 11 planned)"
    capped = Settings(max_rounds=11, budget_s=300.0)
    capped.fit_pace(7, spent_s=30.0, round_s=5.0, ceiling=25)  # 1 + 54: the 25 asked
    assert capped.max_rounds == 25
    unasked = Settings(max_rounds=11, budget_s=300.0)
    assert unasked.fit_pace(7, spent_s=30.0, round_s=15.0) is None and unasked.max_rounds == 11


class SlowStartWorker(ScriptedWorker):
    """A worker whose start (its preloads) and calibration take wall time, and whose rounds
    take almost none."""

    def ask(self, request: dict) -> dict:
        if request["op"] in ("ready", "calibrate"):
            time.sleep(0.3)
        return super().ask(request)


def test_the_pace_leaves_out_the_workers_start_and_the_calibration() -> None:
    """Round 1 also waits for the worker's preloads and calibrates every case, which no later
    round repeats: counted as a round's pace, they would cut a 3 s budget to the 6 rounds
    that can flag (1 + (3 - 0.9) / 0.6 = 4); left out, the 10 planned fit."""
    side = Side("base", "base", "", Path("."))
    settings = Settings(max_rounds=10, min_rounds=10, budget_s=3.0)
    lines: list[str] = []
    results = run_rounds(side, replace(side, label="head"), ["a", "b"], settings, lines.append,
                         SlowStartWorker(set()))  # fmt: skip
    assert settings.max_rounds == 10 and not any("round 1 took" in line for line in lines)
    assert all(len(r.rounds) == 10 for r in results if not isinstance(r, PooledResult))


def test_the_budget_counts_from_the_process_start() -> None:
    """What ran before the command (the interpreter, the imports; here a 0.5 s sleep) is wall
    time the budget pays too."""
    code = (
        "import time; time.sleep(0.5)\n"
        "from rlperf.bench.commands import process_started\n"
        "print(time.perf_counter() - process_started())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 0.5 <= float(done.stdout) < 30.0


def test_a_gate_slower_than_its_budget_runs_the_rounds_that_can_flag(tiny_repo: TinyRepo) -> None:
    """The real rounds: a 1 s budget that round 1 already spends leaves the fewest rounds a
    regression of one case needs, and the run stops there."""
    base = tiny_repo.commit("base")
    settings = replace(FIVE_PERCENT, budget_s=1.0, max_rounds=30)
    lines: list[str] = []
    started = time.perf_counter() - 5.0  # the budget already spent
    (res,) = gate_tiny(tiny_repo, base, base, settings, lines.append, started)
    need = settings.max_rounds
    assert need < 30 and any("running the" in line for line in lines)
    assert len(res.rounds) <= need
