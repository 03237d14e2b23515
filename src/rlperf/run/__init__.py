"""Run infrastructure around a trainer: run directory, checkpoints, SPS accounting, progress."""
