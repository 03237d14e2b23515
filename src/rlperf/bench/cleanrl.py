"""CleanRL's PPO loop, the reference that both SPS scripts time rlperf against.

``benchmarks/sps.py`` compares rlperf's MLP PPO on CartPole with CleanRL's ``ppo.py``, and
``benchmarks/lstm_sps.py`` its recurrent PPO on position-only CartPole with CleanRL's
``ppo_atari_lstm.py`` (the CNN replaced by an MLP encoder). Those two CleanRL files are one loop
with two networks: rollout into preallocated ``(num_steps, num_envs)`` torch tensors, GAE as a
Python loop over time steps, the batch flattened, ``update_epochs`` passes over shuffled
minibatches, the clipped policy and value losses with an entropy bonus, grad-norm clipping, Adam,
and the learning rate annealed linearly to 0. The recurrent file differs only where the LSTM
needs it: the state is carried through the rollout (multiplied by ``1 - done`` before every
step), the state at the rollout's start is kept, and a minibatch is a set of whole environments
replayed from that state.

This module writes the loop out once, as CleanRL writes it (``Categorical``, index-gathered
minibatches, ``.item()`` per minibatch), with the two agents as small classes that plug into it
(:func:`mlp_agent`, :func:`lstm_agent`; the interface is :class:`CleanRLAgent`), so that both
scripts' baselines run the same code and a change to the loop reaches both. The figures in
``docs/performance.md`` were measured with these loops: hyperparameters, seeds, environments and
what is timed are those the two scripts had when each carried its own copy.

Timing (:func:`run_mlp`, :func:`run_lstm`): the first ``warmup_iters`` iterations are not timed;
SPS is environment steps over wall seconds of the remaining whole iterations, counted from the
start of iteration ``warmup_iters + 1`` to the end of the last.

torch and numpy are imported inside the functions: ``sps.py`` imports this module in the process
that the harness (:mod:`rlperf.bench.harness`) forks every sample from, so importing it must stay
cheap and must not start torch there.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    import numpy as np
    import torch
    from gymnasium.vector import VectorEnv


@dataclass(frozen=True)
class PPOCoefs:
    """PPO's hyperparameters, CleanRL ``ppo.py``'s CartPole defaults (both scripts use them;
    ``lstm_sps.py`` with ``learning_rate`` 2.5e-3)."""

    learning_rate: float = 2.5e-4  # Adam's at iteration 1, annealed linearly to 0
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_coef: float = 0.2  # policy ratio clip, and value clip around the rollout's values
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    num_minibatches: int = 4
    update_epochs: int = 4


CLEANRL_PPO = PPOCoefs()
# run_lstm's default: lstm_sps.py's values (the script passes its own constants, which its other
# implementations share).
LSTM_SPS_PPO = PPOCoefs(learning_rate=2.5e-3)


class Minibatch(NamedTuple):
    """One minibatch of M transitions gathered from the flattened rollout."""

    obs: torch.Tensor  # (M, obs_dim)
    actions: torch.Tensor  # (M,) float, as stored; cast to long for the agent
    logprobs: torch.Tensor  # (M,) log-probability of the action when it was taken
    advantages: torch.Tensor  # (M,) GAE, not yet normalised
    returns: torch.Tensor  # (M,) advantages + values
    values: torch.Tensor  # (M,) V(obs) when the action was taken


class Losses(NamedTuple):
    """What one minibatch update computed: the tensors CleanRL logs, and the clip fraction."""

    v_loss: torch.Tensor
    pg_loss: torch.Tensor
    entropy_loss: torch.Tensor
    old_approx_kl: torch.Tensor | None  # None unless asked for (``tensorboard_reads``)
    approx_kl: torch.Tensor
    clipfrac: float  # fraction of the minibatch whose ratio left [1 - clip, 1 + clip]


class CleanRLAgent(Protocol):
    """What the loop needs of an agent (an ``nn.Module``); ``state`` is the recurrent state
    (None for a feed-forward agent), ``done`` (N,) 1.0 where ``obs`` starts a new episode."""

    def parameters(self) -> Iterator[torch.Tensor]: ...

    def initial_state(self, num_envs: int) -> Any:
        """The state before the first step."""
        ...

    def act(
        self, obs: torch.Tensor, state: Any, done: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Any]:
        """Sampled action (N,), its log-probability (N,), V(obs) (N, 1) and the next state."""
        ...

    def value(self, obs: torch.Tensor, state: Any, done: torch.Tensor) -> torch.Tensor:
        """V(obs), (N, 1)."""
        ...

    def minibatches(
        self, dones: torch.Tensor, start_state: Any, num_minibatches: int, update_epochs: int
    ) -> Iterator[tuple[np.ndarray, Any]]:
        """One iteration's minibatches, epoch after epoch, shuffled with numpy's global RNG:
        (indices into the flattened (T * N,) batch, what ``evaluate`` needs besides obs and
        actions). ``dones`` (T, N) is the rollout's, ``start_state`` the state it began from."""
        ...

    def evaluate(
        self, obs: torch.Tensor, actions: torch.Tensor, extra: Any
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """For a minibatch (M rows, actions long): log-probability (M,), entropy (M,) and
        value (M, 1), with gradients."""
        ...


def _layer_init(
    layer: torch.nn.Linear, std: float = math.sqrt(2), bias_const: float = 0.0
) -> torch.nn.Linear:
    """CleanRL's ``layer_init``: orthogonal weights with gain ``std``, constant bias."""
    import torch

    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


def _tanh_trunk(obs_dim: int) -> list[torch.nn.Module]:
    """Linear(obs_dim, 64) + Tanh + Linear(64, 64) + Tanh, CleanRL-initialised: ppo.py's actor
    and critic bodies, and the encoder that stands in for ppo_atari_lstm.py's CNN."""
    from torch import nn

    return [
        _layer_init(nn.Linear(obs_dim, 64)),
        nn.Tanh(),
        _layer_init(nn.Linear(64, 64)),
        nn.Tanh(),
    ]


def mlp_agent(obs_dim: int, n_actions: int) -> CleanRLAgent:
    """CleanRL ``ppo.py``'s ``Agent``: separate actor and critic, each Linear(obs_dim, 64) + Tanh
    + Linear(64, 64) + Tanh and a head (actor std 0.01, critic std 1); a categorical policy."""
    from torch import nn
    from torch.distributions.categorical import Categorical

    class Agent(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.critic = nn.Sequential(
                *_tanh_trunk(obs_dim), _layer_init(nn.Linear(64, 1), std=1.0)
            )
            self.actor = nn.Sequential(
                *_tanh_trunk(obs_dim), _layer_init(nn.Linear(64, n_actions), std=0.01)
            )

        # CleanRL's methods.
        def get_value(self, x):  # noqa: ANN001, ANN202
            return self.critic(x)

        def get_action_and_value(self, x, action=None):  # noqa: ANN001, ANN202
            logits = self.actor(x)
            probs = Categorical(logits=logits)
            if action is None:
                action = probs.sample()
            return action, probs.log_prob(action), probs.entropy(), self.critic(x)

        # The loop's (CleanRLAgent); no state, so ``state`` and ``done`` are not used.
        def initial_state(self, num_envs):  # noqa: ANN001, ANN202
            return None

        def act(self, obs, state, done):  # noqa: ANN001, ANN202
            action, logprob, _, value = self.get_action_and_value(obs)
            return action, logprob, value, None

        def value(self, obs, state, done):  # noqa: ANN001, ANN202
            return self.get_value(obs)

        def minibatches(self, dones, start_state, num_minibatches, update_epochs):  # noqa: ANN001, ANN202
            # Transitions shuffled across steps and envs; the permutation is reshuffled in place
            # each epoch, as ppo.py does.
            import numpy as np

            batch_size = dones.numel()
            minibatch_size = batch_size // num_minibatches
            b_inds = np.arange(batch_size)
            for _epoch in range(update_epochs):
                np.random.shuffle(b_inds)
                for start in range(0, batch_size, minibatch_size):
                    yield b_inds[start : start + minibatch_size], None

        def evaluate(self, obs, actions, extra):  # noqa: ANN001, ANN202
            _, newlogprob, entropy, newvalue = self.get_action_and_value(obs, actions)
            return newlogprob, entropy, newvalue

    return Agent()


def lstm_agent(obs_dim: int, n_actions: int, hidden: int) -> CleanRLAgent:
    """CleanRL ``ppo_atari_lstm.py``'s ``Agent`` with the CNN replaced by an MLP encoder
    Linear(obs_dim, 64) + Tanh + Linear(64, 64) + Tanh: then ``nn.LSTM(64, hidden)`` (orthogonal
    weights gain 1, zero biases) stepped one time step at a time with the state multiplied by
    ``1 - done``, actor ``Linear(hidden, n_actions)`` (std 0.01) and critic ``Linear(hidden, 1)``
    (std 1) on its output. The state is ``(h, c)``, each (1, N, hidden)."""
    import torch
    from torch import nn
    from torch.distributions.categorical import Categorical

    class Agent(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.network = nn.Sequential(*_tanh_trunk(obs_dim))
            self.lstm = nn.LSTM(64, hidden)
            for name, param in self.lstm.named_parameters():
                if "bias" in name:
                    nn.init.constant_(param, 0)
                elif "weight" in name:
                    nn.init.orthogonal_(param, 1.0)
            self.actor = _layer_init(nn.Linear(hidden, n_actions), std=0.01)
            self.critic = _layer_init(nn.Linear(hidden, 1), std=1)

        # CleanRL's methods. ``x`` is T * N rows, step-major; ``done`` the same rows.
        def get_states(self, x, lstm_state, done):  # noqa: ANN001, ANN202
            hidden = self.network(x)
            # LSTM logic
            batch_size = lstm_state[0].shape[1]
            hidden = hidden.reshape((-1, batch_size, self.lstm.input_size))
            done = done.reshape((-1, batch_size))
            new_hidden = []
            for h, d in zip(hidden, done, strict=True):
                h, lstm_state = self.lstm(
                    h.unsqueeze(0),
                    (
                        (1.0 - d).view(1, -1, 1) * lstm_state[0],
                        (1.0 - d).view(1, -1, 1) * lstm_state[1],
                    ),
                )
                new_hidden += [h]
            new_hidden = torch.flatten(torch.cat(new_hidden), 0, 1)
            return new_hidden, lstm_state

        def get_value(self, x, lstm_state, done):  # noqa: ANN001, ANN202
            hidden, _ = self.get_states(x, lstm_state, done)
            return self.critic(hidden)

        def get_action_and_value(self, x, lstm_state, done, action=None):  # noqa: ANN001, ANN202
            hidden, lstm_state = self.get_states(x, lstm_state, done)
            logits = self.actor(hidden)
            probs = Categorical(logits=logits)
            if action is None:
                action = probs.sample()
            return action, probs.log_prob(action), probs.entropy(), self.critic(hidden), lstm_state

        # The loop's (CleanRLAgent).
        def initial_state(self, num_envs):  # noqa: ANN001, ANN202
            return (
                torch.zeros(self.lstm.num_layers, num_envs, self.lstm.hidden_size),
                torch.zeros(self.lstm.num_layers, num_envs, self.lstm.hidden_size),
            )

        def act(self, obs, state, done):  # noqa: ANN001, ANN202
            action, logprob, _, value, state = self.get_action_and_value(obs, state, done)
            return action, logprob, value, state

        def value(self, obs, state, done):  # noqa: ANN001, ANN202
            return self.get_value(obs, state, done)

        def minibatches(self, dones, start_state, num_minibatches, update_epochs):  # noqa: ANN001, ANN202
            # Whole environments (all T steps of each), so that the update can replay every
            # sequence from the state its rollout started in; env order reshuffled in place
            # each epoch. Indices are step-major, matching ``get_states``'s reshape.
            import numpy as np

            num_steps, num_envs = dones.shape
            b_dones = dones.reshape(-1)
            envsperbatch = num_envs // num_minibatches
            envinds = np.arange(num_envs)
            flatinds = np.arange(num_steps * num_envs).reshape(num_steps, num_envs)
            for _epoch in range(update_epochs):
                np.random.shuffle(envinds)
                for start in range(0, num_envs, envsperbatch):
                    end = start + envsperbatch
                    mbenvinds = envinds[start:end]
                    mb_inds = flatinds[:, mbenvinds].ravel()  # be really careful about the index
                    state = (start_state[0][:, mbenvinds], start_state[1][:, mbenvinds])
                    yield mb_inds, (state, b_dones[mb_inds])

        def evaluate(self, obs, actions, extra):  # noqa: ANN001, ANN202
            state, dones = extra
            _, newlogprob, entropy, newvalue, _ = self.get_action_and_value(
                obs, state, dones, actions
            )
            return newlogprob, entropy, newvalue

    return Agent()


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    next_value: torch.Tensor,
    next_done: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> torch.Tensor:
    """CleanRL's GAE: advantages (T, N) of a rollout, as its reverse loop over time steps.

    ``rewards``, ``values`` (T, N): reward of step t and V(obs[t]); ``dones`` (T, N): 1.0 where
    obs[t] is the first of a new episode (the env ended at step t - 1). ``next_value`` (1, N)
    and ``next_done`` (N,): V and done of the observation after the last step. A done cuts both
    the bootstrap and the accumulation; truncation counts as termination, as in CleanRL.
    """
    import torch

    num_steps = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    lastgaelam: torch.Tensor | float = 0
    for t in reversed(range(num_steps)):
        if t == num_steps - 1:
            nextnonterminal = 1.0 - next_done
            nextvalues = next_value
        else:
            nextnonterminal = 1.0 - dones[t + 1]
            nextvalues = values[t + 1]
        delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
        advantages[t] = lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
    return advantages


def minibatch_update(
    agent: CleanRLAgent,
    optimizer: torch.optim.Optimizer,
    mb: Minibatch,
    extra: Any = None,
    coefs: PPOCoefs = CLEANRL_PPO,
    with_old_kl: bool = False,
) -> Losses:
    """One CleanRL minibatch update: re-evaluate ``mb`` (with ``extra``, see
    :meth:`CleanRLAgent.minibatches`), the clipped policy loss on per-minibatch normalised
    advantages, the clipped value loss, the entropy bonus, backward, grad-norm clip, one step.

    ``with_old_kl``: also compute ``old_approx_kl`` (ppo_atari_lstm.py's loop does, for its logs).
    """
    import torch
    from torch import nn

    newlogprob, entropy, newvalue = agent.evaluate(mb.obs, mb.actions.long(), extra)
    logratio = newlogprob - mb.logprobs
    ratio = logratio.exp()
    with torch.no_grad():
        old_kl = (-logratio).mean() if with_old_kl else None
        approx_kl = ((ratio - 1) - logratio).mean()
        # A host sync per minibatch, as CleanRL's clipfracs list has.
        clipfrac = ((ratio - 1.0).abs() > coefs.clip_coef).float().mean().item()
    advantages = (mb.advantages - mb.advantages.mean()) / (mb.advantages.std() + 1e-8)
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1 - coefs.clip_coef, 1 + coefs.clip_coef)
    pg_loss = torch.max(pg_loss1, pg_loss2).mean()
    newvalue = newvalue.view(-1)
    v_loss_unclipped = (newvalue - mb.returns) ** 2
    v_clipped = mb.values + torch.clamp(newvalue - mb.values, -coefs.clip_coef, coefs.clip_coef)
    v_loss_clipped = (v_clipped - mb.returns) ** 2
    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
    entropy_loss = entropy.mean()
    loss = pg_loss - coefs.ent_coef * entropy_loss + v_loss * coefs.vf_coef
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(agent.parameters(), coefs.max_grad_norm)
    optimizer.step()
    return Losses(v_loss, pg_loss, entropy_loss, old_kl, approx_kl, clipfrac)


def train(
    make_envs: Callable[[], VectorEnv],
    make_agent: Callable[[int, int], CleanRLAgent],
    *,
    num_envs: int,
    num_steps: int,
    total: int,
    threads: int,
    seed: int,
    coefs: PPOCoefs = CLEANRL_PPO,
    warmup_iters: int = 2,
    tensorboard_reads: bool = False,
) -> dict[str, Any]:
    """CleanRL's PPO loop for ``total // (num_envs * num_steps)`` iterations; its timings.

    Seeds torch and numpy's global RNG with ``seed``, then builds the vector env
    (``make_envs()``, gymnasium 1.x API, same-step autoreset, reset with ``seed``) and the agent
    (``make_agent(obs_dim, n_actions)``). ``tensorboard_reads``: per minibatch also compute
    ``old_approx_kl``, and per iteration read to the host what CleanRL writes to TensorBoard
    (five losses, the clip fractions' mean, explained variance), as ppo_atari_lstm.py does.

    Returns ``sps`` (environment steps per wall second over the iterations after
    ``warmup_iters``), ``rollout_ms`` (collection plus GAE) and ``update_ms`` (flatten and the
    epochs of minibatch updates, plus the reads) per timed iteration, and ``mean_return``, the
    mean of the last 100 episode returns the env reported in ``infos["episode"]`` (None if none).
    """
    import numpy as np
    import torch
    from torch import optim

    batch_size = num_envs * num_steps
    iterations = total // batch_size
    if iterations <= warmup_iters:
        raise ValueError(
            f"{total} steps are {iterations} iterations of {batch_size}: none is timed after "
            f"{warmup_iters} of warm-up"
        )
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    np.random.seed(seed)
    envs = make_envs()
    obs_shape = envs.single_observation_space.shape
    assert obs_shape is not None
    agent = make_agent(obs_shape[0], int(envs.single_action_space.n))  # type: ignore[attr-defined]
    optimizer = optim.Adam(agent.parameters(), lr=coefs.learning_rate, eps=1e-5)

    # Storage, (num_steps, num_envs): dones[t] is 1.0 where obs[t] starts a new episode.
    obs = torch.zeros((num_steps, num_envs, *obs_shape))
    actions = torch.zeros((num_steps, num_envs))
    logprobs = torch.zeros((num_steps, num_envs))
    rewards = torch.zeros((num_steps, num_envs))
    dones = torch.zeros((num_steps, num_envs))
    values = torch.zeros((num_steps, num_envs))

    global_step = 0
    next_obs_np, _ = envs.reset(seed=seed)
    next_obs = torch.Tensor(next_obs_np)
    next_done = torch.zeros(num_envs)
    state = agent.initial_state(num_envs)
    episode_returns: list[float] = []
    times = {"rollout": 0.0, "update": 0.0}
    t_start = 0.0
    steps_start = 0
    for iteration in range(1, iterations + 1):
        if iteration == warmup_iters + 1:
            t_start, steps_start = time.perf_counter(), global_step
            times.update(rollout=0.0, update=0.0)
        t_rollout = time.perf_counter()
        # The update replays each env's sequence from the state its rollout started in.
        start_state = None if state is None else (state[0].clone(), state[1].clone())
        frac = 1.0 - (iteration - 1.0) / iterations
        optimizer.param_groups[0]["lr"] = frac * coefs.learning_rate

        for step in range(num_steps):
            global_step += num_envs
            obs[step] = next_obs
            dones[step] = next_done
            with torch.no_grad():
                action, logprob, value, state = agent.act(next_obs, state, next_done)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob
            next_obs_np, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
            next_done_np = np.logical_or(terminations, truncations)
            rewards[step] = torch.tensor(reward).view(-1)
            next_obs, next_done = torch.Tensor(next_obs_np), torch.Tensor(next_done_np)
            if "episode" in infos:
                episode_returns.extend(infos["episode"]["r"][infos["_episode"]].tolist())

        with torch.no_grad():
            next_value = agent.value(next_obs, state, next_done).reshape(1, -1)
            advantages = gae(rewards, values, dones, next_value, next_done,
                             coefs.gamma, coefs.gae_lambda)  # fmt: skip
            returns = advantages + values
        t_update = time.perf_counter()
        times["rollout"] += t_update - t_rollout

        b_obs = obs.reshape((-1, *obs_shape))
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape(-1)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)
        clipfracs = []
        minibatches = agent.minibatches(dones, start_state, coefs.num_minibatches,
                                        coefs.update_epochs)  # fmt: skip
        for mb_inds, extra in minibatches:
            mb = Minibatch(b_obs[mb_inds], b_actions[mb_inds], b_logprobs[mb_inds],
                           b_advantages[mb_inds], b_returns[mb_inds],
                           b_values[mb_inds])  # fmt: skip
            losses = minibatch_update(agent, optimizer, mb, extra, coefs, tensorboard_reads)
            clipfracs.append(losses.clipfrac)
        if tensorboard_reads:
            y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
            var_y = np.var(y_true)
            _explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
            _logged = (losses.v_loss.item(), losses.pg_loss.item(), losses.entropy_loss.item(),
                       losses.old_approx_kl.item(),  # type: ignore[union-attr]  # computed here
                       losses.approx_kl.item(), np.mean(clipfracs))  # fmt: skip
        times["update"] += time.perf_counter() - t_update

    elapsed = time.perf_counter() - t_start
    timed_iters = iterations - warmup_iters
    return {
        "sps": (global_step - steps_start) / elapsed,
        "rollout_ms": 1e3 * times["rollout"] / timed_iters,
        "update_ms": 1e3 * times["update"] / timed_iters,
        "mean_return": statistics.fmean(episode_returns[-100:]) if episode_returns else None,
    }


def run_mlp(
    num_envs: int, num_steps: int, total: int, threads: int, seed: int = 1, warmup_iters: int = 2
) -> dict[str, float]:
    """``benchmarks/sps.py``'s ``cleanrl``: CleanRL ``ppo.py`` (:func:`mlp_agent`,
    :data:`CLEANRL_PPO`) on gymnasium's native vector ``CartPole-v1``; ``{"sps": ...}``."""

    def make_envs() -> VectorEnv:
        import gymnasium as gym

        return gym.make_vec("CartPole-v1", num_envs=num_envs,
                            vectorization_mode="vector_entry_point")  # fmt: skip

    result = train(make_envs, mlp_agent, num_envs=num_envs, num_steps=num_steps, total=total,
                   threads=threads, seed=seed, warmup_iters=warmup_iters)  # fmt: skip
    return {"sps": result["sps"]}


def run_lstm(
    total: int,
    threads: int,
    seed: int,
    *,
    num_envs: int = 64,
    num_steps: int = 32,
    hidden: int = 64,
    coefs: PPOCoefs = LSTM_SPS_PPO,
    warmup_iters: int = 2,
) -> dict[str, Any]:
    """``benchmarks/lstm_sps.py``'s ``cleanrl``: CleanRL ``ppo_atari_lstm.py``
    (:func:`lstm_agent`) on rlperf's CartPole observing position only (``make_vec("cartpole",
    num_envs, seed=seed, observe="position")``), with its TensorBoard reads; :func:`train`'s
    ``sps``, ``rollout_ms``, ``update_ms`` and ``mean_return``."""

    def make_envs() -> VectorEnv:
        from rlperf.envs import make_vec

        return make_vec("cartpole", num_envs, seed=seed, observe="position")

    def make_agent(obs_dim: int, n_actions: int) -> CleanRLAgent:
        return lstm_agent(obs_dim, n_actions, hidden)

    return train(make_envs, make_agent, num_envs=num_envs, num_steps=num_steps, total=total,
                 threads=threads, seed=seed, coefs=coefs, warmup_iters=warmup_iters,
                 tensorboard_reads=True)  # fmt: skip


# -- CleanRL's own scripts, run as published ------------------------------------------------
# benchmarks/mujoco_sps.py and atari_sps.py time CleanRL's files themselves, not the loop above:
# each adapted to today's gymnasium by a few checked (original, replacement) edits and run as
# its own process, its SPS read from what it prints.


class ScriptError(ValueError):
    """CleanRL's script is not the one these edits were written for (one line)."""


# The edit every CleanRL PPO script on gymnasium's vector env needs on 1.x (ppo_atari.py and
# ppo_continuous_action.py print episodes the same way): 1.x's final_info is one dict of arrays,
# each entry flagged by its ``_key`` mask, not 0.29's list of dicts.
_EPISODE_LOG = (
    "print(f\"global_step={global_step}, episodic_return={info['episode']['r']%s}\")",
    'writer.add_scalar("charts/episodic_return", info["episode"]["r"]%s, global_step)',
    'writer.add_scalar("charts/episodic_length", info["episode"]["l"]%s, global_step)',
)
FINAL_INFO_EDIT = (
    "\n".join([
        '            if "final_info" in infos:',
        '                for info in infos["final_info"]:',
        '                    if info and "episode" in info:',
        *(" " * 24 + line % "" for line in _EPISODE_LOG),
    ]),
    "\n".join([
        '            if "episode" in infos.get("final_info", {}):',
        '                info = infos["final_info"]',
        '                for i in np.flatnonzero(info["_episode"]):',
        *(" " * 20 + line % "[i]" for line in _EPISODE_LOG),
    ]),
)  # fmt: skip


def adapt_script(source: str, edits: tuple[tuple[str, str], ...]) -> str:
    """``source`` with every ``(original, replacement)`` of ``edits`` applied; ScriptError
    naming the first original it lacks (another version of the script)."""
    for old, new in edits:
        if old not in source:
            raise ScriptError(
                f"the CleanRL script lacks {old.strip().splitlines()[0]!r}: this benchmark "
                "adapts the version of vwxyzjn/cleanrl's master of 2024-2026"
            )
        source = source.replace(old, new)
    return source


def run_script(script: str, args: list[str], threads: int) -> dict[str, Any]:
    """Run CleanRL script ``script`` with ``args`` in its own process (``OMP_NUM_THREADS``
    ``threads``, in a fresh temporary folder, where it writes ``runs/``: two samples started in
    the same second would share a TensorBoard folder): ``{"sps": its last printed SPS}``, which
    is ``global_step / (time.time() - start_time)`` over its whole loop.

    Raises:
        RuntimeError: it failed or printed no SPS (its last line of stderr).
    """
    import os
    import re
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix="cleanrl-") as folder:
        out = subprocess.run(
            [sys.executable, str(Path(script).resolve()), *args], capture_output=True, text=True,
            cwd=folder, env={**os.environ, "OMP_NUM_THREADS": str(threads)},
        )  # fmt: skip
    sps = re.findall(r"^SPS: (\d+)$", out.stdout, re.MULTILINE)
    if out.returncode != 0 or not sps:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"CleanRL's script failed ({out.returncode}): {tail}")
    return {"sps": float(sps[-1])}
