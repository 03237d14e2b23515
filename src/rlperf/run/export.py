"""A trained run's policy outside rlperf: :func:`load_policy` and :func:`export_policy`.

``rlperf.load_policy(RUN_DIR)`` gives a :class:`LoadedPolicy`, a plain ``torch.nn.Module``
holding the run's policy with the checkpoint's parameters and, where the run trained with
``--normalize-obs``, its observation statistics, frozen and pooled as ``rlperf eval`` pools them
(``run/evaluate.py``). ``policy.act(obs)`` takes raw observations as the env gives them and
returns actions as the env takes them, the same as ``rlperf eval`` would choose:

- ``deterministic=True``: the distribution's mode (the argmax of the logits, each component's
  for MultiDiscrete; the Gaussian's mean), ``rlperf eval --deterministic``'s actions;
- ``deterministic=False``: a sample (pass a seeded ``torch.Generator`` to repeat it);
- Box actions clipped to the action space's bounds, as in training and evaluation.

A recurrent policy (``lstm``, ``convlstm``) keeps its state inside the module between
:meth:`LoadedPolicy.act` calls, one row per env: pass ``done`` (B,), 1 where the observation
is an episode's first (after a reset), as ``rlperf eval`` does; :meth:`LoadedPolicy.reset`
starts every row afresh.

``rlperf export RUN_DIR --format torchscript|onnx --out FILE`` writes the deterministic
policy, normalisation included, as one file that needs torch (TorchScript,
``torch.jit.load``) or only an ONNX runtime (``onnxruntime``, the ``export`` extra): input
``obs`` (B, *obs_shape) in the env's dtype, output ``actions`` ((B,) int64, (B, k) int64 or
(B, d) float32). Feed-forward policies without action masks only: a recurrent policy's state
and an env's action masks would be extra inputs and outputs that no runtime convention names,
so those are refused in one line (use :func:`load_policy`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import math
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from torch import nn

from rlperf.envs.spec import EnvSpec
from rlperf.policies import distributions
from rlperf.policies.base import ActorCritic, State
from rlperf.run.evaluate import load_run, make_eval_env, policy_for_env

FORMATS = ("torchscript", "onnx")
EXPORT_INSTALL = "pip install 'rlperf[export]'"
# The ONNX exporter (torch.onnx.export's dynamo path) needs onnx and onnxscript.
ONNX_PACKAGES = ("onnx", "onnxscript")
ONNX_OPSET = 18


class LoadedPolicy(nn.Module):
    """A run's policy with its frozen observation normalisation (module docstring).

    Args:
        policy: the run's policy with its trained parameters (eval mode).
        obs_mean, obs_var: the observation statistics (``obs_shape``), or None without
            ``--normalize-obs``.
        clip_obs: normalised observations are clipped to +-this (0: no clip).
        epsilon: added to the variance before its square root (the Normalizer's).
    """

    # Buffers (saved with the module, moved with it): the statistics in float64, the bounds.
    obs_mean: torch.Tensor
    obs_std: torch.Tensor
    action_low: torch.Tensor
    action_high: torch.Tensor

    def __init__(
        self,
        policy: ActorCritic,
        obs_mean: np.ndarray | None = None,
        obs_var: np.ndarray | None = None,
        clip_obs: float = 0.0,
        epsilon: float = 1e-8,
    ) -> None:
        super().__init__()
        self.policy = policy.eval()
        self.spec: EnvSpec = policy.spec
        self.normalizes = obs_mean is not None
        self.clip_obs = float(clip_obs)
        shape = self.spec.obs_shape
        mean = np.zeros(shape) if obs_mean is None else np.asarray(obs_mean, np.float64)
        var = np.ones(shape) if obs_var is None else np.asarray(obs_var, np.float64)
        # float64, as the Normalizer computes: (obs - mean) / sqrt(var + eps), then float32.
        self.register_buffer("obs_mean", torch.from_numpy(mean.reshape(shape).copy()))
        self.register_buffer("obs_std", torch.from_numpy(np.sqrt(var.reshape(shape) + epsilon)))
        low, high = (np.zeros(0), np.zeros(0)) if self.spec.action.discrete else (
            np.asarray(self.spec.action.low, np.float32),
            np.asarray(self.spec.action.high, np.float32),
        )  # fmt: skip
        self.register_buffer("action_low", torch.from_numpy(low))
        self.register_buffer("action_high", torch.from_numpy(high))
        self.state: State | None = None  # a recurrent policy's, between act() calls
        self.eval()

    @property
    def recurrent(self) -> bool:
        return self.policy.recurrent

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        """Raw observations (B, *obs_shape) as the policy saw them in training: normalised
        with the frozen statistics and clipped (float32), or unchanged without normalisation."""
        if not self.normalizes:
            return obs
        out = (obs.double() - self.obs_mean) / self.obs_std
        if self.clip_obs > 0:
            out = out.clamp(-self.clip_obs, self.clip_obs)
        return out.float()

    def to_env(self, actions: torch.Tensor) -> torch.Tensor:
        """Actions as the env takes them: Box actions clipped to the space's bounds."""
        if self.spec.action.discrete:
            return actions
        return torch.minimum(torch.maximum(actions, self.action_low), self.action_high)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """The deterministic actions of a feed-forward policy for raw ``obs`` (what the
        exported file computes)."""
        out, _ = self.policy.actor_output(self.normalize(obs), (), None)
        return self.to_env(distributions.mode(self.spec.action, out))

    def reset(self) -> None:
        """Forget a recurrent policy's state: the next :meth:`act` starts every row afresh."""
        self.state = None

    @torch.no_grad()
    def act(
        self,
        obs: torch.Tensor | np.ndarray,
        deterministic: bool = False,
        done: torch.Tensor | np.ndarray | None = None,
        action_mask: torch.Tensor | np.ndarray | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Actions (B, ...) for raw observations ``obs`` (B, *obs_shape), as the env takes them.

        Args:
            deterministic: the distribution's mode instead of a sample.
            done: (B,) 1 where ``obs`` is an episode's first (recurrent policies; the first call
                after :meth:`reset` starts every row afresh whatever it says).
            action_mask: (B, mask_width) bool, True where allowed (envs with masks).
            generator: the sampler's generator (``deterministic=False``).
        """
        obs_t = torch.as_tensor(obs)
        if obs_t.dtype != torch.uint8 and not self.normalizes:
            obs_t = obs_t.to(torch.float32)
        obs_t = self.normalize(obs_t)
        n = obs_t.shape[0]
        done_t = None if done is None else torch.as_tensor(done, dtype=torch.float32)
        if self.state is None or (self.recurrent and self.state[0].shape[0] != n):
            self.state, done_t = self.policy.initial_state(n), torch.ones(n)
        mask_t = None if action_mask is None else torch.as_tensor(action_mask, dtype=torch.bool)
        with torch.inference_mode(), self.policy.acting():
            if deterministic:
                actions, self.state = self.policy.act_mode(obs_t, self.state, done_t, mask_t)
            else:
                actions, _, _, self.state = self.policy.act(
                    obs_t, self.state, done_t, mask_t, generator
                )
        return self.to_env(actions)


def load_policy(run_dir: str | Path) -> LoadedPolicy:
    """``run_dir``'s trained policy as a :class:`LoadedPolicy` on the CPU (module docstring).

    One env of the run is made to read its spaces (the run's env packages must be installed).

    Raises:
        EvalError, CheckpointError, ConfigError, UnknownEnvError, EnvOptionError: the run
            cannot be loaded here (one line each).
    """
    cfg, payload = load_run(Path(run_dir), purpose="load the policy")
    env = make_eval_env(cfg, 1)
    try:
        _, policy, normalizer = policy_for_env(cfg, payload, env, seed=0)
    finally:
        env.close()
    if normalizer is None:
        return LoadedPolicy(policy)
    stats = normalizer.obs_stats
    assert stats is not None  # an observation normaliser has observation statistics
    return LoadedPolicy(policy, stats.mean, stats.var, normalizer.clip_obs, normalizer.epsilon)


# -- files -------------------------------------------------------------------------------
def format_problem(fmt: str) -> str | None:
    """Why ``--format`` cannot be written here, or None: an unknown format, or ONNX without
    its packages."""
    if fmt not in FORMATS:
        return f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}"
    if fmt == "onnx":
        missing = [p for p in ONNX_PACKAGES if importlib.util.find_spec(p) is None]
        if missing:
            return f"--format onnx needs {' and '.join(missing)}: {EXPORT_INSTALL}"
    return None


def exportable_problem(loaded: LoadedPolicy) -> str | None:
    """Why ``loaded`` cannot be written as one file (module docstring), or None."""
    if loaded.recurrent:
        return (
            f"policy {type(loaded.policy).__name__} is recurrent: its state would be an extra "
            "input and output of the file, which export does not write; load it with "
            "rlperf.load_policy(RUN_DIR) and call .act(obs, done=...)"
        )
    if loaded.spec.has_mask:
        return (
            "the env gives action masks, which the exported file would need as an input: load "
            "the policy with rlperf.load_policy(RUN_DIR) and pass action_mask to .act"
        )
    return None


def example_obs(spec: EnvSpec, batch: int = 2) -> torch.Tensor:
    """A batch of observations of ``spec``'s shape and dtype to trace the policy with."""
    generator = torch.Generator().manual_seed(0)
    shape = (batch, *spec.obs_shape)
    if spec.obs_dtype == np.uint8:
        return torch.randint(0, 256, shape, generator=generator, dtype=torch.uint8)
    return torch.from_numpy(torch.randn(shape, generator=generator).numpy().astype(spec.obs_dtype))


def export_policy(loaded: LoadedPolicy, fmt: str, out: Path) -> None:
    """Write ``loaded``'s deterministic policy (:meth:`LoadedPolicy.forward`) to ``out`` as
    TorchScript (traced) or ONNX, with a dynamic batch dimension; written beside ``out`` under
    a temporary name and renamed over it, so a failed export leaves nothing."""
    tmp = out.with_name(f".{out.name}.tmp")
    obs = example_obs(loaded.spec)
    loaded.eval()
    try:
        with torch.no_grad():
            if fmt == "torchscript":
                traced = torch.jit.trace(loaded, (obs,), check_trace=False)
                torch.jit.save(traced, str(tmp))
            else:
                with quiet_onnx_exporter():
                    batch = torch.export.Dim("batch", min=1)
                    torch.onnx.export(
                        loaded, (obs,), str(tmp), input_names=["obs"], output_names=["actions"],
                        dynamic_shapes={"obs": {0: batch}}, opset_version=ONNX_OPSET,
                        dynamo=True, external_data=False, verbose=False,
                    )  # fmt: skip
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def quiet_onnx_exporter() -> Iterator[None]:
    """torch.onnx's exporter without the chatter that is not about the policy: its registry's
    notes on torchvision's operators (a logger) and a deprecation inside torch.export."""
    registry = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = registry.level
    registry.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", r"`isinstance\(treespec, LeafSpec\)`", FutureWarning)
            yield
    finally:
        registry.setLevel(level)


def describe_export(loaded: LoadedPolicy, fmt: str, out: Path) -> str:
    """One line saying what the file holds and how to run it."""
    spec = loaded.spec
    obs = f"obs (B, {', '.join(map(str, spec.obs_shape))}) {np.dtype(spec.obs_dtype).name}"
    kind = spec.action.kind
    action = {"discrete": "(B,) int64", "multidiscrete": f"(B, {len(spec.action.nvec)}) int64",
              "box": f"(B, {spec.action.dim}) float32"}[kind]  # fmt: skip
    norm = ", observation normalisation inside" if loaded.normalizes else ""
    run = "torch.jit.load" if fmt == "torchscript" else "onnxruntime.InferenceSession"
    size = math.ceil(out.stat().st_size / 1024)
    return f"{out} ({fmt}, {size:,} KiB): {obs} -> actions {action}{norm}; run it with {run}"
