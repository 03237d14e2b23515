"""Instruction counts (valgrind's callgrind) as a gate signal: cost, determinism, sensitivity.

    python benchmarks/instruction_counts.py --runs 3 --calls 2    # A/A: CartPole's e2e case
    python benchmarks/instruction_counts.py --runs 1 --calls 2 --extra-work 0.05 --skip-base
    python benchmarks/instruction_counts.py --case gather --runs 1 --calls 1   # same instructions,
                                                                 # two memory access orders
    python benchmarks/instruction_counts.py --isa   # CPU features torch, MKL, oneDNN and numpy
                                                    # pick natively and under valgrind
    python benchmarks/instruction_counts.py --runs 1 --threads 2   # (not measured: the budget)
    python benchmarks/instruction_counts.py --runs 1 \
        --case "e2e_train[num_envs=16,env_steps=512,threads=1,kind=lstm]"   # (nor this)

Each valgrind process of an e2e case took about 200 s of one core here (docs/benchmarks.md,
"Signals considered"); the gather case 6-10 s; ``--isa`` 40 s.

What it does: a case of the registry is run once natively, where its calls per sample are
calibrated as ``rlperf gate`` does (doubled until a sample is >= 0.1 s of CPU) and its CPU and
wall time per sample are taken; then ``--runs`` fresh processes run it under
``valgrind --tool=callgrind``, each: import torch and rlperf, set the case up, 3 warm-up calls,
``--samples`` samples of those calls. Each process prints the instruction count (Ir) of every
sample, its wall time split into import / setup + warm-up / sample, and the summary gives the
spread of Ir over the processes ((max - min) / median) and, per variant, the ratio to the first.

How a sample is cut out of the process's count: a two-function C library, compiled on the fly
with gcc from valgrind's own ``callgrind.h``, issues callgrind's client requests ZERO_STATS
(right before the sample) and DUMP_STATS (right after it: one file per sample); natively the
requests are a few no-op instructions. So the count holds the sample's calls and nothing else
(plus a few hundred instructions of ctypes and the timers, the same every sample). Callgrind's
``--zero-before=FUNCTION`` on a libc function called through ctypes was tried first: the calls
were not seen as entries of that function here, and no dump was made.

``--extra-work F`` adds a variant that does F more work per call: after every call, a pure
Python loop (real instructions, not a clock-based busy-wait: under valgrind a wait on the clock
would measure valgrind's slowdown) sized in the native run to F x the call's CPU time.
``--case gather`` times ``np.take`` of 2**23 doubles in index order and in a shuffled order:
the same instructions, a different number of cache and TLB misses.

Fixed for every process: PYTHONHASHSEED=0, OMP/MKL threads 1 (the case's ``threads`` sets
torch's). Native times on a shared machine are indicative only. Not imported by the package or
the tests.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DEFAULT_CASE = "e2e_train[num_envs=64,env_steps=4096,threads=1]"
WARMUP_CALLS = 3  # a fixed count, not the gate's ">= 0.2 s of CPU": the count must not vary
GATHER_N = 1 << 23  # 64 MiB of doubles: well beyond the caches
ENV = {"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
MARKERS_C = """#include <valgrind/callgrind.h>
void instrument(void) { CALLGRIND_START_INSTRUMENTATION; }
void sample_start(void) { CALLGRIND_ZERO_STATS; }
void sample_end(void) { CALLGRIND_DUMP_STATS; }
"""


# -- the child: one process, natively or under callgrind -------------------------------------
def extra_work(iterations: int) -> int:
    """Planted work: pure Python arithmetic, a fixed number of instructions."""
    x = 0
    for i in range(iterations):
        x += i * i % 7
    return x


def gather_run(order: str) -> Any:
    import numpy as np

    data, out = np.ones(GATHER_N), np.empty(GATHER_N)
    index = np.arange(GATHER_N)
    if order == "shuffled":
        np.random.default_rng(0).shuffle(index)
    return lambda: np.take(data, index, out=out).sum()


def child(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    if args.case.startswith("gather"):
        t_import = t0  # nothing to import but numpy: all of it counts as setup
        run = gather_run(args.case.split("=")[1].rstrip("]"))
        t_setup = time.perf_counter()
    else:
        import torch  # noqa: F401  (timed here: its import is part of what a sample costs)

        from rlperf.bench import registry

        (case,) = registry.select([args.case])
        if args.threads:
            case = dataclasses.replace(case, params={**case.params, "threads": args.threads})
        t_import = time.perf_counter()
        run = case.setup().run
        for _ in range(WARMUP_CALLS):
            run()
        t_setup = time.perf_counter()
    from rlperf.bench.gate import Settings
    from rlperf.bench.worker import calibrate_calls

    calls = args.calls or calibrate_calls(run, Settings().sample_s)  # as the gate's worker does
    markers = ctypes.CDLL(args.markers)
    # Import, setup and warm-up run uninstrumented (--instr-atstart=no): fully instrumented they
    # took 210 of a 300 s process here. The two modes' counts differed by 0.03% (untraced), so
    # compare only counts taken with the same options.
    markers.instrument()
    samples = []
    for _ in range(args.samples):
        markers.sample_start()  # callgrind: counters to zero
        wall0, cpu0 = time.perf_counter(), time.process_time()
        for _ in range(calls):
            run()
            if args.extra_loops:
                extra_work(args.extra_loops)
        samples.append((time.perf_counter() - wall0, time.process_time() - cpu0))
        markers.sample_end()  # callgrind: the counts since sample_start to a file
    loop_s = None
    if args.loop_cost:  # CPU seconds per iteration of extra_work, to size the planted variant
        cpu0 = time.process_time()
        extra_work(2_000_000)
        loop_s = (time.process_time() - cpu0) / 2_000_000
    result = {"calls": calls, "import_s": t_import - t0, "setup_s": t_setup - t_import,
              "wall_s": [w for w, _ in samples], "cpu_s": [c for _, c in samples],
              "loop_s": loop_s}  # fmt: skip
    print(json.dumps(result))


# -- the driver --------------------------------------------------------------------------
def build_markers(folder: str) -> str:
    """The marker library's path (gcc and valgrind's headers are on this machine)."""
    source, lib = Path(folder) / "markers.c", Path(folder) / "markers.so"
    source.write_text(MARKERS_C)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(lib), str(source)], check=True)
    return str(lib)


def run_child(argv: list[str], callgrind: bool) -> dict[str, Any]:
    """The child's result, plus the process's wall time and (under callgrind) Ir per sample."""
    with tempfile.TemporaryDirectory() as tmp:
        prefix = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                  f"--callgrind-out-file={tmp}/cg.out"]  # fmt: skip
        cmd = [*(prefix if callgrind else []), sys.executable, __file__, "--child", *argv]
        cmd += ["--markers", build_markers(tmp)]
        started = time.perf_counter()
        done = subprocess.run(cmd, env={**os.environ, **ENV}, capture_output=True, text=True)
        wall_s = time.perf_counter() - started
        if done.returncode != 0:
            sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr[-3000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result["process_s"] = wall_s
        if callgrind:  # cg.out.1, cg.out.2, ...: one dump per sample; cg.out is the exit dump
            dumps = sorted(Path(tmp).glob("cg.out.*"), key=lambda p: int(p.suffix[1:]))
            result["ir"] = [read_ir(p) for p in dumps]
    return result


def read_ir(path: Path) -> int:
    # "summary" is callgrind's own event total since the zeroing. The file's "totals" line (the
    # sum of its cost lines) came out up to 0.7% above it in a first trial; it is not used.
    match = re.search(r"^summary: (\d+)", path.read_text(), re.MULTILINE)
    if match is None:
        sys.exit(f"no instruction count in {path}")
    return int(match.group(1))


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values) if values else math.nan


def measure(args: argparse.Namespace) -> None:
    cases = [f"gather[order={o}]" for o in ("sequential", "shuffled")]
    variants = [(c, ["--case", c]) for c in cases] if args.case == "gather" else []
    if not variants:
        variants = [(args.case, ["--case", args.case, "--threads", str(args.threads)])]
    base_args = [*variants[0][1], "--samples", str(args.native_samples), "--calls", str(args.calls)]
    base_args += ["--loop-cost"] if args.extra_work else []
    native = {variants[0][0]: run_child(base_args, callgrind=False)}
    first = native[variants[0][0]]
    calls = first["calls"]
    how = "given" if args.calls else "calibrated as the gate does"
    print(f"native: {calls} calls a sample ({how}); CPU a sample "
          f"{', '.join(f'{c:.3f}' for c in first['cpu_s'])} s, wall "
          f"{', '.join(f'{w:.3f}' for w in first['wall_s'])} s", flush=True)  # fmt: skip
    if args.extra_work:
        cpu_call = statistics.median(first["cpu_s"]) / calls
        loops = round(args.extra_work * cpu_call / first["loop_s"])
        label = f"{variants[0][0]} + {args.extra_work:.0%} extra work"
        variants.append((label, [*variants[0][1], "--extra-loops", str(loops)]))
        print(f"planted: {loops} loop iterations after every call")
    for label, argv in variants[1:]:
        native[label] = run_child([*argv, "--calls", str(calls), "--samples",
                                   str(args.native_samples)], callgrind=False)  # fmt: skip
    ir: dict[str, list[int]] = {label: [] for label, _ in variants}
    for r in range(args.runs):  # variants alternate, one valgrind process at a time
        for label, argv in variants[1:] if args.skip_base else variants:
            res = run_child([*argv, "--calls", str(calls), "--samples", str(args.samples)],
                            callgrind=True)  # fmt: skip
            ir[label] += res["ir"]
            print(
                f"run {r + 1} {label}: Ir {res['ir']}; process {res['process_s']:.1f} s "
                f"(import {res['import_s']:.1f}, setup+warm-up {res['setup_s']:.1f}, "
                f"samples {', '.join(f'{w:.1f}' for w in res['wall_s'])} s)",
                flush=True,
            )
    base = statistics.median(ir[variants[0][0]]) if ir[variants[0][0]] else math.nan
    cpu0 = statistics.median(first["cpu_s"])
    print(
        "\n| variant | native CPU a sample | native wall a sample | Ir a sample (median) "
        "| Ir spread | Ir ratio | native CPU ratio |\n|---|---|---|---|---|---|---|"
    )
    for label, _ in variants:
        cpu = statistics.median(native[label]["cpu_s"])
        wall = statistics.median(native[label]["wall_s"])
        med = statistics.median(ir[label]) if ir[label] else math.nan
        print(f"| {label} | {cpu:.3f} s | {wall:.3f} s | {med:,.0f} | {spread(ir[label]):.2e} "
              f"({len(ir[label])} samples) | {med / base:.4f} | {cpu / cpu0:.3f} |")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({"native": native, "ir": ir}, indent=1))


ISA_PROBE = """
import numpy as np, torch
from numpy._core._multiarray_umath import __cpu_features__ as f
print("torch capability:", torch.backends.cpu.get_cpu_capability())
print("numpy features:", " ".join(k for k in ("AVX2", "FMA3", "AVX512F") if f.get(k)))
a = torch.randn(256, 256)
a @ a  # MKL's sgemm: MKL_VERBOSE names the instruction set it dispatched to
torch.nn.Conv2d(16, 16, 3)(torch.randn(8, 16, 32, 32))  # oneDNN: ONEDNN_VERBOSE names its ISA
"""


def isa() -> None:
    """What torch, MKL, oneDNN and numpy choose natively and under valgrind's emulated CPU."""
    env = {**os.environ, **ENV, "MKL_VERBOSE": "1", "ONEDNN_VERBOSE": "1"}
    for where, prefix in (("native", []), ("valgrind", ["valgrind", "--tool=none", "-q"])):
        done = subprocess.run([*prefix, sys.executable, "-c", ISA_PROBE], env=env,
                              capture_output=True, text=True)  # fmt: skip
        lines = (done.stdout + done.stderr).splitlines()
        keep = [
            ln
            for ln in lines
            if ln.startswith(("torch", "numpy"))
            or "cpu,isa" in ln
            or "convolution,jit" in ln
            or re.search(r"MKL_VERBOSE oneMKL|MKL_VERBOSE Intel", ln)
        ]
        print(f"--- {where} (exit {done.returncode})\n" + "\n".join(keep[:6]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", default=DEFAULT_CASE, help="a registry case's full name, or gather")
    p.add_argument("--runs", type=int, default=5, help="valgrind processes per variant")
    p.add_argument("--samples", type=int, default=1, help="samples per valgrind process")
    p.add_argument("--native-samples", type=int, default=5)
    p.add_argument("--calls", type=int, default=0, help="calls a sample (0: calibrate natively)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: the case's own)")
    p.add_argument("--extra-work", type=float, default=0.0, help="add a planted variant")
    p.add_argument("--skip-base", action="store_true",
                   help="time only the added variants under valgrind (the base's count is "
                   "deterministic: compare with an earlier run's)")  # fmt: skip
    p.add_argument("--isa", action="store_true", help="only compare the chosen CPU features")
    p.add_argument("--json", help="write native results and every Ir here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--extra-loops", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--loop-cost", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--markers", help=argparse.SUPPRESS)
    args = p.parse_args()
    if not args.child and not args.isa and not args.case.startswith("gather"):
        from rlperf.bench.registry import UnknownCaseError, select

        try:
            select([args.case])  # a bad name is one line here, not a child's traceback
        except UnknownCaseError as err:
            p.error(str(err))
    if args.child:
        child(args)
    elif args.isa:
        isa()
    else:
        measure(args)


if __name__ == "__main__":
    main()
