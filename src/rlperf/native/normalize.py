"""Observation and reward normalisation in one call (``envs/_normalize_cpu.c``)."""

from __future__ import annotations

import numpy as np

from rlperf.native._core import EXTENSIONS, KernelArgumentError, _load, _np_ptr

_normalize = _load(EXTENSIONS["normalize"])


def normalize_available() -> bool:
    """Whether the normalisation kernel was built and imported (and not disabled)."""
    return _normalize is not None


class NormalizeKernel:
    """:class:`~rlperf.envs.normalize.Normalizer`'s step in one kernel call
    (``envs/_normalize_cpu.c``): its numpy arithmetic on the statistics and running returns
    it is bound to, checked once here and updated in place by every :meth:`step`.

    Args:
        n, features: envs a step and features of one (flattened) observation.
        obs_stats, return_stats: (mean, var, count) float64 arrays as
            :class:`~rlperf.envs.normalize.RunningStats` holds them (per env: (N, F), (N, F),
            (N, 1), the returns' (N,) each; shared: (F,), (F,), (1,), the returns' 0-d), or
            None for the part not normalised.
        returns: (N,) float64, the running discounted returns.
    """

    def __init__(
        self,
        n: int,
        features: int,
        per_env: bool,
        obs_stats: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
        return_stats: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
        returns: np.ndarray,
    ) -> None:
        if _normalize is None:
            raise RuntimeError(
                "the normalisation kernel is not built (or RLPERF_NO_KERNELS is set)"
            )
        if n < 1 or not 1 <= features <= _normalize.MAX_DIM:
            raise KernelArgumentError(
                f"the normalisation kernel takes n >= 1 and 1 to {_normalize.MAX_DIM} "
                f"features, got {n} and {features}"
            )
        lead = (n,) if per_env else ()
        stat_ptrs: list[int] = []
        for name, stats, feature in (("obs", obs_stats, (features,)),
                                     ("return", return_stats, ())):  # fmt: skip
            if stats is None:
                stat_ptrs += [0, 0, 0]
                continue
            shape, count_shape = lead + feature, lead + (1,) * len(feature)
            for part, array, want in zip(("mean", "var", "count"), stats,
                                         (shape, shape, count_shape), strict=True):  # fmt: skip
                stat_ptrs.append(_np_ptr(f"{name} {part}", array, want, np.float64))
        # The step's inputs are copied into these (any real dtype cast to float64, ~1 us
        # each), so their addresses are taken once: reading an array's address costs ~3 us.
        self._obs = np.zeros((n, features))
        self._rewards = np.zeros(n)
        self._flags = np.zeros((2, n), dtype=np.bool_)
        self._obs_out = np.zeros((n, features), dtype=np.float32)
        self._rewards_out = np.zeros(n)
        self._alive = (obs_stats, return_stats, returns)  # the addresses stay valid
        self._head = (n, features, int(per_env))
        self._ptrs = (
            _np_ptr("obs", self._obs, (n, features), np.float64),
            _np_ptr("rewards", self._rewards, (n,), np.float64),
            self._flags.ctypes.data, self._flags.ctypes.data + n, *stat_ptrs,
            _np_ptr("returns", returns, (n,), np.float64),
            self._obs_out.ctypes.data, self._rewards_out.ctypes.data,
        )  # fmt: skip

    def step(
        self,
        obs: np.ndarray,
        rewards: np.ndarray,
        terminations: np.ndarray,
        truncations: np.ndarray,
        training: bool,
        gamma: float,
        eps: float,
        clip_obs: float,
        clip_reward: float,
    ) -> tuple[np.ndarray, np.ndarray]:
        """One step: ``obs`` (N, ...) with N x F values, ``rewards``, ``terminations`` and
        ``truncations`` (N,). Returns the observations normalised and clipped, (N, F) float32,
        and the rewards (N,) float64: this object's buffers, overwritten by the next step."""
        n, features, _ = self._head
        np.copyto(self._obs, obs.reshape(n, features))
        np.copyto(self._rewards, rewards)
        np.copyto(self._flags[0], terminations)
        np.copyto(self._flags[1], truncations)
        _normalize.step(  # type: ignore[union-attr]  # __init__ checked it is loaded
            *self._head, int(training), gamma, eps, clip_obs, clip_reward, *self._ptrs
        )
        return self._obs_out, self._rewards_out
