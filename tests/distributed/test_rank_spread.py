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
