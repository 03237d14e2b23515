"""Breakdown arithmetic: children + other = parent, top level + untimed = wall, no double count."""

from __future__ import annotations

import math

import pytest

from rlperf.timing.breakdown import build_rows, render
from rlperf.timing.stats import SectionStats

MS = 1_000_000


def stat(name: str, total_ms: float, calls: int = 1) -> SectionStats:
    parent = name.rsplit("/", 1)[0] if "/" in name else None
    total_ns = round(total_ms * MS)
    return SectionStats(name, parent, calls, total_ns, total_ns // calls, total_ns // calls)


STATS = [
    stat("rollout", 690, 10),
    stat("rollout/env_step", 240, 320),
    stat("rollout/policy_forward", 330, 320),
    stat("rollout/policy_forward/head", 100, 320),
    stat("gae", 10, 10),
    stat("update", 270, 10),
    stat("update/loss", 140, 40),
    stat("update/backward", 60, 40),
    stat("update/optimizer_step", 70, 40),  # children cover the parent exactly: no other row
]
WALL_S = 1.0


def rows_by_path():
    return {r.path: r for r in build_rows(STATS, WALL_S)}


def test_children_plus_other_add_up_to_each_parent():
    rows = build_rows(STATS, WALL_S)
    for parent in [r for r in rows if r.calls]:
        kids = [r for r in rows if r.path.rsplit("/", 1)[0] == parent.path and r is not parent]
        if kids:
            assert math.isclose(sum(k.total_s for k in kids), parent.total_s, abs_tol=1e-9)


def test_other_rows_are_shown_exactly_where_children_do_not_cover_the_parent():
    rows = rows_by_path()
    assert rows["rollout/(other)"].total_s == pytest.approx(0.690 - 0.240 - 0.330)
    assert rows["rollout/policy_forward/(other)"].total_s == pytest.approx(0.230)
    assert "update/(other)" not in rows


def test_top_level_plus_untimed_adds_up_to_wall_time():
    rows = build_rows(STATS, WALL_S)
    top = [r for r in rows if r.depth == 0]
    assert [r.name for r in top][-1] == "untimed"
    assert sum(r.total_s for r in top) == pytest.approx(WALL_S)
    assert sum(r.pct for r in top) == pytest.approx(100.0)
    untimed = top[-1]
    assert untimed.total_s == pytest.approx(WALL_S - 0.690 - 0.010 - 0.270)


def test_every_section_appears_once_and_children_follow_their_parent():
    rows = build_rows(STATS, WALL_S)
    timed = [r.path for r in rows if r.calls]
    assert sorted(timed) == sorted(s.name for s in STATS)
    for i, r in enumerate(rows):
        if r.depth:
            parent_path = r.path.rsplit("/", 1)[0]
            assert any(p.path == parent_path for p in rows[:i])


def test_siblings_are_ordered_by_time_and_rows_carry_per_call_figures():
    rows = build_rows(STATS, WALL_S)
    top = [r.name for r in rows if r.depth == 0 and r.calls]
    assert top == ["rollout", "update", "gae"]
    env = rows_by_path()["rollout/env_step"]
    assert env.calls == 320 and env.mean_ms == pytest.approx(240 / 320)
    assert env.pct == pytest.approx(24.0)


def test_render_shows_every_row_and_the_wall_line():
    rows = build_rows(STATS, WALL_S)
    text = render(rows, WALL_S, title="t")
    lines = text.splitlines()
    assert lines[0] == "t"
    for r in rows:
        assert any(line.lstrip().startswith(r.name) for line in lines)
    assert lines[-1].split()[:2] == ["wall", "1.000"]
