"""rlperf's vector envs as a stable-baselines3 ``VecEnv`` (``pip install 'rlperf[sb3]'``).

    from stable_baselines3 import PPO
    from rlperf.envs.sb3 import Sb3VecEnv
    from rlperf.envs.workers import MultiprocessVecEnv

    if __name__ == "__main__":      # worker processes start with forkserver
        venv = Sb3VecEnv(MultiprocessVecEnv("cartpole", 16, num_workers=2, seed=0))
        PPO("MlpPolicy", venv, n_steps=128).learn(100_000)

SB3's vector API differs from gymnasium's in what a step returns; the adapter converts:

- ``reset()`` returns the observations only (the infos go to ``reset_infos``); the seed and
  options SB3 stores with ``seed()``/``set_options()`` are used at the next reset. rlperf's envs
  take one seed for the whole vector env and seed row ``i`` of a ``gym:`` id with ``seed + i``,
  which is what SB3's ``seed(s)`` asks (``s + i`` for env ``i``); rlperf's own envs draw every
  row from one generator seeded ``s``.
- ``step_wait()`` returns ``dones = terminated | truncated`` and one info dict per row: every
  info key the env reports for that row, ``"TimeLimit.truncated"`` (truncated and not
  terminated), and on rows whose episode ended ``"terminal_observation"`` (from rlperf's
  ``infos["final_obs"]``; the observation returned for that row already starts the next
  episode, as SB3 expects) and ``"episode"`` as SB3's ``Monitor`` writes it (``r``, ``l``,
  ``t`` as Python numbers), so ``ep_info_buffer`` and the ``rollout/ep_rew_mean`` log fill
  without a Monitor wrapper.
- ``get_attr``/``set_attr``/``env_method`` reach the one vector-env object (rlperf's envs are
  batched, not a list of gymnasium envs): ``get_attr`` repeats its value for every index asked;
  ``set_attr`` and ``env_method`` act once and must be asked for every env.

Building the per-row info dicts is SB3's API (DummyVecEnv builds them too); the adapter builds
the dicts of finished rows only beyond an empty dict with ``TimeLimit.truncated`` per row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from gymnasium.vector import VectorEnv

try:
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv
except ImportError as e:  # one line, naming the extra that installs it
    raise ImportError("rlperf.envs.sb3 needs stable-baselines3: pip install 'rlperf[sb3]'") from e


def _row(batch: Any, i: int) -> Any:
    """Row ``i`` of a batch (an array, or a tuple/dict of them): an array row copied (the
    batch may be a view the next step overwrites), a scalar row as a numpy scalar."""
    if isinstance(batch, tuple):
        return tuple(_row(b, i) for b in batch)
    if isinstance(batch, dict):
        return {k: _row(v, i) for k, v in batch.items()}
    value = batch[i]
    return value.copy() if isinstance(value, np.ndarray) else value


def _item(value: Any) -> Any:
    """A numpy scalar as the Python number SB3's Monitor writes."""
    return value.item() if isinstance(value, np.generic) else value


def _add_rows(rows: list[dict[str, Any]], infos: dict[str, Any], skip: Iterable[str]) -> None:
    """Every key of vector ``infos`` (but ``skip``) into the dicts of the rows its ``_key`` mask
    sets (all rows where it has none); nested dicts become nested per-row dicts."""
    skipped = set(skip)
    for key, value in infos.items():
        if key.startswith("_") or key in skipped:
            continue
        mask = infos.get("_" + key)
        where: Iterable[Any] = np.flatnonzero(mask) if mask is not None else range(len(rows))
        for i in where:
            if isinstance(value, dict):
                nested: list[dict[str, Any]] = [{} for _ in rows]
                _add_rows(nested, value, ())
                rows[i][key] = nested[i]
            else:
                rows[i][key] = _row(value, int(i))


class Sb3VecEnv(VecEnv):
    """An rlperf vector env (serial or :class:`~rlperf.envs.workers.MultiprocessVecEnv`) as a
    stable-baselines3 ``VecEnv`` of ``env.num_envs`` envs.

    Args:
        env: the env, reset or not (the adapter resets it at SB3's first ``reset()``). Its
            synchronous ``step`` is used; a worker env built with ``batch_size`` is refused.

    Raises:
        ValueError: ``env`` is an asynchronous worker env (``batch_size`` below ``num_envs``).
    """

    def __init__(self, env: VectorEnv) -> None:
        workers_per_batch = getattr(env, "workers_per_batch", None)
        if workers_per_batch not in (None, getattr(env, "num_workers", None)):
            raise ValueError(
                "Sb3VecEnv steps every env at once: build the MultiprocessVecEnv without "
                "batch_size (SB3's VecEnv has no partial batches)"
            )
        self.env = env
        self._actions: np.ndarray | None = None
        super().__init__(env.num_envs, env.single_observation_space, env.single_action_space)

    # -- SB3's VecEnv API ------------------------------------------------------------------
    def reset(self) -> Any:
        seed = self._seeds[0]
        expected = [None if seed is None else seed + i for i in range(self.num_envs)]
        if self._seeds != expected:
            raise ValueError(
                "rlperf's envs take one seed for all envs (env i of a gym: id gets seed + i): "
                f"use seed(s), not per-env seeds {self._seeds}"
            )
        options = self._options[0] or None
        if any(o != self._options[0] for o in self._options):
            raise ValueError("rlperf's envs take one set of reset options for all envs")
        obs, infos = self.env.reset(seed=seed, options=options)
        self.reset_infos = [{} for _ in range(self.num_envs)]
        _add_rows(self.reset_infos, infos, ())
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        if self._actions is None:
            raise RuntimeError("step_wait() without step_async(actions)")
        actions, self._actions = self._actions, None
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        terminated, truncated = np.asarray(terminated), np.asarray(truncated)
        dones = terminated | truncated
        timeouts = (truncated & ~terminated).tolist()
        rows: list[dict[str, Any]] = [{"TimeLimit.truncated": t} for t in timeouts]
        if dones.any():
            _add_rows(rows, infos, ("final_obs", "episode", "final_info"))
            final_obs, episode = infos.get("final_obs"), infos.get("episode")
            # The finished episodes' last infos (gymnasium's final_info), where the row's own
            # infos (those of its next episode's first observation) do not have the key.
            finals: list[dict[str, Any]] = [{} for _ in rows]
            if isinstance(infos.get("final_info"), dict):
                _add_rows(finals, infos["final_info"], ())
            for i in np.flatnonzero(dones):
                if final_obs is not None:
                    rows[i]["terminal_observation"] = _row(final_obs, int(i))
                if episode is not None:
                    rows[i]["episode"] = {k: _item(v[i]) for k, v in episode.items()}
                rows[i].update({k: v for k, v in finals[i].items() if k not in rows[i]})
        else:
            _add_rows(rows, infos, ())
        return obs, np.asarray(rewards, dtype=np.float32), dones, rows

    def close(self) -> None:
        self.env.close()

    def _count(self, indices: Any) -> int:
        return len(list(self._get_indices(indices)))

    def _all(self, indices: Any, doing: str) -> None:
        if sorted(set(self._get_indices(indices))) != list(range(self.num_envs)):
            raise ValueError(
                f"{doing} acts on rlperf's whole vector env (one batched object): ask for "
                "every env (indices=None)"
            )

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        """The vector env's attribute ``attr_name``, once per index."""
        return [getattr(self.env, attr_name)] * self._count(indices)

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        self._all(indices, f"set_attr({attr_name!r})")
        setattr(self.env, attr_name, value)

    def env_method(
        self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any
    ) -> list[Any]:
        """Calls the vector env's method once; its result is repeated for every env."""
        self._all(indices, f"env_method({method_name!r})")
        result = getattr(self.env, method_name)(*method_args, **method_kwargs)
        return [result] * self.num_envs

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        """Whether each env is a gymnasium env wrapped in ``wrapper_class``: a ``gym:`` id's
        sub-envs (serial) are asked; rlperf's own rows, and envs in worker processes, are not
        gymnasium envs and answer False."""
        from stable_baselines3.common.env_util import is_wrapped

        envs: Sequence[Any] | None = getattr(self.env.unwrapped, "envs", None)
        ids = list(self._get_indices(indices))
        if envs is None or len(envs) != self.num_envs:
            return [False] * len(ids)
        return [is_wrapped(envs[i], wrapper_class) for i in ids]
