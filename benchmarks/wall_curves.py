"""Learning curves against wall time, as a table: each run's mean return of the last 100
training episodes when its clock reached each of the given seconds.

    python benchmarks/wall_curves.py runs/cheetah-s1 runs/cheetah-s2 --at 30,60,120,240,313
    python benchmarks/wall_curves.py runs/*-s1 --at 60,313 --target 5800

Reads each run directory's metrics.jsonl (a row an iteration, ``wall_s`` on the run's own clock,
``mean_return`` the last-100 mean then). A cell is the last row at or before that second, blank
past the run's end; the last column is the run's end (its return and second); ``--target R``
adds the first second the run's mean reached R. A missing or malformed file: one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def rows_of(run_dir: Path) -> list[dict]:
    """The run's metrics rows; ValueError saying why when the file is missing or malformed."""
    path = run_dir / "metrics.jsonl"
    try:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for row in rows:
            float(row["wall_s"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: {type(e).__name__}: {e}") from e
    if not rows:
        raise ValueError(f"{path}: no rows")
    return rows


def at(rows: list[dict], second: float) -> float | None:
    """The last-100 mean return of the last row logged at or before ``second``."""
    before = [r for r in rows if r["wall_s"] <= second and r.get("mean_return") is not None]
    if not before or second > rows[-1]["wall_s"]:
        return None
    return float(before[-1]["mean_return"])


def first_reaching(rows: list[dict], target: float) -> float | None:
    """The first second at which the last-100 mean return was at least ``target``."""
    for row in rows:
        if row.get("mean_return") is not None and row["mean_return"] >= target:
            return float(row["wall_s"])
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run directories (rlperf train --run-dir)")
    ap.add_argument("--at", default="30,60,120,180,240,313", help="seconds, comma-separated")
    ap.add_argument("--target", type=float, help="also the first second at this return")
    args = ap.parse_args(argv)
    try:
        seconds = [float(s) for s in args.at.split(",")]
    except ValueError:
        print(f"wall_curves: --at takes seconds separated by commas, got {args.at!r}",
              file=sys.stderr)  # fmt: skip
        return 2
    header = ["run", *(f"{s:g} s" for s in seconds), "end"]
    if args.target is not None:
        header.append(f"reached {args.target:g}")
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for run in args.runs:
        try:
            rows = rows_of(run)
        except ValueError as e:
            print(f"wall_curves: {e}", file=sys.stderr)
            return 2
        cells = [run.name]
        for second in seconds:
            value = at(rows, second)
            cells.append("" if value is None else f"{value:.0f}")
        end = rows[-1]
        cells.append(f"{end.get('mean_return') or 0:.0f} at {end['wall_s']:.0f} s")
        if args.target is not None:
            reached = first_reaching(rows, args.target)
            cells.append("-" if reached is None else f"{reached:.0f} s")
        lines.append("| " + " | ".join(cells) + " |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
