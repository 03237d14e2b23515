"""The scripts' harness: ABBA order, paired ratios, and one fresh process per sample."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import rlperf
from rlperf.bench.harness import (
    HarnessError,
    Implementation,
    abba,
    compare,
    paired_ratios,
    parse_shape,
    run_fresh,
    spread,
    summary,
)


def test_abba_alternates_the_order_every_round() -> None:
    assert list(abba(["a", "b"], 4)) == [
        (0, "a"), (0, "b"), (1, "b"), (1, "a"), (2, "a"), (2, "b"), (3, "b"), (3, "a"),
    ]  # fmt: skip
    assert [n for _, n in abba(["a", "b", "c"], 2)] == ["a", "b", "c", "c", "b", "a"]


def test_spread_and_paired_ratios() -> None:
    assert spread([3.0, 1.0, 2.0], ".1f") == "2.0 [1.0 - 3.0]"
    assert spread([0.5, 2.0], ".2f", unit="x") == "1.25x [0.50 - 2.00]"
    assert paired_ratios([2.0, 3.0, 8.0], [1.0, 3.0, 4.0]) == [2.0, 1.0, 2.0]
    with pytest.raises(ValueError):
        paired_ratios([1.0], [1.0, 2.0])


def _toy(label: str, log: str, value: float) -> dict:
    """A toy implementation: appends its label and pid to ``log``, returns its value."""
    with open(log, "a") as f:
        f.write(f"{label} {os.getpid()}\n")
    return {"pid": os.getpid(), "seconds": value}


def test_compare_runs_each_sample_in_a_fresh_process_abba(tmp_path: Path) -> None:
    log = str(tmp_path / "log")
    impls = [Implementation("new", _toy, {"label": "new", "log": log, "value": 1.0}),
             Implementation("old", _toy, {"label": "old", "log": log, "value": 2.0})]  # fmt: skip
    seen = []
    results = compare(impls, 3, lambda r, name, result: seen.append((r, name)))
    ran = [line.split() for line in Path(log).read_text().splitlines()]
    assert [label for label, _ in ran] == ["new", "old", "old", "new", "new", "old"]
    assert seen == list(abba(["new", "old"], 3))
    pids = {int(pid) for _, pid in ran}
    assert len(pids) == 6 and os.getpid() not in pids  # one new process per sample
    assert [r["pid"] for r in results["new"]] == [int(p) for label, p in ran if label == "new"]
    lines = summary(results, "seconds", reference="old", fmt=".1f")
    assert lines[0] == ("new  seconds 1.0 [1.0 - 1.0]  / old, paired: 0.500 [0.500 - 0.500], "
                        "above 1 in 0 of 3")  # fmt: skip
    assert lines[1] == "old  seconds 2.0 [2.0 - 2.0]"


def _import_toy() -> dict:
    import toy_tree_module

    return {"version": toy_tree_module.VERSION, "file": toy_tree_module.__file__}


def test_an_implementation_runs_against_its_own_tree(tmp_path: Path) -> None:
    """``src`` goes first on the child's path: two trees, two versions, the parent untouched."""
    trees = []
    for version in (1, 2):
        src = tmp_path / f"tree{version}" / "src"
        src.mkdir(parents=True)
        (src / "toy_tree_module.py").write_text(f"VERSION = {version}\n")
        trees.append(str(src))
    got = [run_fresh(Implementation(f"v{i}", _import_toy, src=src)) for i, src in enumerate(trees)]
    assert [g["version"] for g in got] == [1, 2]
    assert got[0]["file"].startswith(trees[0])
    with pytest.raises(ImportError):
        import toy_tree_module  # noqa: F401


def _rlperf_origin() -> dict:
    import rlperf

    return {"file": rlperf.__file__}


def test_another_rlperf_tree_replaces_the_scripts_own(tmp_path: Path) -> None:
    """The harness imports rlperf; an implementation with another tree's src gets that tree's."""
    (tmp_path / "rlperf").mkdir()
    (tmp_path / "rlperf" / "__init__.py").write_text('"""An older rlperf."""\n')
    got = run_fresh(Implementation("base", _rlperf_origin, src=str(tmp_path)))
    assert got["file"] == str(tmp_path / "rlperf" / "__init__.py")
    assert run_fresh(Implementation("head", _rlperf_origin))["file"] == rlperf.__file__


def _fails() -> dict:
    raise ValueError("planted")


def test_a_failing_implementation_names_itself() -> None:
    with pytest.raises(HarnessError, match="broken failed: ValueError: planted"):
        run_fresh(Implementation("broken", _fails))
    with pytest.raises(ValueError, match="unique"):
        compare([Implementation("a", _fails), Implementation("a", _fails)], 1)


def test_parse_shape_reads_envs_by_steps_and_names_what_is_wrong() -> None:
    import argparse

    assert parse_shape("4x128") == (4, 128)
    assert parse_shape("1024X32") == (1024, 32)
    cases = [("4xq", "not ENVSxSTEPS"), ("4x", "not ENVSxSTEPS"), ("4x8x2", "not ENVSxSTEPS"),
             ("0x32", "must be >= 1"), ("4x-1", "must be >= 1")]  # fmt: skip
    for bad, match in cases:
        with pytest.raises(argparse.ArgumentTypeError, match=match):
            parse_shape(bad)
