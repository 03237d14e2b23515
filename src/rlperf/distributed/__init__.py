"""Training on several processes and machines with torch.distributed.

``group.py``: a rank's place in the run and the collectives the trainer calls; ``launch.py``:
``rlperf train --nproc N`` through torch.distributed's elastic launcher, and how ranks report
their failures to it.
"""
