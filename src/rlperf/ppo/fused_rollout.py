"""The fused rollout: a whole rollout of the analytic MLP or LSTM on rlperf's CartPole in one
native call.

Why: at 4 envs the trainer's rollout step (``Trainer.collect``) costs ~150-230 us, nearly all of
it Python and torch dispatch around ~35k multiply-adds: ~15 torch ops for the policy and the
sample, the numpy env's ~30 array ops, the buffer's writes. ``ppo/_rollout_cpu.c`` runs the
same steps in one C loop per rollout: for t in 0..T-1, actor and critic on ``obs[t]``, the
categorical sample, CartPole's physics with truncation and same-step autoreset, the transition
into the rollout buffer, and V(final observation) where a time limit ended an episode.

Same trajectories as the torch path, for the same seed:

- Sampling: the Exp(1) draws of the Gumbel-max sample come from the run's torch generator, one
  ``(T, N, A)`` draw per rollout, the same numbers as the torch path's T draws of ``(N, A)``
  (torch's CPU ``exponential_`` fills element by element from the generator's stream;
  tests/ppo/test_fused_rollout.py checks both the draws and the trajectories).
- Env: the physics is envs/cartpole.py's float64 arithmetic in the same order (bit-identical
  states and observations); reset states are numpy's: a pool of 4 T N uniform(-0.05, 0.05)
  draws (enough for every row to finish at every step) is drawn from the env's generator, the
  kernel takes them in numpy's order, and afterwards the generator is set back and advanced by
  exactly the draws used, so it ends where the numpy env's would (checkpoints agree).
- Policy: the MLP's is not bit-identical (another summation order, a polynomial exp in tanh):
  log-probs and values agree with the torch path's to ~1e-6 and the actions are the same except
  at a Gumbel tie to that precision. The LSTM's is the compiled step its torch path already
  calls each step (``native.CompiledStep``, the same C function), so everything is the same bit
  for bit: actions, log-probs, values, the states saved at segment starts, the episode-start
  flags and the state the rollout ends in. At 4 envs that takes its rollout step from ~150 us
  (the compiled step ~15 us of it; the rest Python, torch around the state, the numpy env) to
  a few microseconds.

The profiler's sections stay the torch path's: the kernel reads the clock at each phase
boundary (``CLOCK_MONOTONIC``, ~20 ns a read, four or five a step) and keeps per phase the
calls, total, min and max; they are recorded once per rollout under ``rollout`` as
``policy_forward``, ``env_step``, ``buffer_store`` and ``truncation_bootstrap``
(:meth:`~rlperf.timing.sections.Profiler.record`); while a torch.profiler trace records
(:attr:`~rlperf.timing.sections.Profiler.wants_spans`) the kernel also logs each phase's start
and end, which go into the trace as ranges of those names. ``device_to_host`` does not exist
here (the actions never leave the kernel). With the profiler disabled the kernel reads no
clock.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import torch

from rlperf import native
from rlperf.config import Config
from rlperf.envs import cartpole
from rlperf.envs.cartpole import CartPoleVec
from rlperf.envs.spec import EnvSpec
from rlperf.policies.base import ActorCritic
from rlperf.policies.lstm import LSTMActorCritic
from rlperf.policies.mlp import MLPActorCritic
from rlperf.ppo.rollout import RolloutBuffer
from rlperf.run.episode_log import EpisodeLog
from rlperf.timing import names
from rlperf.timing.sections import Profiler

# The kernel's phases, in its order (native.ROLLOUT_PHASES of them).
PHASES = (names.POLICY_FORWARD, names.ENV_STEP, names.BUFFER_STORE, names.TRUNCATION_BOOTSTRAP)
# CartPole's constants in the kernel's order (its Physics struct).
PHYSICS = np.array(
    [
        cartpole.GRAVITY, cartpole.TOTAL_MASS, cartpole.HALF_POLE_LENGTH, cartpole.MASS_POLE,
        cartpole.POLE_MASS_LENGTH, cartpole.FORCE_MAG, cartpole.TAU_S,
        cartpole.THETA_THRESHOLD_RAD, cartpole.X_THRESHOLD,
    ],
    dtype=np.float64,
)  # fmt: skip


# The step the kernel reproduces: a run whose CartPoleVec.step was replaced (a test injecting
# faults, a user's patch) keeps the torch path, which calls whatever step is there.
NUMPY_STEP = CartPoleVec.step


def fused_step_applies(
    cfg: Config, spec: EnvSpec, policy: ActorCritic, device: torch.device, teacher: bool
) -> bool:
    """Whether a run takes the fused rollout or step (:func:`make_fused`): ``--fused-rollout``
    on, the kernel built, the analytic MLP (one unmasked discrete action, or a Box action) in
    float32 on the CPU, flat float32 observations, no teacher phase (it may replace the
    actions) and not the asynchronous collector (its rows each have their own step)."""
    return (
        cfg.policy.fused_rollout
        and native.rollout_available()
        and device.type == "cpu"
        and isinstance(policy, MLPActorCritic)
        and policy.analytic
        and policy.flat.dtype == torch.float32
        and np.dtype(spec.obs_dtype) == np.float32
        and len(spec.obs_shape) == 1
        and not teacher
        and not cfg.env.asynchronous
        and _fits(policy)
    )


def steps_as_numpy(env: object) -> bool:
    """Whether ``env`` is rlperf's CartPole stepping with its own numpy step (not a subclass,
    and neither its class's nor the instance's ``step`` replaced)."""
    return type(env) is CartPoleVec and CartPoleVec.step is NUMPY_STEP and "step" not in vars(env)


def make_fused(
    cfg: Config,
    env: object,
    spec: EnvSpec,
    policy: ActorCritic,
    buffer: RolloutBuffer,
    teacher: bool,
    prof: Profiler,
    episodes: EpisodeLog,
) -> tuple[FusedCartPoleRollout | None, FusedStep | None]:
    """The run's fused rollout (rlperf's CartPole stepping as numpy: one call per rollout) or
    fused step (any other env), or neither where :func:`fused_step_applies` does not hold
    (``ppo/build.py`` chooses among these and the torch path once). The LSTM has a fused
    rollout on CartPole (:func:`fused_lstm_applies`); its step elsewhere is one call already
    (its compiled step)."""
    if isinstance(policy, LSTMActorCritic):
        if fused_lstm_applies(cfg, env, spec, policy, buffer.device, teacher):
            assert isinstance(env, CartPoleVec)  # for the type checker: checked just above
            return FusedLSTMCartPoleRollout(buffer, env, policy, prof, episodes), None
        return None, None
    if not (
        isinstance(policy, MLPActorCritic)
        and fused_step_applies(cfg, spec, policy, buffer.device, teacher)
    ):
        return None, None
    # The whole-rollout kernel steps the env itself: normalisation happens outside the env.
    whole = steps_as_numpy(env) and not policy.continuous and not cfg.env.normalizes
    if isinstance(env, CartPoleVec) and whole:
        return FusedCartPoleRollout(buffer, env, policy, prof, episodes), None
    return None, FusedStep(buffer, policy)


def fused_lstm_applies(
    cfg: Config, env: object, spec: EnvSpec, policy: ActorCritic, device: torch.device,
    teacher: bool,
) -> bool:  # fmt: skip
    """Whether the LSTM's fused CartPole rollout can run: ``--fused-rollout`` on, the LSTM's
    kernel built and its compiled step in use (:attr:`LSTMActorCritic.analytic`: flat
    observations, one unmasked categorical action, float32 on the CPU), rlperf's CartPole
    stepping as numpy without normalisation, no teacher, not the asynchronous collector."""
    return (
        cfg.policy.fused_rollout
        and native.lstm_available()
        and device.type == "cpu"
        and isinstance(policy, LSTMActorCritic)
        and policy.analytic
        and policy.lstm.weight_hh.dtype == torch.float32
        and np.dtype(spec.obs_dtype) == np.float32
        and len(spec.obs_shape) == 1
        and not teacher
        and not cfg.env.asynchronous
        and isinstance(env, CartPoleVec)
        and steps_as_numpy(env)
        and not cfg.env.normalizes
    )


def _fits(policy: MLPActorCritic) -> bool:
    max_layers, max_width, max_actions = native.ROLLOUT_LIMITS
    widths = (policy.obs_dim, *policy.hidden_sizes)
    return (
        len(policy.hidden_sizes) <= max_layers
        and max(widths) <= max_width
        and policy.action_dim <= max_actions
    )


def fused_mlp(policy: MLPActorCritic) -> native.FusedMLP:
    """The policy's current weights as the kernel reads them (views of its flat parameter)."""
    views = policy.views(policy.flat.detach())
    layers = range(policy.num_layers)
    return native.FusedMLP(
        [views[f"w{i}"] for i in layers],
        [views[f"b{i}"] for i in layers],
        views["actor_logstd"] if policy.continuous else None,
    )


class FusedCartPoleRollout:
    """Fills a :class:`RolloutBuffer` from a :class:`CartPoleVec` with one kernel call per
    rollout (see the module docstring); the env's state, generator and episode statistics
    move on as the numpy env's would. The MLP's; :class:`FusedLSTMCartPoleRollout` the LSTM's.

    Args:
        episodes: where the finished episodes' returns and lengths go.
    """

    def __init__(
        self,
        buffer: RolloutBuffer,
        env: CartPoleVec,
        policy: ActorCritic,
        prof: Profiler,
        episodes: EpisodeLog,
    ) -> None:
        self.buffer, self.env, self.policy = buffer, env, policy
        self.prof, self.episodes = prof, episodes
        t_len, n = buffer.num_steps, buffer.num_envs
        self.num_actions = int(buffer.spec.action.nvec[0])
        self.reset_draws = 4 * t_len * n  # every row finishing at every step
        self.finished = native.FinishedEpisodes.sized(t_len * n)
        self.span_log = native.SpanLog(len(PHASES) * t_len)
        self.spans: native.SpanLog | None = None  # span_log while a trace records
        self.env_arrays = native.CartPoleArrays(
            env._state_t, env.episode_steps, env.episode_returns, env._episode_start_s,
            PHYSICS, env.observe == "full", env.max_episode_steps,
        )  # fmt: skip
        self.tensors = native.RolloutTensors(
            buffer.obs_slots, buffer.actions, buffer.logprobs, buffer.values,
            buffer.bootstrap_values, buffer.rewards_host, buffer.terminations_host,
            buffer.truncations_host,
        )  # fmt: skip

    def applies(self, supervised: bool) -> bool:
        """Whether this rollout is the kernel's: not a teacher's (it may replace actions), and
        the env still steps as the kernel does (a test or a user may replace its ``step``
        after the trainer was made: the trainer then collects on the torch path)."""
        return not supervised and steps_as_numpy(self.env)

    def collect(
        self, state: tuple[torch.Tensor, ...], generator: torch.Generator
    ) -> tuple[torch.Tensor, ...]:
        """One rollout into the buffer: ``num_steps`` steps of every env from ``next_obs`` and
        the policy state ``state``; returns the state after it."""
        with torch.inference_mode():
            return self._collect(state, generator)

    def _collect(
        self, state: tuple[torch.Tensor, ...], generator: torch.Generator
    ) -> tuple[torch.Tensor, ...]:
        buf, rng, out = self.buffer, self.env.np_random, self.finished
        buf.start_rollout()
        noise = torch.empty(buf.num_steps, buf.num_envs, self.num_actions)
        noise.exponential_(generator=generator)
        saved = rng.bit_generator.state
        pool = rng.uniform(-cartpole.RESET_BOUND, cartpole.RESET_BOUND, size=self.reset_draws)
        timing = self.prof.enabled
        self.spans = self.span_log if self.prof.wants_spans else None
        state = self._run(state, noise, pool, timing)
        # Give the unused draws back: the generator ends where the numpy env's would.
        rng.bit_generator.state = saved
        if out.draws:
            rng.uniform(-cartpole.RESET_BOUND, cartpole.RESET_BOUND, size=out.draws)
        if out.count:
            k = out.count
            self.episodes.extend(out.returns[:k], out.lengths[:k])
        if timing:
            spans = {} if self.spans is None else self.spans.take(PHASES)
            for name, (calls, total, low, high) in zip(PHASES, out.phase_ns.tolist(), strict=True):
                self.prof.record(name, total, calls, low, high, spans.get(name, ()))
        return state

    def _run(
        self, state: tuple[torch.Tensor, ...], noise: torch.Tensor, pool: np.ndarray, timing: bool
    ) -> tuple[torch.Tensor, ...]:
        assert isinstance(self.policy, MLPActorCritic)  # for the type checker: make_fused's
        native.cartpole_rollout(
            fused_mlp(self.policy), self.tensors, self.env_arrays, noise, pool, self.finished,
            timing, self.spans,
        )  # fmt: skip
        return state


class FusedLSTMCartPoleRollout(FusedCartPoleRollout):
    """:class:`FusedCartPoleRollout` for :class:`LSTMActorCritic`: the state saved at each BPTT
    segment's start, the compiled step, the episode-start flags, all in the kernel."""

    def _run(
        self, state: tuple[torch.Tensor, ...], noise: torch.Tensor, pool: np.ndarray, timing: bool
    ) -> tuple[torch.Tensor, ...]:
        assert isinstance(self.policy, LSTMActorCritic)  # for the type checker: make_fused's
        buf = self.buffer
        h, c = (s.contiguous().clone() for s in state)  # the kernel writes them in place
        step = self.policy.compiled_step(buf.num_envs, int(buf.spec.obs_shape[0]))
        native.lstm_cartpole_rollout(
            step, (h, c), cast(torch.Tensor, buf.done_slots),
            cast(tuple[torch.Tensor, torch.Tensor], buf.states), buf.horizon, self.tensors,
            self.env_arrays, noise, pool, self.finished, timing, self.spans,
        )  # fmt: skip
        return (h, c)


# torch fills a contiguous float32 tensor of 16 or more numbers with its vectorised normal
# sampler, which pairs the draws differently from its element-by-element one (smaller or
# non-contiguous tensors).
_VECTORISED_NORMAL_MIN = 16


def draw_normal_steps(noise: torch.Tensor, generator: torch.Generator) -> None:
    """Fill ``noise`` (T, N, A) with N(0, 1) draws equal to T calls of
    ``torch.randn((N, A), generator=generator)``, the torch path's draws a step, leaving
    ``generator`` where those calls leave it (tests/ppo/test_fused_rollout.py).

    Below 16 numbers a step torch draws element by element, so one draw into a
    non-contiguous view of all T steps (the same element-by-element sampler, in memory order)
    gives the same numbers in a single call; from 16 a step draws T times."""
    steps, rest = noise.shape[0], noise[0].numel()
    if rest >= _VECTORISED_NORMAL_MIN:
        for t in range(steps):
            torch.randn(noise.shape[1:], generator=generator, out=noise[t])
        return
    padded = torch.empty(steps, rest + 1)
    padded[:, :rest].normal_(generator=generator)  # strided: the element-by-element sampler
    noise.copy_(padded[:, :rest].view(noise.shape))


class FusedStep:
    """One rollout step's policy for any env, in one kernel call: actor and critic on
    ``obs[t]``, the sample (categorical, or a Box action's Gaussian), and the actions,
    log-probabilities and values written into the buffer's slots ``t``. The env steps as on
    the torch path (``gym:`` ids, env workers): the fused part stops at the env boundary. The
    Exp(1) draws are the torch path's: one (T, N, A) draw per rollout from the same generator
    is its T draws of (N, A), the same numbers (nothing else draws from it during a rollout
    without a teacher), so the actions are the same; so are a Box action's normal draws
    (:func:`draw_normal_steps`). The buffer's slots are checked and bound once
    (:meth:`native.FusedMLP.bind_rollout`), again only where the weights moved.
    """

    def __init__(self, buffer: RolloutBuffer, policy: MLPActorCritic) -> None:
        self.buffer, self.policy = buffer, policy
        self.steps: native.BoundSteps | None = None
        self.noise = torch.empty(buffer.num_steps, buffer.num_envs, policy.action_dim)
        self._actions = buffer.actions.unbind(0)  # each step's view, made once (__call__)
        self._bound_weights = 0  # the flat parameter's address self.steps was bound to

    def start_rollout(self, generator: torch.Generator) -> None:
        """Take the policy's current weights and draw the rollout's noise (call once per
        rollout, before the first step): the draws of all its steps, the torch path's numbers
        (:func:`draw_normal_steps` for a Box action's N(0, 1))."""
        buf = self.buffer
        if self.policy.continuous:
            draw_normal_steps(self.noise, generator)
        else:
            self.noise.exponential_(generator=generator)
        # The binding holds addresses: the buffer's and the noise's live as long as this
        # object, the weights' while the flat parameter keeps its storage (Adam steps it in
        # place; moving the policy, or assigning its data, makes a new one).
        weights = self.policy.flat.data_ptr()
        if self.steps is None or self._bound_weights != weights:
            self.steps = fused_mlp(self.policy).bind_rollout(
                buf.obs, self.noise, buf.actions, buf.logprobs, buf.values
            )
            self._bound_weights = weights

    def __call__(
        self,
        t: int,
        obs: torch.Tensor,
        state: tuple[torch.Tensor, ...],
        done: torch.Tensor | None,
        mask: torch.Tensor | None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """Act on the observations in slot ``t`` (``obs`` is that slot; the MLP has no state,
        the env no mask); returns the actions, (N,) or (N, A) for a Box action (a buffer view),
        and ``state``. :class:`~rlperf.ppo.rollout.PolicyStep`'s interface.

        No torch op runs here: one C call. Between env steps torch's dispatcher code evicts
        the env's from the caches; one randn and two tensor indexings a step made a MuJoCo
        env step ~10 us slower (docs/continuous.md)."""
        if self.steps is None:
            raise RuntimeError("FusedStep: call start_rollout() before the first step")
        self.steps.act(t)
        return self._actions[t], state

    def store(self, t: int, actions: torch.Tensor) -> None:
        """Nothing to write: the kernel wrote step ``t``'s actions, log-probabilities and
        values in place (no teacher runs with a fused step, so the actions are the policy's)."""
