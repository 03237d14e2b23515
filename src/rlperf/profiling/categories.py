"""The analyzer's category view: every second of a run in one of six categories.

A section's *own* time (its total minus its children's) goes to exactly one category, so the
categories add up to the run's wall time (with ``untimed`` in ``other``); measurement overhead
(``measurement/...``) is left out, as in the ranking, and reported apart. The rules, first match
on the section's path wins:

==============  =============================================================================
rendering       any section at or below a ``render`` section (RGB observations and their stages)
transfer        ``device_to_host`` and ``to_device`` sections (actions to the host, the teacher's
                copies)
environment     ``rollout/env_step`` and everything below it that is not rendering, and
                ``rollout/normalize`` (observation/reward normalisation)
model           the policy's forward during the rollout (``rollout/policy_forward`` and its
                stages, e.g. ``convlstm/...``) and the truncation bootstrap's critic call
training        ``gae``, ``rollout/buffer_store`` (the replay store feeds the update) and
                ``update`` with all of its parts (the loss's forward, backward, optimizer)
other           logging, checkpoints, the scripted teacher's own work (``rollout/teacher``:
                neither the environment nor the trained model), untimed glue, user sections
==============  =============================================================================

This is the guide's "Category Analysis" (``guide-rgb-pipeline-profiling.md``) computed from the
sections rlperf already records, so it needs no extra instrumentation.
"""

from __future__ import annotations

from typing import Any

from rlperf.timing import names

CATEGORIES = ("environment", "rendering", "model", "training", "transfer", "other")
UNTIMED = "untimed"


def category_of(path: str) -> str:
    """The category of a section's own time (see the module docstring for the rules)."""
    parts = path.split("/")
    if names.RENDER in parts[:-1] or parts[-1] == names.RENDER:
        return "rendering"
    if parts[-1] in (names.DEVICE_TO_HOST, names.TEACHER_TO_DEVICE):
        return "transfer"
    top = parts[0]
    second = parts[1] if len(parts) > 1 else None
    if top == names.ROLLOUT:
        if second in (names.ENV_STEP, names.NORMALIZE):
            return "environment"
        if second in (names.POLICY_FORWARD, names.TRUNCATION_BOOTSTRAP):
            return "model"
        if second == names.BUFFER_STORE:
            return "training"
        return "other"
    if top in (names.GAE, names.UPDATE):
        return "training"
    return "other"


def own_seconds(sections: list[dict[str, Any]]) -> dict[str, float]:
    """Section name -> its total seconds minus those of its direct children (>= 0)."""
    own = {e["name"]: float(e["total_s"]) for e in sections}
    for e in sections:
        parent = e.get("parent")
        if parent in own:
            own[parent] -= float(e["total_s"])
    return {name: max(s, 0.0) for name, s in own.items()}


def categorize(sections: list[dict[str, Any]], wall_s: float, untimed_s: float = 0.0
               ) -> list[dict[str, Any]]:  # fmt: skip
    """Each category's own time and share of wall time, largest first.

    Args:
        sections: report entries (``name``, ``parent``, ``total_s``), measurement included or
            not (it is skipped here).
        wall_s: the run's wall time (shares are of this).
        untimed_s: wall time outside every top-level section (counted as ``other``).

    Returns:
        ``[{"category", "total_s", "pct", "sections": [names, largest own time first]}]`` for
        all six categories (zero ones included, so a reader sees that rendering cost nothing).
    """
    training = [e for e in sections if not names.is_measurement(e["name"])]
    own = own_seconds(training)
    totals = dict.fromkeys(CATEGORIES, 0.0)
    members: dict[str, list[tuple[float, str]]] = {c: [] for c in CATEGORIES}
    for name, seconds in own.items():
        category = category_of(name)
        totals[category] += seconds
        if seconds > 0:
            members[category].append((seconds, name))
    if untimed_s > 0:
        totals["other"] += untimed_s
        members["other"].append((untimed_s, UNTIMED))
    rows = [
        {
            "category": c,
            "total_s": totals[c],
            "pct": 100.0 * totals[c] / wall_s if wall_s > 0 else 0.0,
            "sections": [n for _, n in sorted(members[c], reverse=True)],
        }
        for c in CATEGORIES
    ]
    return sorted(rows, key=lambda r: -r["total_s"])


def render_categories(rows: list[dict[str, Any]]) -> list[str]:
    """Text lines of the category table (for the analyzer's report)."""
    lines = [
        "CATEGORY ANALYSIS (each section's own time in one category; tool overhead left out)",
        "-" * 96,
        f"{'category':<14} {'time%':>6} {'seconds':>9}  largest sections",
        "-" * 96,
    ]
    for r in rows:
        shown = ", ".join(r["sections"][:3]) + (" ..." if len(r["sections"]) > 3 else "")
        lines.append(f"{r['category']:<14} {r['pct']:>6.1f} {r['total_s']:>9.3f}  {shown}")
    return lines
