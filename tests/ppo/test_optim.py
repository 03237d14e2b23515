"""FlatAdam is torch.optim.Adam(fused=True) without the Python wrapper: same numbers; the
learning rate's linear anneal over steps, and over a wall-clock budget."""

from __future__ import annotations

import math

import pytest
import torch

from rlperf.config import Config
from rlperf.ppo.optim import FlatAdam, annealed_lr, kl_adapted_lr, log_std_ceiling, run_progress


def _pair(seed: int) -> tuple[torch.nn.Parameter, torch.nn.Parameter]:
    torch.manual_seed(seed)
    a = torch.nn.Parameter(torch.randn(1000))
    return a, torch.nn.Parameter(a.detach().clone())


def test_flat_adam_equals_fused_torch_adam_bit_for_bit_with_annealing() -> None:
    ref_param, param = _pair(0)
    ref = torch.optim.Adam([ref_param], lr=1e-3, eps=1e-5, fused=True)
    ours = FlatAdam(param, lr=1e-3, eps=1e-5)
    for i in range(50):
        grad = torch.randn(1000)
        ref_param.grad, param.grad = grad.clone(), grad.clone()
        ref.param_groups[0]["lr"] = ours.lr = 1e-3 * (1 - i / 50)
        ref.step()
        ours.step()
        assert torch.equal(ref_param, param), f"step {i}"


def test_state_dict_round_trip_continues_identically() -> None:
    _, a = _pair(1)
    b = torch.nn.Parameter(a.detach().clone())
    opt_a = FlatAdam(a, lr=3e-4)
    for _ in range(5):
        a.grad = torch.randn(1000)
        opt_a.step()
    b.data.copy_(a.data)
    opt_b = FlatAdam(b, lr=1.0)
    opt_b.load_state_dict(opt_a.state_dict())
    assert opt_b.lr == opt_a.lr
    for _ in range(5):
        g = torch.randn(1000)
        a.grad, b.grad = g.clone(), g.clone()
        opt_a.step()
        opt_b.step()
    assert torch.equal(a, b)


def anneal_config(anneal_lr: bool = True, with_wall: bool = False, budget_s: float = 0.0) -> Config:
    cfg = Config()
    cfg.ppo.learning_rate, cfg.ppo.anneal_lr, cfg.ppo.anneal_with_wall = 1e-3, anneal_lr, with_wall
    cfg.run.max_wall_s = budget_s
    return cfg


def test_the_anneal_is_cleanrls_over_steps_and_the_further_of_steps_and_seconds() -> None:
    steps_only = anneal_config()
    for iteration in range(1, 11):
        # CleanRL: frac = 1.0 - (iteration - 1.0) / num_iterations
        expected = (1.0 - (iteration - 1.0) / 10) * 1e-3
        assert annealed_lr(steps_only, iteration, 10, elapsed_s=99.0) == expected
    assert annealed_lr(anneal_config(anneal_lr=False), 9, 10, 5.0) == 1e-3
    # A budget without --anneal-with-wall changes nothing; with it, seconds count as progress.
    assert annealed_lr(anneal_config(budget_s=10.0), 2, 10, 5.0) == pytest.approx(0.9e-3)
    with_wall = anneal_config(with_wall=True, budget_s=10.0)
    assert annealed_lr(with_wall, 2, 10, elapsed_s=5.0) == pytest.approx(0.5e-3)
    assert annealed_lr(with_wall, 9, 10, elapsed_s=1.0) == pytest.approx(0.2e-3)
    assert annealed_lr(with_wall, 2, 10, elapsed_s=12.0) == 0.0, "past the budget: 0, not < 0"
    assert annealed_lr(anneal_config(with_wall=True), 2, 10, 5.0) == pytest.approx(0.9e-3)


def test_anneal_with_wall_refuses_several_ranks() -> None:
    """Each rank's clock is its own: annealed by it, their Adam steps would differ."""
    from rlperf.config import ConfigError
    from rlperf.ppo.checks import check_config

    cfg = anneal_config(with_wall=True, budget_s=60.0)
    check_config(cfg, world_size=1)
    with pytest.raises(ConfigError, match="--anneal-with-wall needs one rank"):
        check_config(cfg, world_size=2)


def test_the_kl_adaptive_rate_is_rl_games_step_and_bounds() -> None:
    """rl_games' AdaptiveScheduler: /1.5 above twice the target, x1.5 below half, else kept,
    within [1e-6, 1e-2]; the band's edges keep the rate."""
    assert kl_adapted_lr(3e-4, 0.02, 0.008) == pytest.approx(2e-4)
    assert kl_adapted_lr(3e-4, 0.001, 0.008) == pytest.approx(4.5e-4)
    for kl in (0.004, 0.008, 0.016):
        assert kl_adapted_lr(3e-4, kl, 0.008) == 3e-4
    assert kl_adapted_lr(9e-3, 0.0, 0.008) == 1e-2
    assert kl_adapted_lr(1.2e-6, 1.0, 0.008) == 1e-6


def test_a_negative_kl_target_is_refused() -> None:
    from rlperf.config import ConfigError
    from rlperf.ppo.checks import check_config

    cfg = anneal_config()
    cfg.ppo.lr_kl_target = -0.01
    with pytest.raises(ConfigError, match="--lr-kl-target must be >= 0"):
        check_config(cfg, world_size=1)


def test_the_std_ceiling_falls_log_linearly_on_the_anneals_progress() -> None:
    """``--final-std``: the ceiling starts at ``--init-log-std`` and ends at log(final_std),
    on the progress the anneal uses (the further of steps and seconds with a wall budget)."""
    cfg = anneal_config(with_wall=True, budget_s=10.0)
    assert log_std_ceiling(cfg, 0.5) == math.inf, "off by default"
    cfg.policy.init_log_std, cfg.ppo.final_std = -1.0, 0.1
    assert log_std_ceiling(cfg, 0.0) == -1.0
    assert log_std_ceiling(cfg, 1.0) == pytest.approx(math.log(0.1))
    assert log_std_ceiling(cfg, 0.25) == pytest.approx(-1.0 + 0.25 * (math.log(0.1) + 1.0))
    assert run_progress(cfg, 2, 10, elapsed_s=5.0) == 0.5
    assert run_progress(cfg, 9, 10, elapsed_s=5.0) == 0.9
    assert run_progress(cfg, 2, 10, elapsed_s=30.0) == 1.0, "past the budget: 1, not more"
    assert run_progress(anneal_config(budget_s=10.0), 2, 10, elapsed_s=5.0) == 0.2


def test_the_std_ceiling_waits_for_final_std_from_then_falls_to_the_end() -> None:
    """``--final-std-from F``: the starting log-std until F of the run, then linear in the
    progress to log(final_std) at 1 (F = 0 is the plain ceiling)."""
    cfg = anneal_config()
    cfg.policy.init_log_std, cfg.ppo.final_std, cfg.ppo.final_std_from = -1.0, 0.1, 0.6
    assert log_std_ceiling(cfg, 0.0) == log_std_ceiling(cfg, 0.6) == -1.0
    assert log_std_ceiling(cfg, 0.8) == pytest.approx(-1.0 + 0.5 * (math.log(0.1) + 1.0))
    assert log_std_ceiling(cfg, 1.0) == pytest.approx(math.log(0.1))


@pytest.mark.parametrize("share", [-0.1, 1.0, 1.5])
def test_a_final_std_from_outside_the_run_is_refused(share: float) -> None:
    from rlperf.config import ConfigError
    from rlperf.ppo.checks import check_config

    cfg = anneal_config()
    cfg.ppo.final_std, cfg.ppo.final_std_from = 0.1, share
    with pytest.raises(
        ConfigError, match=r"--final-std-from must be a share of the run in \[0, 1\)"
    ):
        check_config(cfg, world_size=1)


@pytest.mark.parametrize("final_std", [-0.1, 1.0, 2.0])
def test_a_final_std_not_below_the_starting_std_is_refused(final_std: float) -> None:
    from rlperf.config import ConfigError
    from rlperf.ppo.checks import check_config

    cfg = anneal_config()
    cfg.ppo.final_std = final_std
    with pytest.raises(ConfigError, match="--final-std must be 0 .off. or in .0, 1."):
        check_config(cfg, world_size=1)


def test_a_std_ceiling_on_the_wall_refuses_several_ranks() -> None:
    from rlperf.config import ConfigError
    from rlperf.ppo.checks import check_config

    cfg = anneal_config(anneal_lr=False, with_wall=True, budget_s=60.0)
    cfg.ppo.final_std = 0.5
    check_config(cfg, world_size=1)
    with pytest.raises(ConfigError, match="--anneal-with-wall needs one rank"):
        check_config(cfg, world_size=2)
