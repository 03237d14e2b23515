"""The files a training run leaves behind, and how each is written.

- ``config.json``: the full configuration (written once, before training starts);
- ``metrics.jsonl``: one JSON object per iteration, flushed as written;
- ``summary.json``: totals at the end (written atomically);
- ``checkpoint.pt``: see ``run/checkpoint.py``;
- ``tensorboard/``: with ``--tensorboard``, TensorBoard event files (see ``run/tensorboard.py``).

A new run never writes into a directory that already holds these files: the command refuses
(``--resume`` continues the run, ``--overwrite`` replaces it), because a run mixed into another's
files (a config from one, a checkpoint from the other) is worse than no run. See
:func:`run_files` and :func:`remove_files`.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, TextIO

CONFIG_NAME = "config.json"
METRICS_NAME = "metrics.jsonl"
SUMMARY_NAME = "summary.json"
CHECKPOINT_NAME = "checkpoint.pt"  # written by run/checkpoint.py, which takes the name from here
TENSORBOARD_DIR = "tensorboard"
RUN_FILE_NAMES = (CHECKPOINT_NAME, CONFIG_NAME, METRICS_NAME, SUMMARY_NAME)
# What rlperf writes under a TensorBoard log directory: SummaryWriter's event files, and
# torch.profiler traces where TensorBoard's profiler plugin looks for them.
TENSORBOARD_PATTERNS = ("events.out.tfevents.*", "plugins/profile/*/*.pt.trace.json")
TRACE_PATTERN = "*.pt.trace.json"


def tensorboard_files(log_dir: str | Path) -> list[Path]:
    """The files rlperf wrote under a TensorBoard log directory (none if it does not exist)."""
    log_dir = Path(log_dir)
    if not log_dir.is_dir():
        return []
    return sorted(p for pattern in TENSORBOARD_PATTERNS for p in log_dir.glob(pattern))


def trace_files(trace_dir: str | Path) -> list[Path]:
    """torch.profiler traces (``*.pt.trace.json``) directly in ``trace_dir``."""
    trace_dir = Path(trace_dir)
    return sorted(trace_dir.glob(TRACE_PATTERN)) if trace_dir.is_dir() else []


def run_files(path: str | Path) -> list[Path]:
    """The files of an earlier run in run directory ``path``: the four run files and the
    TensorBoard files under ``path/tensorboard``. Anything else in the directory is not rlperf's
    and is never counted (nor removed by :func:`remove_files`)."""
    path = Path(path)
    if not path.is_dir():
        return []
    found = [path / name for name in RUN_FILE_NAMES if (path / name).is_file()]
    return found + tensorboard_files(path / TENSORBOARD_DIR)


def cannot_write(path: str | Path, folder: bool) -> str | None:
    """Why ``path`` could not be written, or None when it can: a folder to create or use
    (``folder=True``, a run directory) or a file to create or replace.

    Tried for real in the nearest folder that exists, with a probe folder made there and removed
    at once, so nothing stays behind: permission bits do not tell (root passes them, and /proc,
    a read-only mount or a full quota still refuse).
    """
    path = Path(path)
    if folder and path.exists() and not path.is_dir():
        return f"{path} is a file, not a directory"
    if not folder and path.is_dir():
        return f"{path} is a directory, not a file"
    nearest = path if folder else path.parent
    while not nearest.exists() and nearest != nearest.parent:
        nearest = nearest.parent
    if not nearest.is_dir():
        return f"{nearest} is a file, not a directory"
    try:
        tempfile.TemporaryDirectory(dir=nearest, prefix=".rlperf-probe-").cleanup()
    except OSError as e:
        return f"cannot create anything in {nearest} ({e.strerror or e})"
    return None


def out_file_problem(flag: str, path: Path | None) -> str | None:
    """Why the file ``flag`` names could not be written, or None; checked before any work,
    so a long run does not end in a traceback at its last step."""
    if path is None:
        return None
    if not path.parent.is_dir():
        return f"{flag}: directory {path.parent} does not exist"
    problem = cannot_write(path, folder=False)
    return f"{flag} {path}: {problem}" if problem else None


def describe_files(root: str | Path, files: list[Path], limit: int = 4) -> str:
    """``"config.json, metrics.jsonl and 3 more"``: names relative to ``root``, for messages."""
    root = Path(root)
    names = [str(p.relative_to(root)) if p.is_relative_to(root) else str(p) for p in files]
    if len(names) > limit:
        return ", ".join(names[:limit]) + f" and {len(names) - limit} more"
    return ", ".join(names)


def remove_files(files: list[Path], root: str | Path) -> None:
    """Delete ``files`` (an earlier run's, for ``--overwrite``), then the folders strictly
    below ``root`` that this left empty (``tensorboard/plugins/profile/<run>``). Nothing else
    is touched: other files stay, and ``root`` itself is kept even when empty."""
    root = Path(root).resolve()
    folders: set[Path] = set()
    for f in files:
        f.unlink(missing_ok=True)
        folders.update(p for p in f.resolve().parents if p != root and p.is_relative_to(root))
    # Deepest first, so a parent is tried after its children; rmdir refuses non-empty ones.
    for folder in sorted(folders, key=lambda p: -len(p.parts)):
        try:
            folder.rmdir()
        except OSError:
            continue


def _clean(value: Any) -> Any:
    """JSON has no NaN/inf: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as indented JSON through a temporary file and a rename."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_clean(data), indent=2) + "\n")
    os.replace(tmp, path)


class RunDir:
    """Writer for one run directory."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._metrics: TextIO | None = None

    def prepare(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)

    def write_config(self, config: dict[str, Any]) -> None:
        write_json_atomic(self.path / CONFIG_NAME, config)

    def open_metrics(self, keep_through_iteration: int | None = None) -> None:
        """Open metrics.jsonl for appending; on resume, drop lines after the checkpoint."""
        path = self.path / METRICS_NAME
        if keep_through_iteration is not None and path.exists():
            kept = []
            for line in path.read_text().splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    break  # a torn last line from a crash
                if row.get("iteration", 0) <= keep_through_iteration:
                    kept.append(line)
            path.write_text("".join(k + "\n" for k in kept))
        elif keep_through_iteration is None:
            path.write_text("")
        self._metrics = open(path, "a", buffering=1)  # noqa: SIM115 - closed in close()

    def append_metrics(self, row: dict[str, Any]) -> None:
        assert self._metrics is not None
        self._metrics.write(json.dumps(_clean(row)) + "\n")

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_json_atomic(self.path / SUMMARY_NAME, summary)

    def close(self) -> None:
        if self._metrics is not None:
            self._metrics.close()
            self._metrics = None
