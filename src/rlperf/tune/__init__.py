"""``rlperf tune``: an Optuna search over PPO's settings, each trial a fresh ``rlperf train``
process with a wall-clock budget, the best settings written as a preset file.

- ``space.py``: the declared search space and how a trial's draw becomes config overrides;
- ``trial.py``: one trial's process, its learning curve read as it grows, its result;
- ``commands.py``: the command (checks, the study, resuming, signals, the preset file).
"""
