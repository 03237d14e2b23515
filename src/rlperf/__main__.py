"""The ``rlperf`` command: ``rlperf ...``, ``python -m rlperf ...`` and each rank's
``torchrun -m rlperf train ...``.

It settles what must be settled before torch loads (``openmp.py``), then runs ``cli.main``.
"""

import sys


def main() -> int:
    from rlperf import openmp

    openmp.tune(sys.argv[1:])
    from rlperf.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
