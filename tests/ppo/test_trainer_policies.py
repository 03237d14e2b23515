"""The trainer with every policy kind and the env features the protocol opened: recurrent
state through rollout, checkpoint and resume; uint8 images; action masks; MultiDiscrete and Box
actions; env options; bf16 autocast."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from rlperf import native
from rlperf.cli import main
from rlperf.config import Config
from rlperf.envs import CartPoleVec, register
from rlperf.ppo.samplers import PackedTableSampler, RowSampler, SegmentSampler
from rlperf.ppo.trainer import Trainer
from rlperf.ppo.update import AnalyticUpdate, AutogradUpdate, NativeMLPUpdate
from rlperf.timing.sections import Profiler

NUM_ENVS, NUM_STEPS = 8, 16
BATCH = NUM_ENVS * NUM_STEPS
TIMING_FIELDS = {"sps", "sps_cumulative", "sections_s", "wall_s", "telemetry"}
WORKLOADS = {
    "mlp": {"policy__kind": "mlp"},
    "lstm": {"policy__kind": "lstm", "env__options": {"observe": "position"}},
    "lstm-bptt": {
        "policy__kind": "lstm",
        "env__options": {"observe": "position"},
        "ppo__bptt_horizon": 4,
    },  # fmt: skip
    "cnn": {"policy__kind": "cnn", "env__env": "catch"},
    "lstm-images": {"policy__kind": "lstm", "env__env": "catch", "policy__cnn_channels": (8,)},
    "convlstm": {
        "policy__kind": "convlstm",
        "env__env": "catch",
        "policy__convlstm_channels": 4,
        "policy__cnn_features": 16,
    },  # fmt: skip
    "convlstm-bptt": {
        "policy__kind": "convlstm",
        "env__env": "catch",
        "policy__convlstm_channels": 4,
        "policy__cnn_features": 16,
        "ppo__bptt_horizon": 4,
    },  # fmt: skip
    # 2 maps x 4 agents = 8 rows; supervised for iterations 1-2, PPO from iteration 3 on (the
    # resume test's checkpoint falls on the switch).
    "grid-teacher": {
        "policy__kind": "cnn",
        "env__env": "grid",
        "env__num_envs": 2,
        "env__options": {"mission": "extractor_hub_12"},
        "policy__cnn_channels": (8,),
        "policy__cnn_features": 32,
        "teacher__supervised_steps": 2 * BATCH,
    },
}


def config(iterations: int, **overrides) -> Config:
    """A short CPU run: 8 envs x 16 steps, 4 minibatches x 2 epochs, one thread."""
    cfg = Config()
    cfg.env.num_envs, cfg.ppo.num_steps, cfg.ppo.update_epochs = NUM_ENVS, NUM_STEPS, 2
    cfg.run.total_steps, cfg.run.threads, cfg.run.progress, cfg.run.seed = (
        iterations * BATCH, 1, False, 3,
    )  # fmt: skip
    for dotted, value in overrides.items():
        section, name = dotted.split("__")
        setattr(getattr(cfg, section), name, value)
    return cfg.validate()


def metrics(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k not in TIMING_FIELDS} for row in rows]


@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path: Path, workload) -> None:
    """Ctrl-C after the iteration-2 checkpoint of a 4-iteration run, then ``--resume``: the same
    losses, returns and parameters, so the recurrent state and masks were restored exactly."""
    overrides = {**WORKLOADS[workload], "run__checkpoint_every": 2}
    straight = Trainer(config(4, **overrides), profiler=Profiler())
    straight.train(tmp_path / "straight")

    interrupted = Trainer(config(4, **overrides), profiler=Profiler())

    def stop_after_checkpoint(trainer: Trainer, row: dict) -> None:
        if row["iteration"] == 2:
            raise KeyboardInterrupt

    interrupted.callbacks.append(stop_after_checkpoint)
    with pytest.raises(KeyboardInterrupt):
        interrupted.train(tmp_path / "resumed")
    assert main(["train", "--resume", str(tmp_path / "resumed")]) == 0
    assert metrics(tmp_path / "resumed") == metrics(tmp_path / "straight")
    resumed = torch.load(tmp_path / "resumed" / "checkpoint.pt", weights_only=True)
    for name, value in straight.policy.state_dict().items():
        assert torch.equal(resumed["policy"][name], value), name
    if straight.policy.recurrent:
        for saved, state in zip(resumed["policy_state"], straight.state, strict=True):
            assert torch.equal(saved, state)


def test_each_workload_gets_its_sampler_and_update() -> None:
    # The LSTM's analytic path is its compiled network: without the kernel, autograd.
    lstm_update = AnalyticUpdate if native.lstm_available() else AutogradUpdate
    # The MLP's analytic update is one kernel where it is built (ppo/_mlp_update_cpu.c).
    mlp_update = NativeMLPUpdate if native.update_available() else AnalyticUpdate
    expected = {
        "mlp": (PackedTableSampler, mlp_update),
        "lstm": (SegmentSampler, lstm_update),
        "cnn": (RowSampler, AutogradUpdate),
        "convlstm": (SegmentSampler, AutogradUpdate),
    }
    for workload, (sampler, update) in expected.items():
        trainer = Trainer(config(1, **WORKLOADS[workload]), profiler=Profiler())
        assert isinstance(trainer.sampler, sampler) and isinstance(trainer.update_impl, update)
    trainer = Trainer(config(1, ppo__precision="bf16"), profiler=Profiler())
    assert isinstance(trainer.update_impl, AutogradUpdate), "the analytic path is fp32 only"


@pytest.mark.parametrize("workload, iterations", [("cnn", 6), ("convlstm", 3)])
def test_images_stay_uint8_and_the_image_policies_train(workload, iterations) -> None:
    trainer = Trainer(config(iterations, **WORKLOADS[workload], ppo__learning_rate=1e-3),
                      profiler=Profiler())  # fmt: skip
    assert trainer.buffer.obs.dtype == torch.uint8
    assert trainer.buffer.obs.shape == (NUM_STEPS, NUM_ENVS, 1, 10, 5)
    before = {k: v.clone() for k, v in trainer.policy.state_dict().items()}
    summary = trainer.train()
    assert summary["global_step"] == iterations * BATCH and summary["episodes"] > 0
    assert all(np.isfinite(v) for v in summary["final_stats"].values())
    changed = [k for k, v in trainer.policy.state_dict().items() if not torch.equal(v, before[k])]
    assert len(changed) == len(before), "every parameter was trained"


@pytest.mark.parametrize("kind", ["cnn", "convlstm"])
def test_rollout_stores_what_the_env_produced_and_evaluate_agrees(kind: str) -> None:
    """On the RGB robots board: a fresh env replaying the buffer's actions gives back every
    stored observation and reward, and the policy's ``evaluate`` on an update minibatch gives
    the rollout's own log-probabilities and values (the checks that cleared the pipeline when
    PPO did not learn from these images; docs/robots.md)."""
    from rlperf.envs import make_vec

    cfg = config(1, policy__kind=kind, env__env="robots", policy__cnn_features=16,
                 policy__convlstm_channels=4, policy__cnn_channels=(4, 4, 4))  # fmt: skip
    trainer = Trainer(cfg, profiler=Profiler())
    trainer.collect()
    buf = trainer.buffer
    env = make_vec("robots", NUM_ENVS, seed=cfg.run.seed)
    obs, _ = env.reset(seed=cfg.run.seed)
    for t in range(NUM_STEPS):
        np.testing.assert_array_equal(buf.obs[t].numpy(), obs)
        obs, reward, *_ = env.step(buf.actions[t].numpy())
        np.testing.assert_array_equal(buf.rewards_host[t], reward)
    trainer.compute_advantages()
    trainer.sampler.prepare()
    mb = trainer.sampler.epoch(2, torch.Generator().manual_seed(0))[0]
    with torch.no_grad():
        logprob, _, value = trainer.policy.evaluate(
            mb.obs, mb.actions, mb.state0, mb.dones, mb.masks
        )
    torch.testing.assert_close(logprob, mb.logprobs, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(value, mb.values, rtol=1e-5, atol=1e-5)


def test_env_options_reach_the_environment() -> None:
    trainer = Trainer(config(1, env__options={"observe": "position", "max_episode_steps": 20}))
    assert trainer.spec.obs_shape == (2,)
    assert trainer.env.max_episode_steps == 20
    trainer.train()
    assert max(trainer.episodes.lengths) <= 20


def test_bf16_autocast_trains_with_finite_losses() -> None:
    for workload in ("mlp", "lstm", "convlstm"):
        trainer = Trainer(config(2, **WORKLOADS[workload], ppo__precision="bf16"))
        summary = trainer.train()
        assert all(np.isfinite(v) for v in summary["final_stats"].values()), workload


# -- action masks, MultiDiscrete and Box actions ---------------------------------------------
class MaskedCartPole(CartPoleVec):
    """CartPole whose third action is invalid in even steps and the first in odd ones: the
    mask comes in ``infos["action_mask"]`` and every action actually taken is recorded."""

    def __init__(self, num_envs: int) -> None:
        super().__init__(num_envs)
        self.single_action_space = spaces.Discrete(3)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.taken: list[tuple[np.ndarray, np.ndarray]] = []
        self._mask = self._make_mask()

    def _make_mask(self) -> np.ndarray:
        mask = np.ones((self.num_envs, 3), dtype=bool)
        odd = self.episode_steps % 2 == 1
        mask[~odd, 2] = False
        mask[odd, 0] = False
        return mask

    def reset(self, *, seed=None, options=None):
        obs, infos = super().reset(seed=seed, options=options)
        self._mask = self._make_mask()
        return obs, {**infos, "action_mask": self._mask}

    def step(self, actions):
        self.taken.append((np.asarray(actions).copy(), self._mask.copy()))
        obs, rewards, terms, truncs, infos = super().step(np.asarray(actions) % 2)
        self._mask = self._make_mask()
        return obs, rewards, terms, truncs, {**infos, "action_mask": self._mask}


class MultiDiscreteCartPole(CartPoleVec):
    """Two action components (push, and a second ignored choice of 3): MultiDiscrete([2, 3])."""

    def __init__(self, num_envs: int) -> None:
        super().__init__(num_envs)
        self.single_action_space = spaces.MultiDiscrete([2, 3])
        self.action_space = batch_space(self.single_action_space, num_envs)

    def step(self, actions):
        actions = np.asarray(actions)
        assert actions.shape == (self.num_envs, 2) and (actions[:, 1] < 3).all()
        return super().step(actions[:, 0])


@pytest.fixture
def test_envs(isolated_env_registry) -> dict:
    made: dict = {}

    def masked(num_envs: int) -> MaskedCartPole:
        made["masked"] = MaskedCartPole(num_envs)
        return made["masked"]

    register("masked_cartpole", masked)
    register("multidiscrete_cartpole", MultiDiscreteCartPole)
    register("box_pendulum", lambda n: __import__("rlperf.envs", fromlist=["make_vec"]).make_vec(
        "gym:Pendulum-v1", n))  # fmt: skip
    return made


@pytest.mark.parametrize("kind", ["mlp", "lstm"])
def test_masked_actions_are_never_sent_to_the_env(test_envs: dict, kind: str) -> None:
    trainer = Trainer(config(3, env__env="masked_cartpole", policy__kind=kind))
    assert trainer.spec.has_mask and isinstance(trainer.update_impl, AutogradUpdate)
    trainer.train()
    taken = test_envs["masked"].taken
    assert len(taken) == 3 * NUM_STEPS
    for actions, mask in taken:
        assert mask[np.arange(NUM_ENVS), actions].all(), "a masked action reached the env"
    assert trainer.buffer.masks.dtype == torch.bool


@pytest.mark.parametrize("env", ["multidiscrete_cartpole", "box_pendulum"])
def test_multidiscrete_and_box_actions_train(test_envs: dict, env: str) -> None:
    trainer = Trainer(config(2, env__env=env))
    summary = trainer.train()
    assert all(np.isfinite(v) for v in summary["final_stats"].values())
    kind = "multidiscrete" if env.startswith("multi") else "box"
    assert trainer.spec.action.kind == kind


@pytest.mark.parametrize("threads", [1, 2])
def test_large_minibatches_take_the_native_update_only_on_one_thread(threads: int) -> None:
    """The native update runs on one thread: past NATIVE_UPDATE_MAX_SAMPLES the analytic
    update's torch matmuls on 2 threads are faster, on one thread the native update still is
    (ppo/build.py)."""
    from rlperf.ppo.build import NATIVE_UPDATE_MAX_SAMPLES

    num_envs = 4 * NATIVE_UPDATE_MAX_SAMPLES // 16 * 2  # minibatch = 2x the limit at 16 steps
    cfg = config(
        1, env__num_envs=num_envs, ppo__num_steps=16, ppo__num_minibatches=4,
        run__total_steps=num_envs * 16, run__threads=threads,
    )  # fmt: skip
    before = torch.get_num_threads()
    try:
        trainer = Trainer(cfg, profiler=Profiler())
    finally:
        torch.set_num_threads(before)
    assert trainer.batch_size // 4 > NATIVE_UPDATE_MAX_SAMPLES
    native_here = threads == 1 and native.update_available()
    assert type(trainer.update_impl) is (NativeMLPUpdate if native_here else AnalyticUpdate)
