"""The PPO loss on a four-sample batch, worked out by hand.

The batch covers every branch of the clipped objective:

sample  old p  new p  ratio  adv   -adv*ratio  -adv*clip(ratio)  max (branch)
1       0.4    0.5    1.25   2.0   -2.5        -2.4              -2.4  (clipped)
2       0.5    0.3    0.6   -1.0    0.6         0.8               0.8  (clipped)
3       0.5    0.45   0.9    1.5   -1.35       -1.35             -1.35 (inside the range)
4       0.5    0.625  1.25  -1.0    1.25        1.2               1.25 (unclipped, outside)
pg_loss = (-2.4 + 0.8 - 1.35 + 1.25) / 4 = -0.425

and of the clipped value loss (clip 0.2):

sample  v     oldv  ret   (v-ret)^2  oldv+clip(v-oldv)  (vc-ret)^2  max (branch)
1       1.0   0.5   2.0   1.0        0.7                1.69        1.69 (clipped)
2       0.1   0.0   0.0   0.01       0.1                0.01        0.01 (equal: not clamped)
3       3.0   2.0   2.5   0.25       2.2                0.09        0.25 (unclipped)
4      -1.0   0.0  -0.5   0.25      -0.2                0.09        0.25 (unclipped)
v_loss = 0.5 * (1.69 + 0.01 + 0.25 + 0.25) / 4 = 0.275; unclipped: 0.5 * 1.51 / 4 = 0.18875
"""

from __future__ import annotations

import math

import pytest
import torch

from rlperf.ppo.loss import (
    LOGGED_STATS,
    STAT_NAMES,
    LossCoefs,
    compiled_loss_available,
    discrete_ppo_loss_and_head_grads,
    discrete_ppo_loss_and_head_grads_torch,
    finalize_stats,
    normalize_advantages,
    ppo_loss,
)

OLD_P = [0.4, 0.5, 0.5, 0.5]
NEW_P = [0.5, 0.3, 0.45, 0.625]
ADV = [2.0, -1.0, 1.5, -1.0]
NEW_V = [1.0, 0.1, 3.0, -1.0]
OLD_V = [0.5, 0.0, 2.0, 0.0]
RET = [2.0, 0.0, 2.5, -0.5]
ENTROPY = [0.6, 0.5, 0.7, 0.2]
B = 4
COEFS = LossCoefs(clip_coef=0.2, clip_vloss=True, ent_coef=0.01, vf_coef=0.5)

PG_LOSS = -0.425
V_LOSS = {True: 0.275, False: 0.18875}
RATIOS = [1.25, 0.6, 0.9, 1.25]
APPROX_KL = sum((r - 1) - math.log(r) for r in RATIOS) / B
CLIPFRAC = 0.75  # samples 1, 2 and 4 lie outside [0.8, 1.2]
# d loss / d newlogprob: -adv * ratio / B on the unclipped branch, 0 where the clip is the max.
GRAD_LOGPROB = [0.0, 0.0, -1.5 * 0.9 / B, 1.0 * 1.25 / B]
# d loss / d v = vf_coef * (v - ret) / B on the unclipped branch (and for all, unclipped).
GRAD_VALUE = {
    True: [0.0, 0.5 * 0.1 / B, 0.5 * 0.5 / B, 0.5 * -0.5 / B],
    False: [0.5 * -1.0 / B, 0.5 * 0.1 / B, 0.5 * 0.5 / B, 0.5 * -0.5 / B],
}


def t(values: list[float], grad: bool = False) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64, requires_grad=grad)


def log(values: list[float]) -> torch.Tensor:
    return torch.tensor([math.log(v) for v in values], dtype=torch.float64)


def assert_stats(
    stats: torch.Tensor,
    coefs: LossCoefs,
    expected: dict[str, float],
    rtol: float = 1e-12,
    atol: float = 1e-12,
) -> None:
    """Compare the figures the trainer logs from a stats vector with hand-computed ones."""
    assert stats.shape == (len(STAT_NAMES),)
    got = finalize_stats(stats.tolist(), coefs)
    assert tuple(got) == LOGGED_STATS
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=rtol, abs=max(atol, 1e-12)), name


def hand_stats(clip_vloss: bool, mean_entropy: float) -> dict[str, float]:
    """The logged figures of the hand-worked batch; only the entropy differs between tests."""
    return {
        "loss": PG_LOSS - 0.01 * mean_entropy + 0.5 * V_LOSS[clip_vloss],
        "pg_loss": PG_LOSS,
        "v_loss": V_LOSS[clip_vloss],
        "entropy": mean_entropy,
        "approx_kl": APPROX_KL,
        "clipfrac": CLIPFRAC,
    }


@pytest.mark.parametrize("clip_vloss", [True, False])
def test_reference_loss_and_gradients_by_hand(clip_vloss: bool) -> None:
    coefs = LossCoefs(0.2, clip_vloss, 0.01, 0.5)
    newlogprob = log(NEW_P).requires_grad_()
    entropy, newvalue = t(ENTROPY, grad=True), t(NEW_V, grad=True)
    loss, stats = ppo_loss(
        newlogprob, entropy, newvalue, log(OLD_P), t(ADV), t(RET), t(OLD_V), coefs
    )
    expected = hand_stats(clip_vloss, mean_entropy=0.5)
    assert loss.item() == pytest.approx(expected["loss"], rel=1e-12)
    assert_stats(stats, coefs, expected)
    assert not stats.requires_grad
    loss.backward()
    torch.testing.assert_close(newlogprob.grad, t(GRAD_LOGPROB), rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(newvalue.grad, t(GRAD_VALUE[clip_vloss]), rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(entropy.grad, t([-0.01 / B] * B), rtol=1e-12, atol=1e-15)


def binary_entropy(p: float) -> float:
    return -(p * math.log(p) + (1 - p) * math.log(1 - p))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64-torch", "f32-compiled"])
@pytest.mark.parametrize("clip_vloss", [True, False])
def test_analytic_loss_and_head_gradients_by_hand(clip_vloss: bool, dtype) -> None:
    """Two actions; the taken one (action 0 or 1, alternating) has probability NEW_P. In
    float32 on the CPU the compiled loop runs, in float64 the torch ops."""
    coefs = LossCoefs(0.2, clip_vloss, 0.01, 0.5)
    actions = torch.tensor([0, 1, 0, 1])
    probs = [
        [p, 1 - p] if a == 0 else [1 - p, p] for p, a in zip(NEW_P, actions.tolist(), strict=True)
    ]
    logits = torch.tensor([[math.log(q) for q in row] for row in probs], dtype=dtype)
    stats, grad_logits, grad_value = discrete_ppo_loss_and_head_grads(
        logits, *(x.to(dtype) for x in (t(NEW_V),)), actions,
        *(x.to(dtype) for x in (log(OLD_P), t(ADV), t(RET), t(OLD_V))), coefs,
    )  # fmt: skip
    entropies = [binary_entropy(p) for p in NEW_P]
    if dtype == torch.float32:
        stats, grad_logits, grad_value = stats.double(), grad_logits.double(), grad_value.double()
    tol = {"rtol": 1e-12, "atol": 1e-15} if dtype == torch.float64 else {"rtol": 0, "atol": 1e-6}
    assert_stats(stats, coefs, hand_stats(clip_vloss, mean_entropy=sum(entropies) / B), **tol)
    torch.testing.assert_close(grad_value, t(GRAD_VALUE[clip_vloss]), **tol)
    # Chain rule per logit j: d logp(a)/d logit_j = [j == a] - p_j, and the entropy bonus
    # -ent_coef * mean(H) has d/d logit_j = (ent_coef / B) * p_j * (log p_j + H).
    expected = [
        [
            GRAD_LOGPROB[i] * ((j == a) - row[j])
            + 0.01 / B * row[j] * (math.log(row[j]) + entropies[i])
            for j in range(2)
        ]
        for i, (row, a) in enumerate(zip(probs, actions.tolist(), strict=True))
    ]
    torch.testing.assert_close(grad_logits, torch.tensor(expected, dtype=torch.float64), **tol)


def random_batch(n: int, num_actions: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    logits = 2.0 * torch.randn(n, num_actions, generator=gen)
    value = torch.randn(n, generator=gen)
    actions = torch.randint(0, num_actions, (n,), generator=gen)
    logp = torch.log_softmax(logits, 1).gather(1, actions[:, None])[:, 0]
    # Old log-probs and values on both sides of every clip.
    oldlogp = logp + 0.4 * torch.randn(n, generator=gen)
    adv = torch.randn(n, generator=gen)
    ret = value + torch.randn(n, generator=gen)
    oldv = value + 0.5 * torch.randn(n, generator=gen)
    return logits, value, actions, oldlogp, adv, ret, oldv


@pytest.mark.kernel("loss")
@pytest.mark.parametrize("clip_vloss", [True, False], ids=["vclip", "no-vclip"])
@pytest.mark.parametrize("n, num_actions", [(1, 1), (7, 2), (512, 2), (300, 5), (4099, 3)])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_compiled_loss_equals_the_torch_ops(n, num_actions, clip_vloss, layout) -> None:
    """The compiled loop against the torch version, float32, random batches that cross every
    clip branch; "strided" reads the inputs as the MLP and the packed table hold them (logits
    a transposed view, per-sample columns of one table) and writes into strided views."""
    assert compiled_loss_available(), "rlperf.ppo._loss_cpu is missing: pip install -e ."
    coefs = LossCoefs(0.2, clip_vloss, 0.01, 0.5)
    batch = random_batch(n, num_actions, seed=n + num_actions)
    outs = {}
    if layout == "strided":
        logits_t = batch[0].T.contiguous()
        table = torch.stack([batch[i] for i in (1, 3, 4, 5, 6)], 1).contiguous()
        batch = (logits_t.T, table[:, 0], batch[2], *table[:, 1:].unbind(1))
        grad_buf = torch.empty(num_actions + 1, n)
        outs = {"grad_logits_out": grad_buf[:num_actions].T, "grad_value_out": grad_buf[-1]}
    fast = discrete_ppo_loss_and_head_grads(*batch, coefs, **outs)
    if outs:
        assert fast[1].data_ptr() == outs["grad_logits_out"].data_ptr()
        assert fast[2].data_ptr() == outs["grad_value_out"].data_ptr()
    fast = tuple(x.clone() for x in fast)
    reference = discrete_ppo_loss_and_head_grads_torch(*batch, coefs)
    for name, f, r in zip(("stats", "grad_logits", "grad_value"), fast, reference, strict=True):
        torch.testing.assert_close(f, r, rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.kernel("loss")
def test_compiled_loss_refuses_an_action_out_of_range() -> None:
    logits, value, actions, *rest = random_batch(6, 3, seed=0)
    actions[4] = 3
    with pytest.raises(ValueError, match="action 3 of row 4 is outside 0..2"):
        discrete_ppo_loss_and_head_grads(logits, value, actions, *rest, COEFS)


@pytest.mark.kernel("loss")
def test_compiled_loss_does_not_depend_on_the_thread_count() -> None:
    """Large batches split their rows over torch's threads; the statistics are summed in fixed
    pieces added in order, so one and two threads give the same bits."""
    batch = random_batch(5000, 2, seed=9)
    results = []
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            results.append([x.clone() for x in discrete_ppo_loss_and_head_grads(*batch, COEFS)])
    finally:
        torch.set_num_threads(before)
    for one, two in zip(*results, strict=True):
        assert torch.equal(one, two)


@pytest.mark.kernel("loss")
def test_compiled_loss_finds_a_bad_action_in_any_thread_s_rows() -> None:
    logits, value, actions, *rest = random_batch(5000, 3, seed=1)
    actions[4321] = -1
    with pytest.raises(ValueError, match="action -1 of row 4321 is outside 0..2"):
        discrete_ppo_loss_and_head_grads(logits, value, actions, *rest, COEFS)


def test_zero_coefficients_leave_only_the_policy_term() -> None:
    coefs = LossCoefs(clip_coef=0.2, clip_vloss=True, ent_coef=0.0, vf_coef=0.0)
    loss, stats = ppo_loss(
        log(NEW_P), t(ENTROPY), t(NEW_V), log(OLD_P), t(ADV), t(RET), t(OLD_V), coefs
    )
    assert loss.item() == pytest.approx(PG_LOSS, rel=1e-12)
    assert_stats(stats, coefs, {"loss": PG_LOSS, "v_loss": 0.275, "pg_loss": PG_LOSS})


def test_wide_clip_makes_every_sample_unclipped() -> None:
    coefs = LossCoefs(clip_coef=10.0, clip_vloss=True, ent_coef=0.0, vf_coef=0.5)
    _, stats = ppo_loss(
        log(NEW_P), t(ENTROPY), t(NEW_V), log(OLD_P), t(ADV), t(RET), t(OLD_V), coefs
    )
    expected_pg = sum(-a * r for a, r in zip(ADV, RATIOS, strict=True)) / B
    assert_stats(stats, coefs, {"pg_loss": expected_pg, "v_loss": 0.18875, "clipfrac": 0.0})


def test_normalize_advantages_uses_the_unbiased_std() -> None:
    adv = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    std = math.sqrt(((1.5**2) * 2 + (0.5**2) * 2) / 3)
    expected = [(a - 2.5) / (std + 1e-8) for a in (1.0, 2.0, 3.0, 4.0)]
    torch.testing.assert_close(normalize_advantages(adv), torch.tensor(expected, dtype=adv.dtype))


def test_logged_names_and_default_coefficients() -> None:
    assert set(LOGGED_STATS) == {"loss", "pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac"}
    assert COEFS == LossCoefs(), "defaults are CleanRL's"


def test_supervised_loss_by_hand():
    """Two samples: teacher actions with student probabilities 0.5 and 0.25.

    cross-entropy = (-ln 0.5 - ln 0.25) / 2 = (0.6931 + 1.3863) / 2 = 1.0397;
    values (v, oldv, ret): (1.0, 0.9, 2.0) inside the clip: (v-ret)^2 = 1.0 vs (1.0-2.0)^2 = 1.0
    -> 1.0; (0.0, 0.5, 0.0): v-oldv = -0.5 clipped to -0.2 -> vc = 0.3, (vc-ret)^2 = 0.09,
    unclipped 0.0 -> max 0.09. v_loss = 0.5 * (1.0 + 0.09) / 2 = 0.2725.
    loss = 1.0397 + 0.5 * 0.2725 = 1.17595 (no policy-gradient term, no entropy bonus).
    """
    from rlperf.ppo.loss import SUPERVISED_STATS, finalize_supervised_stats, supervised_loss

    coefs = LossCoefs(clip_coef=0.2, clip_vloss=True, ent_coef=0.01, vf_coef=0.5)
    logp = torch.log(torch.tensor([0.5, 0.25])).requires_grad_()
    entropy = torch.tensor([1.0, 0.5])
    newvalue = torch.tensor([1.0, 0.0], requires_grad=True)
    loss, stats = supervised_loss(
        logp, entropy, newvalue, torch.tensor([2.0, 0.0]), torch.tensor([0.9, 0.5]), coefs
    )
    ce = (math.log(2) + math.log(4)) / 2
    assert loss.item() == pytest.approx(ce + 0.5 * 0.2725, rel=1e-6)
    loss.backward()
    # d loss / d logp = -1/B; value: sample 1 unclipped (v-ret)/B * vf = -0.25, sample 2 clipped
    # branch with an active clamp: 0.
    torch.testing.assert_close(logp.grad, torch.tensor([-0.5, -0.5]))
    torch.testing.assert_close(newvalue.grad, torch.tensor([-0.25, 0.0]))
    figures = finalize_supervised_stats(stats.tolist(), coefs)
    assert list(figures) == list(SUPERVISED_STATS)
    assert figures["cross_entropy"] == pytest.approx(ce)
    assert figures["v_loss"] == pytest.approx(0.2725)
    assert figures["entropy"] == pytest.approx(0.75)
    assert figures["loss"] == pytest.approx(loss.item())
