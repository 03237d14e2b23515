"""keep_freed_memory: large temporaries freed by one iteration are reused by the next without a
page fault; glibc's defaults fault them in again every time (the reference side)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="mallopt is glibc's (elsewhere keep_freed_memory is a no-op returning False)",
)

# Two passes over the same sizes, as two iterations of an update would allocate them; above
# 32 MiB glibc's dynamic mmap threshold stops growing, so by default each is its own mapping.
PASSES = textwrap.dedent(
    """
    import json, resource, sys
    import numpy as np
    from rlperf.run.allocator import keep_freed_memory
    applied = keep_freed_memory() if sys.argv[1] == "keep" else None
    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    counts = []
    for _ in range(2):
        before = faults()
        for mb in (48, 64, 40):
            np.ones(mb << 20, np.uint8)  # written, then freed
        counts.append(faults() - before)
    print(json.dumps({"applied": applied, "faults": counts}))
    """
)


def _passes(mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PASSES, mode], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    return json.loads(done.stdout)


def test_kept_memory_is_reused_without_faults_where_the_default_faults_again() -> None:
    # Fault counts, not pages: with transparent huge pages one fault may bring in 2 MiB.
    default = _passes("default")
    kept = _passes("keep")
    assert kept["applied"] is True
    # The reference: glibc's defaults map and unmap every block, so the second pass faults
    # it all in again.
    assert default["faults"][0] > 100 and default["faults"][1] > 0.8 * default["faults"][0]
    # Kept: the first pass faults the blocks in once, the second reuses them.
    assert kept["faults"][0] > 100 and kept["faults"][1] < 0.05 * kept["faults"][0], kept


def test_a_second_call_is_a_no_op_that_says_it_is_applied() -> None:
    code = ("from rlperf.run.allocator import keep_freed_memory as k; "
            "print(k(), k())")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    assert done.stdout.split() == ["True", "True"]
