"""Builds the compiled parts of rlperf: the LSTM recurrence and the categorical PPO loss on the
CPU (float32; the small-batch hot paths where torch's per-op cost dominates).

Everything else is in pyproject.toml. The extensions are optional: where no C compiler (or no
OpenMP) is available the install still succeeds and the torch implementations run instead
(``rlperf.policies.lstm_cpu.available()`` and ``rlperf.ppo.loss.compiled_loss_available()``
say which).
"""

import sys

from setuptools import Extension, setup

openmp = [] if sys.platform in ("darwin", "win32") else ["-fopenmp"]
# -ffp-contract=fast: ISO C mode forbids fusing a * b + c into one FMA, which halves the matmul
# tile's speed; -fno-trapping-math: lets the element loops' min/max clamps vectorise.
# No -ffast-math: the results must not depend on reassociation.
COMPILE_ARGS = ["-O3", "-std=c11", "-ffp-contract=fast", "-fno-trapping-math", *openmp]

setup(
    ext_modules=[
        Extension(
            "rlperf.policies._lstm_cpu",
            ["src/rlperf/policies/_lstm_cpu.c"],
            extra_compile_args=COMPILE_ARGS,
            libraries=["m"],
            extra_link_args=openmp,
            optional=True,
        ),
        Extension(
            "rlperf.ppo._loss_cpu",
            ["src/rlperf/ppo/_loss_cpu.c"],
            extra_compile_args=COMPILE_ARGS,
            extra_link_args=openmp,
            optional=True,
        ),
    ]
)
