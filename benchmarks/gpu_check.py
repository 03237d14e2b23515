"""The GPU check (issues #49, #57): every CUDA path of rlperf run once on one GPU machine, in one
command of at most 8 minutes, with every figure in one JSON file. The steps live in the
``gpucheck`` package beside this file (its docstring says what each does); this is the command.

    python benchmarks/gpu_check.py --out $OUT/gpu_check.json   # on the GPU machine
    python benchmarks/gpu_check.py --cpu                         # the same control flow, here
"""

import sys

from gpucheck.main import main  # benchmarks/ is on the path: it is this script's folder

if __name__ == "__main__":
    sys.exit(main())
