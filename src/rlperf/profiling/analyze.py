"""Turn a saved report into ranked bottlenecks, flags and advice tied to the numbers.

**Score.** Every section gets four components, each normalised to [0, 1] by dividing by the
largest value of that component over all sections of the report (a component nobody has, such as
GPU memory on a CPU run, is 0 for everyone):

    score = 100 * (0.40 * share + 0.30 * per_call + 0.15 * cpu_memory + 0.15 * gpu_memory)

``share`` is the section's percent of wall time, ``per_call`` its mean milliseconds per call,
``cpu_memory`` / ``gpu_memory`` its ``cpu_peak_mb`` / ``gpu_peak_mb``. The top section of every
component therefore scores that component's full weight.

**Flags** (absolute thresholds, independent of the score): CRITICAL over 30% of wall time, SLOW
over 100 ms per call, MEMORY over 100 MB CPU peak, GPU MEMORY over 100 MB GPU peak; and UNSTABLE
when a section called at least 20 times averages over 5x its fastest call (its times then
measure a busy machine more than the code).

**Measurement overhead** (the ``measurement`` section and its children: torch.profiler stepping
and exporting, TensorBoard writes) is the measuring tools' own cost, not a training bottleneck:
it is left out of the scores, flags and ranking (and so does not shift the normalisation of the
others) and listed apart, labelled as such, with its share of wall time.

**Categories** (``profiling/categories.py``): every section's own time in one of environment,
rendering, model, training, transfer, other, with each category's share of wall time.

**Recommendations**: one per flagged section and advice: CRITICAL, SLOW, MEMORY and GPU MEMORY
share the section's advice (listed once, with every flag it answers), UNSTABLE has its own.

**GPU idle** (a whole-run finding, not a section): a CUDA run whose GPU, by the report's
telemetry (NVML's utilisation, ``run/telemetry.py``), ran kernels less than
:data:`GPU_IDLE_BUSY_PCT` of the wall is waiting on the host: launches from Python, the env on
the CPU, copies. It is listed first among the recommendations (flag GPU IDLE), with what to try
for the run's settings: the env on the device (``--vec-backend torch``), CUDA graphs, and for a
small network the CPU (``--device cpu`` or ``auto``).

**Advice** is keyed on the section's phase (device-to-host copies, policy forward, env step, the
update and its parts, logging / checkpointing / evaluation, GAE, buffer store, untimed glue) and
quotes the run's own figures and settings.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from rlperf.profiling.categories import categorize, render_categories
from rlperf.timing import names

WEIGHTS = {"share": 0.40, "per_call": 0.30, "cpu_memory": 0.15, "gpu_memory": 0.15}
CRITICAL_PCT = 30.0
SLOW_MS = 100.0
MEMORY_MB = 100.0
GPU_MEMORY_MB = 100.0
# UNSTABLE (beyond the four flags above): a section called often whose mean is many times its
# fastest call is being slowed by something outside it, usually a busy machine or more torch
# threads than free cores (spinning intra-op threads); its times then measure the machine.
UNSTABLE_MEAN_OVER_MIN = 5.0
UNSTABLE_MIN_CALLS = 20
# GPU IDLE: a CUDA run's GPU busy (NVML utilisation, mean over the run) below this share of the
# wall. The first GPU run's CartPole was at 12% (4 envs) and 27% (4,096 envs); a GPU-bound
# run reads over 90%. Below half, the host's launches and copies are the bottleneck.
GPU_IDLE_BUSY_PCT = 50.0
# Envs that have a torch implementation on the device (--vec-backend torch, envs/device/).
DEVICE_ENVS = ("cartpole", "catch")
TOP_N = 10
MEASUREMENT_NOTE = (
    "measurement overhead is the measuring tools' own work (torch.profiler stepping and "
    "exporting traces, TensorBoard writes), not a training bottleneck: it is left out of the "
    "score and the ranking; profile without these tools for undisturbed timings"
)


@dataclass
class Scored:
    """One section's analysis: its report entry, score components and flags."""

    name: str
    pct: float
    mean_ms: float
    min_ms: float
    calls: int
    total_s: float
    cpu_peak_mb: float | None
    gpu_peak_mb: float | None
    components: dict[str, float]
    score: float
    flags: list[str] = field(default_factory=list)


def _normalised(values: list[float]) -> list[float]:
    top = max(values, default=0.0)
    return [v / top if top > 0 else 0.0 for v in values]


def score_sections(sections: list[dict[str, Any]]) -> list[Scored]:
    """Score and flag every section; returned best-first (highest score first)."""
    raw = {
        "share": [e["pct"] for e in sections],
        "per_call": [e["mean_ms"] for e in sections],
        "cpu_memory": [e["cpu_peak_mb"] or 0.0 for e in sections],
        "gpu_memory": [e["gpu_peak_mb"] or 0.0 for e in sections],
    }
    norm = {k: _normalised(v) for k, v in raw.items()}
    scored = []
    for i, e in enumerate(sections):
        components = {k: norm[k][i] for k in WEIGHTS}
        flags = []
        if e["pct"] > CRITICAL_PCT:
            flags.append("CRITICAL")
        if e["mean_ms"] > SLOW_MS:
            flags.append("SLOW")
        if (e["cpu_peak_mb"] or 0.0) > MEMORY_MB:
            flags.append("MEMORY")
        if (e["gpu_peak_mb"] or 0.0) > GPU_MEMORY_MB:
            flags.append("GPU MEMORY")
        if (
            e["calls"] >= UNSTABLE_MIN_CALLS
            and e["min_ms"] > 0
            and e["mean_ms"] > UNSTABLE_MEAN_OVER_MIN * e["min_ms"]
        ):
            flags.append("UNSTABLE")
        scored.append(
            Scored(
                name=e["name"],
                pct=e["pct"],
                mean_ms=e["mean_ms"],
                min_ms=e["min_ms"],
                calls=e["calls"],
                total_s=e["total_s"],
                cpu_peak_mb=e["cpu_peak_mb"],
                gpu_peak_mb=e["gpu_peak_mb"],
                components=components,
                score=100.0 * sum(WEIGHTS[k] * components[k] for k in WEIGHTS),
                flags=flags,
            )
        )
    return sorted(scored, key=lambda s: -s.score)


# -- advice ----------------------------------------------------------------------------------
def _setting(report: dict[str, Any], section: str, key: str) -> Any:
    return report.get("run", {}).get("config", {}).get(section, {}).get(key)


def phase_of(name: str) -> str:
    """The phase a section path belongs to, for advice (its last component decides first)."""
    leaf = name.rsplit("/", 1)[-1].lower()
    if name == "untimed":
        return "untimed"
    if names.is_measurement(name):
        return names.MEASUREMENT
    if "device_to_host" in leaf or "to_host" in leaf or "gpu_cpu" in leaf:
        return "device_to_host"
    if "forward" in leaf or "inference" in leaf or "bootstrap" in leaf:
        return "policy_forward"
    if "env" in leaf or "reset" in leaf:
        return "env_step"
    if any(k in leaf for k in ("log", "eval", "checkpoint")):
        return "logging"
    if leaf in (names.UPDATE, *names.UPDATE_CHILDREN, names.MINIBATCH_GRAPH):
        return names.UPDATE
    if leaf in (names.GAE, names.BUFFER_STORE, names.ROLLOUT):
        return leaf
    return "other"


def advice(entry: Scored, report: dict[str, Any]) -> str:
    """Concrete advice for one section, using the run's figures and settings."""
    num_envs = _setting(report, "env", "num_envs")
    hidden = _setting(report, "policy", "hidden_sizes")
    device = report.get("run", {}).get("device", "cpu")
    mbs = _setting(report, "ppo", "num_minibatches")
    epochs = _setting(report, "ppo", "update_epochs")
    head = f"{entry.name} takes {entry.pct:.1f}% of wall time ({entry.mean_ms:.3f} ms per call)"
    phase = phase_of(entry.name)
    if phase == "device_to_host":
        return (
            f"{head}: copy into pre-allocated pinned host buffers (non_blocking) and transfer "
            "once per step, not per tensor; keep everything the env does not need on the device."
        )
    if phase == "policy_forward":
        tips = [f"run more environments per forward (num_envs={num_envs}: try {2 * num_envs})"]
        if device.startswith("cuda"):
            tips.append("use mixed precision (bf16 autocast) for the forward pass")
        if hidden:
            smaller = [max(1, h // 2) for h in hidden]
            tips.append(f"a smaller network (hidden_sizes={list(hidden)}: try {smaller}) "
                        "if the return allows it")  # fmt: skip
        else:
            tips.append("a smaller network if the return allows it")
        return f"{head}: " + "; ".join(tips) + "."
    if phase == "env_step":
        backend = _setting(report, "env", "backend")
        batch = _setting(report, "env", "env_batch_size")
        if backend == "envpool" and not batch and num_envs and num_envs % 2 == 0:
            return (
                f"{head}: let EnvPool step half the envs while the policy acts on the other "
                f"half (--env-batch-size {num_envs // 2}: the Atari rollout took 601 ms instead "
                "of 718 on 2 cores, docs/atari.md)."
            )
        return (
            f"{head}: step more environments per call (num_envs={num_envs}: try "
            f"{2 * num_envs}); use a vectorised or faster env implementation (a native batch "
            "env like rlperf's cartpole instead of gym:<id> wrappers); or spread envs over "
            "more worker processes."
        )
    if phase == "update":
        kind = _setting(report, "policy", "kind")
        fp32 = _setting(report, "ppo", "precision") in (None, "fp32")
        if kind == "cnn" and fp32 and bf16_pays(report):
            return (
                f"{head}: the CNN's convolutions are the update's arithmetic; --precision bf16 "
                "runs them under bf16 autocast (1.56x on the Atari update on a CPU with "
                "AVX512-BF16, docs/atari.md; on yours: rlperf compare --b 'precision=bf16' with "
                "this run's flags). It changes the arithmetic: benchmarks/atari_precision.py "
                "measures how far."
            )
        return (
            f"{head}: fewer, larger minibatches (num_minibatches={mbs}: try "
            f"{max(1, (mbs or 2) // 2)}) cut per-minibatch overhead; fewer update epochs "
            f"(update_epochs={epochs}) cut it proportionally; keep --analytic on for MLP "
            "policies with discrete actions."
        )
    if phase == "logging":
        return (
            f"{head}: do it less often (e.g. raise --checkpoint-every, evaluate or log every "
            "N iterations instead of every one)."
        )
    if phase == "gae":
        return f"{head}: GAE is one vectorised pass; rarely worth optimising unless it dominates."
    if phase == "buffer_store":
        return f"{head}: the buffer is pre-allocated; check for per-step allocations or copies."
    if phase == "untimed":
        return (
            f"{head}: time outside every section (Python glue); wrap suspects in "
            "`with rlperf.profile(...)` to find it."
        )
    if phase == names.MEASUREMENT:
        return f"{head}: measurement overhead, not training; profile without the tool to remove it."
    if phase == "rollout":
        return f"{head}: see its children (policy forward, env step) for where it goes."
    return f"{head}: a user section; time its parts with nested `rlperf.profile(...)` blocks."


def bf16_pays(report: dict[str, Any]) -> bool:
    """Whether bf16 autocast can speed the report's run up: on CUDA, or on a CPU that computes
    bf16 natively (the report's ``cpu_bf16``; a report from before it was recorded: this
    machine's, ``rlperf/cpu_features.py``). Without native bf16 it runs slower than float32."""
    run = report.get("run", {})
    if str(run.get("device", "cpu")).startswith("cuda"):
        return True
    native = run.get("cpu_bf16")
    if native is None:
        from rlperf.cpu_features import cpu_computes_bf16

        native = cpu_computes_bf16()
    return bool(native)


def _run_gpu(report: dict[str, Any]) -> dict[str, Any] | None:
    """The telemetry block of the GPU a CUDA run trained on (``cuda:N``'s index, else the first),
    or None: not a CUDA run, or no GPU telemetry."""
    device = str(report.get("run", {}).get("device", "cpu"))
    gpus = (report.get("telemetry") or {}).get("gpus") or []
    if not device.startswith("cuda") or not gpus:
        return None
    index = int(device.partition(":")[2] or 0)
    return next((g for g in gpus if g.get("index") == index), gpus[0])


def gpu_idle(report: dict[str, Any]) -> dict[str, Any] | None:
    """The GPU IDLE finding (module docstring): ``{"flag", "flags", "section", "busy_pct",
    "advice"}`` where a CUDA run's GPU was busy under :data:`GPU_IDLE_BUSY_PCT` of the run,
    else None."""
    gpu = _run_gpu(report)
    busy = None if gpu is None else gpu.get("util_pct_mean")
    if busy is None or busy >= GPU_IDLE_BUSY_PCT:
        return None
    env, backend = report.get("run", {}).get("env"), _setting(report, "env", "backend")
    kind, num_envs = _setting(report, "policy", "kind"), _setting(report, "env", "num_envs")
    tips = []
    if env in DEVICE_ENVS and backend != "torch":
        tips.append(f"step {env} on the GPU (--vec-backend torch): no copies, no numpy step")
    if _setting(report, "run", "cuda_graphs") is False:
        tips.append("replay the update as a CUDA graph (drop --no-cuda-graphs)")
    else:
        tips.append("CUDA graphs (on by default) replay the update; the rollout's launches remain")
    if kind in (None, "mlp", "lstm"):
        tips.append(
            f"a small network ({kind or 'mlp'}, {num_envs} envs) may train faster on the CPU: "
            "--device cpu, or --device auto to time both"
        )
    else:
        tips.append(f"more envs per step (num_envs={num_envs}) give each launch more work")
    advice_text = (
        f"GPU {gpu.get('index', 0) if gpu else 0} busy {busy:.0f}% of the run (NVML utilisation, "
        f"mean): it waits on the host {100 - busy:.0f}% of the time (launches from Python, the "
        "env on the CPU, copies); " + "; ".join(tips) + "."
    )
    return {"flag": "GPU IDLE", "flags": ["GPU IDLE"], "section": "gpu", "busy_pct": busy,
            "advice": advice_text}  # fmt: skip


def unstable_advice(entry: Scored, report: dict[str, Any]) -> str:
    """Advice for a section whose mean call is many times its fastest (UNSTABLE)."""
    threads = report.get("run", {}).get("threads")
    cpus = report.get("run", {}).get("cpu_count")
    return (
        f"{entry.name} averages {entry.mean_ms:.3f} ms per call but its fastest took "
        f"{entry.min_ms:.3f} ms: something "
        f"outside it is slowing it (a busy machine, or {threads} torch threads on {cpus} CPUs "
        "competing with other work). Retry on a quiet machine or with --threads 1 before "
        "optimising it."
    )


# -- the analysis --------------------------------------------------------------------------
def analyze(report: dict[str, Any]) -> dict[str, Any]:
    """Everything the analyzer computes from a report, as one JSON-ready dict."""
    sections = list(report["sections"])
    totals = report["totals"]
    untimed_s = float(totals.get("untimed_s", 0.0))
    categories = categorize(sections, float(totals["wall_s"]), untimed_s)
    if untimed_s > 0 and totals["wall_s"] > 0:
        sections.append(
            {
                "name": "untimed",
                "parent": None,
                "calls": 0,
                "total_s": untimed_s,
                "mean_ms": 0.0,
                "min_ms": 0.0,
                "max_ms": 0.0,
                "pct": 100.0 * untimed_s / totals["wall_s"],
                "cpu_peak_mb": None,
                "gpu_peak_mb": None,
            }  # fmt: skip
        )
    measurement = [
        {"section": e["name"], "pct": e["pct"], "total_s": e["total_s"], "calls": e["calls"],
         "mean_ms": e["mean_ms"]}
        for e in sections
        if names.is_measurement(e["name"])
    ]  # fmt: skip
    sections = [e for e in sections if not names.is_measurement(e["name"])]
    scored = score_sections(sections)
    by_name = {s.name: s for s in scored}
    idle = gpu_idle(report)
    recommendations = [] if idle is None else [idle]  # the whole run's bottleneck first
    for s in scored:
        # CRITICAL, SLOW and the memory flags get the same advice (the section's phase): one
        # entry for all of them; UNSTABLE has its own (the machine, not the code).
        own = [f for f in s.flags if f != "UNSTABLE"]
        for flags, text in ((own, advice), (["UNSTABLE"] if "UNSTABLE" in s.flags else [],
                                            unstable_advice)):  # fmt: skip
            if flags:
                recommendations.append({"flag": ",".join(flags), "flags": flags,
                                        "section": s.name, "advice": text(s, report)})  # fmt: skip
    # The largest leaf (a section without children) is where an optimisation pays most.
    parents = {e["parent"] for e in sections if e["parent"]}
    leaves = [s for s in scored if s.name not in parents]
    largest_leaf = max(leaves, key=lambda s: s.pct, default=None)
    top_level = sorted(
        (by_name[e["name"]] for e in sections if e["parent"] is None), key=lambda s: -s.pct
    )
    return {
        "schema": "rlperf.analysis/1",
        "weights": WEIGHTS,
        "thresholds": {
            "critical_pct": CRITICAL_PCT,
            "slow_ms": SLOW_MS,
            "memory_mb": MEMORY_MB,
            "gpu_memory_mb": GPU_MEMORY_MB,
            "gpu_idle_busy_pct": GPU_IDLE_BUSY_PCT,
        },  # fmt: skip
        "totals": totals,
        "interrupted": report.get("interrupted", False),
        "instrumentation": report.get("run", {}).get("instrumentation", []),
        "run": {k: v for k, v in report.get("run", {}).items() if k != "config"},
        "dominant_phase": top_level[0].name if top_level else None,
        "largest_leaf": None
        if largest_leaf is None
        else {
            "section": largest_leaf.name,
            "pct": largest_leaf.pct,
            "advice": advice(largest_leaf, report),
        },  # fmt: skip
        "ranking": [asdict(s) for s in scored],
        "categories": categories,
        "recommendations": recommendations,
        "measurement": measurement,
        "measurement_note": MEASUREMENT_NOTE if measurement else None,
        "gpu_idle": idle,
    }


def render_analysis(analysis: dict[str, Any], top_n: int = TOP_N) -> str:
    """The text report: totals, top-N bottleneck table, flags with advice, where to start."""
    t = analysis["totals"]
    lines = [
        f"rlperf analysis: {t['steps']:,} steps in {t['wall_s']:.2f}s, {t['sps']:,.0f} SPS"
        + (" (INTERRUPTED run: partial)" if analysis["interrupted"] else ""),
    ]
    if analysis["instrumentation"]:
        lines.append(f"note: timings include {', '.join(analysis['instrumentation'])} overhead")
    w = analysis["weights"]
    lines += [
        "",
        f"TOP {top_n} BOTTLENECKS (score = {w['share']:.0%} time share + {w['per_call']:.0%} "
        f"time per call + {w['cpu_memory']:.0%} CPU memory + {w['gpu_memory']:.0%} GPU memory)",
        "-" * 96,
        f"{'section':<34} {'score':>6} {'time%':>6} {'mean_ms':>9} {'calls':>8} "
        f"{'cpu_mb':>7} {'gpu_mb':>7}  flags",
        "-" * 96,
    ]

    def mb(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    for s in analysis["ranking"][:top_n]:
        lines.append(
            f"{s['name']:<34} {s['score']:>6.1f} {s['pct']:>6.1f} {s['mean_ms']:>9.3f} "
            f"{s['calls']:>8} {mb(s['cpu_peak_mb']):>7} {mb(s['gpu_peak_mb']):>7}  "
            + ",".join(s["flags"])
        )
    if analysis.get("categories"):
        lines += ["", *render_categories(analysis["categories"])]
    if analysis.get("measurement"):
        lines += ["", "MEASUREMENT OVERHEAD (not a training bottleneck; not scored or ranked)"]
        for m in analysis["measurement"]:
            lines.append(
                f"{m['section']:<34} {'':>6} {m['pct']:>6.1f} {m['mean_ms']:>9.3f} {m['calls']:>8}"
            )
        lines.append(f"note: {analysis['measurement_note']}")
    lines += ["", "RECOMMENDATIONS"]
    if not analysis["recommendations"]:
        th = analysis["thresholds"]
        lines.append(
            f"  nothing over the thresholds ({th['critical_pct']:.0f}% of time, "
            f"{th['slow_ms']:.0f} ms per call, {th['memory_mb']:.0f} MB)"
        )
    for r in analysis["recommendations"]:
        lines.append(f"  [{r['flag']}] {r['advice']}")
    leaf = analysis["largest_leaf"]
    if leaf is not None:
        lines += ["", "WHERE TO START (largest leaf section)", f"  {leaf['advice']}"]
    return "\n".join(lines)
