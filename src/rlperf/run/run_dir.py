"""The files a training run leaves behind, and how each is written.

- ``config.json``: the full configuration (written once, before training starts);
- ``metrics.jsonl``: one JSON object per iteration, flushed as written;
- ``summary.json``: totals at the end (written atomically);
- ``checkpoint.pt``: see ``run/checkpoint.py``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

CONFIG_NAME = "config.json"
METRICS_NAME = "metrics.jsonl"
SUMMARY_NAME = "summary.json"


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
        self._metrics = None

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
