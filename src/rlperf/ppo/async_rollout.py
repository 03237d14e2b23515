"""One rollout from env workers in asynchronous batches: act on whichever workers are ready.

With ``--env-batch-size B < num_envs`` (``envs/workers/``), the trainer does not step every env
together: :meth:`MultiprocessVecEnv.recv` returns the rows of the first workers to finish,
the policy acts on those rows alone and :meth:`~MultiprocessVecEnv.send` hands their actions
back, while the other workers are still stepping (EnvPool's ``recv``/``send``, PufferLib's
``batch_size``). The policy's forward pass overlaps the envs' steps.

Envs then move at different paces, so every env row keeps its own position in the rollout
(``position[row]``: steps it has taken) and every write goes to ``(position[row], row)`` of the
buffer: each env's column holds its own transitions in time order, exactly as the synchronous
loop (``Trainer.collect``) would lay them out, and GAE and truncated BPTT read columns as before.
A recurrent policy's state is a row of the state tensors, gathered for the batch's rows and
scattered back. An env that has all ``num_steps`` steps is not sent new actions: the rollout
ends when every env has its steps, so every rollout starts (and a checkpoint is taken) with
every worker waiting for actions.

Sections, as the synchronous loop's: ``policy_forward``, ``device_to_host``, ``buffer_store``,
``truncation_bootstrap``, and ``env_send`` / ``env_recv`` (the wait for ready workers) in place
of ``env_step``.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import torch

from rlperf.envs.spec import ACTION_MASK_KEY, EnvSpec
from rlperf.ppo.rollout import RolloutBuffer, bootstrap_truncated
from rlperf.run.episode_log import EpisodeLog
from rlperf.timing import names
from rlperf.timing.sections import Profiler

State = tuple[torch.Tensor, ...]


class AsyncCollector:
    """Fills a :class:`RolloutBuffer` from a ``MultiprocessVecEnv`` in batches of ready rows.

    Args:
        buf: the rollout buffer (``num_envs`` = the env's rows).
        policy: acts on any number of rows (the policy protocol, ``policies/base.py``).
        env: a ``MultiprocessVecEnv`` whose envs all wait for actions (after ``reset`` or a
            previous rollout), their observations in ``buf.next_obs``.
        spec: the env's spec. episodes: where finished episodes are recorded.
    """

    def __init__(self, buf: RolloutBuffer, policy: Any, env: Any, spec: EnvSpec,
                 profiler: Profiler, episodes: EpisodeLog) -> None:  # fmt: skip
        self.buf, self.policy, self.env, self.spec = buf, policy, env, spec
        self.prof, self.episodes = profiler, episodes
        self.device = buf.device
        self.position = np.zeros(buf.num_envs, dtype=np.int64)

    def applies(self, supervised: bool) -> bool:
        """Every rollout of its run is this collector's (the config refuses a teacher with
        asynchronous batches)."""
        return True

    def collect(self, state: State, generator: torch.Generator) -> State:
        """One rollout: ``num_steps`` steps of every env; returns the policy state after it."""
        buf, sec, n = self.buf, self.prof.section, self.buf.num_envs
        buf.start_rollout()
        self.position[:] = 0
        with torch.inference_mode(), self.policy.acting():
            state = tuple(s.clone() for s in state)  # written per row below
            self._act_and_send(np.arange(n), state, generator)
            in_flight = n
            while in_flight:
                with sec(names.ENV_RECV):
                    obs, rewards, terminations, truncations, infos, rows = self.env.recv()
                in_flight -= len(rows)
                steps = self.position[rows]
                with sec(names.BUFFER_STORE):
                    buf.store_env_rows(steps, rows, rewards, terminations, truncations)
                    if infos and "_episode" in infos:
                        self.episodes.record(infos)
                    slots = torch.from_numpy(steps + 1).to(self.device)
                    done = terminations | truncations if self.policy.recurrent else None
                    buf.write_rows(slots, torch.from_numpy(rows).to(self.device), obs, done,
                                   infos.get(ACTION_MASK_KEY))  # fmt: skip
                if infos and "_final_obs" in infos and truncations.any():
                    with sec(names.TRUNCATION_BOOTSTRAP):
                        bootstrap_truncated(buf, self.policy, steps, rows, infos,
                                            terminations, truncations, state)  # fmt: skip
                self.position[rows] += 1
                more = rows[self.position[rows] < buf.num_steps]  # whole workers: one position
                if more.size:
                    self._act_and_send(more, state, generator)
                    in_flight += len(more)
        return state

    def _act_and_send(self, rows: np.ndarray, state: State, generator: torch.Generator) -> None:
        buf, sec, policy = self.buf, self.prof.section, self.policy
        steps = self.position[rows]
        index = (torch.from_numpy(steps).to(self.device), torch.from_numpy(rows).to(self.device))
        obs = buf.obs_rows(steps, rows)
        # A recurrent policy's buffer has done slots.
        done = cast(torch.Tensor, buf.done_slots)[index] if policy.recurrent else None
        mask = buf.mask_slots[index] if buf.mask_slots is not None else None
        state_rows = tuple(s[index[1]] for s in state)
        if policy.recurrent:
            buf.store_state_rows(steps, rows, state_rows)
        with sec(names.POLICY_FORWARD):
            actions, logprobs, values, new_rows = policy.act(obs, state_rows, done, mask, generator)
        for s, new in zip(state, new_rows, strict=True):
            s[index[1]] = new
        with sec(names.DEVICE_TO_HOST):
            host = actions.numpy() if self.device.type == "cpu" else actions.cpu().numpy()
            host = self.spec.action.to_env(host)
        with sec(names.BUFFER_STORE):
            buf.store_rows(steps, rows, actions, logprobs, values)
        with sec(names.ENV_SEND):
            self.env.send(host, env_ids=rows)
