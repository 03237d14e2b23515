"""Ricochet Robots: batched sliding against the plain mover, the batched BFS against brute force,
generated puzzle lengths, episodes and rewards, images against the Pillow reference, symbolic
planes, determinism and resume, option errors, the profiler sections and the PNG script."""

from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
import pytest

from rlperf.envs import EnvOptionError, make_vec, registered
from rlperf.envs.registry import options_of
from rlperf.envs.robots import GOAL_REWARD, ON, STEP_COST, RobotsVec, make_robots
from rlperf.envs.robots.__main__ import main as draw_main
from rlperf.envs.robots.board import (
    DOWN,
    LEFT,
    RIGHT,
    UP,
    WALL_BITS,
    random_walls,
    slide_lengths,
)
from rlperf.envs.robots.moves import slide
from rlperf.envs.robots.puzzles import generate
from rlperf.envs.robots.reference import reference_image, reference_move
from rlperf.envs.robots.render import BoardRenderer
from rlperf.envs.robots.solver import UNREACHED, first_depths, solution_lengths
from rlperf.timing.sections import get_profiler

N, E, S, W = (int(b) for b in WALL_BITS)


def random_starts(rng: np.random.Generator, count: int, board_size: int, robots: int):
    return np.argsort(rng.random((count, board_size * board_size)), axis=1)[:, :robots]


def open_board(b: int) -> np.ndarray:
    """A ``b x b`` board with the border walled only."""
    walls = np.zeros((b, b), dtype=np.uint8)
    walls[0, :] |= N
    walls[-1, :] |= S
    walls[:, 0] |= W
    walls[:, -1] |= E
    return walls


def add_wall(walls: np.ndarray, row: int, col: int, side: int) -> None:
    """A wall on one side of a cell, mirrored onto the neighbour."""
    walls[row, col] |= side
    mirror = {N: (-1, 0, S), S: (1, 0, N), E: (0, 1, W), W: (0, -1, E)}[side]
    r, c = row + mirror[0], col + mirror[1]
    if 0 <= r < walls.shape[0] and 0 <= c < walls.shape[1]:
        walls[r, c] |= mirror[2]


# -- boards and moves -------------------------------------------------------------------------
def test_walls_are_consistent_and_bordered() -> None:
    walls = random_walls(np.random.default_rng(0), 50, 7)
    assert ((walls[:, 0] & N) != 0).all() and ((walls[:, -1] & S) != 0).all()
    assert ((walls[:, :, 0] & W) != 0).all() and ((walls[:, :, -1] & E) != 0).all()
    np.testing.assert_array_equal((walls[:, 1:] & N) != 0, (walls[:, :-1] & S) != 0)
    np.testing.assert_array_equal((walls[:, :, 1:] & W) != 0, (walls[:, :, :-1] & E) != 0)
    assert (walls[:, 1:-1, 1:-1] != 0).any()  # some inner walls


def test_hand_worked_moves() -> None:
    """5 x 5: a wall east of (2, 1); robot 0 at (2, 0), robot 1 at (2, 4), robot 2 at (4, 4)."""
    walls = open_board(5)
    add_wall(walls, 2, 1, E)
    lengths = slide_lengths(walls[None])
    robots = np.array([[10, 14, 24]])

    def move(robot: int, direction: int) -> list[int]:
        out = slide(robots, np.array([robot]), np.array([direction]), lengths, 5)
        assert out.tolist()[0] == reference_move(walls, robots[0].tolist(), robot, direction)
        return out.tolist()[0]

    assert move(0, RIGHT) == [11, 14, 24]  # stops at the wall east of (2, 1)
    assert move(0, LEFT) == [10, 14, 24]  # already at the border: goes nowhere
    assert move(1, LEFT) == [10, 12, 24]  # slides to the wall's other side
    assert move(1, DOWN) == [10, 19, 24]  # stops on top of robot 2
    assert move(2, UP) == [10, 14, 19]  # stops below robot 1
    assert move(0, UP) == [0, 14, 24]


@pytest.mark.parametrize("board_size,robots", [(4, 1), (6, 3), (9, 4)])
def test_slide_matches_reference_mover(board_size: int, robots: int) -> None:
    rng = np.random.default_rng(board_size)
    count = 400
    walls = random_walls(rng, count, board_size)
    lengths = slide_lengths(walls)
    positions = random_starts(rng, count, board_size, robots)
    for step in range(6):  # keep moving the same boards: robots bunch up against each other
        robot = rng.integers(0, robots, count)
        direction = rng.integers(0, 4, count)
        moved = slide(positions, robot, direction, lengths, board_size)
        for i in range(count):
            expected = reference_move(walls[i], positions[i].tolist(), robot[i], direction[i])
            assert moved[i].tolist() == expected, f"step {step} board {i}"
        assert all(len(set(p)) == robots for p in moved.tolist())  # never overlap
        positions = moved


# -- the solver and the puzzles ---------------------------------------------------------------
def brute_force_depths(walls: np.ndarray, start: list[int], max_depth: int) -> np.ndarray:
    """First depth of every (robot, cell), trying every sequence of up to max_depth moves."""
    robots, cells = len(start), walls.size
    depth = np.full((robots, cells), UNREACHED)
    depth[np.arange(robots), start] = 0
    moves = [(r, d) for r in range(robots) for d in range(4)]
    for length in range(1, max_depth + 1):
        for sequence in itertools.product(moves, repeat=length):
            positions = list(start)
            for robot, direction in sequence:
                positions = reference_move(walls, positions, robot, direction)
            for robot, cell in enumerate(positions):
                if depth[robot, cell] == UNREACHED:
                    depth[robot, cell] = length
    return depth


@pytest.mark.parametrize("board_size,robots,max_depth", [(4, 2, 4), (5, 2, 3), (5, 3, 3)])
def test_solver_matches_brute_force(board_size: int, robots: int, max_depth: int) -> None:
    rng = np.random.default_rng(7)
    walls = random_walls(rng, 4, board_size)
    start = random_starts(rng, 4, board_size, robots)
    depth, _ = first_depths(slide_lengths(walls), start, board_size, max_depth)
    for i in range(4):
        expected = brute_force_depths(walls[i], start[i].tolist(), max_depth)
        np.testing.assert_array_equal(depth[i], expected, err_msg=f"board {i}")


def test_generated_puzzles_have_the_asked_lengths() -> None:
    rng = np.random.default_rng(3)
    puzzles = generate(rng, 600, 8, 2, 4)
    assert len(puzzles) >= 590  # only boards whose robots cannot move yield none
    start = puzzles.robots.astype(np.int64)
    assert (start[:, 0] != start[:, 1]).all()
    assert (start != puzzles.target_cell[:, None]).all()  # the target starts uncovered
    # An independent check of the optimal length: a fresh search per puzzle.
    lengths = solution_lengths(slide_lengths(puzzles.walls), start,
                               puzzles.target_robot.astype(np.int64),
                               puzzles.target_cell.astype(np.int64), 8, 6)  # fmt: skip
    np.testing.assert_array_equal(lengths, puzzles.depth)
    counts = np.bincount(puzzles.depth, minlength=5)[1:]
    # Wanted lengths are uniform over 1..4; boards without a puzzle that long fall back to a
    # shorter one, so deep puzzles are a little rarer but every length is well represented.
    assert counts.min() >= 0.15 * len(puzzles), counts.tolist()
    assert np.bincount(puzzles.target_robot).min() >= 0.4 * len(puzzles) / 2


def test_brute_force_agrees_on_generated_puzzles() -> None:
    puzzles = generate(np.random.default_rng(11), 6, 5, 2, 3)
    for i in range(len(puzzles)):
        depth = brute_force_depths(puzzles.walls[i], puzzles.robots[i].tolist(), 3)
        assert depth[puzzles.target_robot[i], puzzles.target_cell[i]] == puzzles.depth[i]


# -- episodes ---------------------------------------------------------------------------------
def puzzle_env(max_steps: int = 5, obs_mode: str = "symbolic") -> RobotsVec:
    """Two envs; env 0 holds a hand-made puzzle: on an open 5 x 5 board, robot 1 (at (0, 0))
    must reach (4, 0): one move down. Robot 0 sits at (4, 4)."""
    env = make_robots(2, board_size=5, max_steps=max_steps, obs_mode=obs_mode, image_size=40)
    env.reset(seed=0)
    state = env.get_state()
    state["walls"][0] = open_board(5)
    state["positions"][0] = [24, 0]
    state["target_robot"][0], state["target_cell"][0], state["optimal"][0] = 1, 20, 1
    env.set_state(state)
    return env


def test_goal_terminates_with_reward_and_autoresets() -> None:
    env = puzzle_env()
    for action, cells in ((1 * 4 + RIGHT, [24, 4]), (1 * 4 + LEFT, [24, 0])):
        _, rewards, terminated, truncated, _ = env.step(np.array([action, 0]))
        assert env.positions[0].tolist() == cells
        assert rewards[0] == np.float32(-STEP_COST) and not terminated[0] and not truncated[0]
    obs, rewards, terminated, truncated, infos = env.step(np.array([1 * 4 + DOWN, 0]))
    assert terminated[0] and not truncated[0]
    assert rewards[0] == np.float32(GOAL_REWARD - STEP_COST)
    assert infos["_final_obs"][0] and infos["_episode"][0]
    assert infos["episode"]["l"][0] == 3
    assert infos["episode"]["r"][0] == pytest.approx(GOAL_REWARD - 3 * STEP_COST)
    final = infos["final_obs"][0]
    assert final[4 + 1, 4, 0] == ON and final[4 + 2 + 1, 4, 0] == ON  # robot 1 on the target
    # SAME_STEP: the returned observation is the next episode's first, from the pool.
    assert env.episode_steps[0] == 0 and 1 <= env.optimal[0] <= env.max_depth
    assert np.flatnonzero(obs[0, 4 + 2] == ON).tolist() == [env.target_cell[0]]
    assert np.flatnonzero(obs[0, 4 + 1] == ON).tolist() == [env.positions[0, 1]]


def test_truncation_at_max_steps() -> None:
    env = puzzle_env(max_steps=3)
    stuck = np.array([1 * 4 + UP, 0])  # robot 1 is against the north border: goes nowhere
    for t in range(1, 4):
        _, rewards, terminated, truncated, infos = env.step(stuck)
        assert rewards[0] == np.float32(-STEP_COST) and not terminated[0]
        assert truncated[0] == (t == 3), f"step {t}"
    assert infos["episode"]["l"][0] == 3
    assert infos["episode"]["r"][0] == pytest.approx(-3 * STEP_COST)


def test_env_steps_match_reference_mover() -> None:
    env = make_robots(64, board_size=6, num_robots=3, max_depth=2, obs_mode="symbolic")
    env.reset(seed=5)
    rng = np.random.default_rng(5)
    for step in range(40):
        before = env.positions.copy()
        actions = rng.integers(0, 12, 64)
        _, rewards, terminated, truncated, _ = env.step(actions)
        done = terminated | truncated
        for i in np.flatnonzero(~done):
            expected = reference_move(env.walls[i], before[i].tolist(), actions[i] // 4,
                                      actions[i] % 4)  # fmt: skip
            assert env.positions[i].tolist() == expected, f"step {step} env {i}"
        assert (rewards[terminated] == np.float32(GOAL_REWARD - STEP_COST)).all()
        assert (rewards[~terminated] == np.float32(-STEP_COST)).all()


# -- observations -----------------------------------------------------------------------------
def test_symbolic_planes_match_the_state() -> None:
    env = make_robots(16, board_size=6, num_robots=3, obs_mode="symbolic")
    obs, _ = env.reset(seed=2)
    assert obs.shape == (16, 4 + 3 + 2, 6, 6) and obs.dtype == np.uint8
    assert set(np.unique(obs).tolist()) == {0, ON}
    for _ in range(3):
        for i in range(16):
            planes = obs[i] == ON
            for d in range(4):
                np.testing.assert_array_equal(planes[d], (env.walls[i] & WALL_BITS[d]) != 0)
            for j in range(3):
                assert np.flatnonzero(planes[4 + j]).tolist() == [env.positions[i, j]]
            assert np.flatnonzero(planes[7]).tolist() == [env.target_cell[i]]
            target = env.positions[i, env.target_robot[i]]
            assert np.flatnonzero(planes[8]).tolist() == [target]
        obs, *_ = env.step(env.action_space.sample())


def batched_images(renderer: BoardRenderer, walls, robots, target_robot, target_cell):
    images = renderer.backgrounds(walls)
    renderer.draw_target(images, target_robot, target_cell)
    renderer.draw_robots(images, robots, target_robot, target_cell)
    return images


@pytest.mark.parametrize(
    "board_size,robots,image_size", [(8, 2, 64), (8, 4, 84), (5, 3, 50), (7, 3, 100)]
)
def test_images_match_pillow_reference(board_size: int, robots: int, image_size: int) -> None:
    """Tolerance: exact everywhere except inside the cells holding a robot or the target; in
    each of those, at most ``4 * shape_size`` pixels differ (about the pixels a shape's edge
    crosses), by at most 96 per channel. At 8 x 8 and 64 pixels that is under 1% of an
    image's pixels.

    Why: grid lines and walls are rectangles on whole pixels in both renderers and the tiles
    use Pillow's own box-filter rounding, so they are exact. Discs and stars are rasterised
    differently: Pillow's ellipse walks the curve and its polygon fill also strokes the
    outline, while the tiles sample canvas pixel centres; they disagree on about one canvas
    pixel along a shape's edge, i.e. a few of the 16 samples behind an output pixel (at most
    6/16 of the colour contrast, under 96), and only on pixels an edge crosses: a disc's edge
    crosses about 2.5 and a star's about 3.2 times its size in pixels."""
    rng = np.random.default_rng(board_size * 100 + robots)
    puzzles = generate(rng, 40, board_size, robots, 2)
    robots_at = puzzles.robots.astype(np.int64)
    free = (robots_at[:, 1:] != puzzles.target_cell[:, None]).all(1)
    move = free & (np.arange(len(puzzles)) % 3 == 0)  # some robots on the target, any colour
    robots_at[move, 0] = puzzles.target_cell[move]
    target_robot = puzzles.target_robot.astype(np.int64)
    target_cell = puzzles.target_cell.astype(np.int64)
    renderer = BoardRenderer(board_size, robots, image_size)
    images = batched_images(renderer, puzzles.walls, robots_at, target_robot, target_cell)
    g = renderer.geometry
    differing = 0
    for i in range(len(puzzles)):
        ref = reference_image(puzzles.walls[i], robots_at[i], int(target_robot[i]),
                              int(target_cell[i]), image_size).transpose(2, 0, 1)  # fmt: skip
        diff = np.abs(images[i].astype(np.int64) - ref).max(0)
        occupied = np.zeros(diff.shape, dtype=bool)
        for cell in {*robots_at[i].tolist(), int(target_cell[i])}:
            r, c = divmod(cell, board_size)
            inside = (slice(g.lo[r], g.hi[r]), slice(g.lo[c], g.hi[c]))
            occupied[inside] = True
            assert (diff[inside] > 0).sum() <= 4 * g.shape_size, f"board {i} cell {cell}"
        assert (diff[~occupied] == 0).all(), f"board {i}: grid or walls differ"
        assert diff.max() <= 96, f"board {i}: {diff.max()}"
        differing += int((diff > 0).sum())
    if (board_size, image_size) == (8, 64):
        assert differing / (len(puzzles) * image_size**2) < 0.01


def test_rgb_observations_show_the_state_through_autoresets() -> None:
    """The cached backgrounds are redrawn for every new episode: after many same-step
    autoresets each observation is still the drawing of the env's current state."""
    env = make_vec("robots", 16, seed=9, max_steps=3)
    rng = np.random.default_rng(9)
    env.reset(seed=9)
    resets = 0
    for _ in range(40):
        obs, _, terminated, truncated, _ = env.step(rng.integers(0, 8, 16))
        resets += int((terminated | truncated).sum())
        frames = env.render()
        for i in range(16):
            np.testing.assert_array_equal(obs[i].transpose(1, 2, 0), frames[i])
    assert resets > 100


def test_rgb_observations_and_render() -> None:
    """render() is gymnasium's VectorEnv.render: a tuple of every env's (H, W, 3) frame;
    render_board(i) draws one board alone, the same frame."""
    env = make_vec("robots", 6, seed=4, image_size=72)
    obs, *_ = env.step(env.action_space.sample())
    assert obs.shape == (6, 3, 72, 72) and obs.dtype == np.uint8
    assert env.render_mode == "rgb_array"
    frames = env.render()
    assert isinstance(frames, tuple) and len(frames) == env.num_envs
    assert all(f.shape == (72, 72, 3) and f.dtype == np.uint8 for f in frames)
    for i in range(6):
        np.testing.assert_array_equal(frames[i], obs[i].transpose(1, 2, 0))
        np.testing.assert_array_equal(env.render_board(i), frames[i])
    ref = reference_image(env.walls[5], env.positions[5], int(env.target_robot[5]),
                          int(env.target_cell[5]), 72)  # fmt: skip
    assert (frames[5] != ref).any(axis=2).mean() < 0.01
    symbolic = make_vec("robots", 2, seed=4, obs_mode="symbolic", image_size=40)
    assert [f.shape for f in symbolic.render()] == [(40, 40, 3)] * 2
    with pytest.raises(IndexError):
        env.render_board(6)


# -- determinism and resume -------------------------------------------------------------------
@pytest.mark.parametrize("obs_mode", ["rgb_image", "symbolic"])
def test_same_seed_same_trajectory(obs_mode: str) -> None:
    a = make_vec("robots", 32, seed=9, obs_mode=obs_mode, image_size=32)
    b = make_vec("robots", 32, seed=9, obs_mode=obs_mode, image_size=32)
    rng = np.random.default_rng(0)
    for step in range(30):
        actions = rng.integers(0, 8, 32)
        for x, y in zip(a.step(actions), b.step(actions), strict=True):
            if isinstance(x, dict):
                assert x.keys() == y.keys(), f"step {step}"
                if x:
                    np.testing.assert_array_equal(x["final_obs"], y["final_obs"])
                    np.testing.assert_array_equal(x["episode"]["r"], y["episode"]["r"])
            else:
                np.testing.assert_array_equal(x, y, err_msg=f"step {step}")
    c = make_vec("robots", 32, seed=10, obs_mode=obs_mode, image_size=32)
    assert (c.target_cell != a.target_cell).any() or (c.walls != a.walls).any()


@pytest.mark.parametrize("obs_mode", ["rgb_image", "symbolic"])
def test_get_state_set_state_resumes_bit_identically(obs_mode: str) -> None:
    def env() -> RobotsVec:  # small refill batches, so that refills happen during the run
        return RobotsVec(8, board_size=6, num_robots=2, max_depth=3, max_steps=4,
                         obs_mode=obs_mode, image_size=24, batch_boards=16)  # fmt: skip

    first = env()
    first.reset(seed=1)
    rng = np.random.default_rng(1)
    for _ in range(7):
        first.step(rng.integers(0, 8, 8))
    saved = first.get_state()
    actions = [rng.integers(0, 8, 8) for _ in range(30)]
    expected = [first.step(a) for a in actions]
    assert first.pool.generated > 16  # the run went through refills
    second = env()
    second.reset(seed=123)
    second.set_state(saved)
    for step, (a, want) in enumerate(zip(actions, expected, strict=True)):
        got = second.step(a)
        for x, y in zip(got[:4], want[:4], strict=True):
            np.testing.assert_array_equal(x, y, err_msg=f"step {step}")
        assert got[4].keys() == want[4].keys(), f"step {step}"
        if want[4]:
            np.testing.assert_array_equal(got[4]["final_obs"], want[4]["final_obs"])
            np.testing.assert_array_equal(got[4]["episode"]["r"], want[4]["episode"]["r"])


# -- options, sections, script ----------------------------------------------------------------
def test_registered_with_options() -> None:
    assert "robots" in registered()
    assert options_of("robots") == ["board_size", "num_robots", "max_depth", "max_steps",
                                    "obs_mode", "image_size"]  # fmt: skip
    env = make_vec("robots", 3, seed=0, obs_mode="symbolic", num_robots=1, max_depth=2)
    assert env.single_action_space.n == 4 and env.max_steps == 8
    assert env.single_observation_space.shape == (4 + 1 + 2, 8, 8)


@pytest.mark.parametrize(
    "options,message",
    [
        ({"obs_mode": "pixels"}, "obs_mode must be one of rgb_image, symbolic"),
        ({"board_size": 3}, "board_size must be an integer in 4..16"),
        ({"board_size": 17}, "board_size must be an integer in 4..16"),
        ({"image_size": 20}, "image_size must be an integer in 32..256"),
        ({"image_size": 300}, "image_size must be an integer in 32..256"),
        ({"num_robots": 0}, "num_robots must be an integer in 1..4"),
        ({"num_robots": 5}, "num_robots must be an integer in 1..4"),
        ({"max_depth": 0}, "max_depth must be an integer in 1..64"),
        ({"max_steps": 0}, "max_steps must be an integer >= 1"),
        ({"board_size": 4, "num_robots": 1, "max_depth": 12}, "max_depth 12 is deeper than"),
    ],
)
def test_bad_options_are_one_line_errors(options: dict, message: str) -> None:
    with pytest.raises(EnvOptionError) as e:
        make_vec("robots", 2, **options)
    text = str(e.value)
    assert message in text and "\n" not in text and text.startswith("env 'robots': ")


def test_sections_nest_under_env_step() -> None:
    profiler = get_profiler()
    env = make_vec("robots", 16, seed=0, max_steps=1)  # every step resets every env
    profiler.reset()
    with profiler.section("env_step"):
        env.step(env.action_space.sample())
    timed = profiler.totals_s()
    for name in ("reset", "reset/render/draw_grid", "reset/render/draw_walls", "move",
                 "render", "render/draw_target", "render/draw_robots"):  # fmt: skip
        assert f"env_step/{name}" in timed, name
    symbolic = make_vec("robots", 4, seed=0, obs_mode="symbolic")
    profiler.reset()
    with profiler.section("env_step"):
        symbolic.step(symbolic.action_space.sample())
    assert "env_step/observe" in profiler.totals_s()
    assert "env_step/render" not in profiler.totals_s()


def test_png_script(tmp_path, capsys) -> None:  # noqa: ANN001
    image = pytest.importorskip("PIL.Image", reason="needs the robots extra (Pillow)")

    out = tmp_path / "boards.png"
    draw_main(["--out", str(out), "--count", "3", "--seed", "2", "--image-size", "48",
               "--scale", "1"])  # fmt: skip
    assert image.open(out).size == (3 * 48 + 2 * 4, 2 * 48 + 4)
    assert capsys.readouterr().out.count("moves") == 3


def test_env_needs_no_pillow() -> None:
    code = (
        "import sys; sys.modules['PIL'] = None\n"
        "from rlperf.envs import make_vec\n"
        "env = make_vec('robots', 2, seed=0)\n"
        "env.step(env.action_space.sample()); env.render()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
