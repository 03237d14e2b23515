"""The GPU check (issue #49): every CUDA path of rlperf run once on one GPU machine, in one
command of at most 8 minutes, with every figure in one JSON file.

    python benchmarks/gpu_check.py --out $OUT/gpu_check.json   # on the GPU machine
    python benchmarks/gpu_check.py --cpu                         # the same control flow, here
    python benchmarks/gpu_check.py --only cartpole_475,profile   # again, some steps only
    python benchmarks/gpu_check.py --fetch-wheels .whl           # before: what the GPU lacks
    python benchmarks/gpu_check.py --prepare-cleanrl GIT_DIR     # before: CleanRL's ppo_atari.py

The steps, in this order (:data:`gpucheck.main.STEPS`). Each has its own timeout, cut to what
the overall deadline leaves; one that fails or times out is recorded and the next one runs:

- ``probe``: torch, CUDA and the GPU's name (nvidia-smi's too).
- ``install``: the wheels of ``--wheels`` (.whl/) into ``--site`` (/tmp/site, put on every
  subprocess's PYTHONPATH), then ``pip install --no-deps --no-build-isolation -e .`` (the C
  kernels built there); then which presets, envs, kernels and optional modules rlperf sees.
- ``cuda_tests``: every test under tests/ that mentions CUDA
  (:func:`gpucheck.pytests.find_cuda_tests`), with pytest; pass, fail and skip counts.
- ``cartpole_475``: ``rlperf train --device cuda`` on PureJaxRL's CartPole work (4 envs x 128
  steps, lr 2.5e-4, 500,000 steps), stopped at the first mean return (last 100) of 475: SPS,
  steps and seconds to that return.
- ``telemetry``: that run's NVML block (GPU utilisation and memory; nvidia-ml-py).
- ``registry_cuda``: pytest-benchmark on the registry's CUDA cases (the host/device transfers)
  and on the trainer's parts on the device (:mod:`gpucheck.device_cases`: policy act, an update
  epoch, the optimizer step, end-to-end iterations) at 4,096 envs.
- ``profile``: ``rlperf profile --device cuda --torch-profiler`` at 4,096 envs: the synced
  sections and a torch.profiler trace, its CUDA kernels counted and the trace kept.
- ``workloads``: the GPU-sized runs: CartPole at 4,096 envs, the CNN on the robots' RGB pixels,
  the ConvLSTM (``--preset robots-rgb``), MuJoCo (``--preset mujoco``), Atari (``--preset
  atari``) and nccl with two ranks, each for a few seconds; SPS and where the time went.
- ``purejaxrl``: where jax sees the GPU, PureJaxRL's ``ppo.py`` on the CartPole work of
  ``cartpole_475`` and at the workloads' CartPole size (4,096 envs x 32 steps, against
  ``cartpole_big``) (benchmarks/purejaxrl_vs_rlperf.py's worker).
- ``atari_vs_cleanrl``: ``--preset atari --env gym:ale_py:ALE/Pong-v5`` and CleanRL's
  ``ppo_atari.py`` on PongNoFrameskip-v4, at once on the same GPU for the same seconds (what the
  deadline leaves, at most ``--atari-s``; alone: ``--only atari_vs_cleanrl --atari-s 300`` on
  the warm machine); both return curves.

``--cpu`` runs all of it on the CPU at tiny sizes (the target return lowered to 40, so that the
stop at the target runs too): only what needs CUDA is skipped, with the reason recorded.
tests/bench/test_gpu_check.py runs it, so the script is not what fails on the day.

The JSON (``--out``; default ``$OUT/gpu_check.json`` where OUT is set, else gpu_check.json) has
the GPU's name, each step's status (ok, skipped, failed or timeout), its reason and its figures,
and ``headline``: the figures issue #49 asks for. Beside it, ``<stem>.log`` holds every step's
output and ``<stem>_trace.json.gz`` the profiler's trace. The exit status is 1 when a step failed
or timed out.

The modules, read top to bottom: :mod:`~gpucheck.core` (outcomes, processes),
:mod:`~gpucheck.check` (sizes, deadline, report), :mod:`~gpucheck.facts`, :mod:`~gpucheck.wheels`,
:mod:`~gpucheck.pytests`, :mod:`~gpucheck.training`, :mod:`~gpucheck.workloads`,
:mod:`~gpucheck.purejaxrl`, :mod:`~gpucheck.atari`, :mod:`~gpucheck.device_cases`,
:mod:`~gpucheck.report` and :mod:`~gpucheck.main` (the command).
"""
