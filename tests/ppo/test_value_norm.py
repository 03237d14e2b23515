"""``--normalize-value``: the critic's targets normalised around GAE (ppo/value_norm.py), held
against a plain per-env loop on the returns, and end to end in the trainer (resume included)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from test_cli import expect_usage_error  # the tests/ root is on the path
from test_trainer import ctrl_c_after, resume_and_compare, small_config, train

from rlperf.ppo.gae import gae, gae_reference
from rlperf.ppo.trainer import Trainer
from rlperf.ppo.value_norm import EPSILON, ValueNormalizer
from rlperf.timing.sections import Profiler

T, N, GAMMA, LAMBDA = 12, 5, 0.97, 0.9


def rollout(seed: int) -> dict[str, np.ndarray]:
    """GAE's inputs as the buffer holds them: the critic's (normalised) outputs, bootstraps only
    where truncated and not terminated."""
    rng = np.random.default_rng(seed)
    term = (rng.random((T, N)) < 0.1).astype(np.float32)
    trunc = (rng.random((T, N)) < 0.1).astype(np.float32)
    boot = rng.normal(size=(T, N)).astype(np.float32) * trunc * (1 - term)
    return {
        "rewards": rng.normal(3.0, 2.0, (T, N)).astype(np.float32),
        "terminations": term,
        "truncations": trunc,
        "values": rng.normal(size=(T, N)).astype(np.float32),
        "bootstrap_values": boot,
        "last_value": rng.normal(size=N).astype(np.float32),
        "out": np.zeros((T, N), np.float32),
    }


def reference(batches: list[dict[str, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, float, float]:
    """The last batch's normalised values and advantages, the obvious way: every batch's critic
    outputs turned into returns with the statistics of the returns before it (mean and variance
    of all of them, float64), GAE per env, then the last batch's written with all of them."""
    seen: list[np.ndarray] = []
    for b in batches:
        mean, std = (np.mean(seen), np.sqrt(np.var(seen) + EPSILON)) if seen else (0.0, 1.0)
        values = b["values"].astype(np.float64) * std + mean
        last = b["last_value"].astype(np.float64) * std + mean
        final = b["bootstrap_values"].astype(np.float64) * std + mean
        adv = np.array(gae_reference(b["rewards"].tolist(), values.tolist(), last.tolist(),
                                     b["terminations"].astype(bool).tolist(),
                                     b["truncations"].astype(bool).tolist(), final.tolist(),
                                     GAMMA, LAMBDA))  # fmt: skip
        seen.extend((adv + values).ravel())
        mean, std = np.mean(seen), np.sqrt(np.var(seen) + EPSILON)
    return (values - mean) / std, adv / std, float(mean), float(std)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_normalised_targets_match_the_returns_normalised_by_every_return_seen(kind: str) -> None:
    batches = [rollout(seed) for seed in range(3)]
    values_ref, adv_ref, mean_ref, std_ref = reference(batches)
    norm = ValueNormalizer()
    for b in batches:
        inputs = {k: v.copy() for k, v in b.items()}
        if kind == "torch":
            inputs = {k: torch.from_numpy(v) for k, v in inputs.items()}
        norm.denormalize(inputs)
        gae(**inputs, gamma=GAMMA, gae_lambda=LAMBDA)
        norm.normalize_targets(inputs["values"], inputs["out"])
    values, adv = (np.asarray(inputs[k]) for k in ("values", "out"))
    mean, std = norm.scale()
    # float32 buffers; the statistics' epsilon count (1e-4 of a prior of mean 0, var 1)
    assert (mean, std) == pytest.approx((mean_ref, std_ref), rel=1e-5)
    np.testing.assert_allclose(values, values_ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(adv, adv_ref, rtol=1e-4, atol=1e-5)
    # The update reads returns as advantages + values: the normalised returns.
    np.testing.assert_allclose(values + adv, values_ref + adv_ref, rtol=1e-4, atol=1e-4)


def test_the_trainer_s_update_sees_normalised_returns_and_the_same_policy_gradient() -> None:
    """One rollout on CartPole: the advantages the update reads are the plain run's divided by
    the returns' std (so, normalised per minibatch, the same), and advantages + values are the
    returns standardised."""
    plain = Trainer(small_config(2), profiler=Profiler())
    scaled = Trainer(small_config(2, ppo__normalize_value=True), profiler=Profiler())
    for trainer in (plain, scaled):
        trainer.collect()
        trainer.compute_advantages()
    mean, std = scaled.value_norm.scale()
    returns = plain.buffer.advantages + plain.buffer.values  # the first rollout: stats (0, 1)
    torch.testing.assert_close(scaled.buffer.advantages * std, plain.buffer.advantages,
                               rtol=1e-5, atol=1e-5)  # fmt: skip
    torch.testing.assert_close(scaled.buffer.advantages + scaled.buffer.values,
                               (returns - mean) / std, rtol=1e-5, atol=1e-5)  # fmt: skip
    assert std > 1.5, "CartPole's returns spread well beyond 1"


def test_a_normalised_run_resumes_to_the_run_that_never_stopped(tmp_path: Path) -> None:
    cfg = small_config(6, run__checkpoint_every=3, ppo__normalize_value=True)
    straight, _ = train(cfg, tmp_path / "straight")
    assert straight.value_norm.scale() != (0.0, 1.0)
    ctrl_c_after(small_config(6, run__checkpoint_every=3, ppo__normalize_value=True), 3,
                 tmp_path / "resumed")  # fmt: skip
    resume_and_compare(tmp_path / "resumed", tmp_path / "straight", straight)


def test_without_advantage_normalisation_it_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expect_usage_error(capsys, ["train", "--normalize-value", "--no-norm-adv",
                                "--run-dir", str(tmp_path / "run")],  # fmt: skip
                       "--normalize-value needs --norm-adv")  # fmt: skip
    assert not (tmp_path / "run").exists()
