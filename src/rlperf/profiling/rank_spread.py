"""Each rank's breakdown of a distributed run side by side, and the spread between them.

The ranks meet at every minibatch's all-reduce, so the slowest one sets the pace: the others
finish their own work (rollout, loss, backward) first and wait for it inside
``update/allreduce``. The rank with the least time in ``update/allreduce`` is therefore the one
the run waits for; the spread of the other sections says why it is slower (its environments,
its share of the cores).

Where the ranks share a machine, their arrival times at each all-reduce (``AllreduceClock``, one
monotonic clock for all processes of a machine) split ``update/allreduce`` exactly: the time a
rank waited for the last one to arrive, and the exchange after everyone had. Which rank arrived
last, call by call, says whether one rank is slow or the last place moves from call to call (a
loaded machine's jitter, which no rank can be blamed for).
"""

from __future__ import annotations

from typing import Any

import numpy as np

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


# A rank that arrived last at more than this share of the all-reduces is the one others wait for.
SLOW_RANK_SHARE = 0.6


def allreduce_split(per_rank: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``update/allreduce`` split into waiting and exchange, from each rank's arrival clock.

    Args:
        per_rank: as :func:`rank_rows`, each with ``"host"`` and ``"allreduce_clock"`` (an
            ``AllreduceClock.window()``).

    Returns:
        ``{"calls", "wait_s", "exchange_s", "last_share"}`` (lists by rank: seconds waiting for
        the last rank to arrive, seconds after all had arrived, the share of calls at which the
        rank arrived last), or None where the clocks cannot be compared: ranks on several
        machines, or no all-reduce recorded.
    """
    clocks = [r.get("allreduce_clock") for r in per_rank]
    if any(c is None for c in clocks) or len({r.get("host") for r in per_rank}) != 1:
        return None
    windows = {(c["first_call"], len(c["arrive_ns"])) for c in clocks}  # type: ignore[index]
    if len(windows) != 1 or not clocks[0]["arrive_ns"]:  # type: ignore[index]
        return None
    arrive = np.array([c["arrive_ns"] for c in clocks], dtype=np.int64)  # type: ignore[index]
    done = np.array([c["done_ns"] for c in clocks], dtype=np.int64)  # type: ignore[index]
    last = arrive.max(axis=0)
    last_rank = arrive.argmax(axis=0)
    return {
        "calls": int(arrive.shape[1]),
        "wait_s": ((last - arrive).sum(axis=1) / 1e9).tolist(),
        "exchange_s": (np.clip(done - last, 0, None).sum(axis=1) / 1e9).tolist(),
        "last_share": [float(np.mean(last_rank == r)) for r in range(len(per_rank))],
    }


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
    split = allreduce_split(per_rank)
    if split is None or max(split["last_share"]) > SLOW_RANK_SHARE:
        lines.append(
            f"rank {pace} sets the pace: it waits least in {ALLREDUCE} (s by rank: {waits}); "
            "the others finish their own work first and wait for it there."
        )
    if split is not None:
        shares = ", ".join(f"rank {r} {100 * x:.0f}%" for r, x in enumerate(split["last_share"]))
        if max(split["last_share"]) <= SLOW_RANK_SHARE:
            lines.append(
                f"no rank sets the pace: the last to arrive at an all-reduce changes from call to "
                f"call ({shares}): the waits are the ranks' jitter, not one slow rank."
            )
        else:
            lines.append(f"last to arrive: {shares}.")
        for r, rank in enumerate(per_rank):
            wall = rank["wall_s"]
            wait, exchange = split["wait_s"][r], split["exchange_s"][r]
            lines.append(
                f"rank {r}: {ALLREDUCE} over the last {split['calls']} calls = waiting for the "
                f"last rank {wait:.3f} s ({100 * wait / wall:.1f}% of wall) + exchange "
                f"{exchange:.3f} s ({100 * exchange / wall:.1f}%)"
            )
    return "\n".join(lines)
