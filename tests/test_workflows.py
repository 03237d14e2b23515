"""The CI workflows pass zizmor's security audit (``zizmor --offline .github/workflows/``) with
no high and no medium finding: actions pinned to commits, no ``${{ }}`` expanded into a script,
read-only tokens, no credentials left in the clone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
FAILING = ("High", "Medium")


def zizmor() -> str:
    """The zizmor executable (the dev extra installs it beside this interpreter's scripts)."""
    found = shutil.which("zizmor") or shutil.which("zizmor", path=sysconfig.get_path("scripts"))
    if found is None:
        pytest.skip("zizmor is not installed (pip install -e '.[dev]')")
    return found


def audit(path: Path) -> list[dict]:
    """zizmor's findings on the workflows under ``path``, offline (no GitHub API)."""
    done = subprocess.run(
        [zizmor(), "--offline", "--format", "json", str(path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    # Exit status 0, or 10 + the highest severity found: the JSON is the answer either way.
    assert done.stdout.strip(), f"zizmor gave no report: {done.stderr[-2000:]}"
    return json.loads(done.stdout)


def failing(findings: list[dict]) -> list[str]:
    """``ident (severity) at file:line`` of each high or medium finding not ignored."""
    out = []
    for f in findings:
        if f["ignored"] or f["determinations"]["severity"] not in FAILING:
            continue
        first = f["locations"][0]
        where = first["symbolic"]["key"].get("Local", {}).get("verbatim_path", "?")
        line = first["concrete"]["location"]["start_point"]["row"] + 1
        out.append(f"{f['ident']} ({f['determinations']['severity']}) at {where}:{line}")
    return out


def test_the_workflows_have_no_high_or_medium_finding() -> None:
    assert WORKFLOWS.is_dir()
    assert failing(audit(WORKFLOWS)) == []


def test_the_audit_finds_what_the_workflows_once_had(tmp_path: Path) -> None:
    """A workflow as they were before the fix: the check above is not passing for want of a
    working audit."""
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "gate.yml").write_text(
        "name: gate\n"
        "on: pull_request\n"
        "jobs:\n"
        "  gate:\n"
        "    runs-on: ubuntu-latest\n"
        "    steps:\n"
        "      - uses: actions/checkout@v4\n"
        '      - run: rlperf gate --base "origin/${{ github.base_ref }}"\n'
    )
    idents = {line.split(" ")[0] for line in failing(audit(workflows))}
    assert {"unpinned-uses", "template-injection", "artipacked"} <= idents
