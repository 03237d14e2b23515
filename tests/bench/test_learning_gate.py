"""``rlperf gate --learning`` and ``rlperf bisect --learning``: end to end on a copy of rlperf
(real training, to a return CartPole reaches in ~16k steps), on a tiny repository whose
"training" is arithmetic on the seed, and its exit status on bad input.

Training on one thread from a seed is deterministic, so the steps to a return, and with them
the gate's decision on them, are the same on every run of these tests; only CPU seconds vary.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from tiny_repo import TinyRepo, git

import rlperf
from rlperf.bench.bisection import bisect
from rlperf.bench.gate import GateError, Side, Worker, exit_code
from rlperf.bench.learning_gate import LearningSettings, run_learning_rounds
from rlperf.bench.stats import OK, REGRESSION
from rlperf.cli import main

# CartPole to a mean return of 60: 16,384 steps for seeds 1-16 at the default learning rate,
# more at a fifth of it (~0.1 s of CPU a run). One look at 4 rounds of two runs a side (the
# workload's runs_per_round): every head run longer than every base run gives p = 1/C(16, 8).
TINY = ["--workloads", "cartpole_mlp=60", "--seed", "1", "--min-rounds", "4", "--max-rounds",
        "4", "--looks", "1"]  # fmt: skip

SLOW_LEARNER = """

# Planted by the test: a fifth of the configured learning rate.
_planted_init = Trainer.__init__


def _planted_slow_init(self, cfg, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
    cfg.ppo.learning_rate *= 0.2
    _planted_init(self, cfg, *args, **kwargs)


Trainer.__init__ = _planted_slow_init
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path | str]:
    """A git repo holding a copy of rlperf (its built kernels included): commits base and
    slow (a fifth of the learning rate)."""
    root = tmp_path_factory.mktemp("learning-repo")
    package = Path(rlperf.__file__).parent
    shutil.copytree(package, root / "src" / "rlperf", ignore=shutil.ignore_patterns("__pycache__"))
    git(root, "init", "-q")
    git(root, "add", "src")
    git(root, "commit", "-qm", "base")
    base = git(root, "rev-parse", "HEAD")
    trainer = root / "src" / "rlperf" / "ppo" / "trainer.py"
    trainer.write_text(trainer.read_text() + SLOW_LEARNER)
    git(root, "commit", "-qam", "slow learner")
    slow = git(root, "rev-parse", "HEAD")
    return {"root": root, "base": base, "slow": slow}


def gate(repo: dict, head: str, *args: str, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.chdir(repo["root"])
    git(repo["root"], "checkout", "-q", repo[head])  # the head is the working tree
    return main(["gate", "--learning", *args])


def test_a_slower_learner_is_a_regression(
    repo: dict, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    out_json = tmp_path / "learning.json"
    code = gate(repo, "slow", "--base", str(repo["base"]), "--json", str(out_json), *TINY,
                monkeypatch=monkeypatch)  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1, out
    assert "cartpole_mlp (CartPole, MLP (rlperf train's defaults); return >= 60 within" in out
    assert "REGRESSION after 4 rounds: steps to return" in out
    verdict_line = out.rstrip().splitlines()[-1]  # whether SPS moved too is CPU time's say
    assert verdict_line.startswith("gate: LEARNING REGRESSION beyond 10% in cartpole_mlp (steps")
    assert verdict_line.endswith("(exit 1)")
    saved = json.loads(out_json.read_text())
    workload = saved["workloads"][0]
    assert saved["kind"] == "learning" and saved["exit_code"] == 1
    assert workload["runs_per_round"] == 2  # cartpole_mlp's: two runs a side each round
    assert [run["seed"] for run in workload["runs"]["base"]] == list(range(1, 17, 2))
    assert [run["seed"] for run in workload["runs"]["head"]] == list(range(2, 17, 2))
    assert all(run["reached"] for side in workload["runs"].values() for run in side)
    assert {run["steps"] for run in workload["runs"]["base"]} == {16384}
    assert min(run["steps"] for run in workload["runs"]["head"]) > 16384
    assert workload["verdicts"]["steps"]["p_value"] == pytest.approx(1 / math.comb(16, 8))
    # The same runs, decided again from the file, give the same answer.
    assert main(["gate", "--learning", "--from-json", str(out_json)]) == 1


def test_the_base_against_itself_passes(
    repo: dict, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    code = gate(repo, "base", "--base", str(repo["base"]), *TINY, monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    assert code == 0, out
    # Steps only: SPS is CPU time, which these tests never judge (8 runs a side of 0.1 s).
    assert "steps to return 1.00x unchanged within noise (p=" in out
    assert out.rstrip().endswith("gate: no learning regression beyond 10% (exit 0)")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--base", "no-such-ref", *TINY], "unknown git ref 'no-such-ref'"),
        (["--base", "HEAD", "--workloads", "nope"], "unknown learning workload 'nope'"),
        (["--base", "HEAD", "--workloads", "cartpole_mlp=600"],
         "no run can reach a return of 600: the best an episode of cartpole_mlp returns is 500"),
        (["--base", "HEAD", "--workloads", "cartpole_mlp=x"], "'x' is not a return"),
        (["--base", "HEAD", "--workloads", "cartpole_mlp,cartpole_mlp"], "twice"),
        (["--base", "HEAD", "--cases", "gae"], "--cases is the SPS gate's option"),
        (["--base", "HEAD", "--pairs", "3"], "--pairs is the SPS gate's option"),
        (["--base", "HEAD", "--metric", "wall"], "--learning --metric must be one of steps"),
        (["--base", "HEAD", "--min-rounds", "3", "--max-rounds", "3", "--looks", "1"],
         "too few to flag a regression among 5 workloads"),
        (["--base", "HEAD", "--looks", "9"], "--looks must be in [1, 7]"),
        (["--base", "HEAD", "--seed", "-1"], "--seed must be in"),
        (["--base", "HEAD", "--threshold", "0"], "threshold must be in"),
        (["--base", "HEAD", "--json", "/no/such/dir/out.json"], "does not exist"),
        ([], "--base REF is required"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(
    repo: dict, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
    args: list[str], message: str,
) -> None:  # fmt: skip
    code = gate(repo, "base", *args, monkeypatch=monkeypatch)
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("rlperf: error: ") and message in err, err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["gate", "--base", "HEAD", "--workloads", "petri_masked"], "--workloads needs --learning"),
        (["gate", "--base", "HEAD", "--metric", "steps"], "--metric steps needs --learning"),
        (["bisect", "HEAD~1", "HEAD", "--learning", "--workloads", "nope"],
         "unknown learning workload 'nope'"),
    ],
)  # fmt: skip
def test_options_of_the_other_gate_are_refused(
    repo: dict, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
    args: list[str], message: str,
) -> None:  # fmt: skip
    monkeypatch.chdir(repo["root"])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_malformed_from_json_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "sps.json"
    path.write_text(json.dumps({"cases": []}))
    assert main(["gate", "--learning", "--from-json", str(path)]) == 2
    assert "not a --learning file" in capsys.readouterr().err


# -- a tiny repository: "training" is arithmetic on the seed -------------------------------
LEARN = '''"""Fake training for the learning gate's tests: steps to the return from the seed."""

# {message}

import random

FACTOR = {factor}  # how many times more steps than the base this commit needs
CRASH = {crash}
CAP = 5000


def train(seed):
    if CRASH:
        raise RuntimeError("planted crash")
    steps = int(1000 * FACTOR * (1 + 0.2 * random.Random(seed).random()))
    return {{"reached": steps <= CAP, "steps": min(steps, CAP), "cpu_s": 1e-3 * min(steps, CAP),
             "wall_s": 1e-3, "final_return": 1.0}}
'''

LEARNING_REGISTRY = '''"""The tests' learning registry: ``fake`` trains ``rlperf.learn``."""


class WorkloadSkipped(Exception):
    pass


def learn(name, seed, threshold=None):
    from rlperf import learn

    if name == "missing":
        raise WorkloadSkipped("no such env in this commit")
    return learn.train(seed)  # "fake" and "fake2" (two runs a round) alike
'''


def commit_learner(repo: TinyRepo, message: str, factor: float = 1.0, crash: bool = False) -> str:
    (repo.root / "src" / "rlperf" / "learn.py").write_text(
        LEARN.format(factor=factor, crash=crash, message=message)
    )
    git(repo.root, "add", "-A")
    git(repo.root, "commit", "-qm", message)
    return git(repo.root, "rev-parse", "HEAD")


FAST = LearningSettings(min_rounds=4, max_rounds=6, looks=2, seed=0)


def describe(name: str) -> tuple[str, float, int, int]:
    return "fake", 1.0, 5000, 2 if name == "fake2" else 1


def tiny_gate(repo: TinyRepo, base: str, head: str, workloads: list[str],
              log: list[str] | None = None) -> list:  # fmt: skip
    registry = repo.root.parent / "learning.py"
    registry.write_text(LEARNING_REGISTRY)
    log = [] if log is None else log
    worker = Worker(registry, preload=())
    try:
        from rlperf.bench.worktree import checked_out

        with checked_out(base, repo.root) as b, checked_out(head, repo.root) as h:
            sides = Side("base", base, base, b / "src"), Side("head", head, head, h / "src")
            return run_learning_rounds(*sides, [(w, None) for w in workloads], FAST,
                                       log.append, worker, describe)  # fmt: skip
    finally:
        worker.close()


def test_tiny_gate_decides_and_skips(tiny_repo: TinyRepo, capsys: pytest.CaptureFixture) -> None:
    base = commit_learner(tiny_repo, "base")
    slow = commit_learner(tiny_repo, "twice the steps", factor=2.0)
    results = tiny_gate(tiny_repo, base, slow, ["fake", "missing"])
    assert [r.name for r in results] == ["fake"]  # "missing" skipped, saying so
    assert results[0].decision("steps") == REGRESSION and results[0].rounds == 4
    assert exit_code(results, "steps") == 1
    same = tiny_gate(tiny_repo, base, base, ["fake"])
    assert same[0].decision("steps") == OK and exit_code(same, "steps") == 0


def test_a_workload_of_two_runs_a_round(tiny_repo: TinyRepo) -> None:
    """``runs_per_round=2``: two runs a side every round, each its own seed, the looks in
    rounds; a file saved from it is decided again the same way."""
    base = commit_learner(tiny_repo, "base")
    slow = commit_learner(tiny_repo, "twice the steps", factor=2.0)
    log: list[str] = []
    results = tiny_gate(tiny_repo, base, slow, ["fake2", "fake"], log)
    two, one = results
    assert (two.runs_per_round, two.rounds, len(two.runs["base"])) == (2, 4, 8)
    assert (one.rounds, len(one.runs["base"])) == (4, 4)
    seeds = [run["seed"] for side in two.runs.values() for run in side]
    assert len(set(seeds)) == 16 and all(s % 2 == 0 for s in seeds[:8])
    assert two.decision("steps") == REGRESSION
    assert "one run per side a round, 2 for fake2" in log[0]
    saved = {"kind": "learning", "settings": {}, "workloads": [r.to_dict() for r in results]}
    from rlperf.bench.learning_gate import analyse, results_from_json

    again, _ = results_from_json(saved)
    analyse(again, FAST)
    assert again[0].runs_per_round == 2 and again[0].verdicts["steps"] == two.verdicts["steps"]
    saved["workloads"][0]["runs_per_round"] = 9
    with pytest.raises(GateError, match="runs_per_round 9 is not in"):
        results_from_json(saved)


def test_tiny_gate_errors(tiny_repo: TinyRepo) -> None:
    base = commit_learner(tiny_repo, "base")
    crash = commit_learner(tiny_repo, "crash", crash=True)
    with pytest.raises(GateError, match="case fake failed on head .*planted crash"):
        tiny_gate(tiny_repo, base, crash, ["fake"])
    never = commit_learner(tiny_repo, "never learns", factor=100.0)
    with pytest.raises(GateError, match="no run of base or head reached return 1"):
        tiny_gate(tiny_repo, never, never, ["fake"])
    with pytest.raises(GateError, match="no learning workload can run"):
        tiny_gate(tiny_repo, base, base, ["missing"])


def test_bisect_learning_finds_the_commit_that_learns_worse(tiny_repo: TinyRepo) -> None:
    shas = [commit_learner(tiny_repo, f"commit {i}", factor=2.0 if i >= 3 else 1.0)
            for i in range(6)]  # fmt: skip
    registry = tiny_repo.root.parent / "learning.py"
    registry.write_text(LEARNING_REGISTRY)
    lines: list[str] = []

    def rounds(good, commit, workloads, settings, log, worker):  # noqa: ANN001, ANN202
        return run_learning_rounds(good, commit, workloads, settings, log, worker, describe)

    out = bisect(tiny_repo.root, shas[0], shas[-1], [("fake", None)], FAST, lambda _: None,
                 lines.append, registry=registry, preload=(), rounds=rounds)  # fmt: skip
    assert out.code == 1 and out.first_slower is not None
    assert out.first_slower.sha == shas[3]
    assert "learning worse" in out.first_slower.summary()


def test_ci_runs_the_learning_gate_after_the_sps_gate() -> None:
    workflow = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "benchmarks.yml"
    text = workflow.read_text()
    sps = text.index('rlperf gate --base "origin/$BASE_REF"')
    learning = text.index('rlperf gate --learning --base "origin/$BASE_REF"')
    assert sps < learning
    assert "gate-learning.json" in text[learning:]  # its runs are kept with the SPS gate's


def synthetic(head_factor: float, rounds: int = 6) -> dict:
    """A ``--learning --json`` file: one workload, the head ``head_factor`` times the base's
    steps in every round."""

    def runs(factor: float, offset: int) -> list[dict]:
        return [{"seed": 2 * r + offset, "reached": True, "steps": int(1000 * factor) + 10 * r,
                 "cpu_s": 0.5 * factor, "wall_s": 1.0, "final_return": 1.0}
                for r in range(rounds)]  # fmt: skip

    return {
        "kind": "learning", "sides": {"base": {"ref": "a", "sha": "a" * 40},
                                      "head": {"ref": "b", "sha": "b" * 40}},
        "settings": {"threshold": 0.1, "metric": "steps", "min_rounds": 6, "max_rounds": 12,
                     "looks": 3},
        "workloads": [{"name": "w", "what": "fake", "threshold": 1.0, "cap": 5000,
                       "runs": {"base": runs(1.0, 0), "head": runs(head_factor, 1)},
                       "verdicts": {}}],
    }  # fmt: skip


@pytest.mark.parametrize(("factor", "code"), [(1.0, 0), (2.0, 1)], ids=["equal", "twice"])
def test_from_json_decides_on_saved_runs(tmp_path: Path, factor: float, code: int) -> None:
    path = tmp_path / "learning.json"
    path.write_text(json.dumps(synthetic(factor)))
    assert main(["gate", "--learning", "--from-json", str(path)]) == code


def test_history_charts_learning_runs(tmp_path: Path) -> None:
    from rlperf.bench.history import HistoryError, build

    paths = []
    for factor in (1.0, 2.0):
        paths.append(tmp_path / f"run{factor}.json")
        data = synthetic(factor)
        data["workloads"][0]["verdicts"] = {"steps": {"decision": "ok", "rounds": 6,
                                                      "ratio": factor, "bound": "",
                                                      "reason": "r"}}  # fmt: skip
        paths[-1].write_text(json.dumps(data))
    page, count = build(None, paths)
    assert count == 1 and "learning: w" in page and "head/base steps to return" in page
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"kind": "learning", "workloads": [{"name": "w"}]}))
    with pytest.raises(HistoryError, match="malformed"):
        build(None, [broken])


def test_a_registry_workload_beyond_the_runs_a_round_bound_is_refused() -> None:
    """The seeds' span assumes at most MAX_RUNS_PER_ROUND runs a round: a workload asking more
    is one GateError, before any worker starts."""
    from rlperf.bench.learning_gate import MAX_RUNS_PER_ROUND

    def too_many(name: str) -> tuple[str, float, int, int]:
        return "fake", 1.0, 5000, MAX_RUNS_PER_ROUND + 1

    side = Side("base", "a", "a" * 40, Path("/nonexistent/src"))
    with pytest.raises(GateError, match=f"runs_per_round {MAX_RUNS_PER_ROUND + 1} is not in"):
        run_learning_rounds(side, side, [("fake", None)], FAST, lambda _: None, None, too_many)
