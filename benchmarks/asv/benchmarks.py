"""asv benchmarks: every registry case, timed on each commit of the history.

The case definitions are loaded from ``src/rlperf/bench/registry.py`` of the checkout running
asv, not from the installed commit: older commits have no registry (scipy's rule: benchmarks
must still run on old commits), and one definition for every commit keeps the history
comparable. The components themselves come from the commit asv installed.

asv treats smaller as better, so everything here is time for a fixed amount of work:
``time_case`` one call of a case; for ``TimeTrain`` that is a fixed number of env steps of the
real trainer (seconds per 4,096 steps; SPS = 4096 / time), and ``peakmem_case`` its peak memory.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

REGISTRY_PATH = Path(__file__).resolve().parents[2] / "src" / "rlperf" / "bench" / "registry.py"


def _load_registry() -> Any:
    spec = importlib.util.spec_from_file_location("rlperf_asv_registry", REGISTRY_PATH)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # type: ignore[union-attr]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


registry = _load_registry()
E2E = "e2e_train"


class _CaseBenchmark:
    """One asv class per component; ``params`` are that component's case names."""

    component = ""
    param_names = ["case"]
    timeout = 120
    # Noisy shared 2-core box: more rounds (separate processes, interleaved across
    # benchmarks) and a longer warm-up than asv's defaults of 2 rounds and 0.1 s or so.
    rounds = 4
    repeat = (5, 20, 10.0)
    warmup_time = 0.5

    def setup(self, name: str) -> None:
        (case,) = registry.select([name])
        try:
            self.ready = case.setup()
        except registry.CaseSkipped as e:
            # asv's way to skip one parameter combination; the reason is logged by asv -v.
            raise NotImplementedError(str(e)) from e

    def time_case(self, name: str) -> None:
        self.ready.run()


def _component_class(component: str) -> type:
    names = [c.name for c in registry.all_cases() if c.component == component]
    return type(f"Time_{component}", (_CaseBenchmark,), {"component": component, "params": [names]})


for _component in registry.COMPONENTS:
    if _component != E2E:
        globals()[f"Time_{_component}"] = _component_class(_component)


class TimeTrain(_CaseBenchmark):
    """End-to-end: the real trainer for a fixed number of env steps (``time_case``), and the
    process's peak memory over it (``peakmem_case``)."""

    component = E2E
    params = [[c.name for c in registry.all_cases() if c.component == E2E]]
    timeout = 300
    repeat = (5, 20, 20.0)
    warmup_time = 1.0

    def peakmem_case(self, name: str) -> None:
        self.ready.run()
