"""What each registry case costs to set up and to call: the table the tools' time budgets are
planned against (``src/rlperf/bench/registry/costs.py``, read by ``rlperf.bench.budget``).

    python benchmarks/case_costs.py                      # every case: print the table
    python benchmarks/case_costs.py --write              # ... and rewrite registry/costs.py
    python benchmarks/case_costs.py --cases e2e_train,gae --write   # re-measure some, keep the rest

Each case runs in a fresh process forked from this one (``rlperf.bench.harness.run_fresh``),
which has imported torch, numpy, gymnasium and rlperf's trainer first (:data:`PRELOADED`: a
tool imports them once, not per case; the gate's per-round import is ``budget.ROUND_START_S``):
its setup, one first call (the warm-up every tool makes), then calls until three more have run
or one second of CPU has passed (at least one); the table keeps the wall and CPU seconds of the
setup, of the first call and the median of the later calls. CPU seconds count the processes a
case starts (env workers, the all-reduce's partner), so a case's CPU cost is its work wherever
it runs; the plans use CPU seconds, which a loaded machine moves far less than wall time. A case
that skips here (no CUDA, an extra not installed) is listed with its reason and keeps its
earlier entry, if any. Measure on an idle machine: the plans take these figures as this box's
and scale them to the slowest box the budgets must hold on (``budget.SLOW_BOX``). One process
at a time; ~2 minutes for the whole registry on an idle 2-core box.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from rlperf.bench import registry
from rlperf.bench.commands import split_cases
from rlperf.bench.harness import HarnessError, Implementation, run_fresh
from rlperf.bench.registry.costs import COSTS, SKIPPED, CaseCost

COSTS_FILE = Path(registry.__file__).with_name("costs.py")
PRELOADED = ("numpy", "torch", "gymnasium", "rlperf.ppo.trainer")
MORE_CALLS, MORE_CPU_S = 3, 1.0


def measure(name: str) -> dict[str, Any]:
    """In a fresh process: the case's setup, first call and later calls, wall and CPU seconds."""
    (case,) = registry.select([name])

    this = psutil.Process()
    with_children = False  # set after the setup: reading the children costs ~1 ms of CPU

    def clocks() -> tuple[float, float]:
        """Wall, and the CPU of this process and, for a case that started processes (env
        workers, the all-reduce's partner), theirs: their work is the case's, as
        pytest-benchmark's wall clock sees."""
        children = 0.0
        for child in this.children(recursive=True) if with_children else ():
            try:
                times = child.cpu_times()
            except psutil.Error:  # exited meanwhile
                continue
            children += times.user + times.system
        return time.perf_counter(), time.process_time() + children

    w0, c0 = clocks()
    try:
        ready = case.setup()
    except registry.CaseSkipped as e:
        return {"skipped": str(e)}
    w1, c1 = clocks()
    if this.children(recursive=True):
        with_children = True
        c1 = clocks()[1]  # the children's CPU so far, their start, is the setup's
    ready.run()
    w2, c2 = clocks()
    walls, cpus = [], []
    while len(cpus) < MORE_CALLS and sum(cpus) < MORE_CPU_S:
        a_wall, a_cpu = clocks()
        ready.run()
        b_wall, b_cpu = clocks()
        walls.append(b_wall - a_wall)
        cpus.append(b_cpu - a_cpu)
    return {
        "setup_wall_s": w1 - w0, "setup_cpu_s": c1 - c0,
        "first_wall_s": w2 - w1, "first_cpu_s": c2 - c1,
        "call_wall_s": statistics.median(walls), "call_cpu_s": statistics.median(cpus),
    }  # fmt: skip


def render(costs: dict[str, CaseCost], skipped: dict[str, str], commit: str) -> str:
    """The costs module's source: one entry per case, in registry order, and the cases that
    skipped here with why."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    stamp += f", load average {os.getloadavg()[0]:.1f} at the end"
    lines = [
        '"""What each registry case costs: wall and CPU seconds of its setup, its first call and',
        "a later call, measured on the 2-core AMD EPYC box with AVX-512 (when, and the load then:",
        "MEASURED) by ``python benchmarks/case_costs.py --write``, which rewrites this file; the",
        'time budgets (``rlperf.bench.budget``) plan every tool\'s case set from it."""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import NamedTuple",
        "",
        "",
        "class CaseCost(NamedTuple):",
        '    """Seconds (wall, CPU) of a case\'s setup, its first call and a later call."""',
        "",
        "    setup_wall_s: float",
        "    setup_cpu_s: float",
        "    first_wall_s: float",
        "    first_cpu_s: float",
        "    call_wall_s: float",
        "    call_cpu_s: float",
        "",
        "",
        f"MEASURED = {json.dumps(stamp + ', commit ' + commit)}",
        "# fmt: off",
        "COSTS: dict[str, CaseCost] = {",
    ]
    for name, cost in costs.items():
        figures = ", ".join(f"{v:.4g}" for v in cost)
        lines.append(f"    {json.dumps(name)}:\n        CaseCost({figures}),")
    lines += ["}", "# Skipped where the costs were measured (planned at no cost): why.",
              "SKIPPED: dict[str, str] = {"]  # fmt: skip
    for name, why in skipped.items():
        lines.append(f"    {json.dumps(name)}:\n        {json.dumps(why)},")
    lines += ["}", "# fmt: on", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--cases", help="comma-separated case names or components (default: all)")
    parser.add_argument("--write", action="store_true", help=f"rewrite {COSTS_FILE.name}")
    args = parser.parse_args()
    try:
        chosen = registry.select(split_cases(args.cases)) if args.cases else registry.all_cases()
    except registry.UnknownCaseError as e:
        print(f"rlperf: error: {e}", file=sys.stderr)
        return 2
    for module in PRELOADED:
        importlib.import_module(module)
    measured: dict[str, CaseCost] = {}
    skipped: dict[str, str] = {}
    for case in chosen:
        try:
            result = run_fresh(Implementation(case.name, measure, {"name": case.name}))
        except HarnessError as e:
            print(f"rlperf: error: {e}", file=sys.stderr)
            return 1
        if "skipped" in result:
            print(f"{case.name}: skipped ({result['skipped']})", flush=True)
            skipped[case.name] = result["skipped"]
            continue
        measured[case.name] = CaseCost(**result)
        cost = measured[case.name]
        print(f"{case.name}: setup {cost.setup_wall_s:.3f} s, first call {cost.first_wall_s:.3f}"
              f" s, call {cost.call_wall_s:.4f} s wall / {cost.call_cpu_s:.4f} s CPU",
              flush=True)  # fmt: skip
    if args.write:
        names = [c.name for c in registry.all_cases()]
        # A case skipped now keeps an earlier measurement; one measured now leaves SKIPPED.
        merged = {n: measured.get(n) or COSTS[n] for n in names if n in measured or n in COSTS}
        was_skipped = {n: skipped.get(n) or SKIPPED[n] for n in names
                       if (n in skipped or n in SKIPPED) and n not in merged}  # fmt: skip
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=False).stdout.strip() or "unknown"  # fmt: skip
        COSTS_FILE.write_text(render(merged, was_skipped, commit))
        print(f"wrote {COSTS_FILE} ({len(merged)} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
