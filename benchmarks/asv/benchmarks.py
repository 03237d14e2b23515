"""asv benchmarks: the registry's cases tagged ``history``, timed on each commit.

The case definitions are loaded from ``src/rlperf/bench/registry/`` of the checkout running
asv (with the gate's loader, ``bench/worker.py``), not from the installed commit: older commits
have no registry (scipy's rule: benchmarks must still run on old commits), and one definition
for every commit keeps the history comparable. The components themselves come from the commit
asv installed. The history set is one small end-to-end case per workload (each workload's
``e2e``) and one case per component; the rest of the registry is for pytest-benchmark and the
gate (docs/benchmarks.md says why: one commit in a few minutes, spreads of a few percent).

Every case runs single-threaded (torch's threads set to 1, as the trainer cases' ``threads=1``)
and is timed in CPU time (``timer = time.process_time``): on a shared machine a neighbour adds
wall time, not CPU time. asv treats smaller as better, so everything is time for a fixed amount
of work: one call of the case (for the e2e cases, a fixed number of env steps of the real
trainer: SPS = env steps / time).
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "src" / "rlperf" / "bench"


def _load_worker() -> Any:
    spec = importlib.util.spec_from_file_location("rlperf_asv_worker", BENCH / "worker.py")
    worker = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = worker  # type: ignore[union-attr]
    spec.loader.exec_module(worker)  # type: ignore[union-attr]
    return worker


_worker = _load_worker()
registry = _worker.load_registry(BENCH / "registry", "rlperf_asv_registry")
# The learning gate's workloads (``rlperf gate --learning``), loaded the same way.
learning = _worker.load_registry(BENCH / "registry" / "learning.py", "rlperf_asv_learning")
HISTORY = [c for c in registry.tagged(registry.HISTORY)]


class _CaseBenchmark:
    """One asv class per component; ``params`` are that component's history case names.

    asv_runner re-runs ``setup`` before every sample. Each case is set up (and warmed with
    ``WARM_CALLS`` calls) once per process, and the later setups reuse it: setting a case up
    again for every one of 15 samples cost more than the samples (the grid's 1,024 envs, the
    LSTM's and ConvLSTM's trainers: ~0.5-1 s of CPU each time, 3-4x the whole run's timed
    calls, planned from ``registry/costs.py``), and a sample then times one more call of a
    running case, as pytest-benchmark and the gate do.
    """

    param_names = ["case"]
    timer = time.process_time
    timeout = 120
    # Medians over 15 samples in one process. asv_runner (0.6.6 here) times one call a sample
    # when a class has a setup hook (its auto ``number`` resolves to 1, and an explicit
    # number > 1 re-runs setup between the calls), so a component sample is one call. One round:
    # a second process per case doubled the run (2 min 54 s against 1 min 45 s, idle box) and,
    # the two rounds minutes apart, measured the box's drift between them, not the commit.
    rounds = 1
    repeat = (15, 15, 10.0)
    sample_time = 0.05
    warmup_time = 0.2
    WARM_CALLS = 0
    # name -> the prepared case, or the reason it skips (this process's).
    _prepared: dict[str, Any] = {}

    def setup(self, name: str) -> None:
        import torch

        torch.set_num_threads(1)
        if name not in self._prepared:
            (case,) = registry.select([name])
            try:
                ready = case.setup()
                for _ in range(self.WARM_CALLS):
                    ready.run()
                self._prepared[name] = ready
            except registry.CaseSkipped as e:
                self._prepared[name] = str(e)
        ready = self._prepared[name]
        if isinstance(ready, str):
            # asv's way to skip one parameter combination; the reason is logged by asv -v.
            raise NotImplementedError(ready)
        self.ready = ready

    def time_case(self, name: str) -> None:
        self.ready.run()


def _component_class(component: str, names: list[str]) -> type:
    return type(f"Time_{component}", (_CaseBenchmark,), {"params": [names]})


_E2E = {w.e2e.component for w in registry.workloads()}
for _component in dict.fromkeys(c.component for c in HISTORY if c.component not in _E2E):
    _names = [c.name for c in HISTORY if c.component == _component]
    globals()[f"Time_{_component}"] = _component_class(_component, _names)


class TimeTrain(_CaseBenchmark):
    """End to end: each workload's e2e case, the real trainer for a fixed number of env steps
    (0.03-0.17 s of CPU a call), 20-25 samples in one process, taken within a few seconds.

    Building a new trainer for every sample made every sample the first call of a fresh
    trainer (its buffers' first page faults, the kernels' scratch), which varied more than the
    steady state a long run lives in: the trainer is built once and warmed with ``WARM_CALLS``
    calls, and each sample is one more stretch of the same run, as a user's run is.
    """

    params = [[w.e2e.name for w in registry.workloads()]]
    number = 1
    rounds = 1
    repeat = (20, 25, 10.0)
    warmup_time = 0.0  # the warm calls are the warm-up
    WARM_CALLS = 2


class TrackLearning:
    """Learning across commits: each of the learning gate's default workloads trained on seeds
    1-5 to its return threshold (``registry/learning.py``), the median env steps and CPU
    seconds to it. Training one thread from a seed is deterministic, so the steps are the same
    number on every run of one commit and move only when a commit changes what is learned; a
    run that never reaches the threshold counts as its cap (the median is then a lower bound).

    ``setup_cache`` trains every workload once per commit (~1 min of CPU) and both ``track_``
    methods read its results: asv passes them as the first argument.
    """

    params = [learning.default_names()]
    param_names = ["workload"]
    timeout = 900
    SEEDS = (1, 2, 3, 4, 5)

    def setup_cache(self) -> dict[str, list[dict[str, Any]]]:
        # The 25 runs are independent and single-threaded: one worker process per core (two on
        # the 2-core box) took them in ~35 s where one after another took ~70 s, a fifth of a
        # commit's asv run. The steps are the same numbers either way; each run's CPU seconds
        # are its own process's.
        jobs = [(name, seed) for seed in self.SEEDS for name in learning.default_names()]
        runs = _learn_in_workers(jobs, workers=min(len(jobs), len(os.sched_getaffinity(0))))
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in learning.default_names()}
        skipped = {name for (name, _), run in zip(jobs, runs, strict=True) if run is None}
        for (name, _), run in zip(jobs, runs, strict=True):
            if name not in skipped:
                results[name].append(run)  # type: ignore[arg-type]
        return results  # a workload this commit cannot run: no runs, no value

    def setup(self, results: dict[str, list[dict[str, Any]]], name: str) -> None:
        if not results[name]:
            raise NotImplementedError(f"{name}: not on this commit")

    def track_steps_to_return(self, results: dict[str, list[dict[str, Any]]], name: str) -> float:
        return statistics.median(run["steps"] for run in results[name])

    track_steps_to_return.unit = "env steps"  # type: ignore[attr-defined]

    def track_cpu_s_to_return(self, results: dict[str, list[dict[str, Any]]], name: str) -> float:
        return statistics.median(run["cpu_s"] for run in results[name])

    track_cpu_s_to_return.unit = "CPU seconds"  # type: ignore[attr-defined]


def _learn_in_workers(jobs: list[tuple[str, int]], workers: int) -> list[dict[str, Any] | None]:
    """``learning.learn`` for each (workload, seed) of ``jobs``, in ``workers`` fresh processes
    (this file run as a script), the jobs dealt out in turn; None where the commit lacks what
    the workload needs."""
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for w in range(workers):
            out = Path(tmp) / f"{w}.json"
            share = json.dumps(jobs[w::workers])
            procs.append((subprocess.Popen([sys.executable, __file__, "learn", share, str(out)]),
                          out))  # fmt: skip
        shares = []
        for proc, out in procs:
            if proc.wait() != 0:
                raise RuntimeError(f"a learning worker exited with {proc.returncode}")
            shares.append(json.loads(out.read_text()))
    runs: list[dict[str, Any] | None] = [None] * len(jobs)
    for w, share in enumerate(shares):
        runs[w::workers] = share
    return runs


def _learn_jobs(jobs: list[tuple[str, int]]) -> list[dict[str, Any] | None]:
    import torch

    torch.set_num_threads(1)
    runs: list[dict[str, Any] | None] = []
    for name, seed in jobs:
        try:
            runs.append(learning.learn(name, seed))
        except learning.WorkloadSkipped:
            runs.append(None)
    return runs


if __name__ == "__main__":  # a worker of TrackLearning.setup_cache: learn JOBS_JSON OUT_PATH
    Path(sys.argv[3]).write_text(json.dumps(_learn_jobs(json.loads(sys.argv[2]))))
