"""The asynchronous collector against a per-env reference: same buffer, same GAE, same BPTT.

The policy is deterministic per row (actions from the observation) and recurrent (its state
counts the steps since its episode started), so any transition stored in the wrong slot, any
state that did not follow its env and any env stepped twice or skipped shows up as a difference.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from rlperf.envs import make_vec
from rlperf.envs.spec import EnvSpec
from rlperf.envs.workers import MultiprocessVecEnv
from rlperf.ppo.async_rollout import AsyncCollector
from rlperf.ppo.gae import gae, gae_reference
from rlperf.ppo.rollout import RolloutBuffer
from rlperf.run.episode_log import EpisodeLog
from rlperf.timing.sections import Profiler

SEED, NUM_ENVS, WORKERS, STEPS, HORIZON, ROLLOUTS = 3, 8, 4, 8, 4, 3
OPTIONS = {"max_episode_steps": 7}  # truncations inside every rollout


class CountingPolicy:
    """Deterministic, recurrent, per row."""

    recurrent = True

    def acting(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def initial_state(self, n: int) -> tuple[torch.Tensor, ...]:
        return (torch.zeros(n, 1),)

    def act(self, obs, state, done, mask=None, generator=None):  # noqa: ANN001
        h = state[0] * (1 - done)[:, None] + 1
        actions = (obs[:, 2] + 0.01 * h[:, 0] > 0).long()
        return actions, obs[:, 0] + h[:, 0], obs[:, 1] * h[:, 0], (h,)

    def value(self, obs, state, done):  # noqa: ANN001
        return obs[:, 3] + state[0][:, 0]


def reference_rollouts(policy: CountingPolicy) -> list[dict[str, np.ndarray]]:
    """Each worker's share stepped on its own, in the synchronous order, rollout by rollout."""
    per = NUM_ENVS // WORKERS
    shards = [make_vec("cartpole", per, **OPTIONS) for _ in range(WORKERS)]
    obs = [torch.from_numpy(s.reset(seed=SEED + w * per)[0]) for w, s in enumerate(shards)]
    h = [torch.zeros(per, 1) for _ in shards]
    done = [torch.zeros(per) for _ in shards]
    out = []
    for _ in range(ROLLOUTS):
        keys = ("obs", "actions", "logprobs", "values", "rewards", "terms", "truncs", "dones",
                "bootstrap")  # fmt: skip
        ref = {k: np.zeros((STEPS, NUM_ENVS) + ((4,) if k == "obs" else ())) for k in keys}
        ref["states"] = np.zeros((STEPS // HORIZON, NUM_ENVS, 1))
        for w, shard in enumerate(shards):
            cols = slice(w * per, (w + 1) * per)
            for t in range(STEPS):
                if t % HORIZON == 0:
                    ref["states"][t // HORIZON, cols] = h[w].numpy()
                a, lp, v, (h[w],) = policy.act(obs[w], (h[w],), done[w])
                o2, r, te, tr, infos = shard.step(a.numpy())
                for k, x in (
                    ("obs", obs[w]),
                    ("actions", a),
                    ("logprobs", lp),
                    ("values", v),
                    ("rewards", r),
                    ("terms", te),
                    ("truncs", tr),
                    ("dones", done[w]),
                ):
                    ref[k][t, cols] = np.asarray(x)  # fmt: skip
                boot = tr & ~te
                if boot.any():
                    final = torch.from_numpy(infos["final_obs"][boot])
                    ref["bootstrap"][t, cols][boot] = policy.value(final, (h[w][boot],), None)
                obs[w], done[w] = torch.from_numpy(o2), torch.from_numpy((te | tr).astype("f4"))
        ref["next_obs"] = torch.cat(obs).numpy()
        ref["next_state"] = torch.cat(h).numpy()
        out.append(ref)
    return out


def test_async_rollouts_equal_the_per_env_reference_and_so_do_gae_and_bptt():
    policy = CountingPolicy()
    refs = reference_rollouts(policy)
    env = MultiprocessVecEnv("cartpole", NUM_ENVS, WORKERS, batch_size=2, seed=SEED,
                             options=OPTIONS)  # fmt: skip
    try:
        assert env.workers_per_batch == 1  # batches of one worker: the most asynchronous
        obs, infos = env.reset(seed=SEED)
        spec = EnvSpec.from_env(env, infos)
        state = policy.initial_state(NUM_ENVS)
        buf = RolloutBuffer(STEPS, NUM_ENVS, spec, torch.device("cpu"), state, HORIZON)
        buf.write_obs(STEPS, obs)
        episodes = EpisodeLog()
        collector = AsyncCollector(buf, policy, env, spec, Profiler(), episodes)
        for k, ref in enumerate(refs):
            state = collector.collect(state, torch.Generator().manual_seed(0))
            got = {
                "obs": buf.obs, "actions": buf.actions, "logprobs": buf.logprobs,
                "values": buf.values, "rewards": buf.rewards_host,
                "terms": buf.terminations_host, "truncs": buf.truncations_host,
                "dones": buf.dones, "bootstrap": buf.bootstrap_values, "states": buf.states[0],
                "next_obs": buf.next_obs, "next_state": state[0],
            }  # fmt: skip
            for name, value in got.items():
                np.testing.assert_array_equal(
                    np.asarray(value, dtype=np.float64), ref[name].astype(np.float64),
                    err_msg=f"rollout {k}: {name}",
                )  # fmt: skip
            # GAE over the async buffer equals the plain per-env recursion of the reference.
            last = policy.value(buf.next_obs, state, buf.next_done)
            advantages = gae(**buf.gae_inputs(last), gamma=0.9, gae_lambda=0.8)
            want = gae_reference(
                ref["rewards"].tolist(), ref["values"].tolist(), last.tolist(),
                ref["terms"].astype(bool).tolist(), ref["truncs"].astype(bool).tolist(),
                ref["bootstrap"].tolist(), 0.9, 0.8,
            )  # fmt: skip
            np.testing.assert_allclose(np.asarray(advantages), np.asarray(want), rtol=1e-5,
                                       atol=1e-5, err_msg=f"rollout {k}: GAE")  # fmt: skip
            buf.bootstrap_values.zero_()
        assert episodes.count > 0
    finally:
        env.close()
