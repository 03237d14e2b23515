"""The steps that run pytest on the GPU: ``cuda_tests`` (every test under tests/ that mentions
CUDA, found by reading their source) and ``registry_cuda`` (pytest-benchmark on the registry's
CUDA cases and on the trainer's parts on the device, :mod:`gpucheck.device_cases`)."""

from __future__ import annotations

import ast
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucheck.core import ROOT, Failed, Finished, Skip, read_json, run_process
from gpucheck.device_cases import DEVICE_VAR, ENVS_VAR

DEVICE_CASES = Path(__file__).with_name("device_cases.py")  # collected by pytest

if TYPE_CHECKING:
    from gpucheck.check import Check

# Tests that mention CUDA but run far more cases than need it: test name -> the -k keyword of
# the cases that do (every registry case runs once in that test; only the transfers need CUDA).
NARROW_TESTS = {"test_case_runs_once": "transfer"}
# Test files that mention CUDA but are not run: this check's own tests (they run the check).
NOT_CUDA_TESTS = ("tests/bench/test_gpu_check.py",)


def find_cuda_tests(tests: Path) -> tuple[list[str], list[str]]:
    """(node ids of the tests under ``tests`` whose text, decorators included, or module mark
    mentions CUDA; those among them that skip where CUDA is available, left out)."""
    selected, excluded = [], []
    for path in sorted(tests.rglob("test_*.py")):
        source, rel = path.read_text(), path.relative_to(tests.parent).as_posix()
        if "cuda" not in source.lower() or rel in NOT_CUDA_TESTS:
            continue
        tree, lines = ast.parse(source), source.splitlines()
        marked = any(
            isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets)
            and "cuda" in (ast.get_source_segment(source, n) or "").lower()
            for n in tree.body
        )
        for prefix, fn in _test_functions(tree.body):
            first = min([d.lineno for d in fn.decorator_list] + [fn.lineno])
            text = "\n".join(lines[first - 1 : fn.end_lineno]).lower()
            if marked or "cuda" in text:
                node_id = f"{rel}::{prefix}{fn.name}"
                (excluded if _skips_with_cuda(fn) else selected).append(node_id)
    return selected, excluded


def _test_functions(body: list[ast.stmt], prefix: str = "") -> Iterable[tuple[str, ast.AST]]:
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            yield prefix, node
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            yield from _test_functions(node.body, f"{prefix}{node.name}::")


def _skips_with_cuda(fn: ast.AST) -> bool:
    """Whether ``fn`` has ``if ... torch.cuda.is_available() ...: pytest.skip(...)`` with the
    call not negated: a test of the CPU-only behaviour, skipped on a GPU machine."""
    for node in ast.walk(fn):
        if not isinstance(node, ast.If):
            continue
        negated = {
            id(n.operand)
            for n in ast.walk(node.test)
            if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not)
        }
        asks = any(
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "is_available"
            and id(n) not in negated
            and "cuda" in ast.dump(n.func.value)
            for n in ast.walk(node.test)
        )
        skips = any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "skip"
            for stmt in node.body
            for n in ast.walk(stmt)
        )
        if asks and skips:
            return True
    return False


def narrowing(node_ids: list[str]) -> str | None:
    """pytest's -k expression that keeps only the CUDA cases of :data:`NARROW_TESTS`."""
    names = {n.rsplit("::", 1)[-1] for n in node_ids}
    parts = [f"not ({t} and not {k})" for t, k in NARROW_TESTS.items() if t in names]
    return " and ".join(parts) or None


def junit(path: Path) -> dict[str, Any]:
    """Counts, failed ids and skip reasons of a pytest --junitxml file."""
    counts = Counter({"passed": 0, "failed": 0, "errors": 0, "skipped": 0})
    failures, reasons = [], Counter()
    for case in ET.parse(path).getroot().iter("testcase"):
        node_id = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None:
            counts["failed"] += 1
            failures.append(node_id)
        elif case.find("error") is not None:
            counts["errors"] += 1
            failures.append(node_id)
        elif (skipped := case.find("skipped")) is not None:
            counts["skipped"] += 1
            reasons[skipped.get("message") or "?"] += 1
        else:
            counts["passed"] += 1
    return {**counts, "failures": failures, "skip_reasons": dict(reasons)}


def pytest_run(check: Check, name: str, args: list[str], cap_s: float, env: dict | None = None):
    xml = check.work / f"{name}.xml"
    argv = check.python("-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", *args)
    fin = run_process(argv, check.timeout(cap_s), check.log(name), env or check.env)
    if not xml.exists():
        raise Failed(
            f"pytest exited {fin.rc} without a report", {"log_tail": fin.tail()}, fin.timed_out
        )
    return fin, junit(xml)


def passed(fin: Finished, figures: dict[str, Any]) -> dict[str, Any]:
    """``figures`` of a pytest run that passed; Failed with its log's tail otherwise."""
    if figures["failed"] or figures["errors"] or fin.rc != 0 or fin.timed_out:
        figures["log_tail"] = fin.tail()
        counts = f"{figures['failed']} failed, {figures['errors']} errors"
        raise Failed(f"{counts} (pytest exit {fin.rc})", figures, fin.timed_out)
    return figures


def step_cuda_tests(check: Check) -> dict[str, Any]:
    check.needs_cuda()
    selected, excluded = find_cuda_tests(ROOT / "tests")
    if not selected:  # pytest without paths would run the whole suite
        raise Skip("no test under tests/ mentions CUDA")
    keep = narrowing(selected)
    fin, counts = pytest_run(
        check, "cuda_tests", [*selected, *(["-k", keep] if keep else [])], check.cap("cuda_tests")
    )
    figures = {"selected": selected, "k": keep, "left_out_skip_with_cuda": excluded, **counts}
    return passed(fin, figures)


def step_registry_cuda(check: Check) -> dict[str, Any]:
    check.needs_cuda()
    bench = check.work / "registry_cuda.json"
    env = {**check.env, DEVICE_VAR: check.sizes.device, ENVS_VAR: str(check.sizes.big_envs)}
    args = ["benchmarks/test_components.py", str(DEVICE_CASES.relative_to(ROOT)),
            "-k", "transfer or test_device_case", "--benchmark-only", f"--benchmark-json={bench}",
            f"--benchmark-max-time={check.sizes.bench_max_time_s}",
            f"--benchmark-min-rounds={check.sizes.bench_min_rounds}",
            "--benchmark-warmup=on", "--benchmark-warmup-iterations=3"]  # fmt: skip
    fin, counts = pytest_run(check, "registry_cuda", args, check.cap("registry_cuda"), env)
    cases = {}
    for b in (read_json(bench) or {}).get("benchmarks", []):
        info, stats = b.get("extra_info", {}), b["stats"]
        unit = info.get("items_unit", "items")
        cases[b["param"] if "param" in b and b["param"] else b["name"]] = {
            "median_us": round(stats["median"] * 1e6, 2),
            "min_us": round(stats["min"] * 1e6, 2),
            "max_us": round(stats["max"] * 1e6, 2),
            "rounds": stats["rounds"],
            f"{unit}_per_s": info.get(f"{unit}_per_s"),
            "items_per_call": info.get("items_per_call"),
        }
    return passed(fin, {"cases": cases, **counts})
