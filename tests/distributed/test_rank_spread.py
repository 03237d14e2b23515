"""The per-rank breakdown of ``rlperf profile --nproc``: rows, spread and the pacing rank,
against figures worked out by hand."""

from __future__ import annotations

import pytest

from rlperf.profiling.rank_spread import pacing_rank, rank_rows, render

PER_RANK = [
    {"wall_s": 10.0, "sections": {"rollout": 4.0, "update": 6.0, "update/allreduce": 1.0}},
    {"wall_s": 10.0, "sections": {"rollout": 2.0, "update": 8.0, "update/allreduce": 3.0}},
]


def test_rows_in_iteration_order_with_spread_and_the_rank_that_spent_most() -> None:
    rows = rank_rows(PER_RANK)
    assert [r["section"] for r in rows] == ["rollout", "update", "update/allreduce"]
    rollout = rows[0]
    assert rollout["seconds"] == [4.0, 2.0]
    assert rollout["spread_pct"] == pytest.approx(100 * 2.0 / 3.0)
    assert rollout["max_rank"] == 0


def test_the_rank_that_waits_least_in_the_allreduce_sets_the_pace() -> None:
    assert pacing_rank(PER_RANK) == 0
    text = render(PER_RANK)
    assert "rank 0 sets the pace" in text
    assert "40.0%" in text  # rank 0's rollout: 4 s of its 10 s


def _clocked(arrive_ms: list[float], done_ms: list[float], host: str = "box") -> dict:
    return {"host": host, "allreduce_clock": {
        "first_call": 0, "arrive_ns": [int(a * 1e6) for a in arrive_ms],
        "done_ns": [int(d * 1e6) for d in done_ms]}}  # fmt: skip


def test_the_allreduce_splits_into_waiting_for_the_last_rank_and_the_exchange() -> None:
    # Call 0: rank 1 arrives 2 ms late; call 1: rank 0 arrives 1 ms late; both end 0.5 ms after
    # the last arrival. Worked by hand: rank 0 waits 2 ms, rank 1 waits 1 ms; 1 ms exchange each.
    per_rank = [
        {**PER_RANK[0], **_clocked([0.0, 10.0], [2.5, 10.5])},
        {**PER_RANK[1], **_clocked([2.0, 9.0], [2.5, 10.5])},
    ]
    from rlperf.profiling.rank_spread import allreduce_split

    split = allreduce_split(per_rank)
    assert split is not None and split["calls"] == 2
    assert split["wait_s"] == pytest.approx([0.002, 0.001])
    assert split["exchange_s"] == pytest.approx([0.001, 0.001])
    assert split["last_share"] == [0.5, 0.5]
    text = render(per_rank)
    assert "no rank sets the pace" in text and "rank 0 50%, rank 1 50%" in text
    assert "waiting for the last rank 0.002 s" in text


def test_one_late_rank_sets_the_pace_and_other_machines_clocks_are_not_compared() -> None:
    from rlperf.profiling.rank_spread import allreduce_split

    late = [
        {**PER_RANK[0], **_clocked([0.0, 10.0, 20.0], [3.0, 13.0, 23.0])},
        {**PER_RANK[1], **_clocked([2.0, 12.0, 22.0], [3.0, 13.0, 23.0])},
    ]
    assert allreduce_split(late)["last_share"] == [0.0, 1.0]  # type: ignore[index]
    assert "sets the pace" in render(late) and "last to arrive: rank 0 0%, rank 1 100%" in render(
        late
    )
    apart = [{**late[0], "host": "a"}, {**late[1], "host": "b"}]
    assert allreduce_split(apart) is None
    assert allreduce_split(PER_RANK) is None  # no clocks recorded


def test_the_allreduce_clock_keeps_the_last_calls_in_order() -> None:
    from rlperf.distributed.group import AllreduceClock

    clock = AllreduceClock(capacity=3)
    for i in range(5):
        clock.record(10 * i, 10 * i + 1)
    assert clock.window() == {"first_call": 2, "arrive_ns": [20, 30, 40], "done_ns": [21, 31, 41]}
