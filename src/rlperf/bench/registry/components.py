"""Cases of the components every workload shares: env step/reset, host-device transfers, the
rollout buffer, minibatch sampling, GAE, the PPO loss, backward and optimizer."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection
from typing import Any

from . import compat
from .core import HISTORY, NUM_ACTIONS, OBS_DIM, QUICK, SEED, Case, CaseSkipped, Prepared


# -- environments ------------------------------------------------------------------------
def _env_step(env: str, num_envs: int, make: Callable[..., Any] | None = None) -> Prepared:
    """One step of every env of ``make(env, num_envs, seed=...)`` (default: rlperf's
    ``make_vec``; a backend's own maker, EnvPool's, serves too)."""
    from rlperf.envs import make_vec

    vec = (make or make_vec)(env, num_envs, seed=SEED)
    vec.reset(seed=SEED)
    vec.single_action_space.seed(SEED)
    import numpy as np

    # One action per row: a multi-agent env's rows are its agents (num_envs * agents).
    rows = int(vec.num_envs)
    actions = np.stack([vec.single_action_space.sample() for _ in range(rows)])
    return Prepared(lambda: vec.step(actions), rows, "env_steps")


def _env_step_workers(
    env: str, num_envs: int, workers: int, batch: int, inline: bool = False, spin_us: float = 0.0
) -> Prepared:
    """The multiprocess backend (``envs/workers/``): a synchronous step of every env when
    ``batch == num_envs``, else one asynchronous recv of ``batch`` envs and the send back;
    ``inline``: worker 0 in the timing process (``--inline-worker``); ``spin_us``: the poll
    before blocking (``--worker-spin-us``; the trainer's automatic 300 with the inline worker
    on 2 cores)."""
    import numpy as np

    try:
        from rlperf.envs.workers import MultiprocessVecEnv
    except ImportError as e:
        raise CaseSkipped("this commit has no env workers (rlperf.envs.workers)") from e
    # Commits before the inline worker lack the argument.
    extra: dict[str, Any] = {"inline": True} if inline else {}
    if spin_us:
        extra["spin_us"] = spin_us
    # The trainer's zero-copy views (copy=False); commits before the option had only views.
    if "copy" in inspect.signature(MultiprocessVecEnv).parameters:
        extra["copy"] = False
    try:
        vec = MultiprocessVecEnv(env, num_envs, workers, batch_size=batch, seed=SEED, **extra)
    except TypeError as e:
        raise CaseSkipped("this commit's env workers have no inline worker") from e
    vec.single_action_space.seed(SEED)
    actions = np.stack([vec.single_action_space.sample() for _ in range(vec.num_envs)])
    if batch == num_envs:
        return Prepared(lambda: vec.step(actions), int(vec.num_envs), "env_steps")
    vec.send(actions)  # every env in flight; each call then takes one batch and returns it
    rows = batch * vec.num_envs // num_envs

    def recv_send() -> None:
        env_ids = vec.recv()[-1]
        vec.send(actions[:rows], env_ids=env_ids)

    return Prepared(recv_send, rows, "env_steps")


def _env_reset(env: str, num_envs: int) -> Prepared:
    from rlperf.envs import make_vec

    vec = make_vec(env, num_envs, seed=SEED)
    return Prepared(lambda: vec.reset(seed=SEED), int(vec.num_envs), "env_resets")


# -- host <-> device transfers (CUDA only) -----------------------------------------------
def _transfer(direction: str, memory: str, non_blocking: bool, batch: int) -> Prepared:
    import torch

    if not torch.cuda.is_available():
        raise CaseSkipped(f"CUDA not available (torch {torch.__version__}): nothing to transfer")
    pinned = memory == "pinned"
    if direction == "d2h":
        # The rollout's one copy a step: sampled actions to the host for the environment.
        src = torch.randint(0, NUM_ACTIONS, (batch,), device="cuda")
        dst = torch.empty(batch, dtype=torch.int64, pin_memory=pinned)
    else:
        # Observations from the environment to the device.
        src = torch.randn(batch, OBS_DIM, pin_memory=pinned)
        dst = torch.empty(batch, OBS_DIM, device="cuda")

    def run() -> None:
        dst.copy_(src, non_blocking=non_blocking)
        torch.cuda.synchronize()  # the copy is only done once the stream says so

    return Prepared(run, batch, "samples")


# -- rollout buffer ----------------------------------------------------------------------
def _filled_buffer(num_steps: int, num_envs: int) -> Any:
    import numpy as np
    import torch

    buf = compat.empty_buffer(num_steps, num_envs)
    rng = np.random.default_rng(SEED)
    gen = torch.Generator().manual_seed(SEED)
    for t in range(num_steps):
        buf.write_obs(t, rng.standard_normal((num_envs, OBS_DIM)).astype(np.float32))
        buf.store_step(
            t,
            torch.randint(0, NUM_ACTIONS, (num_envs,), generator=gen),
            torch.randn(num_envs, generator=gen),
            torch.randn(num_envs, generator=gen),
            rng.standard_normal(num_envs).astype(np.float32),
            np.zeros(num_envs, dtype=np.float32),
            np.zeros(num_envs, dtype=np.float32),
        )
    buf.advantages.copy_(torch.randn(num_steps, num_envs, generator=gen))
    return buf


def _buffer_store(num_envs: int) -> Prepared:
    import numpy as np
    import torch

    buf = compat.empty_buffer(32, num_envs)
    gen = torch.Generator().manual_seed(SEED)
    actions = torch.randint(0, NUM_ACTIONS, (num_envs,), generator=gen)
    logprobs, values = torch.randn(num_envs, generator=gen), torch.randn(num_envs, generator=gen)
    rewards = np.ones(num_envs, dtype=np.float32)
    flags = np.zeros(num_envs, dtype=np.float32)
    obs = np.random.default_rng(SEED).standard_normal((num_envs, OBS_DIM)).astype(np.float32)

    def run() -> None:
        buf.store_step(0, actions, logprobs, values, rewards, flags, flags)
        buf.write_obs(1, obs)

    return Prepared(run, num_envs, "env_steps")


def _minibatch_sampling(num_steps: int, num_envs: int) -> Prepared:
    import torch

    buf = _filled_buffer(num_steps, num_envs)
    run = compat.minibatch_epoch(buf, torch.Generator().manual_seed(SEED))
    return Prepared(run, num_steps * num_envs, "samples")


# -- GAE ---------------------------------------------------------------------------------
def _gae(num_steps: int, num_envs: int) -> Prepared:
    import numpy as np

    from rlperf.ppo.gae import gae

    rng = np.random.default_rng(SEED)
    shape = (num_steps, num_envs)
    rewards = rng.standard_normal(shape).astype(np.float32)
    values = rng.standard_normal(shape).astype(np.float32)
    last_value = rng.standard_normal(num_envs).astype(np.float32)
    terms = (rng.random(shape) < 0.02).astype(np.float32)
    truncs = (rng.random(shape) < 0.01).astype(np.float32)
    bootstrap = np.zeros(shape, dtype=np.float32)
    out = np.zeros(shape, dtype=np.float32)

    arrays = (rewards, values, last_value, terms, truncs, bootstrap)
    return Prepared(compat.gae_call(gae, arrays, out), num_steps * num_envs, "samples")


# -- PPO loss, backward, optimizer -------------------------------------------------------
def _minibatch(batch: int) -> tuple[Any, Any]:
    """(policy, minibatch) with realistic old log-probs and values from the policy itself."""
    import torch

    from rlperf.ppo.loss import normalize_advantages

    policy = compat.mlp_policy()
    gen = torch.Generator().manual_seed(SEED)
    obs = torch.randn(batch, OBS_DIM, generator=gen)
    with torch.inference_mode():
        actions, logprobs, values = compat.act(policy, obs, gen)
    mb = {
        "obs": obs,
        "actions": actions.clone(),
        "logprobs": logprobs.clone() + 0.05 * torch.randn(batch, generator=gen),
        "values": values.clone(),
        "advantages": normalize_advantages(torch.randn(batch, generator=gen)),
        "returns": values.clone() + torch.randn(batch, generator=gen),
    }
    return policy, mb


def _loss_and_head_grads(batch: int) -> tuple[Any, Callable[[], tuple[Any, ...]]]:
    """(policy, call): the trainer's analytic loss step, writing the head gradients into the
    policy's own gradient buffers and the statistics into a scratch that lives across calls,
    as ``AnalyticUpdate`` (earlier: the trainer) does."""
    import torch

    from rlperf.ppo.loss import STAT_NAMES, LossCoefs, discrete_ppo_loss_and_head_grads

    policy, mb = _minibatch(batch)
    coefs, stat_rows = LossCoefs(), torch.empty(len(STAT_NAMES), batch)
    protocol = _analytic_protocol(policy)
    obs = mb["obs"].unsqueeze(0) if protocol else mb["obs"]  # a T = 1 sequence, or rows

    def call() -> tuple[Any, ...]:
        logits, newvalue, cache = policy.forward_train(obs)
        logits_grad_out, value_grad_out = policy.output_grad_views(cache if protocol else batch)
        stats, grad_logits, grad_value = discrete_ppo_loss_and_head_grads(
            logits, newvalue, mb["actions"], mb["logprobs"], mb["advantages"], mb["returns"],
            mb["values"], coefs, logits_grad_out, value_grad_out, stat_rows,
        )  # fmt: skip
        return stats, cache, grad_logits, grad_value

    return policy, call


def _ppo_loss_forward(batch: int) -> Prepared:
    _, call = _loss_and_head_grads(batch)
    return Prepared(call, batch, "samples")


def _analytic_protocol(policy: Any) -> bool:
    """Whether the MLP has the one analytic protocol (``policies/base.py``): ``forward_train``
    over ``(T, B, ...)`` sequences, ``backward(cache, max_grad_norm)``. Commits before it
    (before this session's native boundary) took ``(B, ...)`` rows and
    ``backward(cache, grad_logits, grad_value)``."""
    import inspect

    return "state0" in inspect.signature(policy.forward_train).parameters


def _ppo_backward(batch: int) -> Prepared:
    policy, call = _loss_and_head_grads(batch)
    _, cache, grad_logits, grad_value = call()  # the gradients are where backward reads them
    if _analytic_protocol(policy):
        return Prepared(lambda: policy.backward(cache, 0.0), batch, "samples")
    return Prepared(lambda: policy.backward(cache, grad_logits, grad_value), batch, "samples")


def _optimizer_step(hidden: int) -> Prepared:
    """``FlatAdam`` over the MLP's one flat parameter: the optimizer the trainer steps."""
    import torch

    from rlperf.ppo.optim import FlatAdam

    policy = compat.mlp_policy((hidden, hidden))
    policy.flat.grad = torch.randn(
        policy.flat.shape, generator=torch.Generator().manual_seed(SEED)
    ).mul_(1e-3)
    optimizer = FlatAdam(policy.flat, 2.5e-4, eps=1e-5)
    return Prepared(optimizer.step, policy.flat.numel(), "parameters")


def _allreduce(kind: str) -> Prepared:
    """The sum of the default ``kind`` policy's flat gradient between 2 gloo ranks on this
    machine, as ``--nproc 2`` makes it every minibatch (``update/allreduce``: through shared
    memory where the machine allows, ``distributed/loopback.py``)."""
    try:
        from rlperf.distributed.loopback import pair
    except ImportError as e:  # older commits: no distributed training
        raise CaseSkipped("this commit has no rlperf.distributed") from e
    import torch

    from .policies import kind_policy

    numel = sum(p.numel() for p in kind_policy(kind, 1, ("cartpole", {}))[0].parameters())
    side, grad = pair(numel), torch.ones(numel)
    side.allreduce_(grad)  # the partner is up (it connects inside pair): time calls only
    return Prepared(lambda: side.allreduce_(grad), numel, "floats")


def _env_names() -> list[str]:
    from rlperf.envs import registered

    return sorted(registered())


# -- telemetry ---------------------------------------------------------------------------
def _telemetry(part: str) -> Prepared:
    """``sample``: one reading of the trainer, the machine and its workers (what the background
    thread does every ``telemetry_interval_s``); ``run``: a run's fixed cost, the start (NVML,
    CPU clocks, the thread) and the stop with its last sample."""
    try:
        from rlperf.run.telemetry import Telemetry
    except ImportError as e:
        raise CaseSkipped("this commit has no telemetry (rlperf.run.telemetry)") from e
    telemetry = Telemetry(interval_s=3600.0)  # the thread never samples within a call
    if part == "sample":
        telemetry.start()  # left running: the daemon thread waits out the interval
        return Prepared(telemetry.sample, 1, "samples")

    def run() -> None:
        telemetry.start()
        telemetry.stop()

    return Prepared(run, 1, "runs")


def cases() -> list[Case]:
    """The shared components' cases; env step and reset for every env the tree registers."""
    history, quick = {HISTORY}, {HISTORY, QUICK}
    out: list[Case] = []
    for env in _env_names():
        # 4 envs: the step's fixed cost, what a native step would remove (docs/performance.md).
        out.append(Case("env_step", {"env": env, "num_envs": 4}, _env_step))
        for n in (64, 1024):
            tags: Collection[str] = history if n == 1024 else set()
            out.append(Case("env_step", {"env": env, "num_envs": n}, _env_step, tags))
            out.append(Case("env_reset", {"env": env, "num_envs": n}, _env_reset))
    for env, n, batch in (("gym:CartPole-v1", 64, 64), ("gym:CartPole-v1", 64, 32),
                          ("grid", 16, 16), ("grid", 16, 8)):  # fmt: skip
        params = {"env": env, "num_envs": n, "workers": 2, "batch": batch}
        out.append(Case("env_step_workers", params, _env_step_workers))
    for env, n in (("gym:CartPole-v1", 64), ("grid", 16)):
        params = {"env": env, "num_envs": n, "workers": 2, "batch": n, "inline": True}
        out.append(Case("env_step_workers", params, _env_step_workers))
        spin = {**params, "spin_us": 300.0}
        out.append(Case("env_step_workers", spin, _env_step_workers))
    for direction in ("d2h", "h2d"):
        for memory in ("pageable", "pinned"):
            for non_blocking in (False, True):
                params = {"direction": direction, "memory": memory,
                          "non_blocking": non_blocking, "batch": 1024}  # fmt: skip
                out.append(Case("transfer", params, _transfer))
    for n in (64, 1024):
        out.append(Case("buffer_store", {"num_envs": n}, _buffer_store, quick if n == 1024 else ()))
    for (t, n), tags in zip(((32, 64), (128, 1024)), ((), quick), strict=True):
        params = {"num_steps": t, "num_envs": n}
        out.append(Case("minibatch_sampling", params, _minibatch_sampling, tags))
        out.append(Case("gae", params, _gae, tags))
    for b, tags in ((512, ()), (4096, quick)):
        out.append(Case("ppo_loss_forward", {"batch": b}, _ppo_loss_forward, tags))
        out.append(Case("ppo_backward", {"batch": b}, _ppo_backward, tags))
    for h, tags in ((64, ()), (256, quick)):
        out.append(Case("optimizer_step", {"hidden": h}, _optimizer_step, tags))
    out += [Case("allreduce", {"kind": kind}, _allreduce) for kind in ("mlp", "lstm")]
    out += [Case("telemetry", {"part": part}, _telemetry) for part in ("sample", "run")]
    return out
