"""A second run into a directory that holds a run is refused (one line, exit 2, every byte kept)
unless --overwrite, which replaces rlperf's files of the earlier run and nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlperf.cli import main
from rlperf.run import checkpoint, run_dir

TINY = ["--num-envs", "8", "--num-steps", "16", "--num-minibatches", "4", "--update-epochs",
        "1", "--threads", "1", "--seed", "2", "--no-progress"]  # fmt: skip
BATCH = 8 * 16
RUN_FILES = {"checkpoint.pt", "config.json", "metrics.jsonl", "summary.json"}


def tree(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` (relative path -> bytes)."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def train(run: Path, iterations: int, *extra: str) -> int:
    argv = ["train", *TINY, "--total-steps", str(iterations * BATCH), "--run-dir", str(run)]
    return main([*argv, *extra])


@pytest.fixture
def earlier_run(tmp_path: Path) -> Path:
    """A finished 2-iteration run, plus a file of the user's that rlperf must never touch."""
    run = tmp_path / "a"
    assert train(run, 2) == 0
    (run / "notes.txt").write_text("mine\n")
    return run


def test_checkpoint_name_is_the_one_the_guard_looks_for() -> None:
    assert run_dir.CHECKPOINT_NAME == checkpoint.CHECKPOINT_NAME


def test_second_train_into_a_run_is_refused_and_changes_nothing(
    usage_error, earlier_run: Path, capsys: pytest.CaptureFixture
) -> None:
    before = tree(earlier_run)
    line = usage_error(["train", *TINY, "--total-steps", str(BATCH), "--run-dir",
                                str(earlier_run)])  # fmt: skip
    assert f"run directory {earlier_run} already holds a run" in line
    assert f"--resume {earlier_run}" in line and "--overwrite" in line
    assert tree(earlier_run) == before


def test_an_empty_or_missing_directory_is_fine(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert train(tmp_path / "empty", 1) == 0
    assert train(tmp_path / "missing" / "deeper", 1) == 0
    assert RUN_FILES <= {p.name for p in (tmp_path / "missing" / "deeper").iterdir()}


def test_a_directory_with_only_other_files_is_fine(tmp_path: Path) -> None:
    (tmp_path / "readme.md").write_text("x")
    assert train(tmp_path, 1) == 0
    assert (tmp_path / "readme.md").read_text() == "x"


def test_overwrite_with_resume_is_an_error(usage_error, earlier_run: Path, capsys) -> None:
    before = tree(earlier_run)
    line = usage_error(["train", "--resume", str(earlier_run), "--overwrite"])
    assert "--overwrite" in line and "--resume" in line
    assert tree(earlier_run) == before


def test_overwrite_after_a_bad_input_loses_nothing(usage_error, earlier_run: Path, capsys) -> None:
    before = tree(earlier_run)
    usage_error(["train", *TINY, "--run-dir", str(earlier_run), "--overwrite",
                         "--env", "nope"])  # fmt: skip
    assert tree(earlier_run) == before


def test_overwrite_replaces_the_run_and_keeps_other_files(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard", reason="needs the tensorboard extra (--tensorboard)")
    run = tmp_path / "a"
    assert train(run, 2, "--tensorboard") == 0
    (run / "notes.txt").write_text("mine\n")
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    # The new run writes no TensorBoard files: the earlier run's must not stay beside its own.
    assert train(run, 1, "--overwrite") == 0
    assert {p.name for p in run.iterdir()} == RUN_FILES | {"notes.txt"}
    assert (run / "notes.txt").read_text() == "mine\n"
    rows = (run / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(r)["global_step"] for r in rows] == [BATCH]
    assert json.loads((run / "summary.json").read_text())["global_step"] == BATCH


# -- rlperf profile --out ----------------------------------------------------------------------
PROFILE = ["profile", *TINY, "--total-steps", str(3 * BATCH)]
TRACE = ["--torch-profiler", "--wait", "0", "--warmup", "1", "--active", "1"]


def test_second_profile_into_an_out_dir_is_refused_and_changes_nothing(
    usage_error, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "p"
    assert main([*PROFILE, "--out", str(out), *TRACE]) == 0
    assert (out / "report.json").is_file() and list((out / "torch_traces").glob("*.pt.trace.json"))
    capsys.readouterr()
    before = tree(out)
    for extra in ([], TRACE):
        line = usage_error([*PROFILE, "--out", str(out), *extra])
        assert f"--out {out} already holds a profile" in line and "--overwrite" in line
        assert "report.json" in line
    assert tree(out) == before


def test_profile_refuses_a_trace_directory_that_holds_traces(
    usage_error, tmp_path: Path, capsys
) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "old.pt.trace.json").write_text("{}")
    line = usage_error([*PROFILE, *TRACE, "--torch-profiler-dir", str(traces)])
    assert f"trace directory {traces} already holds torch.profiler traces" in line
    assert "old.pt.trace.json" in line
    assert tree(traces) == {"old.pt.trace.json": b"{}"}


def test_profile_overwrite_removes_the_old_report_and_traces_only(tmp_path: Path, capsys) -> None:
    out = tmp_path / "p"
    assert main([*PROFILE, "--out", str(out), *TRACE]) == 0
    (out / "keep.txt").write_text("mine")
    old_report = (out / "report.json").read_bytes()
    # Without --torch-profiler this run writes no trace: the old ones must not stay beside it.
    assert main([*PROFILE, "--out", str(out), "--overwrite"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt", "report.json"]
    assert (out / "report.json").read_bytes() != old_report


def test_profile_refuses_a_run_dir_that_holds_a_run(usage_error, earlier_run: Path, capsys) -> None:
    before = tree(earlier_run)
    line = usage_error([*PROFILE, "--run-dir", str(earlier_run)])
    assert f"--resume {earlier_run}" in line
    assert tree(earlier_run) == before
