"""gloo's I/O threads under SCHED_IDLE (``--gloo-io idle``, the default) and the guard that puts
them back when a busy machine starves them (``distributed/group.py``, ``GlooIoThreads``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from ranks import env_with_src

from rlperf.distributed.group import GLOO_IO_THREAD, AllreduceClock, GlooIoThreads, Ranks

pytestmark = pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux scheduling policy")

# A gloo group of one rank still starts the transport's I/O thread; the child reports that
# thread's policy before and after GlooIoThreads made it idle, and the other threads' after.
GROUP_OF_ONE = f"""
import json, os, tempfile
import torch.distributed as dist
from rlperf.distributed.group import GlooIoThreads
dist.init_process_group("gloo", store=dist.FileStore(tempfile.mktemp(), 1), rank=0, world_size=1)
def policies(want_io):
    out = []
    for tid in os.listdir("/proc/self/task"):
        name = open(f"/proc/self/task/{{tid}}/comm").read().strip()
        if (name == "{GLOO_IO_THREAD}") == want_io:
            out.append(os.sched_getscheduler(int(tid)))
    return out
io = GlooIoThreads.find()  # waits for the loop thread to carry its name
before = [os.sched_getscheduler(tid) for tid in io.tids]
io.make_idle()
print(json.dumps([len(io.tids), before, policies(True), sorted(set(policies(False)))]))
dist.destroy_process_group()
"""


def test_a_gloo_group_s_io_thread_and_only_it_goes_idle() -> None:
    done = subprocess.run(
        [sys.executable, "-c", GROUP_OF_ONE], capture_output=True, text=True,
        env=env_with_src(), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    count, before, after, others = json.loads(done.stdout)
    assert count >= 1
    assert before == [os.SCHED_OTHER] * count
    assert after == [os.SCHED_IDLE] * count
    assert others == [os.SCHED_OTHER]


def test_find_waits_for_a_loop_thread_that_names_itself_late(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # gloo's loop thread renames itself once it runs; a busy machine can list it before that.
    listings = iter([[], [], [4242]])
    monkeypatch.setattr(GlooIoThreads, "_named", staticmethod(lambda: next(listings)))
    assert GlooIoThreads.find().tids == [4242]
    monkeypatch.setattr(GlooIoThreads, "_named", staticmethod(lambda: []))
    monkeypatch.setattr(GlooIoThreads, "FIND_TIMEOUT_S", 0.05)
    assert GlooIoThreads.find().tids == []  # bounded: no such thread, no hang


@pytest.fixture
def sleeper() -> Iterator[int]:
    """A thread of this process that waits (its native id), standing in for gloo's loop."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    thread.start()
    assert thread.native_id is not None
    yield thread.native_id
    stop.set()
    thread.join()


def clock_with(took_ns: list[int]) -> AllreduceClock:
    clock = AllreduceClock(capacity=256)
    t = 1_000_000_000
    for took in took_ns:
        clock.record(t, t + took)
        t += took + 1_000_000
    return clock


def test_starved_threads_go_back_to_the_normal_policy_with_one_message(
    sleeper: int, capsys: pytest.CaptureFixture[str]
) -> None:
    io = GlooIoThreads([sleeper]).make_idle()
    assert os.sched_getscheduler(sleeper) == os.SCHED_IDLE
    # A quarter of the window over the threshold is not starving yet: only those calls are slow.
    slow = GlooIoThreads.STARVED_NS + 1
    window = GlooIoThreads.WINDOW
    assert not io.check(clock_with([slow] * (window // 4) + [400_000] * (window - window // 4)))
    assert os.sched_getscheduler(sleeper) == os.SCHED_IDLE
    # Not at a window's end: not looked at.
    assert not io.check(clock_with([slow] * (window + 1)))
    assert io.check(clock_with([slow] * window))
    assert os.sched_getscheduler(sleeper) == os.SCHED_OTHER
    assert not io.idle
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "starved under SCHED_IDLE" in err and "back to the normal policy" in err
    assert not io.check(clock_with([slow] * window))  # said once


def test_a_large_gradient_s_own_time_is_not_starving(sleeper: int) -> None:
    io = GlooIoThreads([sleeper]).make_idle()
    numel = 4_000_000  # 9.1 ms median for an idle exchange of this size on the 2-core machine
    took = [9_500_000] * GlooIoThreads.WINDOW
    assert not io.check(clock_with(took), numel)
    assert os.sched_getscheduler(sleeper) == os.SCHED_IDLE
    assert io.check(clock_with([int(GlooIoThreads.starved_ns(numel)) + 1] * 64), numel)
    assert os.sched_getscheduler(sleeper) == os.SCHED_OTHER


def test_without_the_right_to_restore_it_says_so(
    sleeper: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    io = GlooIoThreads([sleeper]).make_idle()

    def refuse(tid: int, policy: int, param: os.sched_param) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    assert io.check(clock_with([GlooIoThreads.STARVED_NS * 2] * GlooIoThreads.WINDOW))
    monkeypatch.undo()
    assert "may not restore the normal policy" in capsys.readouterr().err
    os.sched_setscheduler(sleeper, os.SCHED_OTHER, os.sched_param(0))


def test_the_summary_names_the_policy_now(sleeper: int) -> None:
    ranks = Ranks(rank=0, world_size=2, io_threads=GlooIoThreads([sleeper]).make_idle())
    assert ranks.gloo_io == "idle"
    ranks.io_threads.check(clock_with([GlooIoThreads.STARVED_NS * 2] * GlooIoThreads.WINDOW))
    assert ranks.gloo_io == "normal (restored)"
    assert Ranks(rank=0, world_size=2).gloo_io == "normal"  # --gloo-io normal
    assert Ranks().gloo_io is None


def test_no_threads_no_change() -> None:
    io = GlooIoThreads([]).make_idle()
    assert not io.idle
    assert not io.check(clock_with([10**9] * GlooIoThreads.WINDOW))
