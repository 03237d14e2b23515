"""asv's benchmarks run or skip in asv's own environments: those asv builds from asv.conf.json
install rlperf and torch, none of the extras. Each benchmark's ``setup`` is called for every
parameter combination, found by asv's own discovery, in a process where the extras' modules
cannot be imported; each must set up or raise NotImplementedError (asv's skip) with a one-line
reason, never fail. The MuJoCo cases once failed this way in asv (gymnasium's ``import mujoco``
raised its own error in their setup), leaving gaps in every commit's history."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlperf.bench.registry import core

pytest.importorskip("asv_runner", reason="asv is not installed (the dev extra)")

ROOT = Path(__file__).resolve().parents[2]
BENCHMARK_DIR = ROOT / "benchmarks" / "asv"
# Every optional extra's modules (pyproject.toml): what an environment built from asv.conf.json
# lacks. The registry's declared extras, and the rest for code that might import them.
EXTRAS = {m for e in (core.MUJOCO, core.ATARI, core.ENVPOOL, core.ROBOTS) for m in e.modules}
HIDDEN = sorted(EXTRAS | {"pynvml", "matplotlib", "tensorboard", "imageio_ffmpeg", "pygame"})

# Runs in the child: hide the modules (None in sys.modules: ``import`` raises ImportError and
# ``find_spec`` finds nothing, as for a package never installed), then discover the benchmarks
# as asv_runner does and set each parameter combination up with asv_runner's own ``do_setup``
# (True: skipped through NotImplementedError, whose repr it prints).
CHILD = """
import contextlib, io, itertools, json, sys
for name in sys.argv[2].split(","):
    sys.modules[name] = None
from asv_runner._aux import update_sys_path
from asv_runner.discovery import disc_benchmarks
update_sys_path(sys.argv[1])
for bench in disc_benchmarks(sys.argv[1]):
    if bench.setup_cache_key is not None:
        print("@" + json.dumps({"name": bench.name, "outcome": "cached"}), flush=True)
        continue
    for idx, params in enumerate(itertools.product(*bench.params)):
        bench.set_param_idx(idx)
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                skipped = bench.do_setup()
            outcome = "skipped" if skipped else "ran"
        except Exception as e:
            outcome = "error: " + repr(e)
        line = {"name": bench.name, "params": [str(p) for p in params], "outcome": outcome,
                "printed": printed.getvalue()}
        print("@" + json.dumps(line), flush=True)
"""


@pytest.fixture(scope="module")
def setups() -> list[dict]:
    """One entry per benchmark and parameter combination, from a process without the extras."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(BENCHMARK_DIR), ",".join(HIDDEN)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line[1:]) for line in done.stdout.splitlines() if line.startswith("@")]


def test_every_benchmark_sets_up_or_skips_with_a_one_line_reason(setups: list[dict]) -> None:
    assert setups, "asv_runner discovered no benchmark"
    errors = [f"{s['name']}{s['params']}: {s['outcome']}" for s in setups
              if s["outcome"].startswith("error")]  # fmt: skip
    assert not errors, "\n".join(errors)
    for entry in setups:
        if entry["outcome"] == "skipped":
            # asv_runner prints "asv: skipped: NotImplementedError('reason') ": one line.
            assert entry["printed"].count("\n") == 1, entry
            assert "NotImplementedError(" in entry["printed"], entry


def test_the_cases_of_a_missing_extra_skip_naming_it(setups: list[dict]) -> None:
    """The MuJoCo and Atari history cases are asv benchmarks, and each skips naming its extra."""
    by_case = {s["params"][0]: s for s in setups if s.get("params")}
    for extra in (core.MUJOCO, core.ATARI):
        skipped = [s for s in by_case.values() if f"rlperf[{extra.name}]" in s["printed"]]
        assert skipped, f"no asv benchmark skipped for want of the {extra.name} extra"
        assert all(s["outcome"] == "skipped" for s in skipped)
    ran = [s for s in setups if s["outcome"] == "ran"]
    assert len(ran) > len(setups) // 2  # the core cases still run


def test_the_learning_cache_s_workers_give_the_runs_one_process_gives() -> None:
    """``TrackLearning.setup_cache`` deals its runs out to worker processes: each run comes
    back in its job's place, with the steps (deterministic from the seed) a run in this process
    takes."""
    spec = importlib.util.spec_from_file_location(
        "rlperf_asv_benchmarks", BENCHMARK_DIR / "benchmarks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    jobs = [("catch_cnn", 2), ("catch_cnn", 1)]
    runs = module._learn_in_workers(jobs, workers=2)
    assert [run["steps"] for run in runs] == [module.learning.learn(*job)["steps"] for job in jobs]
    with pytest.raises(RuntimeError, match="a learning worker exited with 1"):
        module._learn_in_workers([("no_such_workload", 1)], workers=1)
