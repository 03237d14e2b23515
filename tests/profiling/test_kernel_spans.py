"""The C kernels' phases in the torch.profiler trace: while a trace records, the fused rollout
and the native update log each phase's start and end (``_span_log.h``, ``native.SpanLog``),
the profiler hands them to its span sink, and ``add_kernel_spans`` writes them into the
exported trace as ranges nested in their parent section's range."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from rlperf import native
from rlperf.config import Config, PPOConfig
from rlperf.envs.spec import ActionSpec, EnvSpec
from rlperf.policies.mlp import MLPActorCritic
from rlperf.ppo.rollout import RolloutBuffer
from rlperf.ppo.trainer import Trainer
from rlperf.ppo.update import NativeMLPUpdate
from rlperf.profiling.torch_trace import add_kernel_spans
from rlperf.timing.sections import Profiler

Spans = dict[str, list[tuple[int, int]]]


def sink_into(prof: Profiler) -> Spans:
    """Set a span sink on ``prof`` that keeps every span by section path."""
    got: Spans = {}
    prof.set_span_sink(lambda path, spans: got.setdefault(path, []).extend(spans))
    return got


def assert_spans_are_the_totals(prof: Profiler, got: Spans, since: int, until: int) -> None:
    """Each recorded section's spans add up to its total and calls, shortest and longest as
    recorded, follow one another and lie within [since, until] (perf_counter ns)."""
    stats = {s.name: s for s in prof.stats()}
    assert got, "no spans logged"
    for path, spans in got.items():
        s = stats[path]
        durations = [end - start for start, end in spans]
        assert (len(spans), sum(durations)) == (s.calls, s.total_ns), path
        assert (min(durations), max(durations)) == (s.min_ns, s.max_ns), path
        assert all(since <= start <= end <= until for start, end in spans), path
    ordered = sorted(span for spans in got.values() for span in spans)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(ordered)), "phases overlap"


def test_a_profiler_without_a_sink_wants_no_spans_and_drops_them() -> None:
    prof = Profiler()
    assert not prof.wants_spans
    prof.record("loss", 10, 1, 10, 10, [(0, 10)])  # no sink: the totals only
    assert next(prof.stats()).total_ns == 10
    got = sink_into(prof)
    assert prof.wants_spans
    with prof.section("update"):
        prof.record("loss", 5, 1, 5, 5, [(20, 25)])
    assert got == {"update/loss": [(20, 25)]}
    prof.disable()
    assert not prof.wants_spans
    prof.set_span_sink(None)
    prof.enable()
    assert not prof.wants_spans


def rollout_config(kind: str) -> Config:
    cfg = Config()
    cfg.env.num_envs, cfg.ppo.num_steps = 4, 32
    cfg.env.options = {"max_episode_steps": 10}  # truncations: the bootstrap phase runs too
    cfg.policy.kind = kind
    cfg.run.total_steps, cfg.run.threads, cfg.run.progress = 4 * 4 * 32, 1, False
    return cfg.validate()


@pytest.mark.parametrize("kind", ["mlp", "lstm"])
def test_the_fused_rollouts_spans_are_their_phases_as_the_table_records_them(kind) -> None:
    if not native.rollout_available() or (kind == "lstm" and not native.lstm_available()):
        pytest.skip(f"the {kind}'s fused rollout kernel is not built here")
    prof = Profiler()
    trainer = Trainer(rollout_config(kind), profiler=prof)
    assert trainer.whole_rollout is not None
    trainer.collect()  # no sink: the kernel logs nothing
    assert trainer.whole_rollout.spans is None
    prof.reset()
    got = sink_into(prof)
    since = time.perf_counter_ns()
    with prof.section("rollout"):
        trainer.collect()
    assert_spans_are_the_totals(prof, got, since, time.perf_counter_ns())
    assert set(got) == {f"rollout/{n}" for n in ("policy_forward", "env_step", "buffer_store",
                                                 "truncation_bootstrap")}  # fmt: skip


def flat_rollout(num_steps: int, num_envs: int) -> RolloutBuffer:
    spec = EnvSpec(num_envs, (4,), np.dtype(np.float32), ActionSpec("discrete", (2,), 1))
    buf = RolloutBuffer(num_steps, num_envs, spec, torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)
    buf.obs.copy_(torch.randn(buf.obs.shape, generator=gen))
    buf.actions.copy_(torch.randint(0, 2, buf.actions.shape, generator=gen))
    buf.advantages.copy_(torch.randn(buf.advantages.shape, generator=gen))
    return buf


@pytest.mark.kernel("update")
def test_the_native_updates_spans_are_its_phases_as_the_table_records_them() -> None:
    ppo = PPOConfig(update_epochs=3, num_minibatches=4)
    buf = flat_rollout(32, 4)
    policy = MLPActorCritic(buf.spec, (64, 64))
    update = NativeMLPUpdate(policy, ppo, 32)
    prof = Profiler()
    got = sink_into(prof)
    since = time.perf_counter_ns()
    with prof.section("update"):
        update.update_rollout(buf, 4, torch.Generator(), prof)
        update.report_times(prof)
    until = time.perf_counter_ns()
    # minibatch_prep is also a Python section (the permutations): compare the kernel's phases.
    del got["update/minibatch_prep"]
    assert_spans_are_the_totals(prof, got, since, until)
    assert {p: len(s) for p, s in got.items()} == {
        "update/loss": 12, "update/backward": 12, "update/optimizer_step": 12}  # fmt: skip
    prof.set_span_sink(None)
    update.update_rollout(buf, 4, torch.Generator(), prof)
    assert update.kernel.spans is None


@pytest.mark.kernel("update")
def test_the_span_log_grows_when_a_call_logs_more_than_it_holds() -> None:
    buf = flat_rollout(32, 4)
    update = NativeMLPUpdate(MLPActorCritic(buf.spec, (8,)), PPOConfig(update_epochs=2), 32)
    prof = Profiler()
    sink_into(prof)
    update.kernel.spans = log = native.SpanLog(3)  # kept: the update sizes only a new one
    update.update_rollout(buf, 4, torch.Generator(), prof)
    first = log.take(native.MLP_UPDATE_PHASES)
    assert sum(map(len, first.values())) == 3  # the first three of 32 fit
    assert list(first) == ["minibatch_prep", "loss", "backward"]
    update.update_rollout(buf, 4, torch.Generator(), prof)
    assert update.kernel.spans is log
    assert sum(map(len, log.take(native.MLP_UPDATE_PHASES).values())) == 32
    assert log.take(native.MLP_UPDATE_PHASES) == {}  # taking empties it


def write_trace(path: Path, base_ns: int) -> None:
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "rollout", "pid": 7, "tid": 8,
         "ts": 100.0, "dur": 50.0},
        {"ph": "X", "cat": "user_annotation", "name": "rollout", "pid": 7, "tid": 8,
         "ts": 300.0, "dur": 10.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 7, "tid": 8, "ts": 101.0,
         "dur": 1.0},
    ]  # fmt: skip
    path.write_text(json.dumps({"baseTimeNanoseconds": base_ns, "traceEvents": events}))


def test_kernel_spans_go_into_the_trace_inside_their_parents_range(tmp_path) -> None:
    trace = tmp_path / "t.pt.trace.json"
    base, offset = 5_000_000, 1_000_000  # the trace's base, Unix minus perf_counter: ns
    write_trace(trace, base)

    def at(us: float) -> int:  # perf_counter ns of the trace's ts `us`
        return round(us * 1e3) + base - offset

    spans = [
        ("rollout/env_step", at(110), at(120)),
        ("rollout/policy_forward", at(99), at(105)),  # starts before its parent: clamped
        ("rollout/env_step", at(301), at(302.5)),  # the second rollout
        ("rollout/env_step", at(200), at(210)),  # in no rollout's range: left out
        ("update/loss", at(110), at(111)),  # no update range: left out
    ]
    assert add_kernel_spans(trace, spans, clock_offset_ns=offset) == 3
    added = [e for e in json.loads(trace.read_text())["traceEvents"]
             if e.get("args", {}).get("source") == "rlperf kernel clock"]  # fmt: skip
    got = [(e["name"], e["ts"], e["dur"], e["pid"], e["tid"], e["cat"]) for e in added]
    assert got == [
        ("rollout/env_step", 110.0, 10.0, 7, 8, "user_annotation"),
        ("rollout/policy_forward", 100.0, 5.0, 7, 8, "user_annotation"),
        ("rollout/env_step", 301.0, 1.5, 7, 8, "user_annotation"),
    ]
    assert not list(tmp_path.glob("*.tmp"))
