"""What every step of the GPU check is built from: its outcomes (Skip, Failed, and the
result dict :func:`done` makes), the processes it runs (:func:`run_process`, stopped at a
timeout or on request with SIGINT, then SIGKILL) and the files they write as they go."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ENTRY = ROOT / "benchmarks" / "gpu_check.py"  # the command; its --facts runs in a subprocess
RESERVE_S = 10.0  # kept back from the deadline for the report
MIN_STEP_S = 15.0  # a step that would get less is skipped, saying so
GRACE_S = 15.0  # after SIGINT: a trainer finishes its iteration and writes its summary
BIG = 10**9  # --total-steps of the runs that --max-wall-s stops


class Skip(Exception):
    """The step (or item) cannot run here; the message says why."""

    def __init__(self, reason: str, figures: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.figures = figures or {}


class Failed(Exception):
    """The step (or item) ran and failed; ``figures`` keeps what it measured and its log."""

    def __init__(self, reason: str, figures: dict[str, Any] | None = None, timeout: bool = False):
        super().__init__(reason)
        self.figures = figures or {}
        self.timeout = timeout


@dataclass
class Finished:
    rc: int | None
    seconds: float
    timed_out: bool  # reached its timeout (then SIGINT, and SIGKILL after GRACE_S)
    stopped: bool  # stopped on request (SIGINT from ``stop``)
    log: Path
    started: float = 0.0  # time.monotonic() at its start

    def tail(self, chars: int = 3000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return text[-chars:]


def run_process(
    argv: list[str],
    timeout_s: float,
    log: Path,
    env: dict[str, str],
    cwd: Path = ROOT,
    stop: Callable[[], bool] | None = None,
) -> Finished:
    """Run ``argv`` in its own process group with its output in ``log``. ``stop`` is polled
    twice a second; when it says so, or at the timeout, the group gets SIGINT (rlperf finishes
    the iteration and writes its summary) and SIGKILL GRACE_S later."""
    t0 = time.monotonic()
    interrupted_at: float | None = None
    timed_out = stopped = False
    with open(log, "w") as out:
        out.write(f"$ {shlex.join(argv)}\n")
        out.flush()
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True
        )
        while True:
            try:
                rc: int | None = proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if interrupted_at is None:
                if now - t0 > timeout_s:
                    timed_out = True
                elif stop is not None and stop():
                    stopped = True
                if timed_out or stopped:
                    interrupted_at = now
                    _signal_group(proc, signal.SIGINT)
            elif now - interrupted_at > GRACE_S:
                _signal_group(proc, signal.SIGKILL)
                rc = proc.wait()
                break
    return Finished(rc, time.monotonic() - t0, timed_out, stopped, log, t0)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


class Rows:
    """The complete lines of a growing JSON-lines file, read on from where the last read ended."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.rows = path, 0, []

    def read(self) -> list[dict[str, Any]]:
        if self.path.exists():
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
            end = data.rfind(b"\n") + 1
            self.offset += end
            self.rows += [json.loads(line) for line in data[:end].splitlines() if line.strip()]
        return self.rows


def first_at(rows: list[dict[str, Any]], target: float) -> dict[str, Any] | None:
    """The first metrics row whose mean return (last 100 episodes) reaches ``target``."""
    return next((r for r in rows if (r.get("mean_return") or float("-inf")) >= target), None)


def thin(points: list[Any], most: int) -> list[Any]:
    """At most ``most`` of ``points``, evenly spaced, the last one kept."""
    if len(points) <= most:
        return points
    step = len(points) / most
    return [points[int(i * step)] for i in range(most - 1)] + [points[-1]]


def last_json(text: str) -> dict[str, Any]:
    """The last line of ``text`` that is a JSON object (a worker's result among its warnings)."""
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                return json.loads(line)
    raise ValueError("no JSON result in the output")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


def done(status: str, reason: str | None, figures: dict[str, Any] | None = None) -> dict:
    return {"status": status, "reason": reason, "figures": figures or {}}


def attempt(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run a step or an item: ok with its figures, or skipped, failed or timeout with why."""
    try:
        return done("ok", None, fn())
    except Skip as e:
        return done("skipped", str(e), e.figures)
    except Failed as e:
        return done("timeout" if e.timeout else "failed", str(e), e.figures)
    except Exception as e:  # a bug of this script in one step must not stop the others
        figures = {"traceback": traceback.format_exc()[-3000:]}
        return done("failed", f"{type(e).__name__}: {e}", figures)


def items(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A step made of items: Failed naming the items that failed, Skip when none ran."""
    bad = [n for n, r in results.items() if r["status"] in ("failed", "timeout")]
    figures = {"items": results}
    if bad:
        raise Failed(f"{', '.join(bad)} failed", figures)
    if results and all(r["status"] == "skipped" for r in results.values()):
        raise Skip("; ".join(f"{n}: {r['reason']}" for n, r in results.items()), figures)
    return figures
