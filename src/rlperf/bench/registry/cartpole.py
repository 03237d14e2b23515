"""CartPole's workloads: the MLP on full observations, the LSTM on positions only."""

from __future__ import annotations

from .core import HISTORY, QUICK, Case, Workload
from .policies import kind_act, lstm_network, lstm_recurrence, policy_act, recurrent_evaluate
from .training import e2e_train, update_epoch

_history, _quick = {HISTORY}, {HISTORY, QUICK}

# The MLP with the analytic update: 2 iterations of 64 envs x 32 steps, ~0.15 s a call.
MLP = Workload(
    "cartpole",
    "cartpole",
    e2e=Case("e2e_train", {"num_envs": 64, "env_steps": 4096, "threads": 1}, e2e_train),
    cases=(
        Case("policy_act", {"batch": 64}, policy_act),
        Case("policy_act", {"batch": 1024}, policy_act, _quick),
        Case("policy_act_kind", {"kind": "mlp", "num_envs": 64}, kind_act, _history),
        Case("update_epoch", {"num_envs": 64, "threads": 1}, update_epoch, _quick),
    ),
)

_seq = {"num_steps": 32, "num_envs": 16}  # one update minibatch of the LSTM preset
# Position-only CartPole: one iteration of 16 envs x 32 steps, ~0.064 s a call.
LSTM = Workload(
    "cartpole_lstm",
    "cartpole",
    e2e=Case(
        "e2e_train", {"num_envs": 16, "env_steps": 512, "threads": 1, "kind": "lstm"}, e2e_train
    ),
    cases=(
        Case("policy_act_kind", {"kind": "lstm", "num_envs": 64}, kind_act, _history),
        Case("recurrent_evaluate", {**_seq, "backward": False}, recurrent_evaluate),
        Case("recurrent_evaluate", {**_seq, "backward": True}, recurrent_evaluate, _history),
        Case("lstm_recurrence", {**_seq, "impl": "compiled"}, lstm_recurrence, _quick),
        Case("lstm_recurrence", {**_seq, "impl": "torch"}, lstm_recurrence),
        Case("lstm_network", {**_seq, "impl": "compiled"}, lstm_network, _quick),
        Case("lstm_network", {**_seq, "impl": "autograd"}, lstm_network),
        Case("update_epoch", {"num_envs": 64, "threads": 1, "kind": "lstm"}, update_epoch),
        Case(
            "e2e_train",
            {"num_envs": 64, "threads": 1, "kind": "lstm", "env_steps": 4096},
            e2e_train,
        ),  # fmt: skip
    ),
)
