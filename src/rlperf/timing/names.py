"""The trainer's section names, and which are measurement: a public contract, defined once.

The profiler, the breakdown, the analyzer, the benchmark registry and users' scripts all read
these names (a section nested in another is recorded as ``parent/child``, e.g.
``rollout/env_step``). Renaming one breaks saved reports and dashboards; add, don't rename.
"""

from __future__ import annotations

# Top level: one iteration.
ROLLOUT = "rollout"
GAE = "gae"
UPDATE = "update"
LOGGING = "logging"
CHECKPOINT = "checkpoint"

# Inside ROLLOUT, in the order the data flows.
POLICY_FORWARD = "policy_forward"
DEVICE_TO_HOST = "device_to_host"
ENV_STEP = "env_step"
BUFFER_STORE = "buffer_store"
TRUNCATION_BOOTSTRAP = "truncation_bootstrap"
ROLLOUT_CHILDREN = (POLICY_FORWARD, DEVICE_TO_HOST, ENV_STEP, BUFFER_STORE)

# Inside UPDATE.
MINIBATCH_PREP = "minibatch_prep"
LOSS = "loss"
BACKWARD = "backward"
OPTIMIZER_STEP = "optimizer_step"
UPDATE_CHILDREN = (MINIBATCH_PREP, LOSS, BACKWARD, OPTIMIZER_STEP)

TOP_LEVEL = (ROLLOUT, GAE, UPDATE, LOGGING, CHECKPOINT)

# Top level, outside the iteration: the measuring tools' own work (not training). Kept apart so
# that a profiler's cost is never reported as the user's untimed code, and so that the analyzer
# can leave it out of the bottleneck ranking. Tools attached as trainer callbacks time
# themselves here, each as one child.
MEASUREMENT = "measurement"
TORCH_PROFILER = "torch_profiler"  # stepping torch.profiler, exporting its traces
TENSORBOARD = "tensorboard"  # writing TensorBoard scalars
MEASUREMENT_CHILDREN = (TORCH_PROFILER, TENSORBOARD)


def path(*names: str) -> str:
    """The full name of a nested section: ``path(ROLLOUT, ENV_STEP) == "rollout/env_step"``."""
    return "/".join(names)


def is_measurement(name: str) -> bool:
    """Whether a section path is measurement overhead (``measurement`` or below it)."""
    return name == MEASUREMENT or name.startswith(MEASUREMENT + "/")
