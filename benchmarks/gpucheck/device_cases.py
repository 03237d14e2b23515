"""The trainer's parts on a device, as pytest-benchmark cases: policy act, an update epoch, the
optimizer step and whole iterations, at CartPole with many envs. The ``registry_cuda`` step passes
this file to pytest, which collects :func:`test_device_case`, parametrised by
:func:`pytest_generate_tests` from the device and envs in :data:`DEVICE_VAR` and
:data:`ENVS_VAR`."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEVICE_VAR, ENVS_VAR = "RLPERF_GPU_CHECK_DEVICE", "RLPERF_GPU_CHECK_ENVS"


@dataclass(frozen=True)
class DeviceCase:
    """One part of the trainer on a device, at CartPole with ``num_envs`` envs."""

    component: str  # policy_act, update_epoch, optimizer_step or e2e_train
    device: str
    num_envs: int

    @property
    def name(self) -> str:
        return f"{self.component}[device={self.device},num_envs={self.num_envs}]"


def device_cases() -> list[DeviceCase]:
    device, envs = os.environ.get(DEVICE_VAR, "cuda"), int(os.environ.get(ENVS_VAR, "4096"))
    return [
        DeviceCase(c, device, envs)
        for c in ("policy_act", "update_epoch", "optimizer_step", "e2e_train")
    ]


def prepare_device_case(case: DeviceCase) -> tuple[Callable[[], Any], int, str]:
    """(call, items per call, unit): the call ends with the device synchronised."""
    import torch

    from rlperf.bench.registry.training import continued_training, trainer_config
    from rlperf.ppo.optim import FlatAdam
    from rlperf.ppo.trainer import Trainer

    cfg = trainer_config(case.num_envs, threads=2)
    cfg.run.device = case.device
    sync = torch.cuda.synchronize if case.device.startswith("cuda") else (lambda: None)
    if case.component == "e2e_train":  # one iteration a call
        prepared = continued_training(cfg, case.num_envs * cfg.ppo.num_steps)
        call, items_per_call, unit = prepared.run, prepared.items_per_call, prepared.items_unit
    else:
        cfg.ppo.update_epochs, cfg.run.telemetry = 1, False
        trainer = Trainer(cfg)
        policy = trainer.policy
        if case.component == "policy_act":
            obs = torch.randn(case.num_envs, *trainer.spec.obs_shape, device=trainer.device)
            state = policy.initial_state(case.num_envs)

            def call() -> Any:
                with torch.inference_mode():
                    return policy.act(obs, state, None, None, trainer.sample_gen)

            items_per_call, unit = case.num_envs, "samples"
        elif case.component == "update_epoch":  # forward, loss, backward and optimizer
            trainer.collect()
            trainer.compute_advantages()
            call, items_per_call, unit = trainer.update, trainer.batch_size, "samples"
        else:
            gen = torch.Generator(device=policy.flat.device).manual_seed(0)
            grad = torch.randn(policy.flat.shape, generator=gen, device=policy.flat.device)
            policy.flat.grad = grad.mul_(1e-3)
            optimizer = FlatAdam(policy.flat, 2.5e-4, eps=1e-5)
            call, items_per_call, unit = optimizer.step, policy.flat.numel(), "parameters"

    def synced() -> Any:
        out = call()
        sync()
        return out

    return synced, items_per_call, unit


def pytest_generate_tests(metafunc: Any) -> None:
    if "device_case" in metafunc.fixturenames:
        cases = device_cases()
        metafunc.parametrize("device_case", cases, ids=[c.name for c in cases])


def test_device_case(benchmark: Any, device_case: DeviceCase) -> None:
    import pytest
    import torch

    if device_case.device.startswith("cuda") and not torch.cuda.is_available():
        pytest.skip(f"CUDA not available (torch {torch.__version__})")
    call, items_per_call, unit = prepare_device_case(device_case)
    benchmark.group = f"device:{device_case.component}"
    benchmark.extra_info.update(
        component=device_case.component,
        device=device_case.device,
        items_per_call=items_per_call,
        items_unit=unit,
    )
    benchmark(call)
    benchmark.extra_info[f"{unit}_per_s"] = items_per_call / benchmark.stats.stats.median
