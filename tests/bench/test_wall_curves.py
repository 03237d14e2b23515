"""benchmarks/wall_curves.py: the return at each second, read from a run's metrics rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_scripts import load_script


def run_dir(tmp_path: Path, name: str, rows: list[tuple[float, float | None]]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    lines = [json.dumps({"wall_s": s, "mean_return": r}) for s, r in rows]
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_each_cell_is_the_last_row_at_or_before_its_second(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    script = load_script("wall_curves.py")
    fast = run_dir(tmp_path, "fast", [(1.0, None), (10.0, 100.0), (20.0, 300.0), (30.0, 250.0)])
    short = run_dir(tmp_path, "short", [(5.0, 50.0), (12.0, 80.0)])
    assert script.main([str(fast), str(short), "--at", "10,15,30", "--target", "200"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| run | 10 s | 15 s | 30 s | end | reached 200 |"
    assert lines[2] == "| fast | 100 | 100 | 250 | 250 at 30 s | 20 s |"
    assert lines[3] == "| short | 50 |  |  | 80 at 12 s | - |", "blank past the run's end"


def test_a_missing_run_or_bad_seconds_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    script = load_script("wall_curves.py")
    assert script.main([str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    fast = run_dir(tmp_path, "fast", [(1.0, 5.0)])
    assert script.main([str(fast), "--at", "ten"]) == 2
    assert "--at takes seconds" in capsys.readouterr().err
