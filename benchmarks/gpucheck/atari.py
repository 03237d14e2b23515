"""The ``atari_vs_cleanrl`` step: ``--preset atari`` on Pong and CleanRL's ``ppo_atari.py`` at once
on the same GPU for the same seconds, both return curves; and the preparation of CleanRL's
script here (``--prepare-cleanrl``), adapted to gymnasium 1.x by checked edits."""

from __future__ import annotations

import re
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucheck.core import BIG, GRACE_S, Failed, Skip, attempt, items, run_process, thin
from gpucheck.facts import missing_for
from gpucheck.training import train

if TYPE_CHECKING:
    from gpucheck.check import Check

# rlperf's Atari run (issue #47); gymnasium's module:id form imports ale_py, which registers it.
ATARI_ENV = "gym:ale_py:ALE/Pong-v5"
CLEANRL_DIR = ".cleanrl"  # ignored (.git/info/exclude), carried to the GPU machine
CLEANRL_ENV = "PongNoFrameskip-v4"  # CleanRL's own Atari ids (its wrappers skip frames)
# (why, CleanRL's text, replacement): the least that runs cleanrl/ppo_atari.py on gymnasium 1.x.
CLEANRL_EDITS = (
    (
        "gymnasium 1.x registers the ALE ids only when ale_py registers them",
        "import gymnasium as gym\n",
        "import ale_py\nimport gymnasium as gym\n\ngym.register_envs(ale_py)\n",
    ),
    (
        "gymnasium 1.0 renamed GrayScaleObservation",
        "gym.wrappers.GrayScaleObservation(env)",
        "gym.wrappers.GrayscaleObservation(env)",
    ),
    (
        "gymnasium 1.0 renamed FrameStack",
        "gym.wrappers.FrameStack(env, 4)",
        "gym.wrappers.FrameStackObservation(env, 4)",
    ),
    (
        "gymnasium 1.x's vector env resets on the step after an episode's end unless told to "
        "reset on the same step, as gymnasium 0.29's did (the script's GAE assumes it)",
        "[make_env(args.env_id, i, args.capture_video, run_name) for i in range(args.num_envs)],\n",
        "[make_env(args.env_id, i, args.capture_video, run_name) for i in range(args.num_envs)],\n"
        "        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,\n",
    ),
    (
        "gymnasium 1.x's final_info is one dict of arrays, 'episode' flagged by '_episode', not a "
        "list of dicts (the loop's body is kept)",
        '                for info in infos["final_info"]:\n',
        '                for info in [{"episode": {k: v[i] for k, v in '
        'infos["final_info"]["episode"].items()}}\n'
        '                             for i in np.flatnonzero(infos["final_info"]'
        '.get("_episode", ()))]:\n',
    ),
)


def step_atari_vs_cleanrl(check: Check) -> dict[str, Any]:
    check.needs_cuda()
    script = Path(check.args.cleanrl)
    why_rlperf = missing_for(check, "atari", ("ale_py",))
    why_cleanrl = (
        None
        if script.is_file()
        else (
            f"no {script}: python benchmarks/gpu_check.py --prepare-cleanrl (benchmarks/README.md)"
        )
    )
    why_cleanrl = why_cleanrl or missing_for(
        check, modules=("ale_py", "tyro", "cv2", "tensorboard")
    )
    if why_rlperf and not check.args.cleanrl_alone:
        cleanrl = (
            f"; CleanRL: {why_cleanrl}"
            if why_cleanrl
            else ("; CleanRL not run alone (--cleanrl-alone runs it)")
        )
        raise Skip(f"rlperf: {why_rlperf}{cleanrl}")
    seconds = min(
        check.sizes.atari_s,
        check.timeout(check.sizes.atari_s + 60) - check.sizes.startup_s - GRACE_S,
    )
    if seconds < check.sizes.atari_s / 2:
        raise Skip(f"the deadline leaves {seconds:.0f} s a side: run it alone (--only "
                   "atari_vs_cleanrl --atari-s 300)")  # fmt: skip

    def rlperf() -> dict[str, Any]:
        if why_rlperf:
            raise Skip(why_rlperf)
        args = ["--preset", "atari", "--env", ATARI_ENV, "--total-steps", str(BIG)]
        if check.sizes.atari_envs:
            args += ["--num-envs", str(check.sizes.atari_envs)]
        figures = train(check, "atari_rlperf", args, seconds + 60, wall_s=seconds)
        figures.pop("summary")
        return figures

    def cleanrl() -> dict[str, Any]:
        if why_cleanrl:
            raise Skip(why_cleanrl)
        return run_cleanrl(check, script.resolve(), seconds)

    with ThreadPoolExecutor(2) as pool:
        sides = {"rlperf": pool.submit(attempt, rlperf), "cleanrl": pool.submit(attempt, cleanrl)}
        results = {name: future.result() for name, future in sides.items()}
    figures = items(results)
    figures.update(
        {
            "seconds_each": round(seconds, 1),
            "concurrent": True,
            "envs": {"rlperf": ATARI_ENV, "cleanrl": CLEANRL_ENV},
        }
    )
    return figures


# "episodic_return=-21.0" (a numpy scalar), "[-21.]" (an array, gymnasium 0.29's CleanRL) or
# "np.float32(-21.0)" (a numpy 2 repr).
EPISODE = re.compile(
    r"global_step=(\d+), episodic_return=(?:np\.float\d+\()?\[?(-?\d[\d.]*(?:e[-+]?\d+)?)"
)
SPS_LINE = re.compile(r"^SPS: (\d+)", re.M)


def run_cleanrl(check: Check, script: Path, seconds: float) -> dict[str, Any]:
    """CleanRL's script for ``seconds`` after its start-up allowance (it has no time limit of
    its own: it gets SIGINT then), its episode returns parsed from its output."""
    argv = check.python(
        str(script), "--env-id", CLEANRL_ENV, "--total-timesteps", str(BIG), "--seed", "1"
    )
    batch = 8 * 128  # CleanRL's 8 envs x 128 steps
    if check.sizes.atari_envs:
        argv += ["--num-envs", str(check.sizes.atari_envs), "--num-steps", "32"]
        batch = check.sizes.atari_envs * 32
    if not check.cuda:
        argv.append("--no-cuda")
    cwd = check.work / "cleanrl"
    cwd.mkdir(exist_ok=True)
    fin = run_process(
        argv, seconds + check.sizes.startup_s, check.log("atari_cleanrl"), check.env, cwd=cwd
    )
    text = fin.log.read_text(errors="replace")
    episodes = [(int(s), float(r)) for s, r in EPISODE.findall(text)]
    sps = [int(x) for x in SPS_LINE.findall(text)]
    figures: dict[str, Any] = {
        "command": shlex.join(argv[1:]),
        "exit": fin.rc,
        "process_s": round(fin.seconds, 2),
        "iterations": len(sps),
    }
    if not sps:
        figures["log_tail"] = fin.tail()
        raise Failed(f"CleanRL finished no iteration (exit {fin.rc})", figures)
    last = [r for _, r in episodes[-100:]]
    figures.update(
        {
            "sps": sps[-1],
            "steps": len(sps) * batch,  # every iteration prints its SPS
            "trained_s": round(len(sps) * batch / sps[-1], 1),  # CleanRL's own SPS clock
            "episodes": len(episodes),
            "mean_return_last_100": round(sum(last) / len(last), 2) if last else None,
            "curve": thin([list(e) for e in episodes], 300),
        }
    )
    return figures


def prepare_cleanrl(source: Path, dest: Path) -> None:
    """CleanRL's ppo_atari.py (edited by :data:`CLEANRL_EDITS`) and its atari_wrappers.py into
    ``dest``, from ``source``: CleanRL's checkout, or a bare git directory (the search tool's
    fetch of github:vwxyzjn/cleanrl)."""

    def read(path: str) -> str:
        if (source / path).is_file():
            return (source / path).read_text()
        return subprocess.run(
            ["git", "--git-dir", str(source), "show", f"HEAD:{path}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    git_dir = source / ".git" if (source / ".git").exists() else source
    rev = ["git", "--git-dir", str(git_dir), "rev-parse", "HEAD"]
    commit = subprocess.run(rev, capture_output=True, text=True).stdout.strip() or "unknown"
    text = adapt_cleanrl(read("cleanrl/ppo_atari.py"))
    header = (
        f"# CleanRL's cleanrl/ppo_atari.py at {commit}, adapted to gymnasium 1.x by "
        "benchmarks/gpu_check.py --prepare-cleanrl:\n"
        + "".join(f"#  - {why}\n" for why, _, _ in CLEANRL_EDITS)
    )
    (dest / "cleanrl_utils").mkdir(parents=True, exist_ok=True)
    (dest / "ppo_atari.py").write_text(header + text)
    (dest / "cleanrl_utils" / "__init__.py").write_text("")
    (dest / "cleanrl_utils" / "atari_wrappers.py").write_text(
        read("cleanrl_utils/atari_wrappers.py")
    )
    print(f"wrote {dest / 'ppo_atari.py'} (CleanRL {commit}) and its cleanrl_utils/")


def adapt_cleanrl(text: str) -> str:
    """``text`` with each of :data:`CLEANRL_EDITS`; ValueError where its text is not there
    exactly once (another version of the script)."""
    for why, old, new in CLEANRL_EDITS:
        if text.count(old) != 1:
            raise ValueError(
                f"ppo_atari.py has {text.count(old)} of {old.strip()!r} ({why}): "
                "another version than CleanRL's master of 2025-2026"
            )
        text = text.replace(old, new)
    return text
