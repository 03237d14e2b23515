"""Each rank's breakdown of a distributed run side by side, and the spread between them.

The ranks meet at every minibatch's all-reduce, so the slowest one sets the pace: the others
finish their own work (rollout, loss, backward) first and wait for it inside
``update/allreduce``. The rank with the least time in ``update/allreduce`` is therefore the one
the run waits for; the spread of the other sections says why it is slower (its environments,
its share of the cores).
"""

from __future__ import annotations

from typing import Any

from rlperf.timing import names

ALLREDUCE = names.path(names.UPDATE, names.ALLREDUCE)


def rank_rows(per_rank: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per section (top level and one below): seconds on each rank, the spread
    ``(max - min) / mean`` in percent and the rank that spent the most.

    Args:
        per_rank: each rank's ``{"wall_s": float, "sections": {path: seconds}}``, rank order.
    """

    def order(path: str) -> tuple[int, str]:  # the iteration's order, then children by name
        top = path.split("/", 1)[0]
        rank = names.TOP_LEVEL.index(top) if top in names.TOP_LEVEL else len(names.TOP_LEVEL)
        return rank, path

    paths = sorted({p for r in per_rank for p in r["sections"] if p.count("/") <= 1}, key=order)
    rows = []
    for path in paths:
        seconds = [float(r["sections"].get(path, 0.0)) for r in per_rank]
        mean = sum(seconds) / len(seconds)
        spread = 100.0 * (max(seconds) - min(seconds)) / mean if mean > 0 else 0.0
        rows.append({"section": path, "seconds": seconds, "spread_pct": spread,
                     "max_rank": seconds.index(max(seconds))})  # fmt: skip
    return rows


def pacing_rank(per_rank: list[dict[str, Any]]) -> int:
    """The rank the others wait for: the least time in ``update/allreduce``."""
    waits = [float(r["sections"].get(ALLREDUCE, 0.0)) for r in per_rank]
    return waits.index(min(waits))


def render(per_rank: list[dict[str, Any]]) -> str:
    """Text table: each rank's seconds and % of its wall time per section, and the spread."""
    ranks = range(len(per_rank))
    head = f"{'section':<28}" + "".join(f"{f'rank {r} s (%)':>18}" for r in ranks)
    lines = ["Each rank's breakdown (seconds, % of that rank's wall time)",
             head + f"{'spread':>9}  most", "-" * (len(head) + 15)]  # fmt: skip
    for row in rank_rows(per_rank):
        cells = "".join(
            f"{s:>10.3f} ({100 * s / per_rank[r]['wall_s']:>4.1f}%)"
            for r, s in enumerate(row["seconds"])
        )
        indent = "  " if "/" in row["section"] else ""
        name = indent + row["section"].rsplit("/", 1)[-1]
        lines.append(f"{name:<28}{cells}{row['spread_pct']:>8.1f}%  {row['max_rank']}")
    walls = "".join(f"{r['wall_s']:>18.3f}" for r in per_rank)
    lines.append(f"{'wall':<28}{walls}")
    pace = pacing_rank(per_rank)
    waits = ", ".join(f"{float(r['sections'].get(ALLREDUCE, 0.0)):.3f}" for r in per_rank)
    lines.append(
        f"rank {pace} sets the pace: it waits least in {ALLREDUCE} (s by rank: {waits}); "
        "the others finish their own work first and wait for it there."
    )
    return "\n".join(lines)
