"""One side of the gate: a process that times registry cases of one source tree, per round.

Run as a script, never imported by the tree under test::

    python worker.py --src TREE/src --registry GATE/registry.py

The process imports the heavy third-party modules once (torch, numpy, gymnasium: seconds on a
loaded 2-core machine), then forks a fresh child for every round. The child imports ``rlperf``
from ``--src`` (the base or head checkout), loads the case definitions from the gate's own
``registry.py`` (so both sides run exactly the same benchmark code), sets the cases up, warms
them up and answers the round's requests. Requests and replies are JSON lines on stdin/stdout,
one reply per request:

    {"op": "setup", "cases": [...], "warmup_s": 0.3}  -> {"rlperf": path, "items": {...}}
    {"op": "calibrate", "case": name, "sample_s": 0.1} -> {"calls": n}
    {"op": "measure", "case": name, "calls": n}         -> {"wall_s": w, "cpu_s": c}
    {"op": "end"}                                       -> {"ended": true}  (the child exits)

Any failure is answered ``{"error": "..."}`` and the worker exits 1. CPU time is
``time.process_time()``: the child's user + system time, all its threads included.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

PRELOADED = ("numpy", "torch", "gymnasium")
WARMUP_CALLS = 3


def load_registry(path: Path) -> Any:
    """The gate's registry module, under a name that cannot clash with the tree's ``rlperf``."""
    spec = importlib.util.spec_from_file_location("rlperf_gate_registry", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # type: ignore[union-attr]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def time_calls(run: Any, calls: int) -> tuple[float, float]:
    """(wall_s, cpu_s) of ``calls`` back-to-back calls of ``run``."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(calls):
        run()
    return time.perf_counter() - wall0, time.process_time() - cpu0


def reply(payload: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def setup_round(request: dict[str, Any], src: Path, registry_path: Path) -> dict[str, Any]:
    """Import the tree's rlperf, set up and warm up the cases; returns them by name."""
    import rlperf

    origin = Path(rlperf.__file__).resolve()
    if src.resolve() not in origin.parents:
        raise RuntimeError(f"rlperf imported from {origin}, not from {src}")
    registry = load_registry(registry_path)
    prepared, items, skipped = {}, {}, {}
    for case in registry.select(request["cases"]):
        try:
            ready = case.setup()
        except registry.CaseSkipped as e:  # e.g. a component this commit does not have
            skipped[case.name] = str(e)
            continue
        # Warm up by CPU time, not wall time: on a loaded machine a wall-time budget can pass
        # before the first call has even run twice.
        calls, cpu0 = 0, time.process_time()
        while calls < WARMUP_CALLS or time.process_time() - cpu0 < request["warmup_s"]:
            ready.run()
            calls += 1
        prepared[case.name] = ready
        items[case.name] = [ready.items_per_call, ready.items_unit]
    reply({"rlperf": str(origin), "items": items, "skipped": skipped})
    return prepared


def serve_round(first: dict[str, Any], src: Path, registry_path: Path) -> int:
    """The child of one round: set up, then answer until ``end``."""
    try:
        prepared = setup_round(first, src, registry_path)
        while line := sys.stdin.readline():
            request = json.loads(line)
            op = request["op"]
            if op == "calibrate":
                run, calls = prepared[request["case"]].run, 1
                while time_calls(run, calls)[1] < request["sample_s"] and calls < 1_000_000:
                    calls *= 2
                reply({"calls": calls})
            elif op == "measure":
                wall_s, cpu_s = time_calls(prepared[request["case"]].run, request["calls"])
                reply({"wall_s": wall_s, "cpu_s": cpu_s})
            elif op == "end":
                reply({"ended": True})
                return 0
            else:
                raise ValueError(f"unknown op {op!r}")
        return 1  # the gate went away mid-round
    except Exception as e:  # reported to the gate, which exits 2 naming the side and case
        reply({"error": traceback.format_exception_only(type(e), e)[-1].strip()})
        return 1


def serve(src: Path, registry_path: Path) -> int:
    """Preload, then fork one child per ``setup`` request; exit when stdin closes."""
    sys.path.insert(0, str(src))
    for name in PRELOADED:
        importlib.import_module(name)
    while line := sys.stdin.readline():
        request = json.loads(line)
        if request.get("op") != "setup":
            reply({"error": f"expected a setup request, got {request.get('op')!r}"})
            return 1
        pid = os.fork()
        if pid == 0:
            code = serve_round(request, src, registry_path)
            sys.stdout.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, required=True)
    parser.add_argument("--registry", type=Path, required=True)
    args = parser.parse_args()
    return serve(args.src, args.registry)


if __name__ == "__main__":
    # Drop this script's own folder from the path: its module names must not shadow anything.
    sys.path.pop(0)
    sys.exit(main())
