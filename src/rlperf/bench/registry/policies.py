"""Cases of the policies: acting, and the recurrent policies' evaluate and backward."""

from __future__ import annotations

from typing import Any

from . import compat
from .core import OBS_DIM, SEED, CaseSkipped, Prepared, requires_env, requires_policy
from .training import POLICY_WORKLOADS


def policy_act(batch: int) -> Prepared:
    """``MLPActorCritic.act`` on a batch of CartPole-sized observations."""
    import torch

    policy = compat.mlp_policy()
    obs = torch.randn(batch, OBS_DIM, generator=torch.Generator().manual_seed(SEED))
    gen = torch.Generator().manual_seed(SEED)

    def run() -> Any:
        with torch.inference_mode():
            return compat.act(policy, obs, gen)

    return Prepared(run, batch, "samples")


def kind_policy(
    kind: str, num_envs: int, workload: tuple[str, dict[str, Any]] | None = None
) -> tuple[Any, Any, Any, dict[str, Any]]:
    """(policy, env spec, first observation, reset infos) for a policy kind on a workload
    (default: the kind's own, :data:`POLICY_WORKLOADS`)."""
    import torch

    try:
        from rlperf.config import PolicyConfig
        from rlperf.envs.spec import EnvSpec
        from rlperf.policies.registry import make_policy
    except ImportError as e:  # before 5f4fdd4
        raise CaseSkipped(f"no policy registry in this commit ({e})") from e
    from rlperf.envs import make_vec

    env_name, options = workload or POLICY_WORKLOADS[kind]
    requires_env(env_name)
    requires_policy(kind)
    vec = make_vec(env_name, num_envs, seed=SEED, **options)
    obs, infos = vec.reset(seed=SEED)
    spec = EnvSpec.from_env(vec, infos)
    torch.manual_seed(SEED)
    return make_policy(PolicyConfig(kind=kind), spec), spec, obs, infos


def act_case(policy: Any, obs: Any, infos: dict[str, Any]) -> Prepared:
    """One rollout step of ``policy``: state and done flags carried, the env's mask if any.
    Inside the policy's ``acting()`` stretch, entered once here and left open (the case never
    changes the parameters), as every step of a rollout runs in the trainer."""
    import contextlib

    import torch

    stretch = contextlib.ExitStack()  # collected, it would end the stretch: run() holds it
    acting = getattr(policy, "acting", None)  # commits before 4749e19 have no stretch
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


def kind_act(kind: str, num_envs: int) -> Prepared:
    """One rollout step of policy ``kind`` on its workload."""
    policy, _, obs, infos = kind_policy(kind, num_envs)
    return act_case(policy, obs, infos)


def recurrent_evaluate(
    num_steps: int, num_envs: int, backward: bool, kind: str = "lstm"
) -> Prepared:
    """A recurrent policy over a (T, B) sequence, as one update minibatch sees it."""
    import numpy as np
    import torch

    policy, spec, _, _ = kind_policy(kind, num_envs)
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


def lstm_recurrence(num_steps: int, num_envs: int, impl: str) -> Prepared:
    """The LSTM recurrence alone, forward and backward over a (T, B) minibatch of size 64:
    the compiled kernel (``policies/lstm_cpu.py``) or the torch unroll it replaced."""
    import torch

    try:
        from rlperf.policies import lstm_cpu
    except ImportError as e:  # commits before bab47af
        raise CaseSkipped("no compiled LSTM kernel in this commit") from e
    from rlperf.policies import lstm

    # Named LSTMUnrollCPU and LSTMUnroll before the one analytic protocol (mypy sees the
    # current tree, which has neither name: hence the ignores).
    compiled = getattr(lstm_cpu, "CompiledRecurrence", None) or lstm_cpu.LSTMUnrollCPU  # type: ignore[attr-defined]
    torch_unroll = getattr(lstm, "TorchRecurrence", None) or lstm.LSTMUnroll  # type: ignore[attr-defined]

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


def lstm_network(num_steps: int, num_envs: int, impl: str) -> Prepared:
    """The whole LSTM actor-critic of position-only CartPole (encoder 64-64, LSTM 64, heads),
    forward and backward over a (T, B) minibatch from given output gradients: the compiled
    network (``native.CompiledNet``, one call each way) or autograd through the same modules
    (the recurrence through the compiled kernel's autograd node where it is built)."""
    import torch

    policy, spec, _, _ = kind_policy("lstm", num_envs)
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
