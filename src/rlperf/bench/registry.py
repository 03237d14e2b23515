"""Every benchmark case of rlperf, defined once for pytest-benchmark, asv and ``rlperf gate``.

A case names the component it times and its parameters; ``setup`` builds its inputs once and
returns a :class:`Prepared` whose ``run`` is the one call to time and ``items_per_call`` the
work it does (env steps, samples), so every suite reports throughput the same way.

Imports of rlperf components happen inside the setup functions, by their public names only:
``rlperf gate`` loads this file from the checkout running the gate and points ``rlperf`` at the
tree under test, so the same case definitions time the base and the head commit. Where an API
changed, the case calls the current one and falls back to the one before it (marked "older
commits" below), so the components that existed then stay comparable across the change; a case
for a component a commit does not have raises :class:`CaseSkipped` saying so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class CaseSkipped(Exception):
    """This case cannot run on this machine; the message says why (printed, never silent)."""


@dataclass
class Prepared:
    """A case ready to time: ``run()`` does ``items_per_call`` items of work."""

    run: Callable[[], Any]
    items_per_call: int
    items_unit: str


@dataclass(frozen=True)
class Case:
    """One benchmark case: component, parameters and how to build its inputs."""

    component: str
    params: dict[str, Any]
    setup_fn: Callable[..., Prepared] = field(repr=False)

    @property
    def name(self) -> str:
        """Stable id, e.g. ``gae[T=32,N=64]``."""
        inner = ",".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.component}[{inner}]" if inner else self.component

    def setup(self) -> Prepared:
        """Build the inputs (raises CaseSkipped when the machine lacks what the case needs)."""
        return self.setup_fn(**self.params)


SEED = 0
OBS_DIM, NUM_ACTIONS = 4, 2  # CartPole's sizes, for components timed without an env


# -- environments ------------------------------------------------------------------------
def _env_step(env: str, num_envs: int) -> Prepared:
    from rlperf.envs import make_vec

    vec = make_vec(env, num_envs, seed=SEED)
    vec.reset(seed=SEED)
    vec.single_action_space.seed(SEED)
    import numpy as np

    # One action per row: a multi-agent env's rows are its agents (num_envs * agents).
    rows = int(vec.num_envs)
    actions = np.stack([vec.single_action_space.sample() for _ in range(rows)])
    return Prepared(lambda: vec.step(actions), rows, "env_steps")


def _env_reset(env: str, num_envs: int) -> Prepared:
    from rlperf.envs import make_vec

    vec = make_vec(env, num_envs, seed=SEED)
    return Prepared(lambda: vec.reset(seed=SEED), int(vec.num_envs), "env_resets")


# -- policy ------------------------------------------------------------------------------
def _policy(hidden: tuple[int, ...] = (64, 64)) -> Any:
    import torch

    from rlperf.policies.mlp import MLPActorCritic

    torch.manual_seed(SEED)
    if hasattr(MLPActorCritic, "from_sizes"):
        return MLPActorCritic.from_sizes(OBS_DIM, NUM_ACTIONS, hidden)
    return MLPActorCritic(OBS_DIM, NUM_ACTIONS, hidden)  # older commits


def _act(policy: Any, obs: Any, gen: Any) -> tuple[Any, Any, Any]:
    """actions, logprobs, values of one rollout step (any commit's act signature)."""
    if hasattr(policy, "initial_state"):
        state = policy.initial_state(obs.shape[0])
        return policy.act(obs, state, None, None, gen)[:3]
    return policy.act(obs, gen)  # older commits


def _policy_act(batch: int) -> Prepared:
    import torch

    policy = _policy()
    obs = torch.randn(batch, OBS_DIM, generator=torch.Generator().manual_seed(SEED))
    gen = torch.Generator().manual_seed(SEED)

    def run() -> Any:
        with torch.inference_mode():
            return _act(policy, obs, gen)

    return Prepared(run, batch, "samples")


# Workloads of the policy kinds beyond the MLP: (env, options) each is timed on.
POLICY_WORKLOADS = {
    "mlp": ("cartpole", {}),
    "lstm": ("cartpole", {"observe": "position"}),
    "cnn": ("catch", {}),
    "convlstm": ("robots", {}),
}


def _kind_policy(
    kind: str, num_envs: int, workload: tuple[str, dict[str, Any]] | None = None
) -> tuple[Any, Any, Any, dict[str, Any]]:
    """(policy, env spec, first observation, reset infos) for a policy kind on a workload
    (default: the kind's own, :data:`POLICY_WORKLOADS`)."""
    import torch

    try:
        from rlperf.config import PolicyConfig
        from rlperf.envs.spec import EnvSpec
        from rlperf.policies.registry import make_policy
    except ImportError as e:
        raise CaseSkipped(f"no policy registry in this commit ({e})") from e
    from rlperf.envs import make_vec

    env_name, options = workload or POLICY_WORKLOADS[kind]
    _requires_env(env_name)
    _requires_policy(kind)
    vec = make_vec(env_name, num_envs, seed=SEED, **options)
    obs, infos = vec.reset(seed=SEED)
    spec = EnvSpec.from_env(vec, infos)
    torch.manual_seed(SEED)
    return make_policy(PolicyConfig(kind=kind), spec), spec, obs, infos


def _act_case(policy: Any, obs: Any, infos: dict[str, Any]) -> Prepared:
    """One rollout step of ``policy``: state and done flags carried, the env's mask if any.
    Inside the policy's ``acting()`` stretch, entered once here and left open (the case never
    changes the parameters), as every step of a rollout runs in the trainer."""
    import contextlib

    import torch

    stretch = contextlib.ExitStack()  # collected, it would end the stretch: run() holds it
    acting = getattr(policy, "acting", None)  # commits before the hook have no stretch
    if acting is not None:
        stretch.enter_context(acting())

    num_envs = len(obs)
    obs_t = torch.from_numpy(obs)
    mask = infos.get("action_mask")
    mask_t = None if mask is None else torch.from_numpy(mask)
    state = policy.initial_state(num_envs)
    done = torch.zeros(num_envs) if policy.recurrent else None
    gen = torch.Generator().manual_seed(SEED)

    def run(_stretch: contextlib.ExitStack = stretch) -> Any:  # holds the stretch open
        with torch.inference_mode():
            return policy.act(obs_t, state, done, mask_t, gen)

    return Prepared(run, num_envs, "samples")


def _kind_act(kind: str, num_envs: int) -> Prepared:
    policy, _, obs, infos = _kind_policy(kind, num_envs)
    return _act_case(policy, obs, infos)


def _lstm_evaluate(num_steps: int, num_envs: int, backward: bool, kind: str = "lstm") -> Prepared:
    """A recurrent policy over a (T, B) sequence, as one update minibatch sees it."""
    import numpy as np
    import torch

    if kind != "lstm":
        _requires_env(POLICY_WORKLOADS[kind][0])
    policy, spec, _, _ = _kind_policy(kind, num_envs)
    gen = torch.Generator().manual_seed(SEED)
    if np.dtype(spec.obs_dtype) == np.uint8:
        obs = torch.randint(0, 256, (num_steps, num_envs, *spec.obs_shape), generator=gen,
                            dtype=torch.uint8)  # fmt: skip
    else:
        obs = torch.randn(num_steps, num_envs, *spec.obs_shape, generator=gen)
    actions = torch.randint(0, spec.action.nvec[0], (num_steps, num_envs), generator=gen)
    dones = (torch.rand(num_steps, num_envs, generator=gen) < 0.02).float()
    state = policy.initial_state(num_envs)

    def run() -> Any:
        logprob, entropy, value = policy.evaluate(obs, actions, state, dones, None)
        if backward:
            (logprob.sum() + entropy.sum() + value.sum()).backward()
        return value

    return Prepared(run, num_steps * num_envs, "samples")


def _lstm_recurrence(num_steps: int, num_envs: int, impl: str) -> Prepared:
    """The LSTM recurrence alone, forward and backward over a (T, B) minibatch of size 64:
    the compiled kernel (``policies/lstm_cpu.py``) or the torch unroll it replaced."""
    import torch

    try:
        from rlperf.policies import lstm_cpu
    except ImportError as e:  # commits before the kernel
        raise CaseSkipped("no compiled LSTM kernel in this commit") from e
    from rlperf.policies import lstm

    # Named LSTMUnrollCPU and LSTMUnroll before the one analytic protocol.
    compiled = getattr(lstm_cpu, "CompiledRecurrence", None) or lstm_cpu.LSTMUnrollCPU
    torch_unroll = getattr(lstm, "TorchRecurrence", None) or lstm.LSTMUnroll

    if impl == "compiled" and not lstm_cpu.available():
        raise CaseSkipped("the compiled LSTM kernel is not built (no C compiler at install)")
    hid = 64
    gen = torch.Generator().manual_seed(SEED)
    xproj = torch.randn(num_steps, num_envs, 4 * hid, generator=gen, requires_grad=True)
    keep = (torch.rand(num_steps, num_envs, generator=gen) >= 0.02).float()
    h0, c0 = torch.zeros(num_envs, hid), torch.zeros(num_envs, hid)
    w_hh = (torch.randn(4 * hid, hid, generator=gen) / hid**0.5).requires_grad_()
    grad = torch.randn(num_steps, num_envs, hid, generator=gen)

    def run() -> Any:
        if impl == "compiled":
            hs = compiled.apply(xproj, keep, h0, c0, w_hh)
        else:
            hs = torch_unroll.apply(xproj, keep.unsqueeze(-1), h0, c0, w_hh)
        return torch.autograd.grad(hs, (xproj, w_hh), grad)

    return Prepared(run, num_steps * num_envs, "samples")


def _lstm_network(num_steps: int, num_envs: int, impl: str) -> Prepared:
    """The whole LSTM actor-critic of position-only CartPole (encoder 64-64, LSTM 64, heads),
    forward and backward over a (T, B) minibatch from given output gradients: the compiled
    network (``native.CompiledNet``, one call each way) or autograd through the same modules
    (the recurrence through the compiled kernel's autograd node where it is built)."""
    import torch

    policy, spec, _, _ = _kind_policy("lstm", num_envs)
    if impl == "compiled" and not getattr(policy, "analytic", False):
        raise CaseSkipped("no compiled LSTM network here (commit before it, or not built)")
    from rlperf.ppo.optim import flatten_parameters

    flatten_parameters(policy)
    gen = torch.Generator().manual_seed(SEED)
    obs = torch.randn(num_steps, num_envs, *spec.obs_shape, generator=gen)
    dones = (torch.rand(num_steps, num_envs, generator=gen) < 0.02).float()
    state = policy.initial_state(num_envs)
    grad_out = torch.randn(num_steps * num_envs, spec.action.num_outputs + 1, generator=gen)

    def run() -> Any:
        if impl == "compiled":
            _, _, cache = policy.forward_train(obs, state, dones)
            cache.grad_out.copy_(grad_out)
            policy.backward(cache)
            return cache.grad_out
        x = policy.encoder(obs.flatten(0, 1)).view(num_steps, num_envs, -1)
        hs = policy.lstm.unroll(x, state, dones)
        heads = policy.out.linear  # logits and value side by side, as forward_train's out
        out = torch.addmm(heads.bias, hs.flatten(0, 1), heads.weight.T)
        out.backward(grad_out)
        return out

    return Prepared(run, num_steps * num_envs, "samples")


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
def _empty_buffer(num_steps: int, num_envs: int) -> Any:
    import numpy as np
    import torch

    from rlperf.ppo.rollout import RolloutBuffer

    try:
        from rlperf.envs.spec import ActionSpec, EnvSpec
    except ImportError:  # older commits: flat float observations, action_dim 0 = discrete
        return RolloutBuffer(num_steps, num_envs, OBS_DIM, 0, torch.device("cpu"))
    spec = EnvSpec(num_envs, (OBS_DIM,), np.dtype(np.float32), ActionSpec("discrete", (2,), 1))
    return RolloutBuffer(num_steps, num_envs, spec, torch.device("cpu"))


def _filled_buffer(num_steps: int, num_envs: int) -> Any:
    import numpy as np
    import torch

    buf = _empty_buffer(num_steps, num_envs)
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

    buf = _empty_buffer(32, num_envs)
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
    gen = torch.Generator().manual_seed(SEED)
    try:
        from rlperf.ppo.samplers import PackedTableSampler
    except ImportError:  # older commits: the table lived in the buffer
        buf.build_table(buf.advantages + buf.values)

        def run_old() -> list:
            buf.shuffle(gen)
            return list(buf.minibatches(4))

        return Prepared(run_old, num_steps * num_envs, "samples")
    sampler = PackedTableSampler(buf)
    sampler.prepare()
    return Prepared(lambda: sampler.epoch(4, gen), num_steps * num_envs, "samples")


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
    names = ("rewards", "values", "last_value", "terminations", "truncations", "bootstrap_values")
    kwargs = dict(zip(names, arrays, strict=True))

    def run() -> Any:
        return gae(**kwargs, gamma=0.99, gae_lambda=0.95, out=out)

    try:
        run()
    except TypeError:  # older commits: nine positional arguments, the last one `advantages`

        def run() -> Any:
            return gae(*arrays, 0.99, 0.95, out)

    return Prepared(run, num_steps * num_envs, "samples")


# -- PPO loss, backward, optimizer -------------------------------------------------------
def _minibatch(batch: int) -> tuple[Any, Any]:
    """(policy, minibatch) with realistic old log-probs and values from the policy itself."""
    import torch

    from rlperf.ppo.loss import normalize_advantages

    policy = _policy()
    gen = torch.Generator().manual_seed(SEED)
    obs = torch.randn(batch, OBS_DIM, generator=gen)
    with torch.inference_mode():
        actions, logprobs, values = _act(policy, obs, gen)
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
        views = policy.output_grad_views(cache if protocol else batch)
        stats, grad_logits, grad_value = discrete_ppo_loss_and_head_grads(
            logits, newvalue, mb["actions"], mb["logprobs"], mb["advantages"], mb["returns"],
            mb["values"], coefs, *views, stat_rows,
        )  # fmt: skip
        return stats, cache, grad_logits, grad_value

    return policy, call


def _ppo_loss_forward(batch: int) -> Prepared:
    _, call = _loss_and_head_grads(batch)
    return Prepared(call, batch, "samples")


def _analytic_protocol(policy: Any) -> bool:
    """Whether the MLP has the one analytic protocol (``policies/base.py``): ``forward_train``
    over ``(T, B, ...)`` sequences, ``backward(cache, max_grad_norm)``. Commits before it took
    ``(B, ...)`` rows and ``backward(cache, grad_logits, grad_value)``."""
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

    policy = _policy((hidden, hidden))
    policy.flat.grad = torch.randn(
        policy.flat.shape, generator=torch.Generator().manual_seed(SEED)
    ).mul_(1e-3)
    optimizer = FlatAdam(policy.flat, 2.5e-4, eps=1e-5)
    return Prepared(optimizer.step, policy.flat.numel(), "parameters")


# -- the trainer -------------------------------------------------------------------------
def _trainer_config(num_envs: int, threads: int, kind: str = "mlp") -> Any:
    from rlperf.config import Config

    cfg = Config()
    cfg.env.num_envs = num_envs
    cfg.run.seed = SEED
    cfg.run.threads = threads
    cfg.run.progress = False
    cfg.ppo.anneal_lr = False  # every timed call does the same work
    if kind != "mlp":
        if not hasattr(cfg.policy, "kind"):
            raise CaseSkipped(f"policy {kind!r}: this commit trains the MLP only")
        env_name, options = POLICY_WORKLOADS[kind]
        _requires_env(env_name)
        _requires_policy(kind)
        cfg.policy.kind, cfg.env.env, cfg.env.options = kind, env_name, dict(options)
    return cfg


def _update_epoch(num_envs: int, threads: int, kind: str = "mlp") -> Prepared:
    from rlperf.ppo.trainer import Trainer

    cfg = _trainer_config(num_envs, threads, kind)
    cfg.ppo.update_epochs = 1
    trainer = Trainer(cfg)
    trainer.collect()
    trainer.compute_advantages()
    return Prepared(trainer.update, cfg.ppo.num_steps * num_envs, "samples")


def _e2e_train(
    num_envs: int,
    env_steps: int,
    threads: int,
    kind: str = "mlp",
    num_steps: int | None = None,
    num_minibatches: int | None = None,
) -> Prepared:
    """Continued training of a policy kind on its workload; ``num_steps`` (steps per env per
    rollout) and ``num_minibatches`` override the config's, to shrink an iteration."""
    cfg = _trainer_config(num_envs, threads, kind)
    if num_steps is not None:
        cfg.ppo.num_steps = num_steps
    if num_minibatches is not None:
        cfg.ppo.num_minibatches = num_minibatches
    return _continued_training(cfg, env_steps)


def _continued_training(cfg: Any, env_steps: int) -> Prepared:
    """Each call trains the same run for ``env_steps`` more steps (train() stops at
    total_steps, so it is moved on before every call)."""
    from rlperf.ppo.trainer import Trainer

    cfg.run.warmup_iters = 0
    cfg.run.total_steps = env_steps
    trainer = Trainer(cfg)

    def run() -> dict[str, Any]:
        cfg.run.total_steps = trainer.global_step + env_steps
        return trainer.train()

    return Prepared(run, env_steps, "env_steps")


# -- the Petri-net environment ----------------------------------------------------------
PETRI_NET = "jobshop"  # the >= 20-transition built-in net the speed target is measured on
PETRI_RECORDED_STEPS = 128


def _petri_vec(num_envs: int, **options: Any) -> Any:
    from rlperf.envs import make_vec, registered

    if "petri" not in registered():
        raise CaseSkipped("no petri environment in this commit")
    return make_vec("petri", num_envs, seed=SEED, net=PETRI_NET, **options)


def _petri_step(turbo: bool, num_envs: int) -> Prepared:
    """One step with random enabled transitions, recorded in setup by a turbo twin from the same
    start: every timed step fires valid transitions, as a masked policy would."""
    import numpy as np

    vec, twin = _petri_vec(num_envs, turbo=turbo), _petri_vec(num_envs)
    mask = twin.reset(seed=SEED)[1]["action_mask"]
    rng = np.random.default_rng(SEED)
    actions = []
    for _ in range(PETRI_RECORDED_STEPS):
        actions.append((rng.random(mask.shape) * mask).argmax(1))
        mask = twin.step(actions[-1])[4]["action_mask"]
    vec.reset(seed=SEED)
    start, calls = vec.get_state(), [0]

    def run() -> Any:
        k = calls[0] % PETRI_RECORDED_STEPS
        if k == 0 and calls[0]:
            vec.set_state(start)  # back to where the recording began: 1 call in 128
        calls[0] += 1
        return vec.step(actions[k])

    return Prepared(run, num_envs, "env_steps")


def _petri_reset(turbo: bool, num_envs: int) -> Prepared:
    vec = _petri_vec(num_envs, turbo=turbo)
    return Prepared(lambda: vec.reset(seed=SEED), num_envs, "env_resets")


def _petri_masked_act(num_envs: int) -> Prepared:
    """The MLP policy's act on the petri env's observations with its action mask."""
    _petri_vec(1)  # CaseSkipped on commits without the env
    policy, _, obs, infos = _kind_policy("mlp", num_envs, ("petri", {"net": PETRI_NET}))
    return _act_case(policy, obs, infos)


def _petri_e2e(num_envs: int, env_steps: int, threads: int) -> Prepared:
    """``_e2e_train`` on the petri env (masked MLP PPO)."""
    _petri_vec(1)  # CaseSkipped on commits without the env
    cfg = _trainer_config(num_envs, threads)
    cfg.env.env, cfg.env.options = "petri", {"net": PETRI_NET}
    return _continued_training(cfg, env_steps)


# -- the robots and grid workloads --------------------------------------------------------
def _requires_env(name: str) -> None:
    from rlperf.envs import registered

    if name not in registered():
        raise CaseSkipped(f"no {name} environment in this commit")


def _requires_policy(kind: str) -> None:
    """CaseSkipped on commits without policy ``kind`` (the robots env landed before the
    ConvLSTM: there the kind would fail the trainer, not skip)."""
    from rlperf.policies.registry import policy_names

    if kind not in policy_names():
        raise CaseSkipped(f"no {kind} policy in this commit")


def _robots_vec(num_envs: int, obs_mode: str) -> Any:
    _requires_env("robots")
    from rlperf.envs import make_vec

    return make_vec("robots", num_envs, seed=SEED, obs_mode=obs_mode)


def _robots_step(obs_mode: str, num_envs: int) -> Prepared:
    """One step of every env with random moves (new puzzles for the envs that finish)."""
    import numpy as np

    vec = _robots_vec(num_envs, obs_mode)
    actions = np.random.default_rng(SEED).integers(0, vec.single_action_space.n, num_envs)
    return Prepared(lambda: vec.step(actions), num_envs, "env_steps")


def _robots_reset(obs_mode: str, num_envs: int) -> Prepared:
    vec = _robots_vec(num_envs, obs_mode)
    return Prepared(lambda: vec.reset(), num_envs, "env_resets")


def _robots_render(num_envs: int) -> Prepared:
    """The batched RGB observation of the current boards, as every step makes it."""
    vec = _robots_vec(num_envs, "rgb_image")
    return Prepared(vec._observe, num_envs, "images")


def _robots_render_reference(num_envs: int) -> Prepared:
    """The per-env Pillow reference renderer (draw on a larger canvas, resize) on the same
    boards: the speed baseline of the batched renderer."""
    vec = _robots_vec(num_envs, "rgb_image")
    try:
        from rlperf.envs.robots.reference import reference_image
    except ImportError as e:  # Pillow missing
        raise CaseSkipped(f"the reference renderer needs Pillow ({e})") from e
    walls, positions = vec.walls.copy(), vec.positions.copy()
    robot, cell = vec.target_robot.copy(), vec.target_cell.copy()
    size = vec.single_observation_space.shape[-1]

    def run() -> None:
        for i in range(num_envs):
            reference_image(walls[i], positions[i], int(robot[i]), int(cell[i]), size)

    return Prepared(run, num_envs, "images")


GRID_MISSION = "extractor_hub_30"


def _grid_vec(num_maps: int) -> Any:
    _requires_env("grid")
    from rlperf.envs import make_vec

    return make_vec("grid", num_maps, seed=SEED, mission=GRID_MISSION)


def _grid_step(num_maps: int) -> Prepared:
    """One step of every agent row (maps x agents) with random actions."""
    import numpy as np

    vec = _grid_vec(num_maps)
    actions = np.random.default_rng(SEED).integers(0, vec.single_action_space.n, vec.num_envs)
    return Prepared(lambda: vec.step(actions), int(vec.num_envs), "agent_steps")


def _grid_reset(num_maps: int) -> Prepared:
    vec = _grid_vec(num_maps)
    return Prepared(lambda: vec.reset(), int(vec.num_envs), "agent_resets")


def _teacher_call(num_maps: int) -> Prepared:
    """The scripted teacher on every agent row's observation (host side)."""
    vec = _grid_vec(num_maps)
    obs, _ = vec.reset(seed=SEED)
    teacher = vec.make_teacher()
    return Prepared(lambda: teacher(obs), int(vec.num_envs), "agent_rows")


def _grid_config(num_maps: int, threads: int, phase: str) -> Any:
    """The grid preset on ``num_maps`` maps, all supervised or all PPO."""
    _requires_env("grid")
    from rlperf.config import ConfigError, preset

    try:
        cfg = preset("grid")
    except ConfigError as e:  # the grid env landed two commits before its preset
        raise CaseSkipped(f"no grid preset in this commit ({e})") from e
    cfg.env.num_envs = num_maps
    cfg.run.seed, cfg.run.threads, cfg.run.progress = SEED, threads, False
    cfg.ppo.anneal_lr = False
    cfg.run.total_steps = 1 << 40
    cfg.teacher.supervised_steps = cfg.run.total_steps if phase == "supervised" else 0
    return cfg


def _grid_update_epoch(num_maps: int, threads: int, phase: str) -> Prepared:
    """One update epoch of the grid preset: the supervised loss or PPO's."""
    from rlperf.ppo.trainer import Trainer

    cfg = _grid_config(num_maps, threads, phase)
    cfg.ppo.update_epochs = 1
    trainer = Trainer(cfg)
    trainer.collect()
    trainer.compute_advantages()
    supervised = phase == "supervised"
    return Prepared(lambda: trainer.update(supervised), trainer.batch_size, "samples")


def _grid_e2e(
    num_maps: int, env_steps: int, threads: int, phase: str, num_steps: int | None = None
) -> Prepared:
    """``_e2e_train`` of the grid preset in one phase (supervised: the teacher every step);
    ``num_steps`` (steps per agent per rollout) overrides the preset's, to shrink an iteration."""
    from rlperf.ppo.trainer import Trainer

    cfg = _grid_config(num_maps, threads, phase)
    if num_steps is not None:
        cfg.ppo.num_steps = num_steps
    cfg.run.warmup_iters = 0
    trainer = Trainer(cfg)

    def run() -> dict[str, Any]:
        cfg.run.total_steps = trainer.global_step + env_steps
        return trainer.train()

    return Prepared(run, env_steps, "env_steps")


# -- the registry ------------------------------------------------------------------------
def _env_names() -> list[str]:
    from rlperf.envs import registered

    return sorted(registered())


def all_cases() -> list[Case]:
    """Every case, in a stable order (component, then parameters)."""
    cases: list[Case] = []
    for env in _env_names():
        for n in (64, 1024):
            cases.append(Case("env_step", {"env": env, "num_envs": n}, _env_step))
            cases.append(Case("env_reset", {"env": env, "num_envs": n}, _env_reset))
    cases += [Case("policy_act", {"batch": b}, _policy_act) for b in (64, 1024)]
    for kind in POLICY_WORKLOADS:
        cases.append(Case("policy_act_kind", {"kind": kind, "num_envs": 64}, _kind_act))
    for backward in (False, True):
        params = {"num_steps": 32, "num_envs": 16, "backward": backward}
        cases.append(Case("recurrent_evaluate", params, _lstm_evaluate))
    for impl in ("compiled", "torch"):
        params = {"num_steps": 32, "num_envs": 16, "impl": impl}
        cases.append(Case("lstm_recurrence", params, _lstm_recurrence))
    for impl in ("compiled", "autograd"):
        params = {"num_steps": 32, "num_envs": 16, "impl": impl}
        cases.append(Case("lstm_network", params, _lstm_network))
    for direction in ("d2h", "h2d"):
        for memory in ("pageable", "pinned"):
            for non_blocking in (False, True):
                params = {"direction": direction, "memory": memory,
                          "non_blocking": non_blocking, "batch": 1024}  # fmt: skip
                cases.append(Case("transfer", params, _transfer))
    cases += [Case("buffer_store", {"num_envs": n}, _buffer_store) for n in (64, 1024)]
    for t, n in ((32, 64), (128, 1024)):
        cases.append(Case("minibatch_sampling", {"num_steps": t, "num_envs": n},
                          _minibatch_sampling))  # fmt: skip
        cases.append(Case("gae", {"num_steps": t, "num_envs": n}, _gae))
    for b in (512, 4096):
        cases.append(Case("ppo_loss_forward", {"batch": b}, _ppo_loss_forward))
        cases.append(Case("ppo_backward", {"batch": b}, _ppo_backward))
    cases += [Case("optimizer_step", {"hidden": h}, _optimizer_step) for h in (64, 256)]
    cases.append(Case("update_epoch", {"num_envs": 64, "threads": 1}, _update_epoch))
    cases.append(Case("e2e_train", {"num_envs": 64, "env_steps": 4096, "threads": 1}, _e2e_train))
    for kind in ("lstm", "cnn"):
        params = {"num_envs": 64, "threads": 1, "kind": kind}
        cases.append(Case("update_epoch", params, _update_epoch))
        cases.append(Case("e2e_train", {**params, "env_steps": 4096}, _e2e_train))
    for turbo in (True, False):
        for n in (64, 1024):
            cases.append(Case("petri_step", {"turbo": turbo, "num_envs": n}, _petri_step))
            cases.append(Case("petri_reset", {"turbo": turbo, "num_envs": n}, _petri_reset))
    cases.append(Case("petri_masked_act", {"num_envs": 64}, _petri_masked_act))
    params = {"num_envs": 64, "env_steps": 4096, "threads": 1}
    cases.append(Case("petri_e2e", params, _petri_e2e))
    cases += _workload_cases()
    cases += _gate_cases()
    return cases


def _workload_cases() -> list[Case]:
    """The robots (RGB + ConvLSTM) and grid (teacher) workloads' cases."""
    cases = []
    for mode in ("rgb_image", "symbolic"):
        cases.append(Case("robots_step", {"obs_mode": mode, "num_envs": 1024}, _robots_step))
        cases.append(Case("robots_reset", {"obs_mode": mode, "num_envs": 1024}, _robots_reset))
    cases.append(Case("robots_render", {"num_envs": 256}, _robots_render))
    cases.append(Case("robots_render_reference", {"num_envs": 16}, _robots_render_reference))
    for backward in (False, True):
        params = {"num_steps": 16, "num_envs": 16, "backward": backward, "kind": "convlstm"}
        cases.append(Case("recurrent_evaluate", params, _lstm_evaluate))
    # 16 boards of 64x64 RGB: the ConvLSTM trains at a few hundred SPS on this CPU, so a call
    # of two iterations (1024 steps) keeps a case to seconds.
    params = {"num_envs": 16, "threads": 1, "kind": "convlstm"}
    cases.append(Case("update_epoch", params, _update_epoch))
    cases.append(Case("e2e_train", {**params, "env_steps": 1024}, _e2e_train))
    cases.append(Case("grid_step", {"num_maps": 256}, _grid_step))
    cases.append(Case("grid_reset", {"num_maps": 256}, _grid_reset))
    cases.append(Case("teacher_call", {"num_maps": 256}, _teacher_call))
    for phase in ("supervised", "ppo"):
        params = {"num_maps": 16, "threads": 1, "phase": phase}
        cases.append(Case("grid_update_epoch", params, _grid_update_epoch))
        cases.append(Case("grid_e2e", {**params, "env_steps": 8192}, _grid_e2e))
    return cases


def _gate_cases() -> list[Case]:
    """The LSTM, Petri, ConvLSTM and grid workloads end to end, shrunk for ``rlperf gate``'s
    default set (with CartPole's MLP case, ``e2e_train[num_envs=64,env_steps=4096,threads=1]``).

    Every round the gate warms each case up (at least 3 calls and 0.2 s of CPU, each side) and
    times it 12 times (6 pairs), for up to 30 rounds; a sample is at least 0.1 s of CPU, calls
    being doubled until it is. So a call is sized at ~0.06 s (two make a 0.13 s sample, three or
    four a 0.2 s warm-up) or, where one iteration cannot be that small, ~0.13 s: clear of 0.1 s,
    where the calibration would double a sample or not by chance. Times are CPU seconds on this
    2-core box, one thread; docs/benchmarks.md has the budget.
    """
    # Position-only CartPole: one iteration of 16 envs x 32 steps, ~0.064 s.
    lstm = {"num_envs": 16, "env_steps": 512, "threads": 1, "kind": "lstm"}
    # The jobshop net, masked MLP: one iteration of 96 envs x 32 steps, ~0.063 s.
    petri = {"num_envs": 96, "env_steps": 3072, "threads": 1}
    # 64x64 RGB boards: one iteration of 4 envs x 4 steps, 4 epochs of BPTT over one minibatch
    # of the 4 envs (as wide as a minibatch of the full 16 x 32 run), ~0.125 s; the update is
    # 86% of it (93% at 16 x 32). Short rollouts, not fewer envs: BPTT costs mostly per step
    # (4 envs x 8 steps in 4 minibatches take 0.43 s).
    convlstm = {"num_envs": 4, "env_steps": 16, "threads": 1, "kind": "convlstm",
                "num_steps": 4, "num_minibatches": 1}  # fmt: skip
    # One map of 16 agents x 16 steps, ~0.07 s, supervised: the teacher runs every step. The
    # PPO phase runs no code that this phase and the other default cases do not. (At 32 steps a
    # call took 0.099-0.134 s, on the 0.1 s edge.)
    grid = {"num_maps": 1, "env_steps": 256, "threads": 1, "phase": "supervised", "num_steps": 16}
    return [
        Case("e2e_train", lstm, _e2e_train),
        Case("petri_e2e", petri, _petri_e2e),
        Case("e2e_train", convlstm, _e2e_train),
        Case("grid_e2e", grid, _grid_e2e),
    ]


COMPONENTS = (
    "env_step", "env_reset", "policy_act", "policy_act_kind", "recurrent_evaluate",
    "lstm_recurrence", "lstm_network", "transfer",
    "buffer_store", "minibatch_sampling", "gae", "ppo_loss_forward", "ppo_backward",
    "optimizer_step", "update_epoch", "e2e_train", "petri_step", "petri_reset",
    "petri_masked_act", "petri_e2e", "robots_step", "robots_reset", "robots_render",
    "robots_render_reference", "grid_step", "grid_reset", "teacher_call", "grid_update_epoch",
    "grid_e2e",
)  # fmt: skip


class UnknownCaseError(ValueError):
    """A requested case or component is not in the registry."""


def select(names: list[str]) -> list[Case]:
    """Cases matching each entry, by full name or by component; UnknownCaseError otherwise."""
    cases = all_cases()
    chosen: list[Case] = []
    for wanted in names:
        matches = [c for c in cases if wanted in (c.name, c.component)]
        if not matches:
            raise UnknownCaseError(
                f"unknown benchmark case {wanted!r}; components: {', '.join(COMPONENTS)}"
            )
        chosen += [c for c in matches if c not in chosen]
    return chosen
