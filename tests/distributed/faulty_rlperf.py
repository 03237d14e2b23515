"""``python -m rlperf``, with a fault injected into one rank (the distributed fault tests).

``RLPERF_TEST_FAULT=RANK:ITERATION:KIND`` makes rank RANK, at the start of iteration
ITERATION's update, raise a ValueError (``raise``), raise it only before any elastic restart
(``raise-once``), or SIGKILL itself (``kill``); it writes the time it did so to
``RLPERF_TEST_DIR/fault_time``. Every rank writes its pid to ``RLPERF_TEST_DIR/pid.<rank>``
so the test can check that none is left behind.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from rlperf.cli import main
from rlperf.distributed import launch
from rlperf.ppo.trainer import Trainer


def install_fault(spec: str, out: Path) -> None:
    rank, iteration, kind = spec.split(":")
    restarted = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0
    original = Trainer.update

    def update(self: Trainer, supervised: bool = False):  # type: ignore[no-untyped-def]
        due = self.ranks.rank == int(rank) and self.iteration == int(iteration)
        if due and not (kind == "raise-once" and restarted):
            (out / "fault_time").write_text(repr(time.time()))
            if kind == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise ValueError(f"injected fault at iteration {iteration}")
        return original(self, supervised)

    Trainer.update = update  # type: ignore[method-assign]


if __name__ == "__main__":
    out = Path(os.environ["RLPERF_TEST_DIR"])
    if "RANK" in os.environ:
        (out / f"pid.{os.environ['RANK']}.{os.getpid()}").write_text("")
        if os.environ.get("RLPERF_TEST_FAULT"):
            install_fault(os.environ["RLPERF_TEST_FAULT"], out)
    launch.RANK_ENTRY = (__file__,)
    sys.exit(main())
