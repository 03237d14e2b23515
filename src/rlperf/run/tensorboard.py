"""TensorBoard scalars for ``--tensorboard``: the metrics rlperf already has, once per iteration.

TensorBoard is where CleanRL and Stable-Baselines3 users look at a run, so rlperf writes there
too: the figures of each ``metrics.jsonl`` row as scalars, step = ``global_step``, into
``<run_dir>/tensorboard`` (one TensorBoard run per rlperf run directory):

- ``charts/sps``, ``charts/sps_cumulative``, ``charts/mean_return``, ``charts/learning_rate``;
- ``losses/loss``, ``losses/pg_loss``, ``losses/v_loss``, ``losses/entropy``,
  ``losses/approx_kl``, ``losses/clipfrac``;
- ``sections/<path>``: seconds each section ran in that iteration (``sections/rollout/env_step``).

The ``tensorboard`` package is an optional dependency (``pip install 'rlperf[tensorboard]'``);
:func:`tensorboard_missing` says whether it is absent before any work starts. The writer's own
time is charged to the ``measurement/tensorboard`` section, not to training.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rlperf.timing import names

INSTALL_HINT = "pip install 'rlperf[tensorboard]'"
# metrics.jsonl key -> TensorBoard tag; grouped as CleanRL groups them (charts/, losses/).
SCALAR_TAGS = {
    "sps": "charts/sps",
    "sps_cumulative": "charts/sps_cumulative",
    "mean_return": "charts/mean_return",
    "learning_rate": "charts/learning_rate",
    "loss": "losses/loss",
    "pg_loss": "losses/pg_loss",
    "v_loss": "losses/v_loss",
    "entropy": "losses/entropy",
    "approx_kl": "losses/approx_kl",
    "clipfrac": "losses/clipfrac",
}
SECTION_PREFIX = "sections/"


def tensorboard_missing() -> str | None:
    """None when TensorBoard logging works here, else the one-line reason (with the fix)."""
    try:
        # torch's writer imports the tensorboard package itself; importing it is the test.
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401
    except ImportError as e:
        return f"--tensorboard needs the tensorboard package ({e}): {INSTALL_HINT}"
    return None


class TensorBoardLogger:
    """A trainer callback writing each iteration's metrics row as TensorBoard scalars.

    Args:
        log_dir: the TensorBoard log directory (created now).
        purge_step: on a resumed run, the first step not yet saved (checkpoint step + 1):
            TensorBoard then hides what the stopped process logged after its checkpoint,
            which the resumed run logs again.
    """

    def __init__(self, log_dir: str | Path, purge_step: int | None = None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(log_dir)
        self._writer: Any = SummaryWriter(str(self.log_dir), purge_step=purge_step)

    def __call__(self, trainer: Any, row: dict[str, Any]) -> None:
        """Write ``row`` (a ``trainer.callbacks`` entry: called after every iteration)."""
        with trainer.prof.section(names.MEASUREMENT), trainer.prof.section(names.TENSORBOARD):
            self.write(row)

    def write(self, row: dict[str, Any]) -> None:
        """Write one metrics row's figures at step ``row["global_step"]``."""
        step = int(row["global_step"])
        add = self._writer.add_scalar
        for key, tag in SCALAR_TAGS.items():
            value = row.get(key)
            # mean_return is None until an episode ends; NaN/inf never reach here (the trainer
            # stops on a non-finite loss) but would only draw a gap, so they are left out.
            if value is not None and math.isfinite(value):
                add(tag, value, step)
        for path, seconds in row.get("sections_s", {}).items():
            add(SECTION_PREFIX + path, seconds, step)

    def close(self) -> None:
        """Flush everything written to disk and close the event file (idempotent)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
