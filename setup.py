"""Builds the compiled parts of rlperf: the LSTM recurrence, the categorical PPO loss, the
MLP's whole PPO update and the MLP's fused rollout on the CPU (float32; the small-batch hot
paths where torch's per-op cost dominates).

Everything else is in pyproject.toml. The kernels are optional: rlperf runs the torch
implementations where they are missing (``rlperf.native.status()`` says which are in use).

- ``RLPERF_NO_KERNELS=1`` builds neither (the configuration of an install without a C
  compiler; the same variable keeps already built ones unimported at run time).
- gcc and clang build them; without OpenMP (clang on many systems) they are built
  single-threaded; MSVC, which lacks the GCC vector extensions their register tiles are written
  in, builds none.
- A compiler error leaves that kernel out (``optional=True``) instead of failing the install.
"""

import os
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NO_KERNELS = os.environ.get("RLPERF_NO_KERNELS", "") not in ("", "0")
OPENMP = "-fopenmp"
# -ffp-contract=fast: ISO C mode forbids fusing a * b + c into one FMA, which halves the matmul
# tile's speed; -fno-trapping-math: lets the element loops' min/max clamps vectorise.
# -fno-math-errno: sqrtf inline and vectorised (the same correctly rounded result; the Adam step).
# No -ffast-math: the results must not depend on reassociation.
COMPILE_ARGS = ["-O3", "-std=c11", "-ffp-contract=fast", "-fno-trapping-math", "-fno-math-errno",
                OPENMP]  # fmt: skip
# The fused rollout steps CartPole bit-identically to numpy's float64 arithmetic, so nothing in
# it may be fused into an FMA (its MLP allows it with a pragma); it runs on one thread (no
# OpenMP). -fno-wrapv undoes Python's -fwrapv, under which gcc 13 leaves its tanh loop scalar
# (~2x the policy's time at 64 envs).
EXACT_ARGS = ["-O3", "-std=c11", "-ffp-contract=off", "-fno-trapping-math", "-fno-wrapv"]


class BuildKernels(build_ext):
    """``build_ext`` that fits the flags to the compiler found (see the module docstring)."""

    def finalize_options(self) -> None:
        super().finalize_options()
        # One compiler per core: the five kernels one after another were most of a wheel
        # build's ~18 s on a 2-core box, and asv builds a wheel for every commit it times.
        if self.parallel is None:
            self.parallel = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1

    def build_extensions(self) -> None:
        if self.compiler.compiler_type == "msvc":
            print("rlperf: MSVC has no GCC vector extensions: building without the C kernels")
            return
        if not self._links_openmp():
            print("rlperf: no OpenMP with this compiler: the C kernels run single-threaded")
            for ext in self.extensions:
                ext.extra_compile_args = [a for a in ext.extra_compile_args if a != OPENMP]
                ext.extra_link_args = [a for a in ext.extra_link_args if a != OPENMP]
        super().build_extensions()

    def _links_openmp(self) -> bool:
        """Whether a program using OpenMP compiles and links with ``-fopenmp`` here."""
        with tempfile.TemporaryDirectory() as tmp:
            source = os.path.join(tmp, "omp.c")
            with open(source, "w") as f:
                f.write("#include <omp.h>\nint main(void) { return omp_get_num_threads() - 1; }\n")
            try:
                objects = self.compiler.compile([source], output_dir=tmp, extra_postargs=[OPENMP])
                self.compiler.link_executable(
                    objects, os.path.join(tmp, "omp"), extra_postargs=[OPENMP]
                )
            except Exception:  # CompileError, LinkError: distutils' or setuptools' own classes
                return False
        return True


# The headers the kernels share: a change to one rebuilds every kernel that includes it.
HEADERS = [
    "src/rlperf/_dense_cpu.h",
    "src/rlperf/ppo/_loss_rows.h",
    "src/rlperf/envs/_cartpole_cpu.h",
    "src/rlperf/_span_log.h",
]

# The LSTM kernel's parts: one translation unit, _lstm_cpu.c, includes each once, in this order.
LSTM_PARTS = tuple(
    f"src/rlperf/policies/_lstm_{part}.h" for part in ("net", "forward", "backward", "step")
)


def kernel(
    name: str,
    source: str,
    libraries: list[str],
    compile_args: list[str] = COMPILE_ARGS,
    parts: tuple[str, ...] = (),
) -> Extension:
    """One optional extension from one C file; ``parts``: the headers only it includes (the
    pieces of its one translation unit), rebuilt on change as the shared ``HEADERS`` are."""
    return Extension(
        name,
        [source],
        depends=[*HEADERS, *parts],
        extra_compile_args=compile_args,
        libraries=libraries,
        extra_link_args=[OPENMP] if OPENMP in compile_args else [],
        optional=True,
    )


setup(
    ext_modules=[]
    if NO_KERNELS
    else [
        kernel(
            "rlperf.policies._lstm_cpu", "src/rlperf/policies/_lstm_cpu.c", ["m"], parts=LSTM_PARTS
        ),
        kernel("rlperf.ppo._loss_cpu", "src/rlperf/ppo/_loss_cpu.c", []),
        kernel("rlperf.ppo._mlp_update_cpu", "src/rlperf/ppo/_mlp_update_cpu.c", ["m"]),
        kernel("rlperf.ppo._rollout_cpu", "src/rlperf/ppo/_rollout_cpu.c", ["m"], EXACT_ARGS),
        kernel("rlperf.envs._normalize_cpu", "src/rlperf/envs/_normalize_cpu.c", ["m"], EXACT_ARGS),
    ],
    cmdclass={"build_ext": BuildKernels},
)
