"""Other people's PPO on the same GPU: LeanRL's ``torch.compile`` + CUDA-graph scripts and the
CleanRL originals they were made from, prepared here (``--prepare-cleanrl``, ``--prepare-leanrl``:
copied from their repositories into the ignored, carried ``.cleanrl/``, adapted by checked edits)
and run there for a few seconds after their first printed figure.

The edits are the least that runs each script on what the GPU machine has (gymnasium 1.x,
EnvPool 1.x, no wandb and no network); CleanRL's are the ones benchmarks/atari_sps.py and
benchmarks/mujoco_sps.py already apply, LeanRL's add the same for its copies. Their speed is
what each prints: CleanRL's ``SPS:`` (``global_step / (time.time() - start_time)`` since its
start), LeanRL's ``speed`` (steps a second since its third iteration, over the last ten in the
Atari script), logged through the stand-in for ``wandb.log`` below as one JSON line."""

from __future__ import annotations

import json
import math
import re
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucheck.busy import LogWatch
from gpucheck.core import BIG, Failed, Skip, run_process, thin
from gpucheck.facts import missing_for

if TYPE_CHECKING:
    from gpucheck.check import Check

SPS_LINE = re.compile(r"^SPS: (\d+)", re.M)  # CleanRL's figure, once an iteration
# LeanRL's, every ten iterations (after tqdm's bar, on stderr, in the same line of the log)
WANDB_LINE = re.compile(r"wandb\.log (\{[^\r\n]*\})")

# LeanRL's scripts log through wandb, which the GPU machine lacks and could not reach: a class of
# that name in its place prints each log call as one JSON line (tensors read once, as wandb
# would) and makes init a no-op.
WANDB_STANDIN = """import json as _json


class wandb:  # the GPU check's stand-in (benchmarks/gpucheck/scripts.py)
    @staticmethod
    def init(**kwargs):
        pass

    @staticmethod
    def log(data, step=None):
        row = {"step": step, **{k: float(v) for k, v in data.items()}}
        print("wandb.log " + _json.dumps(row), flush=True)
"""
WANDB_EDIT = ("import wandb\n", WANDB_STANDIN)
# LeanRL's Atari script imports gym (0.23-0.26, not installed) for its Wrapper and spaces;
# EnvPool 1.x's pools are gymnasium envs. The rest is CleanRL's EnvPool script's own edits.
LEANRL_GYM_EDIT = ("# import gymnasium as gym\nimport gym\n", "import gymnasium as gym\n")
# tensordict 0.15's to_module gives the rollout's copy of the agent Parameters that require grad
# (LeanRL was written for 2024's nightlies, whose did not): its rollout would build autograd
# graphs that the update's first backward frees, and the second fails.
INFERENCE_EDIT = (
    "    agent_inference_p.to_module(agent_inference)\n",
    "    agent_inference_p.to_module(agent_inference)\n    agent_inference.requires_grad_(False)\n",
)
# gymnasium 1.x's final_info is one dict of arrays, each entry flagged by its "_episode" mask,
# not 0.29's list of dicts (LeanRL's continuous rollout reads one episode at a time).
LEANRL_FINAL_INFO_EDIT = (
    '            for info in infos["final_info"]:\n'
    '                r = float(info["episode"]["r"].reshape(()))\n',
    '            final = infos["final_info"]\n'
    '            for i in __import__("numpy").flatnonzero(final.get("_episode", ())):\n'
    '                r = float(final["episode"]["r"][i])\n',
)


@dataclass(frozen=True)
class Script:
    """A third-party script as the check runs it."""

    file: str  # in the scripts folder (.cleanrl/)
    repo: str  # cleanrl or leanrl: which --prepare-* writes it
    source: str  # its path in that repository
    env_id: str
    flags: str  # on the GPU, after --env-id, --total-timesteps and --seed
    cpu_flags: str  # --cpu: on the CPU, a tiny batch
    modules: tuple[str, ...]  # what it imports that a machine may lack
    figure: re.Pattern[str]  # the lines it prints its speed on


SCRIPTS = {
    "leanrl_atari": Script(
        "leanrl_ppo_atari_envpool_torchcompile.py", "leanrl",
        "leanrl/ppo_atari_envpool_torchcompile.py", "Breakout-v5", "--compile --cudagraphs",
        "--no-cuda --num-envs 2 --num-steps 16 --num-minibatches 1 --update-epochs 1",
        ("envpool", "tensordict", "tyro", "tqdm"),
        WANDB_LINE,
    ),
    "cleanrl_atari": Script(
        "ppo_atari_envpool.py", "cleanrl", "cleanrl/ppo_atari_envpool.py", "Breakout-v5", "",
        "--no-cuda --num-envs 2 --num-steps 16 --num-minibatches 1 --update-epochs 1",
        ("envpool", "tyro", "tensorboard"), SPS_LINE,
    ),
    # --cudagraphs without --compile: its gae() unrolls 2,048 steps, which torch.compile takes
    # minutes over, more than the check's budget (LeanRL runs both; its run.sh).
    "leanrl_continuous": Script(
        "leanrl_ppo_continuous_action_torchcompile.py", "leanrl",
        "leanrl/ppo_continuous_action_torchcompile.py", "HalfCheetah-v5", "--cudagraphs",
        "--no-cuda --num-steps 32 --num-minibatches 1 --update-epochs 1",
        ("gymnasium", "mujoco", "tensordict", "tyro", "tqdm"), WANDB_LINE,
    ),
    "cleanrl_continuous": Script(
        "ppo_continuous_action.py", "cleanrl", "cleanrl/ppo_continuous_action.py",
        "HalfCheetah-v5", "", "--no-cuda --num-steps 32 --num-minibatches 1 --update-epochs 1",
        ("gymnasium", "mujoco", "tyro", "tensorboard"), SPS_LINE,
    ),
}  # fmt: skip


def edits_of(name: str) -> tuple[tuple[str, str], ...]:
    """(original, replacement) pairs that adapt :data:`SCRIPTS`'s ``name``. CleanRL's come from
    the benchmark scripts that run the same files on the CPU (imported here, at preparation:
    they import rlperf)."""
    from atari_sps import CLEANRL_ENVPOOL_EDITS
    from mujoco_sps import CLEANRL_EDITS as CLEANRL_CONTINUOUS_EDITS

    return {
        "cleanrl_atari": CLEANRL_ENVPOOL_EDITS,
        "cleanrl_continuous": CLEANRL_CONTINUOUS_EDITS,
        # Its import of gym, then CleanRL's EnvPool edits past their own import line.
        "leanrl_atari": (LEANRL_GYM_EDIT, *CLEANRL_ENVPOOL_EDITS[1:], INFERENCE_EDIT, WANDB_EDIT),
        # CleanRL's TransformObservation and same-step autoreset edits match LeanRL's lines.
        "leanrl_continuous": (
            *CLEANRL_CONTINUOUS_EDITS[:2],
            LEANRL_FINAL_INFO_EDIT,
            INFERENCE_EDIT,
            WANDB_EDIT,
        ),
    }[name]


def prepare_scripts(repo: str, source: Path, dest: Path) -> list[Path]:
    """Write :data:`SCRIPTS` of ``repo`` (cleanrl or leanrl), adapted, into ``dest`` from
    ``source``: its checkout or a bare git directory (the search tool's fetch)."""
    from rlperf.bench.cleanrl import adapt_script

    git_dir = source / ".git" if (source / ".git").exists() else source
    rev = ["git", "--git-dir", str(git_dir), "rev-parse", "HEAD"]
    commit = subprocess.run(rev, capture_output=True, text=True).stdout.strip() or "unknown"
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for name, script in SCRIPTS.items():
        if script.repo != repo:
            continue
        if (source / script.source).is_file():
            text = (source / script.source).read_text()
        else:
            show = ["git", "--git-dir", str(git_dir), "show", f"HEAD:{script.source}"]
            text = subprocess.run(show, capture_output=True, text=True, check=True).stdout
        header = (
            f"# {repo}'s {script.source} at {commit}, adapted by benchmarks/gpu_check.py "
            f"--prepare-{repo} (the edits: benchmarks/gpucheck/scripts.py, {name})\n"
        )
        (dest / script.file).write_text(header + adapt_script(text, edits_of(name)))
        written.append(dest / script.file)
        print(f"wrote {dest / script.file} ({repo} {commit[:12]})")
    return written


def run_script(check: Check, name: str, cap_s: float) -> dict[str, Any]:
    """:data:`SCRIPTS`'s ``name`` on the check's device until ``script_s`` seconds after its
    first printed figure (then SIGINT), or its timeout: its last speed, the figures it printed,
    and NVML's GPU utilisation from its first figure on."""
    script = SCRIPTS[name]
    path = Path(check.args.scripts) / script.file
    if not path.is_file():
        raise Skip(f"no {path}: python benchmarks/gpu_check.py --prepare-{script.repo} SRC")
    why = missing_for(check, modules=script.modules)
    if why:
        raise Skip(why)
    flags = script.flags if check.cuda else script.cpu_flags
    argv = check.python(str(path.resolve()), "--env-id", script.env_id, "--total-timesteps",
                        str(BIG), "--seed", "1", *flags.split())  # fmt: skip
    log = check.log(name)
    watch = LogWatch(log, script.figure)

    def measured_enough() -> bool:
        seen = watch.poll()
        return seen is not None and time.monotonic() - seen > check.sizes.script_s

    cwd = check.work / name  # where it writes runs/ and its other files
    cwd.mkdir(exist_ok=True)
    timeout = check.timeout(cap_s, least_s=check.sizes.script_s + 10)
    fin = run_process(argv, timeout, log, check.env, cwd=cwd, stop=measured_enough)
    figures: dict[str, Any] = {
        "command": shlex.join([path.name, *argv[2:]]),
        "exit": fin.rc,
        "process_s": round(fin.seconds, 2),
        "first_figure_s": None if watch.seen_at is None else round(watch.seen_at - fin.started, 1),
        "gpu_busy": check.nvml.mean_pct(watch.seen_at, fin.started + fin.seconds),
        **read_figures(fin.log.read_text(errors="replace"), script.figure),
    }
    if figures["sps"] is None:
        figures["log_tail"] = fin.tail()
        where = "in its timeout" if fin.timed_out else f"(exit {fin.rc})"
        raise Failed(f"{name} printed no speed {where}", figures, fin.timed_out)
    if not fin.stopped and fin.rc != 0:  # it ended by itself, and badly
        figures["log_tail"] = fin.tail()
        raise Failed(f"{name} exited {fin.rc}", figures)
    return figures


def read_figures(text: str, figure: re.Pattern[str]) -> dict[str, Any]:
    """The speed lines of a script's output: CleanRL's ``SPS: N`` or the JSON of LeanRL's
    ``wandb.log``; ``sps`` is the last one (None where there is none)."""
    if figure is SPS_LINE:
        sps = [float(x) for x in SPS_LINE.findall(text)]
        return {"sps": sps[-1] if sps else None, "figures_printed": len(sps)}
    logs = [json.loads(m) for m in WANDB_LINE.findall(text)]
    return {
        "sps": round(logs[-1]["speed"], 1) if logs else None,
        "figures_printed": len(logs),
        "last_episode_return": finite(logs[-1].get("episode_return")) if logs else None,
        "speeds": thin([[r.get("step"), round(r["speed"], 1)] for r in logs], 20),
    }


def finite(x: Any) -> float | None:
    """``x`` where it is a finite number (a mean over no episodes is NaN), else None."""
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None
