"""The thread governor (rlperf/threads.py): the count follows the cores the machine leaves
free, a stall on several threads drops to one at once, and a fixed count stays fixed. Clocks and
the machine's share are faked: nothing here depends on the machine being idle or busy."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from rlperf import threads
from rlperf.threads import CoreShare, PhaseThreads, ThreadGovernor


@pytest.fixture(autouse=True)
def restore_torch_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeShare:
    """A CoreShare whose window is always long enough and whose reading is set by the test."""

    def __init__(self, share: float | None) -> None:
        self.share = share

    def age_s(self) -> float:
        return 1.0

    def read(self) -> float | None:
        return self.share


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(threads.time, "perf_counter", fake)
    return fake


def governor(share: float | None, most: int = 2) -> ThreadGovernor:
    gov = ThreadGovernor(most, adapt=True, rollout_most=most)
    gov.share = FakeShare(share)  # type: ignore[assignment]
    return gov


def run_phase(phase: PhaseThreads, clock: FakeClock, unit_s: list[float]) -> int:
    """One run of a phase whose units take ``unit_s`` seconds each; returns its count."""
    count = phase.begin()
    assert torch.get_num_threads() == count
    for seconds in unit_s:
        clock.now += seconds
        if phase.watching:
            phase.unit_done()
    phase.end(len(unit_s))
    return count


def test_one_thread_until_the_machine_has_been_read_then_the_free_cores(clock: FakeClock) -> None:
    gov = governor(share=1.97)
    assert run_phase(gov.update, clock, [0.001] * 4) == 1
    gov.next_iteration()
    assert gov.count == 2
    assert run_phase(gov.update, clock, [0.001] * 4) == 2


def test_a_busy_machine_keeps_one_thread(clock: FakeClock) -> None:
    gov = governor(share=0.68)  # two busy processes beside a 1-thread trainer on 2 cores
    for _ in range(5):
        gov.next_iteration()
        assert run_phase(gov.rollout, clock, [0.0001] * 32) == 1
        assert run_phase(gov.update, clock, [0.001] * 16) == 1
    assert gov.changes == 0
    assert gov.summary()["update"]["units_at_threads"] == {"1": 80}


def test_load_that_arrives_drops_to_one_thread_at_the_stalled_unit(clock: FakeClock) -> None:
    gov = governor(share=1.95)
    gov.next_iteration()
    for _ in range(3):  # the count's time per unit: 1 ms
        assert run_phase(gov.update, clock, [0.001] * 16) == 2
    # The second minibatch stalls for a scheduler slice: the rest run on one thread.
    run_phase(gov.update, clock, [0.001, 0.020] + [0.001] * 14)
    assert torch.get_num_threads() == 1 and gov.count == 1
    assert gov.update.stalls == 1
    assert gov.update.summary()["units_at_threads"] == {"1": 14, "2": 50}
    # ... and the next phase too, until the next look at the machine.
    assert run_phase(gov.rollout, clock, [0.0001] * 8) == 1


def test_noise_below_the_stall_ratio_keeps_the_count(clock: FakeClock) -> None:
    gov = governor(share=1.95)
    gov.next_iteration()
    for _ in range(3):
        run_phase(gov.update, clock, [0.001] * 16)
    run_phase(gov.update, clock, [0.001, 0.0025] + [0.001] * 14)  # 2.5 ms: under slack
    assert gov.count == 2 and gov.update.stalls == 0


@pytest.mark.parametrize(("share", "most", "count"), [(3.6, 4, 4), (2.4, 4, 2), (5.0, 2, 2)])
def test_the_count_is_the_share_rounded_within_the_flag(
    clock: FakeClock, share: float, most: int, count: int
) -> None:
    gov = governor(share, most)
    gov.next_iteration()
    assert gov.count == count


@pytest.mark.parametrize(("most", "adapt"), [(2, False), (1, True)])
def test_a_fixed_count_is_never_changed(clock: FakeClock, most: int, adapt: bool) -> None:
    gov = ThreadGovernor(most, adapt=adapt, rollout_most=most)
    assert gov.share is None
    gov.next_iteration()
    assert run_phase(gov.update, clock, [0.001, 0.5, 0.001]) == most
    assert torch.get_num_threads() == most and gov.update.stalls == 0


def test_env_workers_keep_the_rollout_on_one_thread(clock: FakeClock) -> None:
    gov = ThreadGovernor(2, adapt=True, rollout_most=1)
    gov.share = FakeShare(2.0)  # type: ignore[assignment]
    gov.next_iteration()
    assert run_phase(gov.rollout, clock, [0.0001] * 4) == 1
    assert run_phase(gov.update, clock, [0.001] * 4) == 2


def test_core_share_reads_idle_plus_own_time(monkeypatch: pytest.MonkeyPatch) -> None:
    share = CoreShare()
    if share.read() is None:
        pytest.skip("no /proc/stat: the share cannot be read on this OS")
    ticks = [1000, 1000]
    own = [5.0]
    wall = [10.0]

    def totals() -> tuple[float, float, float]:
        return wall[0], ticks[0] / 100 + ticks[1] / 100, own[0]

    monkeypatch.setattr(share, "_totals", totals)
    share._last = totals()
    wall[0] += 1.0  # one second: 0.3 s idle on each of two CPUs, 0.6 s of our own CPU time
    ticks[0] += 30
    ticks[1] += 30
    own[0] += 0.6
    assert share.read() == pytest.approx(1.2)


def test_without_proc_stat_it_warns_and_keeps_one_thread(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(threads.os.path, "exists", lambda path: False)
    with pytest.warns(UserWarning, match="no /proc/stat .* --no-adapt-threads runs --threads 2"):
        gov = ThreadGovernor(2, adapt=True, rollout_most=2)
    gov.next_iteration()
    assert run_phase(gov.update, clock, [0.001] * 4) == 1
