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
# The multiprocess backend (envs/workers/) replaces ENV_STEP by these two: handing actions to
# the workers, and waiting for their results (what the trainer waits on the workers).
ENV_SEND = "env_send"
ENV_RECV = "env_recv"
# Observation/reward normalisation of the step's results (envs/normalize.py), where a run has it.
NORMALIZE = "normalize"
BUFFER_STORE = "buffer_store"
TRUNCATION_BOOTSTRAP = "truncation_bootstrap"
ROLLOUT_CHILDREN = (POLICY_FORWARD, DEVICE_TO_HOST, ENV_STEP, BUFFER_STORE)

# Inside UPDATE.
MINIBATCH_PREP = "minibatch_prep"
LOSS = "loss"
BACKWARD = "backward"
OPTIMIZER_STEP = "optimizer_step"
UPDATE_CHILDREN = (MINIBATCH_PREP, LOSS, BACKWARD, OPTIMIZER_STEP)
# Inside UPDATE, several ranks only (``--nproc``): the all-reduce averaging each minibatch's
# flat gradient, between backward and optimizer_step (the clip then moves to optimizer_step).
ALLREDUCE = "allreduce"
# Inside UPDATE, on CUDA with graphs (``--cuda-graphs``, ppo/cuda_graphs.py): one replay of the
# captured minibatch step, which does what loss, backward and optimizer_step time apart eagerly.
MINIBATCH_GRAPH = "minibatch_graph"

TOP_LEVEL = (ROLLOUT, GAE, UPDATE, LOGGING, CHECKPOINT)

# Inside ROLLOUT, a scripted teacher (grid workload, supervised phase only): the path the
# guide's teacher takes when the student's observations live on the training device.
TEACHER = "teacher"
TEACHER_RESHAPE = "reshape"  # observations as (envs, agents, ...) for the teacher
TEACHER_DEVICE_TO_HOST = "device_to_host"  # observations to the host (CUDA: a sync point)
TEACHER_CALL = "call"  # the teacher itself, vectorised over all agents on the host
TEACHER_TO_DEVICE = "to_device"  # teacher actions stacked and copied back to the device
TEACHER_CHILDREN = (TEACHER_RESHAPE, TEACHER_DEVICE_TO_HOST, TEACHER_CALL, TEACHER_TO_DEVICE)

# Inside an environment's step (nested under ``rollout/env_step`` by the process-wide profiler;
# environments open them with ``rlperf.profile``): the stages a user asks about.
ENV_RESET = "reset"  # new episodes for finished sub-environments (puzzle draws, map builds)
ENV_MOVE = "move"  # the dynamics
ENV_OBSERVE = "observe"  # building observations that are not images (planes, windows)
RENDER = "render"  # RGB observations; its stages below
RENDER_DRAW_GRID = "draw_grid"
RENDER_DRAW_WALLS = "draw_walls"
RENDER_DRAW_ROBOTS = "draw_robots"
RENDER_DRAW_TARGET = "draw_target"
RENDER_RESIZE = "resize"

# Inside a policy forward (ConvLSTM): its stages, under one parent so they can be switched off.
CONVLSTM = "convlstm"
CONVLSTM_BOUNDARY_PADDING = "boundary_padding"
CONVLSTM_ENCODER = "encoder"
CONVLSTM_SKIP = "skip_connection"
CONVLSTM_LAYERS = "layers"  # D layers x N ticks, pool-and-inject inside
CONVLSTM_POOL_INJECT = "pool_and_inject"
CONVLSTM_GLOBAL_POOL = "global_pool"  # the "pool" head
CONVLSTM_FLATTEN = "flatten"  # the "flatten" head
CONVLSTM_PROJECTION = "projection"
CONVLSTM_CHILDREN = (
    CONVLSTM_BOUNDARY_PADDING,
    CONVLSTM_ENCODER,
    CONVLSTM_SKIP,
    CONVLSTM_LAYERS,
    CONVLSTM_GLOBAL_POOL,
    CONVLSTM_FLATTEN,
    CONVLSTM_PROJECTION,
)  # a run records one of the two head stages, the one its ``--convlstm-head`` names

# Top level, outside the iteration: the measuring tools' own work (not training). Kept apart so
# that a profiler's cost is never reported as the user's untimed code, and so that the analyzer
# can leave it out of the bottleneck ranking. Tools attached as trainer callbacks time
# themselves here, each as one child.
MEASUREMENT = "measurement"
TORCH_PROFILER = "torch_profiler"  # stepping torch.profiler, exporting its traces
TENSORBOARD = "tensorboard"  # writing TensorBoard scalars
DASHBOARD = "dashboard"  # drawing the live terminal view (--dashboard)
MEASUREMENT_CHILDREN = (TORCH_PROFILER, TENSORBOARD, DASHBOARD)


def path(*names: str) -> str:
    """The full name of a nested section: ``path(ROLLOUT, ENV_STEP) == "rollout/env_step"``."""
    return "/".join(names)


def is_measurement(name: str) -> bool:
    """Whether a section path is measurement overhead (``measurement`` or below it)."""
    return name == MEASUREMENT or name.startswith(MEASUREMENT + "/")
