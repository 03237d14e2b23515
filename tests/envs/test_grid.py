"""The multi-agent grid: rules, windows, distance fields and teacher against the plain per-agent
references on random maps; determinism, resume, autoreset; bad options."""

from __future__ import annotations

import numpy as np
import pytest

from rlperf.envs import EnvOptionError, make_vec
from rlperf.envs.grid import (
    AGENTS,
    COL,
    GOAL,
    GOAL_AT_AGENT,
    GOAL_PER_MOVE,
    INVENTORY,
    MISSIONS,
    MOVES,
    NOOP,
    NUM_CHANNELS,
    ON,
    ROW,
    UNREACHABLE,
    GridTeacher,
    GridVec,
    make_grid,
)
from rlperf.envs.grid.distances import distance_fields
from rlperf.envs.grid.reference import (
    reference_distances,
    reference_step,
    reference_teacher,
    reference_window,
)

SMALL = "extractor_hub_12"


def mixed_actions(env: GridVec, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Half teacher, half uniform: reaches extractors, the hub and crowds (random alone
    rarely deposits)."""
    teacher = GridTeacher(env)(obs)
    random = rng.integers(0, 5, env.num_envs)
    return np.where(rng.random(env.num_envs) < 0.5, teacher, random)


def agent_cells(env: GridVec, m: int) -> set[tuple[int, int]]:
    rows = slice(m * env.num_agents, (m + 1) * env.num_agents)
    return set(zip(env.agent_row[rows].tolist(), env.agent_col[rows].tolist(), strict=True))


def obstacles(env: GridVec, m: int) -> set[tuple[int, int]]:
    """The extractors and the hub of map ``m``."""
    return {tuple(e) for e in env.extractors[m].tolist()} | {tuple(env.hub[m].tolist())}


def same_state(a: dict, b: dict) -> bool:
    return all(np.array_equal(a[k], b[k]) for k in a if k != "rng") and a["rng"] == b["rng"]


def test_registered_and_shaped() -> None:
    env = make_vec("grid", 3, seed=0, mission=SMALL, num_agents=5, obs_radius=2)
    assert (env.num_maps, env.num_agents, env.num_envs) == (3, 5, 15)
    assert env.single_observation_space.shape == (NUM_CHANNELS, 5, 5)
    assert env.single_action_space.n == 5
    obs, _ = env.reset(seed=1)
    assert obs.shape == (15, NUM_CHANNELS, 5, 5) and obs.dtype == np.uint8
    teacher = env.make_teacher()
    assert isinstance(teacher, GridTeacher) and teacher(obs).shape == (15,)
    with pytest.raises(ValueError, match="shape"):
        teacher(obs[:-1])
    with pytest.raises(ValueError, match=r"action per agent row \(3 maps x 5 agents\)"):
        env.step(np.zeros(3, np.int64))


def test_maps_are_valid() -> None:
    """Distinct free starts, extractors and the hub reachable, no pockets."""
    env = make_grid(16, mission=SMALL, num_agents=10)
    env.reset(seed=3)
    size, num_ext = env.map_size, env.num_extractors
    for m in range(env.num_maps):
        starts, blocked = agent_cells(env, m), obstacles(env, m)
        assert len(starts) == env.num_agents
        assert tuple(env.hub[m]) == (size // 2, size // 2)
        assert len(blocked) == num_ext + 1 and not starts & blocked
        assert not any(env.walls[m][c] for c in starts | blocked)
        free = ~env.walls[m]
        for cell in blocked:
            free[cell] = False
        # Every free cell reaches the hub, and every extractor is reachable.
        assert (env.dist[m][free] != UNREACHABLE).all()
        assert (env.dist[m][..., num_ext][free] != UNREACHABLE).all()


@pytest.mark.parametrize("seed", [0, 1])
def test_distance_fields_match_plain_bfs(seed: int) -> None:
    env = make_grid(4, mission="extractor_hub_30")
    env.reset(seed=seed)
    for m in range(env.num_maps):
        sources = [*map(tuple, env.extractors[m].tolist()), tuple(env.hub[m].tolist())]
        passable = ~env.walls[m]
        for cell in sources:
            passable[cell] = False
        for s, cell in enumerate(sources):
            np.testing.assert_array_equal(
                env.dist[m, ..., s], reference_distances(passable, cell), err_msg=f"{m} {s}"
            )
    # Directly, with an enclosed pocket: unreachable stays UNREACHABLE.
    passable = np.zeros((1, 6, 6), bool)
    passable[0, 1:5, 1] = passable[0, 1, 1:5] = passable[0, 3, 3] = True
    dist = distance_fields(passable, np.array([[[4, 1]]]))
    np.testing.assert_array_equal(dist[0, ..., 0], reference_distances(passable[0], (4, 1)))
    assert dist[0, 3, 3, 0] == UNREACHABLE and dist[0, 1, 4, 0] == 6


@pytest.mark.parametrize("seed", [0, 7])
def test_rules_match_reference(seed: int) -> None:
    """Moves, collisions, extraction, cooldown, deposits and rewards, step by step."""
    env = make_grid(6, mission=SMALL, num_agents=14, max_steps=1000)
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    seen = {"deposit": 0, "take": 0, "cooling": 0, "contested": 0, "blocked": 0}
    for t in range(120):
        before = env.get_state()
        actions = mixed_actions(env, obs, rng)
        obs, rewards, terminated, truncated, _ = env.step(actions)
        ref = reference_step(
            before, actions, env.priority, env.num_agents, env.capacity, env.cooldown
        )
        for key in ("agent_row", "agent_col", "inventory", "cooldown_left"):
            np.testing.assert_array_equal(getattr(env, key), ref[key], err_msg=f"{key} t={t}")
        np.testing.assert_array_equal(rewards, ref["rewards"], err_msg=f"rewards t={t}")
        assert rewards.dtype == np.float32 and not terminated.any() and not truncated.any()
        np.testing.assert_array_equal(env.ready, env.cooldown_left == 0)
        # What happened, so the test is known to cover it.
        target = np.stack([before["agent_row"], before["agent_col"]], 1) + MOVES[actions]
        maps = np.repeat(np.arange(env.num_maps), env.num_agents)
        keys = ((maps * 100 + target[:, 0]) * 100 + target[:, 1])[actions > 0]
        seen["contested"] += len(keys) - len(np.unique(keys))
        seen["deposit"] += int((rewards > 0).sum())
        seen["take"] += int((env.inventory > before["inventory"]).sum())
        seen["cooling"] += int((env.cooldown_left > 0).sum())
        stayed = (env.agent_row == before["agent_row"]) & (env.agent_col == before["agent_col"])
        seen["blocked"] += int((stayed & (actions > 0)).sum())
    assert all(count > 0 for count in seen.values()), seen


def test_agents_never_overlap_and_never_leave_free_cells() -> None:
    env = make_grid(8, mission=SMALL, num_agents=30, max_steps=40)
    obs, _ = env.reset(seed=5)
    rng = np.random.default_rng(5)
    for _ in range(100):  # across two new maps
        obs, *_ = env.step(mixed_actions(env, obs, rng))
        for m in range(env.num_maps):
            cells = agent_cells(env, m)
            assert len(cells) == env.num_agents and not cells & obstacles(env, m)
            assert not any(env.walls[m][c] for c in cells)


@pytest.mark.parametrize(("radius", "goal_plane"), [(1, True), (3, True), (5, True), (3, False)])
def test_windows_match_reference_crop(radius: int, goal_plane: bool) -> None:
    env = make_grid(
        3, mission=SMALL, num_agents=12, obs_radius=radius, max_steps=25, goal_plane=goal_plane
    )
    obs, _ = env.reset(seed=radius)
    assert obs.shape[1] == (NUM_CHANNELS if goal_plane else GOAL)
    rng = np.random.default_rng(radius)
    for t in range(30):  # includes a new map at step 25
        state = env.get_state()
        for row in range(env.num_envs):
            want = reference_window(
                state, row, env.num_agents, radius, env.capacity, goal_plane=goal_plane
            )
            np.testing.assert_array_equal(obs[row], want, err_msg=f"row {row} t={t}")
        assert (obs[:, AGENTS, radius, radius] == 0).all()
        obs, *_ = env.step(mixed_actions(env, obs, rng))
    # The constant planes decode exactly.
    np.testing.assert_array_equal(obs[:, ROW, 0, 0] // env.position_step, env.agent_row)
    np.testing.assert_array_equal(obs[:, COL, 0, 0] // env.position_step, env.agent_col)
    np.testing.assert_array_equal(obs[:, INVENTORY, 0, 0] // env.inventory_step, env.inventory)
    assert obs[:, :AGENTS].max() == ON


@pytest.mark.parametrize("mission", [SMALL, "extractor_hub_30"])
def test_teacher_matches_plain_bfs_teacher(mission: str) -> None:
    env = make_grid(3, mission=mission, num_agents=8)
    obs, _ = env.reset(seed=11)
    teacher = GridTeacher(env)
    rng = np.random.default_rng(11)
    for t in range(60):
        actions = teacher(obs)
        assert actions.dtype == np.int64 and actions.shape == (env.num_envs,)
        want = reference_teacher(env.get_state(), env.num_agents, env.capacity)
        np.testing.assert_array_equal(actions, want, err_msg=f"t={t}")
        random = rng.integers(0, 5, env.num_envs)
        obs, *_ = env.step(np.where(rng.random(env.num_envs) < 0.3, random, actions))


def test_teacher_action_is_readable_from_the_goal_plane() -> None:
    """Every decision of the teacher is in the student's own observation: the first of up,
    down, left, right whose GOAL value is one move below the agent's, no-op without a goal."""
    # Many agents on few extractors: some find none ready and carry nothing (no goal).
    env = make_grid(4, mission=SMALL, num_agents=12)
    obs, _ = env.reset(seed=5)
    teacher, rng = GridTeacher(env), np.random.default_rng(5)
    r = env.obs_radius
    neighbours = [(r - 1, r), (r + 1, r), (r, r - 1), (r, r + 1)]  # up, down, left, right
    seen_goal = seen_none = 0
    for _ in range(80):
        actions = teacher(obs)
        goal = obs[:, GOAL].astype(np.int64)
        has_goal = goal[:, r, r] == GOAL_AT_AGENT
        assert ((goal[:, r, r] == 0) | has_goal).all()
        closer = np.stack(
            [goal[:, y, x] == GOAL_AT_AGENT - GOAL_PER_MOVE for y, x in neighbours], axis=1
        )
        from_plane = np.where(closer.any(1), closer.argmax(1) + 1, NOOP)
        from_plane[~has_goal] = NOOP
        np.testing.assert_array_equal(actions, from_plane)
        seen_goal, seen_none = seen_goal + has_goal.sum(), seen_none + (~has_goal).sum()
        random = rng.integers(0, 5, env.num_envs)
        obs, *_ = env.step(np.where(rng.random(env.num_envs) < 0.2, random, actions))
    assert seen_goal > 0 and seen_none > 0


def test_teacher_never_walks_into_a_wall_and_beats_random() -> None:
    def mean_return(policy: str) -> float:
        env = make_grid(6, mission="extractor_hub_30")
        obs, _ = env.reset(seed=2)
        teacher, rng = GridTeacher(env), np.random.default_rng(2)
        for _ in range(env.max_steps):
            if policy == "teacher":
                actions = teacher(obs)
                maps = np.repeat(np.arange(env.num_maps), env.num_agents)
                dy, dx = MOVES[actions].T
                hit = env.walls[maps, env.agent_row + dy, env.agent_col + dx]
                assert not hit.any()
            else:
                actions = rng.integers(0, 5, env.num_envs)
            obs, _, _, truncated, infos = env.step(actions)
        assert truncated.all()
        return float(infos["episode"]["r"].mean())

    teacher, random = mean_return("teacher"), mean_return("random")
    assert teacher > 5 * max(random, 1.0), (teacher, random)


def test_same_seed_same_run_and_resume_is_bit_identical() -> None:
    def run(env: GridVec, steps: int, seed: int) -> list:
        rng = np.random.default_rng(seed)
        out = []
        for _ in range(steps):
            obs, rewards, _, truncated, infos = env.step(rng.integers(0, 5, env.num_envs))
            out.append((obs, rewards, truncated, infos.get("final_obs")))
        return out

    def same(a: list, b: list) -> bool:
        pairs = (pair for s, t in zip(a, b, strict=True) for pair in zip(s, t, strict=True))
        return all((x is None and y is None) or np.array_equal(x, y) for x, y in pairs)

    a = make_vec("grid", 4, seed=9, mission=SMALL, max_steps=15)
    b = make_vec("grid", 4, seed=9, mission=SMALL, max_steps=15)
    assert same_state(a.get_state(), b.get_state())
    assert same(run(a, 40, 1), run(b, 40, 1))  # crosses two new maps
    other = make_vec("grid", 4, seed=10, mission=SMALL, max_steps=15)
    assert not np.array_equal(other.walls, a.walls)

    saved, saved_dist = a.get_state(), a.dist.copy()
    tail = run(a, 30, 2)
    resumed = make_vec("grid", 4, seed=123, mission=SMALL, max_steps=15)
    resumed.set_state(saved)
    assert same_state(resumed.get_state(), saved)
    np.testing.assert_array_equal(resumed.dist, saved_dist)
    assert same(run(resumed, 30, 2), tail)


def test_truncation_starts_a_new_map_same_step() -> None:
    env = make_grid(5, mission=SMALL, max_steps=12)
    obs, _ = env.reset(seed=4)
    teacher = GridTeacher(env)
    total = np.zeros(env.num_envs)
    walls = env.walls.copy()
    for t in range(12):
        last = obs
        obs, rewards, terminated, truncated, infos = env.step(teacher(obs))
        total += rewards
        assert not terminated.any()
        assert truncated.all() == (t == 11) and truncated.any() == (t == 11)
    assert infos["_final_obs"].all() and infos["_episode"].all()
    np.testing.assert_array_equal(infos["episode"]["r"], total.astype(np.float32))
    assert (infos["episode"]["l"] == 12).all()
    assert infos["final_obs"].shape == obs.shape and not np.array_equal(infos["final_obs"], last)
    assert not np.array_equal(env.walls, walls)
    assert (env.map_steps == 0).all() and (env.inventory == 0).all() and env.ready.all()
    state = env.get_state()
    for row in range(env.num_envs):
        want = reference_window(state, row, env.num_agents, env.obs_radius, env.capacity)
        np.testing.assert_array_equal(obs[row], want)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"mission": "extractor_hub_99"}, ["unknown mission", *MISSIONS]),
        ({"num_agents": 1000}, ["num_agents 1000", "at most"]),
        ({"num_agents": 0}, ["num_agents"]),
        ({"map_size": 9}, ["map_size", "in 10..64"]),
        ({"map_size": 65}, ["map_size"]),
        ({"map_size": 10, "mission": "extractor_hub_30"}, ["extractors do not fit"]),
        ({"obs_radius": 0}, ["obs_radius", "in 1..15"]),
        ({"obs_radius": 16}, ["obs_radius"]),
        ({"max_steps": 0}, ["max_steps"]),
        ({"goal_plane": "yes"}, ["goal_plane", "true or false"]),
    ],
)
def test_bad_options_are_one_line_errors(options: dict, words: list[str]) -> None:
    with pytest.raises(EnvOptionError) as err:
        make_vec("grid", 2, **options)
    message = str(err.value)
    assert "\n" not in message and all(w in message for w in words), message
    with pytest.raises(ValueError):  # before any work: a billion maps are never allocated
        make_grid(10**9, **options)
