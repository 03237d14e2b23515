"""The gate's timing process: round processes of both sides, forked from one parent.

Run as a script, never imported by the tree under test::

    python worker.py --registry GATE/src/rlperf/bench/registry --preload numpy,torch,gymnasium

The process imports the heavy third-party modules once (torch, numpy, gymnasium: seconds on a
loaded 2-core machine). For every round it forks one fresh child per side (base and head, or
GOOD and the commit under test for ``rlperf bisect``), both from this one parent. Each child
allocates a random amount of memory (:func:`randomize_layout`), imports ``rlperf`` from its
side's ``src``, loads the case definitions from the gate's own ``registry`` package (so both sides
run exactly the same benchmark code), sets the cases up, warms them up and answers its side's
requests. This parent relays requests and replies, JSON lines on stdin/stdout, one reply per
request:

    {"op": "ready"}                     -> {"ready": true}  (once the preloads are imported)
    {"op": "setup", "sides": {"base": "TREE/src", "head": "TREE/src"}, "cases": [...],
     "warmup_s": 0.3[, "pairing": "together"]}
                              -> {"sides": {"base": {"rlperf": path, "items": {...},
                                                      "skipped": {...}}, "head": {...}}}
    {"op": "calibrate", "side": "base", "case": name, "sample_s": 0.1}  -> {"calls": n}
    {"op": "measure", "side": "head", "case": name, "calls": n[, "cpu": k]}
                              -> {"wall_s": w, "cpu_s": c[, "instructions": n]
                                  [, "sections_s": {name: s}]}
    {"op": "measure_together", "case": name, "calls": n[, "cpu": k], "order": ["head", "base"]}
                              -> {"sides": {"base": <measure reply>, "head": <measure reply>}}
    {"op": "end"}                       -> {"ended": true}  (both round processes exit)

The learning gate (``--registry .../registry/learning.py``) asks for whole training runs, each
in a fresh process of its own, forked for that one run:

    {"op": "learn", "sides": {"base": "TREE/src", "head": "TREE/src"}, "case": name,
     "seeds": {"base": 1, "head": 2}, "threshold": null, "together": true}
                              -> {"sides": {"base": {"reached": ..., "steps": ..., "cpu_s": ...,
                                                     "wall_s": ..., "final_return": ...}, ...}}

``together``: the sides' runs train at the same time (a round takes one run's time on two
cores, and a change in the machine's load hits both); else one after the other, in the order
``sides`` gives. A workload a tree cannot run answers ``{"skipped": reason}`` for that side.

Why one parent for both sides: a forked child inherits its parent's memory layout (where the
interpreter, torch's libraries and the heap lie), and layout moves speed by a few percent. With
one parent per side, as the gate first had, A/A runs of identical code came out at 0.97 in 10
of 12 rounds, or at 1.03 in all 12: a bias fixed for the whole run, which no number of rounds
averages out. Forked from one parent, the two sides differ only by what each child allocates
itself, and that is randomized every round.

Any failure is answered ``{"error": "...", "side": label}`` and the worker exits 1. CPU time is
``time.process_time()``: the round process's user + system time, all its threads included.
``cpu``: the round process's thread is pinned to CPU ``k`` before it times the calls (the
gate sends both samples of a pair the same CPU: ``gate.pair_cpu`` says why).
``measure_together``: both sides' round processes are sent the same ``measure`` request, in
``order``, before either reply is read, so they time their calls at the same time on one CPU
and the scheduler switches between them every few milliseconds (``gate.Settings.pairing``).
``instructions`` (user-space instructions retired by the round process's thread, from the
kernel's hardware counter) where the kernel counts them; else the setup reply says why in
``"no_instructions"``.
``sections_s`` holds the seconds (wall; the thread's CPU seconds where the setup request says
``"pairing": "together"``) each section of the tree's process-wide profiler gained during the
timed calls: the trainer's phases for a case that trains. It is read from two
snapshots taken just outside the timed window, so it costs the timing nothing.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import random
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from importlib.abc import Loader
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any, TextIO, cast

# The untimed calls of a case a round process makes after its setup (and at least
# ``warmup_s`` of CPU): the first call does a case's one-off work (lazy imports, buffers, the
# optimizer's state); in fresh processes on the slow box the calls after it ran within a few
# percent of each other (ConvLSTM 0.42, 0.40, 0.42 s; petri 0.25, 0.21, 0.20 s). Three calls,
# as before 2026-12-03, spent ~2.4 s of CPU a side and round of the default set on it.
WARMUP_CALLS = 1
# The gate's own perf_event_open wrapper, loaded by path as the registry is (a base commit's
# rlperf may have none): each round process counts its samples' instructions where it can.
COUNTERS = Path(__file__).with_name("counters.py")


def load_registry(path: Path, name: str = "rlperf_gate_registry") -> Any:
    """The case definitions at ``path`` (a package folder, as ``rlperf/bench/registry``, or
    one file), under a name that cannot clash with the tree's ``rlperf``."""
    path = Path(path)
    if path.is_dir():  # a package: its modules import each other relatively
        spec = importlib.util.spec_from_file_location(
            name, path / "__init__.py", submodule_search_locations=[str(path)]
        )
    else:
        spec = importlib.util.spec_from_file_location(name, path)
    # A path to a .py file or a package folder always finds the source loader.
    spec = cast(ModuleSpec, spec)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    cast(Loader, spec.loader).exec_module(module)
    return module


def time_calls(run: Any, calls: int) -> tuple[float, float]:
    """(wall_s, cpu_s) of ``calls`` back-to-back calls of ``run``."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(calls):
        run()
    return time.perf_counter() - wall0, time.process_time() - cpu0


def calibrate_calls(run: Any, sample_s: float) -> int:
    """Calls of ``run`` a sample takes: doubled from 1 until they take ``sample_s`` of CPU."""
    calls = 1
    while time_calls(run, calls)[1] < sample_s and calls < 1_000_000:
        calls *= 2
    return calls


def send(stream: TextIO, payload: dict[str, Any]) -> None:
    stream.write(json.dumps(payload) + "\n")
    stream.flush()


def randomize_layout() -> tuple[object, ...]:
    """Allocate a random amount of memory before the tree is imported; returns it (keep it).

    Every round process is forked from the same parent, so without this it would inherit the
    same heap and place the tree's code, module dicts and the case's arrays at the same
    addresses in every round. Layout moves speed by a few percent (alignment, cache sets): A/A
    runs of identical code here measured 0.97 in 10 of 12 rounds, or 1.03 in all 12, a bias
    the rounds cannot average out. With random padding each round draws a fresh layout, and the
    bias becomes noise that the rounds do average out (as Stabilizer, Curtsinger & Berger 2013,
    randomizes layout to make timing comparisons sound).
    """
    rng = random.Random()  # seeded from os.urandom: differs in every forked child
    return (
        bytearray(rng.randrange(1, 1 << 20)),  # the malloc heap: up to 1 MiB
        [object() for _ in range(rng.randrange(1 << 14))],  # pymalloc's small-object pools
        [bytes(rng.randrange(1, 256)) for _ in range(rng.randrange(1 << 12))],
    )


def section_clock() -> Callable[[], dict[str, int]] | None:
    """The tree's process-wide profiler's ``snapshot_ns`` (section -> total ns so far), or
    None on commits without one."""
    try:
        from rlperf.timing.sections import get_profiler
    except ImportError:
        return None
    return getattr(get_profiler(), "snapshot_ns", None)


def sections_between(before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
    """Seconds each section gained between two snapshots (sections that ran only)."""
    return {
        name: (total - before.get(name, 0)) / 1e9
        for name, total in after.items()
        if total > before.get(name, 0)
    }


def import_tree(src: Path) -> Path:
    """Import ``rlperf`` (``src`` is first on the path); RuntimeError unless it came from
    ``src``. Returns where it came from."""
    import rlperf

    origin = Path(rlperf.__file__).resolve()
    if src.resolve() not in origin.parents:
        raise RuntimeError(f"rlperf imported from {origin}, not from {src}")
    return origin


def time_sections_on_cpu() -> None:
    """Make the tree's section profiler read this thread's CPU clock instead of the wall clock.

    For samples paired together (``gate.Settings.pairing``): while one side runs, the other's
    open sections go on counting wall time, so their wall seconds would measure the other
    side as much as their own code. Every tree since the profiler began reads its clock
    through the module's ``_perf_ns``; a tree without it keeps its wall clock. Spans a C
    kernel timed on its own wall clock (``Profiler.record``) are dropped: in a 2026-12-03 run
    the native update's ``update/backward`` read 0.95x for a head 2% slower, the slower side
    running alone once the other had finished; the section around the kernel call still
    counts their CPU time."""
    try:
        from rlperf.timing import sections
    except ImportError:
        return
    if hasattr(sections, "_perf_ns"):
        sections._perf_ns = time.thread_time_ns
    profiler = getattr(sections, "Profiler", None)
    if profiler is not None and hasattr(profiler, "record"):
        profiler.record = lambda self, *args, **kwargs: None


def setup_round(
    request: dict[str, Any], src: Path, registry_path: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Import the tree's rlperf, set up and warm up the cases; (cases by name, the reply)."""
    origin = import_tree(src)
    if request.get("pairing") == "together":
        time_sections_on_cpu()
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
    return prepared, {"rlperf": str(origin), "items": items, "skipped": skipped}


def instruction_counter() -> tuple[Any, str | None]:
    """(this thread's instruction counter, None), or (None, why the kernel will not count)."""
    counters = load_registry(COUNTERS, "rlperf_gate_counters")
    try:
        return counters.Counters.open(("instructions",)), None
    except counters.CountersUnavailable as e:
        return None, str(e)


def serve_round(
    setup: dict[str, Any], registry_path: Path, requests: TextIO, replies: TextIO
) -> int:
    """A round process of one side: put its tree first on the path, randomize the layout, set
    up, then answer its side's requests until ``end``."""
    try:
        src = Path(setup["src"])
        sys.path.insert(0, str(src))
        _padding = randomize_layout()  # held (not freed) while the tree is imported and timed
        prepared, answer = setup_round(setup, src, registry_path)
        counter, no_instructions = instruction_counter()
        if no_instructions is not None:
            answer["no_instructions"] = no_instructions
        send(replies, answer)
        clock = section_clock()
        while line := requests.readline():
            request = json.loads(line)
            op = request["op"]
            if op == "calibrate":
                calls = calibrate_calls(prepared[request["case"]].run, request["sample_s"])
                send(replies, {"calls": calls})
            elif op == "measure":
                if "cpu" in request:
                    os.sched_setaffinity(0, {request["cpu"]})  # this thread, from now on
                before = clock() if clock is not None else {}
                counted = counter.read()["instructions"] if counter is not None else 0.0
                wall_s, cpu_s = time_calls(prepared[request["case"]].run, request["calls"])
                answer = {"wall_s": wall_s, "cpu_s": cpu_s}
                if counter is not None:
                    answer["instructions"] = counter.read()["instructions"] - counted
                if clock is not None and (sections := sections_between(before, clock())):
                    answer["sections_s"] = sections
                send(replies, answer)
            elif op == "end":
                send(replies, {"ended": True})
                return 0
            else:
                raise ValueError(f"unknown op {op!r}")
        return 1  # the parent went away mid-round
    except Exception as e:  # reported to the gate, which exits 2 naming the side and case
        send(replies, {"error": traceback.format_exception_only(type(e), e)[-1].strip()})
        return 1


@dataclass
class RoundProcess:
    """A forked round process of one side and the pipes to it."""

    pid: int
    requests: TextIO  # parent -> child
    replies: TextIO  # child -> parent

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        send(self.requests, request)
        return self.receive()

    def receive(self) -> dict[str, Any]:
        line = self.replies.readline()
        if line:
            return json.loads(line)
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        return {"error": f"the round process died (wait status {status})"}

    def close(self) -> None:
        """Close the pipes and reap the process (it exits once its requests pipe closes)."""
        self.requests.close()
        self.replies.close()
        if self.pid:
            os.waitpid(self.pid, 0)
            self.pid = 0


def serve_learning_run(
    setup: dict[str, Any], registry_path: Path, requests: TextIO, replies: TextIO
) -> int:
    """A learning run's process: put its tree first on the path, randomize the layout, import,
    wait for the parent's go (a line), train one seed of the workload and answer."""
    try:
        src = Path(setup["src"])
        sys.path.insert(0, str(src))
        _padding = randomize_layout()  # held while the tree is imported and trained
        import_tree(src)
        learning = load_registry(registry_path, "rlperf_gate_learning")
        if not requests.readline():
            return 1  # the parent went away
        try:
            answer = learning.learn(setup["case"], setup["seed"], setup.get("threshold"))
        except learning.WorkloadSkipped as e:  # e.g. an env this commit does not have
            answer = {"skipped": str(e)}
        send(replies, answer)
        return 0
    except Exception as e:  # reported to the gate, which exits 2 naming the side and workload
        send(replies, {"error": traceback.format_exception_only(type(e), e)[-1].strip()})
        return 1


def start(process: RoundProcess) -> None:
    """Tell a learning run's process to start; one that already failed (its pipe is closed)
    has its error waiting in its replies."""
    try:
        send(process.requests, {"op": "go"})
    except BrokenPipeError:
        pass


def learning_runs(request: dict[str, Any], registry_path: Path) -> dict[str, dict[str, Any]]:
    """One run per side, each in a process forked for it; side -> its answer."""
    processes: dict[str, RoundProcess] = {}
    try:
        for label, src in request["sides"].items():
            setup = {**request, "src": src, "seed": request["seeds"][label]}
            processes[label] = fork_round(
                setup, registry_path, list(processes.values()), serve_learning_run
            )
        if request.get("together", True):
            for process in processes.values():
                start(process)
            return {label: process.receive() for label, process in processes.items()}
        answers = {}
        for label, process in processes.items():
            start(process)
            answers[label] = process.receive()
        return answers
    finally:
        for process in processes.values():
            process.close()


def fork_round(
    setup: dict[str, Any],
    registry_path: Path,
    siblings: list[RoundProcess],
    target: Callable[[dict[str, Any], Path, TextIO, TextIO], int] = serve_round,
) -> RoundProcess:
    """Fork the round process of one side, connected by two pipes; it runs ``target``."""
    requests_in, requests_out = os.pipe()  # parent writes requests, child reads them
    replies_in, replies_out = os.pipe()  # child writes replies, parent reads them
    pid = os.fork()
    if pid == 0:
        os.close(requests_out)
        os.close(replies_in)
        for sibling in siblings:  # the other side's pipes are not this process's business
            sibling.requests.close()
            sibling.replies.close()
        requests, replies = os.fdopen(requests_in), os.fdopen(replies_out, "w")
        os._exit(target(setup, registry_path, requests, replies))
    os.close(requests_in)
    os.close(replies_out)
    return RoundProcess(pid, os.fdopen(requests_out, "w"), os.fdopen(replies_in))


def measure_together(
    rounds: dict[str, RoundProcess], request: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """Both round processes time the same calls at once (pinned to the request's ``cpu``):
    each is sent its ``measure`` request, in ``request["order"]``, before either reply is
    read; side -> its reply."""
    measure = {k: v for k, v in request.items() if k != "order"}
    for label in request["order"]:
        send(rounds[label].requests, {**measure, "op": "measure"})
    return {label: rounds[label].receive() for label in request["order"]}


def serve(registry_path: Path, preload: list[str]) -> int:
    """Preload; per ``setup`` fork both sides' round processes, relay until ``end``; exit 0
    when stdin closes, 1 after any error (which is relayed first)."""
    for name in preload:
        try:
            importlib.import_module(name.removeprefix("?"))
        except ImportError:
            if not name.startswith("?"):  # "?": where installed (a case that needs it skips)
                raise
    rounds: dict[str, RoundProcess] = {}
    try:
        while line := sys.stdin.readline():
            request = json.loads(line)
            op = request.get("op")
            if op == "ready" and not rounds:  # answered once the preloads are imported
                send(sys.stdout, {"ready": True})
            elif op == "setup" and not rounds:
                for label, src in request["sides"].items():
                    setup = {**request, "src": src}
                    rounds[label] = fork_round(setup, registry_path, list(rounds.values()))
                answers = {label: process.receive() for label, process in rounds.items()}
                failed = [label for label, answer in answers.items() if "error" in answer]
                if failed:
                    send(sys.stdout, {**answers[failed[0]], "side": failed[0]})
                    return 1
                send(sys.stdout, {"sides": answers})
            elif op == "measure_together" and set(request.get("order", ())) == set(rounds):
                answers = measure_together(rounds, request)
                failed = [label for label, answer in answers.items() if "error" in answer]
                if failed:
                    send(sys.stdout, {**answers[failed[0]], "side": failed[0]})
                    return 1
                send(sys.stdout, {"sides": answers})
            elif op in ("calibrate", "measure") and request.get("side") in rounds:
                answer = rounds[request["side"]].ask(request)
                send(sys.stdout, {**answer, "side": request["side"]} if "error" in answer
                     else answer)  # fmt: skip
                if "error" in answer:
                    return 1
            elif op == "learn" and not rounds:
                answers = learning_runs(request, registry_path)
                failed = [label for label, answer in answers.items() if "error" in answer]
                if failed:
                    send(sys.stdout, {**answers[failed[0]], "side": failed[0]})
                    return 1
                send(sys.stdout, {"sides": answers})
            elif op == "end" and rounds:
                for process in rounds.values():
                    process.ask(request)
                    process.close()
                rounds = {}
                send(sys.stdout, {"ended": True})
            else:
                send(sys.stdout, {"error": f"unexpected request {request!r}"})
                return 1
        return 0
    finally:
        for process in rounds.values():
            process.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--registry", type=Path, required=True)
    parser.add_argument(
        "--preload",
        default="",
        help="comma-separated modules to import once; ?NAME where installed",
    )
    args = parser.parse_args()
    return serve(args.registry, [name for name in args.preload.split(",") if name])


if __name__ == "__main__":
    # Drop this script's own folder from the path: its module names must not shadow anything.
    sys.path.pop(0)
    sys.exit(main())
