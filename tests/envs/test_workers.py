"""The multiprocess backend against the serial envs, step for step, and its failure modes.

The reference for ``W`` workers is ``W`` serial envs of ``num_envs / W`` each, reset with the
seeds the workers use (``seed + w * envs_per_worker``) and stepped with the same action slices.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from faulty_envs import FailingCartPole  # tests/envs/, on sys.path under pytest

from rlperf.envs import make_vec, register, unregister
from rlperf.envs.spec import read_action_mask
from rlperf.envs.workers import ApiUsageError, MultiprocessVecEnv, WorkerError
from rlperf.envs.workers.layout import env_layout
from rlperf.envs.workers.pool import RowBatch, probe

SEED = 5
STEPS = 40
# name -> (num_envs, options): small, but every env's episodes end within STEPS somewhere.
ENVS = {
    "cartpole": (4, {"max_episode_steps": 15}),
    "catch": (4, {}),
    "petri": (4, {}),
    "robots": (2, {"obs_mode": "symbolic", "board_size": 5, "max_steps": 6}),
    "grid": (2, {"map_size": 16, "num_agents": 3, "max_steps": 12}),
    "gym:CartPole-v1": (4, {}),
}


@pytest.fixture(autouse=True)
def _no_orphans(no_orphans):
    """Every test here leaves exactly the child processes it found."""


class ShardedSerial:
    """The slow, obviously right reference: the workers' shares stepped one after another."""

    def __init__(self, name: str, num_envs: int, workers: int, options: dict) -> None:
        self.per = num_envs // workers
        self.envs = [make_vec(name, self.per, **options) for _ in range(workers)]

    def reset(self, seed: int):
        outs = [e.reset(seed=seed + w * self.per) for w, e in enumerate(self.envs)]
        masks = [read_action_mask(e, o[1]) for e, o in zip(self.envs, outs, strict=True)]
        return np.concatenate([o[0] for o in outs]), _cat(masks)

    def step(self, actions: np.ndarray):
        rows = self.envs[0].num_envs
        outs = [e.step(actions[w * rows : (w + 1) * rows]) for w, e in enumerate(self.envs)]
        obs, rew, term, trunc = (np.concatenate([o[i] for o in outs]) for i in range(4))
        finals = [_finished(e, o) for e, o in zip(self.envs, outs, strict=True)]
        finals = tuple(np.concatenate(parts) for parts in zip(*finals, strict=True))
        masks = [read_action_mask(e, o[4]) for e, o in zip(self.envs, outs, strict=True)]
        return obs, rew, term, trunc, finals, _cat(masks)

    def teacher(self) -> np.ndarray:
        return np.concatenate([e.make_teacher()(e._observe()) for e in self.envs])


def _cat(masks):
    return None if masks[0] is None else np.concatenate(masks)


def _finished(env, out):
    obs, infos = out[0], out[4]
    if not infos or "_final_obs" not in infos:
        z = np.zeros(env.num_envs, bool)
        return z, np.zeros_like(obs), z, np.zeros(env.num_envs), np.zeros(env.num_envs, np.int64)
    return (infos["_final_obs"], np.asarray(infos["final_obs"]), infos["_episode"],
            infos["episode"]["r"], infos["episode"]["l"])  # fmt: skip


def random_actions(env, mask, rng):
    if mask is not None:  # a uniformly random valid action per row
        return np.argmax(rng.random(mask.shape) * mask, axis=1)
    return np.stack([env.single_action_space.sample() for _ in range(env.num_envs)])


def check_step(t, got, want):
    obs, rew, term, trunc, infos = got
    w_obs, w_rew, w_term, w_trunc, (flags, finals, ep_flags, ep_r, ep_l), w_mask = want
    np.testing.assert_array_equal(obs, w_obs, err_msg=f"obs at step {t}")
    np.testing.assert_array_equal(rew, w_rew.astype(np.float32), err_msg=f"rewards at step {t}")
    np.testing.assert_array_equal(term, w_term, err_msg=f"terminations at step {t}")
    np.testing.assert_array_equal(trunc, w_trunc, err_msg=f"truncations at step {t}")
    if flags.any():
        np.testing.assert_array_equal(infos["_final_obs"], flags, err_msg=f"step {t}")
        np.testing.assert_array_equal(infos["final_obs"][flags], finals[flags])
        np.testing.assert_array_equal(infos["_episode"], ep_flags)
        np.testing.assert_array_equal(infos["episode"]["r"][ep_flags], ep_r[ep_flags])
        np.testing.assert_array_equal(infos["episode"]["l"][ep_flags], ep_l[ep_flags])
    else:
        assert "_final_obs" not in infos or not infos["_final_obs"].any(), f"step {t}"
    if w_mask is not None:
        np.testing.assert_array_equal(infos["action_mask"], w_mask, err_msg=f"mask at step {t}")
    return bool(flags.any())


def check_against_reference(env: MultiprocessVecEnv, ref: ShardedSerial) -> None:
    """Reset both with SEED, then STEPS random steps: every output equal, step for step, and
    at least one episode ended (so the final-obs path was compared too)."""
    obs, infos = env.reset(seed=SEED)
    w_obs, w_mask = ref.reset(SEED)
    np.testing.assert_array_equal(obs, w_obs)
    mask = read_action_mask(env, infos)
    assert (mask is None) == (w_mask is None)
    rng, episodes_ended = np.random.default_rng(0), 0
    for t in range(STEPS):
        actions = random_actions(env, w_mask, rng)
        want = ref.step(actions)
        episodes_ended += check_step(t, env.step(actions), want)
        w_mask = want[5]
    assert episodes_ended, "no episode ended: the final-obs path went untested"


@pytest.mark.parametrize("name", list(ENVS))
def test_sync_equals_serial_shards_bit_for_bit(name):
    num_envs, options = ENVS[name]
    env = MultiprocessVecEnv(name, num_envs, 2, seed=SEED, options=options)
    ref = ShardedSerial(name, num_envs, 2, options)
    try:
        check_against_reference(env, ref)
    finally:
        env.close()


# One worker is the serial env; gymnasium seeds sub-env i with seed + i, and the workers' seeds
# continue that numbering, so a gym id equals the serial backend with any worker count.
@pytest.mark.parametrize(("name", "workers"), [("cartpole", 1), ("gym:CartPole-v1", 2)])
def test_equals_the_serial_backend(name, workers):
    env = MultiprocessVecEnv(name, 4, workers, seed=SEED)
    serial = make_vec(name, 4, seed=SEED)
    try:
        np.testing.assert_array_equal(env.reset(seed=SEED)[0], serial.reset(seed=SEED)[0])
        rng = np.random.default_rng(1)
        for t in range(STEPS):
            a = rng.integers(0, 2, 4)
            got, want = env.step(a), serial.step(a)
            for i in range(4):
                np.testing.assert_array_equal(got[i], want[i], err_msg=f"step {t} output {i}")
    finally:
        env.close()


def test_state_round_trip_continues_exactly():
    env = MultiprocessVecEnv("catch", 4, 2, seed=SEED)
    try:
        env.reset(seed=SEED)
        saved = env.get_state()
        actions = [np.array([t % 3, 1, 2, 0]) for t in range(12)]
        first = [env.step(a)[0].copy() for a in actions]
        env.set_state(saved)
        again = [env.step(a)[0].copy() for a in actions]
        for t, (x, y) in enumerate(zip(first, again, strict=True)):
            np.testing.assert_array_equal(x, y, err_msg=f"step {t}")
        with pytest.raises(ValueError, match="6 workers cannot be restored into 2"):
            env.set_state({"workers": saved["workers"] * 3})
    finally:
        env.close()


def test_grid_teacher_runs_in_the_workers():
    num_envs, options = ENVS["grid"]
    env = MultiprocessVecEnv("grid", num_envs, 2, seed=SEED, options=options)
    ref = ShardedSerial("grid", num_envs, 2, options)
    try:
        obs, _ = env.reset(seed=SEED)
        ref.reset(SEED)
        teacher = env.make_teacher()
        for t in range(10):
            actions = teacher(obs)
            np.testing.assert_array_equal(actions, ref.teacher(), err_msg=f"step {t}")
            obs = env.step(actions)[0]
            ref.step(actions)
        with pytest.raises(ValueError, match="obs must be"):
            teacher(obs[:1])
    finally:
        env.close()


def test_async_batches_are_whole_workers_and_follow_each_env():
    """Batches of ready workers, each env's trajectory exactly its serial shard's, whatever the
    order the workers finish in (actions are a function of the observation)."""
    env = MultiprocessVecEnv("cartpole", 8, 4, batch_size=4, seed=SEED)
    ref = ShardedSerial("cartpole", 8, 4, {})
    ref.reset(SEED)
    try:
        env.async_reset(seed=SEED)
        steps = np.zeros(8, int)
        history: dict[int, list[np.ndarray]] = {r: [] for r in range(8)}
        while steps.min() < 20:
            obs, rewards, term, trunc, infos, env_ids = env.recv()
            assert len(env_ids) == 4 and np.all(env_ids.reshape(-1, 2)[:, 1] % 2 == 1)
            for i, r in enumerate(env_ids):
                history[r].append(obs[i].copy())
            steps[env_ids] += 1
            env.send((obs[:, 2] > 0).astype(np.int64))
        # The pool keeps only consecutive workers' batches (any others are built per call).
        assert all(b.consecutive for b in env._batches.values())
        for w, shard in enumerate(ref.envs):
            rows = range(2 * w, 2 * w + 2)
            n = min(len(history[r]) for r in rows)
            want = [shard.state.astype(np.float32).copy()]
            for _ in range(n - 1):
                want.append(shard.step((want[-1][:, 2] > 0).astype(np.int64))[0].copy())
            for k in range(n):
                got = np.stack([history[r][k] for r in rows])
                np.testing.assert_array_equal(got, want[k], err_msg=f"worker {w} step {k}")
    finally:
        env.close()


@pytest.mark.parametrize("workers", [(1, 2), (3,), (0, 1, 2, 3), (0, 2), (3, 1)])
def test_row_batches_read_their_workers_rows(workers):
    """A batch's arrays equal plain indexing of its workers' rows (the reference), now and after
    the shared arrays change; consecutive workers' are views of the shared block (no copy)."""
    row_ids = np.arange(12).reshape(4, 3)
    views = {"obs": np.arange(24.0).reshape(12, 2), "rewards": np.zeros(12, np.float32)}
    batch = RowBatch(workers, row_ids, views, frozenset(views))
    rows = np.concatenate([row_ids[w] for w in workers])
    np.testing.assert_array_equal(batch.env_ids, rows)
    for step in range(2):
        views["obs"] += 100.0 * step
        np.testing.assert_array_equal(batch["obs"], views["obs"][rows])
        np.testing.assert_array_equal(batch["rewards"], views["rewards"][rows])
    consecutive = list(workers) == list(range(workers[0], workers[0] + len(workers)))
    assert batch.consecutive == consecutive
    assert np.shares_memory(batch["obs"], views["obs"]) == consecutive
    with pytest.raises(ValueError):  # read-only: the batch is built once and kept
        batch.env_ids[0] = 0


@pytest.mark.parametrize("name", ["grid", "cartpole"])
def test_the_layout_names_its_row_arrays(name):
    """Every array of one entry per row is named in ``row_arrays`` (RowBatch slices those),
    every other array has one entry per worker; with a mask and a teacher (the grid) too."""
    shape = probe(name, dict(ENVS[name][1]))
    rows, workers = 12 * shape.rows_per_env, 3
    layout = env_layout(shape, rows, workers)
    for spec in layout.arrays:
        assert spec.shape[0] == (rows if spec.name in layout.row_arrays else workers), spec.name
    assert {"obs", "actions", "final_obs"} <= layout.row_arrays
    assert ("teacher" in layout.row_arrays) == shape.has_teacher


def test_call_order_is_checked():
    env = MultiprocessVecEnv("cartpole", 4, 2, batch_size=2, seed=SEED)
    try:
        env.reset(seed=1)
        with pytest.raises(ApiUsageError, match="no step in flight"):
            env.recv()  # EnvPool and PufferLib would wait forever
        env.send(np.zeros(4, np.int64))
        with pytest.raises(ApiUsageError, match="not waiting for actions"):
            env.send(np.zeros(4, np.int64))
        with pytest.raises(ApiUsageError, match="every env waiting"):
            env.step(np.zeros(4, np.int64))
        *_, first = env.recv()
        with pytest.raises(ValueError, match=r"must be a \(2,\) array.*got shape \(3,\)"):
            env.send(np.zeros(3, np.int64))  # a bad batch, not a call out of order
        with pytest.raises(ApiUsageError, match="whole workers"):
            env.send(np.zeros(1, np.int64), env_ids=first[:1])
        *_, second = env.recv()  # the other worker: both now wait for actions
        assert sorted([*first, *second]) == [0, 1, 2, 3]
        env.send(np.zeros(2, np.int64), env_ids=second)  # the first stays parked
        *_, third = env.recv()
        np.testing.assert_array_equal(third, second)
        with pytest.raises(ApiUsageError, match="no step in flight"):
            env.recv()
    finally:
        env.close()
    with pytest.raises(ApiUsageError, match="closed"):
        env.step(np.zeros(4, np.int64))


@pytest.fixture
def failing_env():
    register("failing_cartpole", FailingCartPole)
    yield "failing_cartpole"
    unregister("failing_cartpole")


def test_a_raising_env_names_the_worker_its_envs_and_the_error(failing_env):
    env = MultiprocessVecEnv(failing_env, 4, 2, seed=SEED, options={"fail_seed": SEED + 2})
    pids = env.pids
    start = time.monotonic()
    with pytest.raises(WorkerError) as caught:
        for _ in range(5):
            env.step(np.zeros(4, np.int64))
    assert time.monotonic() - start < 2.0
    message = str(caught.value)
    assert "worker 1 (envs 2..3 of failing_cartpole)" in message
    assert "RuntimeError: boom at step 3" in message and "faulty_envs.py" in message
    assert "\n" not in message
    assert not any(_alive(p) for p in pids)


def test_a_killed_worker_is_reported_within_two_seconds():
    env = MultiprocessVecEnv("gym:CartPole-v1", 4, 2, seed=SEED)
    env.step(np.zeros(4, np.int64))
    os.kill(env.pids[1], signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(WorkerError, match=r"worker 1 .* died \(killed by signal 9\)"):
        for _ in range(1000):
            env.step(np.zeros(4, np.int64))
    assert time.monotonic() - start < 2.0


def test_workers_run_one_thread():
    env = MultiprocessVecEnv("cartpole", 4, 2, seed=SEED)
    try:
        for _ in range(3):
            env.step(np.zeros(4, np.int64))
        assert [psutil.Process(p).num_threads() for p in env.pids] == [1, 1]
        times = env.worker_times()
        assert len(times) == 2 and all(t["busy_s"] > 0 and t["idle_s"] > 0 for t in times)
    finally:
        env.close()


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this OS")
def test_pinned_workers_each_keep_their_own_core():
    cores = sorted(os.sched_getaffinity(0))
    env = MultiprocessVecEnv("cartpole", 6, 3, seed=SEED, pin_cores=True)
    try:
        env.step(np.zeros(6, np.int64))
        pinned = [os.sched_getaffinity(p) for p in env.pids]
        assert pinned == [{cores[w % len(cores)]} for w in range(3)]  # wraps past the cores
    finally:
        env.close()
    unpinned = MultiprocessVecEnv("cartpole", 4, 2, seed=SEED)
    try:
        assert [os.sched_getaffinity(p) for p in unpinned.pids] == [set(cores)] * 2
    finally:
        unpinned.close()


PARENT = textwrap.dedent(
    """
    import faulthandler, signal, sys, time
    import numpy as np
    from rlperf.envs.workers import MultiprocessVecEnv
    if __name__ == "__main__":
        faulthandler.register(signal.SIGUSR1)  # the test asks where it is stuck, if it is
        env = MultiprocessVecEnv("cartpole", 4, 2, seed=1)
        print(*env.pids, flush=True)
        try:
            while True:
                env.step(np.zeros(4, np.int64))
                time.sleep(0.001)
        except KeyboardInterrupt:
            env.close()
            print("closed", flush=True)
    """
)


def _start_parent(tmp_path: Path) -> tuple[subprocess.Popen, list[int]]:
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)  # fmt: skip
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 2
    return proc, pids


def _alive(pid: int) -> bool:
    """Running (not a zombie). A process may exit between any two psutil calls: one call, and
    its disappearance read as gone."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _gone(pids: list[int], within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            return True
        time.sleep(0.05)
    return False


def _in_group(process: psutil.Process, pgid: int) -> bool:
    try:
        return os.getpgid(process.pid) == pgid
    except (ProcessLookupError, psutil.Error):
        return False


def test_workers_exit_when_the_trainer_is_killed(tmp_path):
    proc, pids = _start_parent(tmp_path)
    try:
        proc.kill()
        proc.wait()
        assert _gone(pids, 3.0), "workers outlived a SIGKILLed parent"
    finally:
        for p in pids:
            if psutil.pid_exists(p):
                os.kill(p, signal.SIGKILL)


# A bound for a hang, not for speed: close() takes ~0.1 s here, but this test failed twice in
# full suites on a box busy with benchmarks (10 s then) and never in 100+ runs alone or beside
# busy loops; if it ever trips again, the failure says where the parent was and who held on.
CTRL_C_EXIT_S = 30


def test_ctrl_c_closes_every_worker(tmp_path):
    proc, pids = _start_parent(tmp_path)
    try:
        time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole process group
        try:
            out, err = proc.communicate(timeout=CTRL_C_EXIT_S)
        except subprocess.TimeoutExpired:
            # Say who held on: the parent itself (and where: faulthandler's stacks on SIGUSR1),
            # or a child keeping its stdout open.
            group = [(p.pid, p.name(), p.status(), p.cmdline()[-1:]) for p in psutil.process_iter()
                     if _in_group(p, proc.pid)]  # fmt: skip
            alive = proc.poll() is None
            if alive:
                os.kill(proc.pid, signal.SIGUSR1)
                time.sleep(1.0)
            os.killpg(proc.pid, signal.SIGKILL)
            try:
                _, err = proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                err = "(stderr still held open)"
            pytest.fail(f"no exit within {CTRL_C_EXIT_S} s of Ctrl-C; parent alive: {alive}; "
                        f"its process group: {group}; workers: {pids}; "
                        f"stderr: {err[-3000:]}")  # fmt: skip
        assert "closed" in out, err
        assert _gone(pids, 2.0)
    finally:
        if proc.poll() is None:
            proc.kill()


# -- the inline worker: worker 0 in the trainer's process -------------------------------------
@pytest.mark.parametrize("name", ["cartpole", "grid", "gym:CartPole-v1"])
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("spin_us", [0.0, 300.0])  # 300: the trainer's automatic spin here
def test_inline_worker_equals_serial_shards_bit_for_bit(name, workers, spin_us):
    num_envs, options = ENVS[name]
    env = MultiprocessVecEnv(name, num_envs, workers, seed=SEED, options=options, inline=True,
                             spin_us=spin_us)  # fmt: skip
    ref = ShardedSerial(name, num_envs, workers, options)
    try:
        assert len(env.pids) == workers - 1  # worker 0 is this process
        check_against_reference(env, ref)
        assert env.worker_times()[0]["busy_s"] > 0
    finally:
        env.close()


def test_inline_worker_state_teacher_and_async():
    num_envs, options = ENVS["grid"]
    env = MultiprocessVecEnv("grid", num_envs, 2, seed=SEED, options=options, inline=True)
    ref = ShardedSerial("grid", num_envs, 2, options)
    try:
        obs, _ = env.reset(seed=SEED)
        ref.reset(SEED)
        saved = env.get_state()
        teacher = env.make_teacher()
        first = []
        for t in range(8):
            actions = teacher(obs)
            np.testing.assert_array_equal(actions, ref.teacher(), err_msg=f"step {t}")
            first.append(actions)
            obs = env.step(actions)[0].copy()
            ref.step(actions)
        env.set_state(saved)
        again = [env.step(a)[0].copy() for a in first]
        np.testing.assert_array_equal(again[-1], obs)
    finally:
        env.close()
    env = MultiprocessVecEnv("cartpole", 8, 4, batch_size=4, seed=SEED, inline=True)
    try:
        env.async_reset(seed=SEED)
        seen = np.zeros(8, int)
        # Until every env has come back, not a fixed count: the inline worker is ready at once,
        # and a process worker slow to wake on a busy box can miss the first few dozen recvs
        # (20 of them take a few milliseconds). The deadline only bounds a hang.
        recvs, deadline = 0, time.monotonic() + 30.0
        while (recvs < 20 or seen.min() == 0) and time.monotonic() < deadline:
            obs, *_, env_ids = env.recv()
            seen[env_ids] += 1
            recvs += 1
            env.send((obs[:, 2] > 0).astype(np.int64))
        assert seen.sum() == 4 * recvs and seen.min() > 0, seen
    finally:
        env.close()


def test_a_raising_inline_env_names_worker_zero(failing_env):
    # fail_seed SEED: the first share (seeded SEED) fails, and it is the inline one.
    env = MultiprocessVecEnv(failing_env, 4, 2, seed=SEED, options={"fail_seed": SEED},
                             inline=True)  # fmt: skip
    pids = env.pids
    with pytest.raises(WorkerError) as caught:
        for _ in range(5):
            env.step(np.zeros(4, np.int64))
    message = str(caught.value)
    assert "worker 0 (inline, envs 0..1 of failing_cartpole)" in message
    assert "RuntimeError: boom at step 3" in message and "\n" not in message
    assert not any(_alive(p) for p in pids)
