"""Two gloo ranks with half the environments each take the same update as one process with
all of them (float tolerance): MLP and LSTM, analytic and autograd updates, with gradient
clipping active so that clipping before the all-reduce would show.

Both sides update on the same data: every rank builds the one-process trainer, collects its
rollout and hands its half of the environments' columns to its own trainer. With one minibatch
per epoch a rank's minibatch is its half of the one process's, so the average of the two ranks'
mean gradients is the one process's mean gradient.

Advantage normalisation is per rank (docs/distributed.md): with it on, the two ranks match the
one process whose advantages were normalised over each half separately.
"""

from __future__ import annotations

import pytest
import torch
from ranks import run_ranks

from rlperf.config import Config
from rlperf.distributed.group import SINGLE, Ranks
from rlperf.ppo.loss import normalize_advantages
from rlperf.ppo.rollout import RolloutBuffer
from rlperf.ppo.trainer import Trainer
from rlperf.timing.sections import Profiler

NUM_ENVS, NUM_STEPS, WORLD = 8, 16, 2
CASES = {
    "mlp-analytic": {"kind": "mlp", "analytic": True},
    "mlp-autograd": {"kind": "mlp", "analytic": False},
    "lstm-analytic": {"kind": "lstm", "analytic": True},
    "lstm-autograd": {"kind": "lstm", "analytic": False},
}
NORM_CASES = ("mlp-analytic", "lstm-analytic")


def config(case: str, num_envs: int, norm_adv: bool) -> Config:
    cfg = Config()
    cfg.policy.kind = CASES[case]["kind"]
    cfg.policy.analytic = CASES[case]["analytic"]
    cfg.policy.hidden_sizes = (16,)
    cfg.policy.lstm_hidden_size = 16
    cfg.env.num_envs = num_envs
    cfg.ppo.num_steps = NUM_STEPS
    cfg.ppo.num_minibatches = 1
    cfg.ppo.update_epochs = 3
    cfg.ppo.norm_adv = norm_adv
    cfg.ppo.max_grad_norm = 0.05  # small: every step is clipped
    # Per-rank normalisation changes the advantages, not the returns: leave the value loss
    # out of that comparison (below).
    cfg.ppo.vf_coef = 0.0 if norm_adv else 0.5
    cfg.run.total_steps = 10 * num_envs * NUM_STEPS * WORLD
    cfg.run.threads = 1
    cfg.run.progress = False
    cfg.run.seed = 7
    return cfg.validate()


def copy_columns(src: RolloutBuffer, dst: RolloutBuffer, cols: slice) -> None:
    """``dst`` (E envs) takes the environments ``cols`` of ``src`` (2E envs)."""
    for name in ("obs", "actions", "logprobs", "values", "advantages", "dones"):
        if getattr(src, name) is not None:
            getattr(dst, name).copy_(getattr(src, name)[:, cols])
    for s_dst, s_src in zip(dst.states, src.states, strict=True):
        s_dst.copy_(s_src[:, cols])


def one_process_rollout(case: str, norm_adv: bool) -> Trainer:
    """The one-process trainer over all environments, its rollout collected, GAE done."""
    cfg = config(case, NUM_ENVS, norm_adv=False)
    cfg.ppo.vf_coef = config(case, NUM_ENVS, norm_adv).ppo.vf_coef
    trainer = Trainer(cfg, Profiler(), SINGLE)
    trainer.iteration = 1
    trainer.collect()
    trainer.compute_advantages()
    if norm_adv:  # the reference for per-rank normalisation: each half on its own
        adv = trainer.buffer.advantages
        for half in (slice(0, NUM_ENVS // 2), slice(NUM_ENVS // 2, NUM_ENVS)):
            adv[:, half] = normalize_advantages(adv[:, half].clone())
    return trainer


def rank_update(ranks: Ranks, case: str, norm_adv: bool) -> dict[str, torch.Tensor]:
    """Runs on each rank: the one-process update and this rank's half-envs update."""
    reference = one_process_rollout(case, norm_adv)
    mine = Trainer(config(case, NUM_ENVS // 2, norm_adv), Profiler(), ranks)
    mine.iteration = 1
    mine.update_impl.flat.data.copy_(reference.update_impl.flat.data)
    half = NUM_ENVS // 2
    copy_columns(reference.buffer, mine.buffer, slice(ranks.rank * half, (ranks.rank + 1) * half))
    mine.update()
    reference.update()
    start = one_process_rollout(case, norm_adv).update_impl.flat
    return {
        "mine": mine.update_impl.flat.detach().clone(),
        "reference": reference.update_impl.flat.detach().clone(),
        "start": start.detach().clone(),
    }


def all_cases(ranks: Ranks) -> dict[str, dict[str, torch.Tensor]]:
    out = {f"{case}-raw": rank_update(ranks, case, norm_adv=False) for case in CASES}
    out.update({f"{case}-norm": rank_update(ranks, case, norm_adv=True) for case in NORM_CASES})
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    return run_ranks(all_cases, WORLD, tmp_path_factory.mktemp("equivalence"))


@pytest.mark.parametrize("key", [f"{c}-raw" for c in CASES] + [f"{c}-norm" for c in NORM_CASES])
def test_two_ranks_step_as_one_process_over_all_envs(results: list[dict], key: str) -> None:
    rank0, rank1 = results[0][key], results[1][key]
    assert torch.equal(rank0["mine"], rank1["mine"]), "the ranks' parameters drifted apart"
    assert not torch.allclose(rank0["mine"], rank0["start"]), "the update changed nothing"
    torch.testing.assert_close(rank0["mine"], rank0["reference"], rtol=1e-5, atol=1e-6)
