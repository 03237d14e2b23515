"""One side of a gate round: a fresh process that times registry cases of one source tree.

Run as a script, never imported by the tree under test::

    python worker.py --src TREE/src --registry GATE/registry.py

``rlperf`` is imported from ``--src`` (the base or head checkout) while the case definitions
come from the gate's own ``registry.py``, so both sides run exactly the same benchmark code.
Requests and replies are JSON lines on stdin/stdout; one reply per request:

    {"op": "setup", "cases": [...], "warmup_s": 0.3}  -> {"rlperf": path, "items": {...}}
    {"op": "calibrate", "case": name, "sample_s": 0.2} -> {"calls": n}
    {"op": "measure", "case": name, "calls": n}         -> {"wall_s": w, "cpu_s": c}

Any failure is answered ``{"error": "..."}`` and the worker exits 1. CPU time is
``time.process_time()``: this process's user + system time, all threads included.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any


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


def serve(src: Path, registry_path: Path) -> int:
    sys.path.insert(0, str(src))
    registry = load_registry(registry_path)
    prepared: dict[str, Any] = {}

    def reply(payload: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(payload) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        try:
            request = json.loads(line)
            op = request["op"]
            if op == "setup":
                import rlperf

                origin = Path(rlperf.__file__).resolve()
                if src.resolve() not in origin.parents:
                    raise RuntimeError(f"rlperf imported from {origin}, not from {src}")
                items = {}
                for case in registry.select(request["cases"]):
                    ready = case.setup()
                    items[case.name] = [ready.items_per_call, ready.items_unit]
                    warm_until = time.perf_counter() + request["warmup_s"]
                    ready.run()
                    while time.perf_counter() < warm_until:
                        ready.run()
                    prepared[case.name] = ready
                reply({"rlperf": str(origin), "items": items})
            elif op == "calibrate":
                run, calls = prepared[request["case"]].run, 1
                while time_calls(run, calls)[1] < request["sample_s"] and calls < 1_000_000:
                    calls *= 2
                reply({"calls": calls})
            elif op == "measure":
                wall_s, cpu_s = time_calls(prepared[request["case"]].run, request["calls"])
                reply({"wall_s": wall_s, "cpu_s": cpu_s})
            else:
                raise ValueError(f"unknown op {op!r}")
        except Exception as e:  # reported to the gate, which exits 2 naming the side and case
            last = traceback.format_exception_only(type(e), e)[-1].strip()
            reply({"error": last})
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
