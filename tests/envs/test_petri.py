"""The Petri-net environment: firing rules on hand-worked nets, turbo == reference step for
step, masks, options and their errors, checkpoint state, and a masked PPO policy on it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rlperf.cli import main
from rlperf.config import Config
from rlperf.envs import make_vec, register
from rlperf.envs.petri import (
    DEAD_PENALTY,
    GOAL_REWARD,
    INVALID_PENALTY,
    STEP_COST,
    Net,
    ReferencePetriVec,
    TurboPetriVec,
    builtin_net,
    make_petri,
)
from rlperf.envs.spec import EnvSpec
from rlperf.ppo.trainer import Trainer

IMPLS = {"turbo": TurboPetriVec, "reference": ReferencePetriVec}
F32 = np.float32


def env_of(impl: str, net: Net, num_envs: int = 1, max_steps: int = 50, mask: bool = True):
    return IMPLS[impl](num_envs, net, mask=mask, max_steps=max_steps, max_tokens=10)


def hand_net() -> Net:
    """Places a(2), b(0), c(0), r(1), g(0).

    t0: 2a -> b          (weight 2 in)
    t1: b + r -> c + r   (r is a self-loop catalyst)
    t2: c -> 3g          (weight 3 out)
    t3: a -> .           (competes with t0 for a's tokens: a conflict)
    goal: g >= 3. Optimal plan t0, t1, t2. Firing t3 first leaves a=1: t0 is then disabled,
    t3 fires once more and the marking is dead.
    """
    transitions = {
        "t0": ({"a": 2}, {"b": 1}),
        "t1": ({"b": 1, "r": 1}, {"c": 1, "r": 1}),
        "t2": ({"c": 1}, {"g": 3}),
        "t3": ({"a": 1}, {}),
    }
    return Net.build("hand", ["a", "b", "c", "r", "g"], transitions, {"a": 2, "r": 1},
                     {"g": 3}, max_steps=10)  # fmt: skip


MARKING = slice(0, 5)


@pytest.mark.parametrize("impl", IMPLS)
def test_firing_rules_and_goal(impl: str) -> None:
    env = env_of(impl, hand_net())
    obs, infos = env.reset(seed=0)
    assert obs.shape == (1, 5 + 4 + 1) and obs.dtype == F32
    assert infos["action_mask"].tolist() == [[True, False, False, True]]
    np.testing.assert_array_equal(obs[0, MARKING], F32([0.2, 0, 0, 0.1, 0]))
    _, r, term, trunc, infos = env.step(np.array([0]))  # weight 2: both tokens of a
    assert env.marking.tolist() == [[0, 1, 0, 1, 0]] and r[0] == F32(-STEP_COST)
    assert infos["action_mask"].tolist() == [[False, True, False, False]]
    env.step(np.array([1]))  # the self-loop keeps r's token
    assert env.marking.tolist() == [[0, 0, 1, 1, 0]]
    obs, r, term, trunc, infos = env.step(np.array([2]))  # 3 tokens into g: the goal
    assert term.tolist() == [True] and not trunc[0]
    assert r[0] == F32(-STEP_COST + GOAL_REWARD)
    np.testing.assert_array_equal(infos["final_obs"][0, MARKING], F32([0, 0, 0, 0.1, 0.3]))
    assert infos["episode"]["l"].tolist() == [3] and infos["_episode"].tolist() == [True]
    # The float32 rewards summed in float64, as gymnasium's RecordEpisodeStatistics sums them.
    assert infos["episode"]["r"].dtype == np.float64
    assert infos["episode"]["r"][0] == 2 * np.float64(F32(-STEP_COST)) + np.float64(r[0])
    # SAME_STEP autoreset: the observation and the mask are the next episode's first.
    assert env.marking.tolist() == [[2, 0, 0, 1, 0]] and obs[0, -1] == 0
    assert infos["action_mask"].tolist() == [[True, False, False, True]]
    assert env.action_mask.tolist() == infos["action_mask"].tolist()


@pytest.mark.parametrize("impl", IMPLS)
def test_conflict_to_a_dead_marking(impl: str) -> None:
    env = env_of(impl, hand_net())
    env.reset()
    _, r, term, _, infos = env.step(np.array([3]))  # t3 takes a token t0 needed
    assert not term[0] and infos["action_mask"].tolist() == [[False, False, False, True]]
    _, r, term, trunc, infos = env.step(np.array([3]))
    assert term.tolist() == [True] and not trunc[0], "no transition enabled: dead"
    assert r[0] == F32(-STEP_COST - DEAD_PENALTY)
    assert infos["final_obs"][0, 5:9].tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("impl", IMPLS)
def test_invalid_action_is_a_penalised_no_op_and_time_runs_out(impl: str) -> None:
    env = env_of(impl, hand_net(), max_steps=3)
    env.reset()
    for step in range(1, 4):
        obs, r, term, trunc, infos = env.step(np.array([2]))  # t2 needs c: disabled
        assert r[0] == F32(-STEP_COST - INVALID_PENALTY) and not term[0]
        if step < 3:
            assert env.marking.tolist() == [[2, 0, 0, 1, 0]] and not trunc[0]
            assert obs[0, -1] == F32(step / 3)
    assert trunc.tolist() == [True] and infos["episode"]["l"].tolist() == [3]
    assert infos["final_obs"][0, -1] == 1.0 and obs[0, -1] == 0.0


def random_actions(rng: np.random.Generator, mask: np.ndarray) -> np.ndarray:
    """A uniformly random enabled transition per env, and a random (often disabled) one in 5%."""
    actions = (rng.random(mask.shape) * mask).argmax(1)
    wild = rng.random(len(actions)) < 0.05
    actions[wild] = rng.integers(0, mask.shape[1], int(wild.sum()))
    return actions


def assert_same_step(a: tuple, b: tuple, step: int) -> None:
    for name, x, y in zip(("obs", "rewards", "terms", "truncs"), a[:4], b[:4], strict=False):
        assert x.dtype == y.dtype and np.array_equal(x, y), f"{name} differ at step {step}"
    ia, ib = a[4], b[4]
    assert ia.keys() == ib.keys(), f"info keys differ at step {step}"
    assert np.array_equal(ia["action_mask"], ib["action_mask"]), f"mask, step {step}"
    if "episode" in ia:
        for key in ("final_obs", "_final_obs", "_episode"):
            assert np.array_equal(ia[key], ib[key]), f"{key} differ at step {step}"
        for key in ("r", "l"):
            assert np.array_equal(ia["episode"][key], ib["episode"][key]), f"{key}, {step}"


@pytest.mark.parametrize("net", ["jobshop", "manufacturing", "random:1", "random:7"])
def test_turbo_matches_the_reference_step_for_step(net: str) -> None:
    steps = 1500
    turbo = make_vec("petri", 16, seed=5, net=net)
    ref = make_vec("petri", 16, seed=5, net=net, turbo=False)
    assert isinstance(turbo, TurboPetriVec) and isinstance(ref, ReferencePetriVec)
    out_t, out_r = turbo.reset(seed=5), ref.reset(seed=5)
    assert np.array_equal(out_t[0], out_r[0])
    rng = np.random.default_rng(0)
    finished = 0
    for step in range(steps):
        actions = random_actions(rng, out_t[-1]["action_mask"])
        out_t, out_r = turbo.step(actions), ref.step(actions)
        assert_same_step(out_t, out_r, step)
        finished += int(out_t[4].get("_episode", np.zeros(1)).sum())
    assert finished > steps // 4, "episodes ended (goals, dead markings, time limits)"
    assert np.array_equal(turbo.marking, ref.marking)


def test_turbo_enabled_sets_are_the_dense_comparison() -> None:
    """The padded-arc test in turbo equals ``(marking[:, :, None] >= pre[None]).all(1)``."""
    rng = np.random.default_rng(1)
    for name in ("jobshop", "manufacturing", "random:2", "random:3"):
        net = builtin_net(name)
        env = env_of("turbo", net, num_envs=4)
        marking = rng.integers(0, 4, (256, net.num_places))
        dense = (marking[:, :, None] >= net.pre[None]).all(1)
        assert np.array_equal(env._enabled_of(marking), dense), name
        assert np.array_equal(env_of("reference", net)._enabled_of(marking[:32]), dense[:32])


def test_builtin_nets() -> None:
    sizes = {name: (builtin_net(name).num_places, builtin_net(name).num_transitions)
             for name in ("manufacturing", "jobshop")}  # fmt: skip
    assert sizes == {"manufacturing": (14, 12), "jobshop": (33, 30)}
    assert builtin_net("random:3").num_transitions >= 10
    a, b = builtin_net("random:11"), builtin_net("random:11")
    assert np.array_equal(a.pre, b.pre) and np.array_equal(a.post, b.post), "seeded"


@pytest.mark.parametrize("net", ["manufacturing", "jobshop", "random:4"])
def test_the_optimal_plan_reaches_the_goal(net: str) -> None:
    """Greedy search over the built-in nets: firing the listed plan reaches the goal."""
    loaded = builtin_net(net)
    plan = optimal_plan(loaded)
    env = env_of("turbo", loaded, max_steps=loaded.max_steps)
    env.reset()
    for i, t in enumerate(plan):
        _, r, term, _, _ = env.step(np.array([t]))
        assert term[0] == (i == len(plan) - 1) and (r[0] > 0) == term[0]


def optimal_plan(net: Net) -> list[int]:
    """Shortest firing sequence to the goal, by breadth-first search (small nets only)."""
    start = tuple(int(x) for x in net.initial)
    parent: dict[tuple, tuple] = {start: ()}
    frontier = [start]
    while frontier:
        following = []
        for m in frontier:
            for t in range(net.num_transitions):
                if all(m[p] >= w for p, w in net.inputs[t]):
                    nxt = list(m)
                    for p, w in net.inputs[t]:
                        nxt[p] -= w
                    for p, w in net.outputs[t]:
                        nxt[p] += w
                    key = tuple(nxt)
                    if key in parent:
                        continue
                    parent[key] = (m, t)
                    if all(key[p] >= k for p, k in net.goal_items):
                        plan = []
                        while parent[key]:
                            key, t = parent[key]
                            plan.append(t)
                        return plan[::-1]
                    following.append(key)
        frontier = following
    raise AssertionError("goal unreachable")


def test_optimal_lengths_of_the_documented_nets() -> None:
    assert len(optimal_plan(builtin_net("manufacturing"))) == 17
    assert len(optimal_plan(builtin_net("jobshop"))) == 18


@pytest.mark.parametrize("impl", [True, False])
def test_mask_false_publishes_no_mask(impl: bool) -> None:
    env = make_vec("petri", 4, seed=0, net="manufacturing", turbo=impl, mask=False)
    obs, infos = env.reset(seed=0)
    assert "action_mask" not in infos and env.action_mask is None
    out = env.step(np.zeros(4, dtype=np.int64))
    assert "action_mask" not in out[4] and env.action_mask is None
    assert not EnvSpec.from_env(env, infos).has_mask
    assert obs[0, 14:26].sum() > 0, "the enabled set is still observed"


def test_state_round_trip_continues_identically() -> None:
    for turbo in (True, False):
        a = make_vec("petri", 8, seed=0, net="jobshop", turbo=turbo)
        rng = np.random.default_rng(2)
        mask = a.reset(seed=0)[1]["action_mask"]
        for _ in range(7):
            mask = a.step(random_actions(rng, mask))[4]["action_mask"]
        saved = a.get_state()
        b = make_vec("petri", 8, seed=9, net="jobshop", turbo=turbo)
        b.set_state(saved)
        assert np.array_equal(b.action_mask, mask)
        for step in range(40):
            actions = random_actions(rng, mask)
            out_a, out_b = a.step(actions), b.step(actions)
            assert_same_step(out_a, out_b, step)
            mask = out_a[4]["action_mask"]


def test_default_options_and_spaces() -> None:
    env = make_vec("petri", 3)
    assert env.single_observation_space.shape == (33 + 30 + 1,)
    assert env.single_observation_space.dtype == np.float32
    assert env.single_action_space.n == 30 and env.max_steps == 64
    assert env.metadata["autoreset_mode"].name == "SAME_STEP"
    assert make_vec("petri", 2, net="jobshop", max_steps=7).max_steps == 7
    goal = make_vec("petri", 2, net="manufacturing", goal="finished:2").net.goal_items
    assert goal == ((5, 2),)


BAD_OPTIONS = [
    ({"net": "nope"}, "unknown net 'nope'"),
    ({"net": "/nonexistent.pnml"}, "no such PNML file"),
    ({"net": "random:x"}, "random:SEED"),
    ({"max_steps": 0}, "max_steps must be a positive integer"),
    ({"max_tokens": -1}, "max_tokens must be a positive integer"),
    ({"turbo": "yes"}, "turbo must be true or false"),
    ({"goal": "finished"}, "goal takes place:count"),
    ({"goal": "nowhere:1"}, "unknown place 'nowhere'"),
]


@pytest.mark.parametrize(("options", "message"), BAD_OPTIONS)
def test_bad_options_are_one_line_value_errors(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        make_vec("petri", 2, **options)
    assert len(str(info.value).splitlines()) == 1


def test_a_net_without_transitions_is_refused() -> None:
    with pytest.raises(ValueError, match="has no transitions"):
        Net.build("empty", ["a"], {}, {"a": 1}, {"a": 2}, max_steps=5)
    with pytest.raises(ValueError, match="no transition is enabled"):
        Net.build("stuck", ["a"], {"t": ({"a": 2}, {})}, {"a": 1}, {"a": 2}, max_steps=5)
    with pytest.raises(ValueError, match="num_envs"):
        make_petri(0)


def expect_usage_error(capsys: pytest.CaptureFixture, argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlperf: error: "), lines
    assert message in lines[0], lines[0]


@pytest.mark.parametrize(
    ("option", "message"),
    [("net=/nonexistent.pnml", "/nonexistent.pnml: no such PNML file"),
     ("net=jobshopp", "unknown net 'jobshopp'"), ("max_steps=0", "max_steps"),
     ("colour=red", "no option 'colour'")],
)  # fmt: skip
def test_cli_reports_bad_options_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, option: str, message: str
) -> None:
    run_dir = str(tmp_path / "r")
    argv = ["train", "--env", "petri", "--env-option", option, "--num-envs", "4",
            "--num-steps", "8", "--total-steps", "64", "--run-dir", run_dir]  # fmt: skip
    expect_usage_error(capsys, argv, message)
    assert not (tmp_path / "r").exists()


# -- a masked policy on the env ---------------------------------------------------------------
class RecordingPetri(TurboPetriVec):
    """The jobshop net, recording every action with the mask it was chosen under."""

    def __init__(self, num_envs: int) -> None:
        super().__init__(num_envs, builtin_net("jobshop"), mask=True, max_steps=64,
                         max_tokens=10)  # fmt: skip
        self.taken: list[tuple[np.ndarray, np.ndarray]] = []

    def step(self, actions):  # type: ignore[no-untyped-def]
        self.taken.append((np.asarray(actions).copy(), self.enabled.copy()))
        return super().step(actions)


@pytest.mark.parametrize("kind", ["mlp", "lstm"])
def test_masked_policy_never_fires_a_disabled_transition(isolated_env_registry, kind) -> None:
    made: dict = {}
    register("recording_petri", lambda n: made.setdefault("env", RecordingPetri(n)))
    cfg = Config()
    cfg.env.env, cfg.env.num_envs, cfg.ppo.num_steps, cfg.ppo.update_epochs = (
        "recording_petri", 8, 16, 1,
    )  # fmt: skip
    cfg.policy.kind = kind
    cfg.run.total_steps, cfg.run.threads, cfg.run.progress, cfg.run.seed = 3 * 128, 1, False, 1
    trainer = Trainer(cfg.validate())
    assert trainer.spec.has_mask
    trainer.train()
    taken = made["env"].taken
    assert len(taken) == 3 * 16
    for actions, enabled in taken:
        assert enabled[np.arange(8), actions].all(), "a disabled transition reached the env"
    assert trainer.buffer.masks.dtype == torch.bool


def test_trains_through_make_vec_options() -> None:
    cfg = Config()
    cfg.env.env, cfg.env.options = "petri", {"net": "random:3", "turbo": False}
    cfg.env.num_envs, cfg.ppo.num_steps, cfg.ppo.update_epochs = 4, 8, 1
    cfg.run.total_steps, cfg.run.threads, cfg.run.progress = 64, 1, False
    summary = Trainer(cfg.validate()).train()
    assert summary["global_step"] == 64 and np.isfinite(summary["final_stats"]["loss"])
