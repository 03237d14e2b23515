"""``rlperf bisect`` end to end on tiny repositories: the planted commit, nothing, bad input."""

from __future__ import annotations

import dataclasses
from functools import partial
from types import SimpleNamespace

import pytest
from tiny_repo import BACKWARD, FAST, FIVE_PERCENT, TinyRepo, git

from rlperf.bench import commands
from rlperf.bench.bisection import BisectError, Outcome, bisect, max_steps
from rlperf.bench.stats import OK, REGRESSION
from rlperf.cli import main

PLANTED_AT = 4  # of commits 0 (GOOD) .. 7 (BAD)


def eight_commits(repo: TinyRepo, slow_from: int | None = PLANTED_AT) -> list[str]:
    """Commits 0..7; from ``slow_from`` on, the backward loop is 3x longer (None: never)."""
    shas = []
    for i in range(8):
        slow = slow_from is not None and i >= slow_from
        shas.append(repo.commit(f"commit {i}", backward=3 * BACKWARD if slow else BACKWARD))
    return shas


def run_bisect(repo: TinyRepo, good: str, bad: str, lines: list[str]) -> Outcome:
    return bisect(repo.root, good, bad, ["step"], FAST, lambda _: None, lines.append,
                  registry=repo.registry, preload=())  # fmt: skip


def test_finds_the_planted_commit_in_log2_steps(tiny_repo: TinyRepo) -> None:
    shas = eight_commits(tiny_repo)
    lines: list[str] = []
    out = run_bisect(tiny_repo, shas[0], shas[-1], lines)
    assert out.code == 1 and out.first_slower is not None
    assert out.first_slower.sha == shas[PLANTED_AT]
    assert len(out.steps) == max_steps(7) == 4  # BAD, then halving 7 commits
    # The path: BAD first, then each tested commit with its verdict, ratio and phase.
    assert lines[0].startswith("bisect: 7 commits after GOOD")
    assert lines[1].startswith(f'step 1: {shas[-1][:12]} "commit 7": REGRESSION step ratio')
    assert [s.decision for s in out.steps] == [REGRESSION, OK, REGRESSION, REGRESSION]
    assert [s.sha for s in out.steps] == [shas[7], shas[3], shas[5], shas[4]]
    assert "update/backward" in out.first_slower.describe()


@pytest.mark.parametrize("run", range(3))
def test_finds_the_planted_commit_every_time(tiny_repo: TinyRepo, run: int) -> None:
    """Repeated runs (fresh repositories, fresh measurements) agree."""
    shas = eight_commits(tiny_repo, slow_from=1 + run)  # the slowdown moves around as well
    out = run_bisect(tiny_repo, shas[0], shas[-1], [])
    assert out.code == 1 and out.first_slower is not None
    assert out.first_slower.sha == shas[1 + run]


def test_finds_a_small_slowdown_at_the_gate_settings(tiny_repo: TinyRepo) -> None:
    """The whole step 15% slower from commit 2 of 0..4: the gate's statistics and round sizes,
    with a 5% threshold. Bisect's three decisions must all resolve within 30 rounds, and an
    unchanged commit is only `ok` once its interval falls below 1 + threshold: at 2% the
    0.02 s samples of this tiny case left commit 1 undecided after 30 rounds in a clean CI
    run (and once on a loaded box; a 5% plant once before). The 2% gate's catch rate on real
    cases is measured by benchmarks/gate_experiment.py, not here."""
    slower = BACKWARD + int(0.15 * 3 * BACKWARD)  # the step is 3 waits of BACKWARD
    shas = [tiny_repo.commit(f"commit {i}", backward=slower if i >= 2 else BACKWARD)
            for i in range(5)]  # fmt: skip
    settings = dataclasses.replace(FIVE_PERCENT, threshold=0.05)
    out = bisect(tiny_repo.root, shas[0], shas[-1], ["step"], settings, lambda _: None,
                 lambda _: None, registry=tiny_repo.registry, preload=())  # fmt: skip
    assert out.code == 1 and out.first_slower is not None
    assert out.first_slower.sha == shas[2] and len(out.steps) == 3


def test_nothing_to_find_is_exit_0_after_one_step(tiny_repo: TinyRepo) -> None:
    shas = eight_commits(tiny_repo, slow_from=None)
    lines: list[str] = []
    out = run_bisect(tiny_repo, shas[0], shas[-1], lines)
    assert out.code == 0 and out.first_slower is None
    assert len(out.steps) == 1 and out.steps[0].decision == OK


def test_a_crash_names_the_commit(tiny_repo: TinyRepo) -> None:
    good = tiny_repo.commit("good")
    tiny_repo.commit("fine")
    crash = tiny_repo.commit("crashes", crash=True)
    bad = tiny_repo.commit("slow", backward=3 * BACKWARD)
    # Steps: BAD (slower), then "fine" (ok), then "crashes": it fails while warming up.
    message = f"at commit {crash[:12]}: setup failed on commit crashes .*: planted crash"
    with pytest.raises(BisectError, match=message):
        run_bisect(tiny_repo, good, bad, [])


def cli(repo: TinyRepo, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.chdir(repo.root)
    return main(["bisect", *args])


@pytest.mark.parametrize(
    ("refs", "message"),
    [
        (("LAST", "FIRST"), "is not an ancestor of BAD"),
        (("FIRST", "nope"), "unknown git ref 'nope'"),
        (("FIRST", "FIRST"), "are the same commit"),
    ],
    ids=["not-ancestor", "unknown-ref", "same-commit"],
)
def test_bad_input_is_one_line_and_exit_2(
    tiny_repo: TinyRepo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
    refs: tuple[str, str], message: str,
) -> None:  # fmt: skip
    shas = [tiny_repo.commit("a"), tiny_repo.commit("b")]
    named = {"FIRST": shas[0], "LAST": shas[1]}
    code = cli(tiny_repo, monkeypatch, *(named.get(r, r) for r in refs))
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("rlperf: error: ") and message in err


def test_good_off_the_first_parent_line_is_exit_2(
    tiny_repo: TinyRepo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """GOOD on a merged side branch is an ancestor of BAD but not on its first-parent line."""
    base = tiny_repo.commit("base")
    git(tiny_repo.root, "checkout", "-qb", "side")
    side = tiny_repo.commit("side")
    git(tiny_repo.root, "checkout", "-q", "-")
    tiny_repo.commit("main")
    git(tiny_repo.root, "merge", "-q", "--no-edit", "side", "-X", "theirs")
    assert base
    assert cli(tiny_repo, monkeypatch, side, "HEAD") == 2
    assert "is not on the first-parent history" in capsys.readouterr().err


def test_cli_prints_the_path_and_exits_1(
    tiny_repo: TinyRepo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The command itself on the tiny repository: its registry swapped in for the gate's
    (the gate's own registry and torch-preloading workers are what tests/bench/test_gate.py
    runs; the worker machinery is the same)."""
    shas = eight_commits(tiny_repo)
    monkeypatch.setattr(commands, "bisect", partial(bisect, registry=tiny_repo.registry,
                                                    preload=()))  # fmt: skip
    monkeypatch.setattr(commands, "select", lambda names: [SimpleNamespace(name=n) for n in names])
    fast = {"--threshold": FAST.threshold, "--pairs": FAST.pairs_per_round,
            "--sample-s": FAST.sample_s, "--max-rounds": FAST.max_rounds,
            "--warmup-s": FAST.warmup_s}  # the other bisect tests' settings  # fmt: skip
    flags = [str(x) for item in fast.items() for x in item]
    code = cli(tiny_repo, monkeypatch, shas[0], shas[-1], "--cases", "step", *flags)
    out = capsys.readouterr().out.splitlines()
    assert code == 1, out
    assert [line.split(":")[0] for line in out[1:-1]] == ["step 1", "step 2", "step 3", "step 4"]
    assert out[-1].startswith(
        f'bisect: first commit slower than GOOD beyond 50%: {shas[PLANTED_AT][:12]} "commit 4": '
        "step "
    )
    assert "x slower; update/backward " in out[-1] and out[-1].endswith("(4 steps, exit 1)")
