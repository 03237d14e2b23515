"""The GPU check (issues #49, #57): rlperf's CUDA paths run on one GPU machine, beside PureJaxRL,
LeanRL and CleanRL on the same GPU, in one command of at most 8 minutes, with every figure in
one JSON file.

    python benchmarks/gpu_check.py --out $OUT/gpu_check.json   # on the GPU machine
    python benchmarks/gpu_check.py --cpu                         # the same control flow, here
    python benchmarks/gpu_check.py --only install,breakout       # again, some steps only
    python benchmarks/gpu_check.py --fetch-wheels .whl           # before: what the GPU lacks
    python benchmarks/gpu_check.py --prepare-cleanrl GIT_DIR     # before: CleanRL's scripts
    python benchmarks/gpu_check.py --prepare-leanrl GIT_DIR      # before: LeanRL's scripts

The plan (:data:`gpucheck.check.PLAN_S`, printed before the first step): each step has a budget,
and may run until the plan's end of it, so what one leaves unspent goes to the next; a step that
fails or times out is recorded and the next one runs. The steps, in this order
(:data:`gpucheck.main.STEPS`):

- ``probe``: torch, CUDA, the GPU's name (nvidia-smi's too), and which of issue #57's features
  this rlperf has (``--vec-backend torch``, ``--cuda-graphs``, ``--device auto``): a row that
  needs a missing one says so in one line and the check goes on.
- ``install``: the wheels of ``--wheels`` (.whl/) into ``--site`` (/tmp/site, put on every
  subprocess's PYTHONPATH), then ``pip install --no-deps --no-build-isolation -e .`` (the C
  kernels built there).
- ``cuda_tests``: every test under tests/ that mentions CUDA
  (:func:`gpucheck.pytests.find_cuda_tests`), with pytest; pass, fail and skip counts.
- ``cartpole_475``: PureJaxRL's CartPole work (4 envs x 128 steps, lr 2.5e-4) on
  ``--vec-backend torch --device cuda``, stopped at the first mean return (last 100) of 475.
- ``telemetry``: that run's NVML block (GPU utilisation and memory).
- ``cartpole_rows``: CartPole at 4,096 envs x 32 and at 4 x 128, each on the host env, on the
  envs on the device with CUDA graphs and without, under ``rlperf profile``: SPS after the
  traced iterations, and the GPU's busy share from the trace (:mod:`gpucheck.cartpole`).
- ``graphs_equal``: a few iterations with CUDA graphs and without from one seed, at both
  shapes: the parameters of the two checkpoints compared.
- ``mujoco_devices``: ``--preset mujoco`` on ``--device cpu``, ``cuda`` and ``auto``.
- ``purejaxrl``: PureJaxRL's ``ppo.py`` at both CartPole shapes, beside rlperf's rows.
- ``breakout``: ``--preset atari`` on EnvPool's Breakout, LeanRL's
  ``ppo_atari_envpool_torchcompile.py`` and CleanRL's ``ppo_atari_envpool.py``.
- ``halfcheetah``: LeanRL's ``ppo_continuous_action_torchcompile.py`` and CleanRL's
  ``ppo_continuous_action.py``, beside ``mujoco_devices``' rows (:mod:`gpucheck.versus`).

Outside the 8 minutes on the GPU (``--only NAME``; ``--cpu`` runs them too), measured on
2026-11-28: ``registry_cuda`` (pytest-benchmark on the host/device transfers and the trainer's
parts on the device, :mod:`gpucheck.device_cases`), ``workloads`` (the CNN and the ConvLSTM on
the robots' pixels, nccl with two ranks) and ``atari_vs_cleanrl`` (Pong beside CleanRL's
``ppo_atari.py`` for minutes, both return curves).

GPU busy time: from each rlperf CartPole row's torch.profiler trace; from NVML's samples for the
programs that are not rlperf's, and from rlperf's own NVML telemetry for its other rows
(:mod:`gpucheck.busy`).

``--cpu`` runs all of it on the CPU at tiny sizes (the target return lowered to 40, so that the
stop at the target runs too): only what needs CUDA is skipped, with the reason recorded.
tests/bench/test_gpu_check.py runs it, so the script is not what fails on the day.

The JSON (``--out``; default ``$OUT/gpu_check.json`` where OUT is set, else gpu_check.json) has
the GPU's name, the plan, each step's status (ok, skipped, failed or timeout), its reason and its
figures, and ``headline``: the figures issue #57 asks for. Beside it, ``<stem>.log`` holds every
step's output and ``<stem>_traces.tar`` the CartPole rows' traces. The exit status is 1 when a
step failed or timed out.

The modules, read top to bottom: :mod:`~gpucheck.core` (outcomes, processes),
:mod:`~gpucheck.check` (sizes, plan, report), :mod:`~gpucheck.facts`, :mod:`~gpucheck.wheels`,
:mod:`~gpucheck.pytests`, :mod:`~gpucheck.training`, :mod:`~gpucheck.busy`,
:mod:`~gpucheck.cartpole`, :mod:`~gpucheck.purejaxrl`, :mod:`~gpucheck.scripts`,
:mod:`~gpucheck.versus`, :mod:`~gpucheck.workloads`, :mod:`~gpucheck.atari`,
:mod:`~gpucheck.device_cases`, :mod:`~gpucheck.report` and :mod:`~gpucheck.main` (the command).
"""
