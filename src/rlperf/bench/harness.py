"""One harness for the scripts in ``benchmarks/``: named implementations, each sample in a fresh
process, interleaved ABBA, reported as median [min - max] and paired ratios.

A script says only what it times: a function per implementation that runs in a fresh process
and returns its measurements as a JSON-able dict (``{"sps": ...}``). :func:`compare` runs every
implementation once per round, in the order A B in even rounds and B A in odd ones (so neither
always runs first, after the other warmed the machine), each in a process forked from the
script's (POSIX: ``os.fork``, as the gate's worker), so no sample inherits another's caches,
allocator state or torch thread pool. Implementation ``src`` puts a tree's ``src`` first on the
child's path before the function runs (an older rlperf, say) and drops the ``rlperf`` modules
the script had imported, so the function, which imports inside itself, gets the tree's. A ratio
between two implementations is taken per round (:func:`paired_ratios`): the two ran next to
each other, so the machine's drift between rounds cancels.

The child's memory layout is randomized as the gate's round processes' are
(:func:`rlperf.bench.worker.randomize_layout`), and results come back as one JSON line on a
pipe (:func:`rlperf.bench.worker.send`); the statistics are the gate's (:mod:`rlperf.bench.stats`).
Fork only from a process that has not run torch operations yet (importing torch is fine): a
forked OpenMP thread pool can hang the child.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlperf.bench.stats import median
from rlperf.bench.worker import randomize_layout, send


class HarnessError(RuntimeError):
    """An implementation failed in its process; the message names it and the child's error."""


@dataclass(frozen=True)
class Implementation:
    """A named thing to time: ``run(**kwargs)`` in a fresh process returns its measurements."""

    name: str
    run: Callable[..., dict[str, Any]]
    kwargs: dict[str, Any] = field(default_factory=dict)
    src: str | None = None  # a tree's src/ put first on the child's path


def parse_shape(text: str) -> tuple[int, int]:
    """``ENVSxSTEPS`` (``4x128``) as ``(envs, steps)``, both >= 1: the benchmark scripts' shape
    arguments, as an argparse ``type`` (a malformed one is an ``ArgumentTypeError`` naming it)."""
    try:
        envs, steps = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape {text!r} is not ENVSxSTEPS, e.g. 4x128") from None
    if envs < 1 or steps < 1:
        raise argparse.ArgumentTypeError(f"shape {text!r}: envs and steps must be >= 1")
    return envs, steps


def abba(names: list[str], rounds: int) -> Iterator[tuple[int, str]]:
    """(round, name) in the order they run: names in order in even rounds, reversed in odd."""
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            yield r, name


# The parent's pid comes as an argument: read in the child, it would be 1 already if the parent
# died while the child started.
SPINNER = """
import os, sys
parent = int(sys.argv[1])
while os.getppid() == parent:
    for _ in range(1_000_000):
        pass
"""


@contextlib.contextmanager
def busy_processes(count: int) -> Iterator[None]:
    """``count`` processes that keep a core busy each (pure-Python spin loops, as a CI runner's
    other jobs or a laptop's browser would) until the block ends, or until this process is
    gone: a SIGTERM or SIGKILL skips the ``finally`` below, and spinners left behind would
    load every measurement after it (they look up their parent every ~20 ms of spinning)."""
    spinners = [subprocess.Popen([sys.executable, "-c", SPINNER, str(os.getpid())])
                for _ in range(count)]  # fmt: skip
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def spread(values: list[float], fmt: str = ".3f", unit: str = "") -> str:
    """``median[unit] [min - max]`` of ``values``, each formatted with ``fmt``."""
    return f"{median(values):{fmt}}{unit} [{min(values):{fmt}} - {max(values):{fmt}}]"


def paired_ratios(numerators: list[float], denominators: list[float]) -> list[float]:
    """Round-by-round ratios of two implementations' values (same length: one per round)."""
    return [a / b for a, b in zip(numerators, denominators, strict=True)]


def _child(impl: Implementation, replies: int) -> int:
    """In the forked process: path, layout, run, answer; the exit status."""
    with os.fdopen(replies, "w") as out:
        try:
            if impl.src is not None:
                sys.path.insert(0, impl.src)
                if (Path(impl.src) / "rlperf").is_dir():
                    # The script's rlperf (this harness's own) is forgotten, so the
                    # implementation's imports load the tree's; the code already running
                    # keeps its module objects.
                    for name in [m for m in sys.modules if m.split(".")[0] == "rlperf"]:
                        del sys.modules[name]
            _padding = randomize_layout()  # held while the implementation runs
            send(out, {"result": impl.run(**impl.kwargs)})
            return 0
        except BaseException as e:  # reported to the parent, which raises HarnessError
            send(out, {"error": traceback.format_exception_only(type(e), e)[-1].strip()})
            return 1


def run_fresh(impl: Implementation) -> dict[str, Any]:
    """``impl.run(**impl.kwargs)`` in a forked process; its result, or HarnessError."""
    sys.stdout.flush()
    sys.stderr.flush()
    replies_in, replies_out = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(replies_in)
        os._exit(_child(impl, replies_out))
    os.close(replies_out)
    with os.fdopen(replies_in) as replies:
        line = replies.readline()
    _, status = os.waitpid(pid, 0)
    answer: dict[str, Any] = (
        json.loads(line) if line else {"error": f"the process died (wait status {status})"}
    )
    if "error" in answer:
        raise HarnessError(f"{impl.name} failed: {answer['error']}")
    return answer["result"]


def compare(
    impls: list[Implementation],
    rounds: int,
    progress: Callable[[int, str, dict[str, Any]], None] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Every implementation once per round, ABBA, each in a fresh process.

    Returns name -> its results, one per round in round order. ``progress(round, name,
    result)`` is called after each sample (scripts print it to stderr).
    """
    by_name = {impl.name: impl for impl in impls}
    if len(by_name) != len(impls):
        raise ValueError("implementation names must be unique")
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in by_name}
    for r, name in abba(list(by_name), rounds):
        result = run_fresh(by_name[name])
        results[name].append(result)
        if progress is not None:
            progress(r, name, result)
    return results


def summary(
    results: dict[str, list[dict[str, Any]]],
    key: str,
    reference: str | None = None,
    fmt: str = ",.0f",
) -> list[str]:
    """One line per implementation: ``key``'s median [min - max] over rounds and, against
    ``reference``, the paired ratio's median [min - max] and in how many rounds it was above 1."""
    width = max(len(name) for name in results)
    lines = []
    for name, samples in results.items():
        values = [s[key] for s in samples]
        line = f"{name:<{width}}  {key} {spread(values, fmt)}"
        if reference is not None and name != reference:
            ratios = paired_ratios(values, [s[key] for s in results[reference]])
            above = sum(ratio > 1.0 for ratio in ratios)
            line += (f"  / {reference}, paired: {spread(ratios, '.3f')}, "
                     f"above 1 in {above} of {len(ratios)}")  # fmt: skip
        lines.append(line)
    return lines
