"""``python -m rlperf``: the ``rlperf`` command (what ``torchrun -m rlperf train ...`` runs)."""

import sys

from rlperf.cli import main

sys.exit(main())
