"""Weight gradients of long minibatches as row blocks reduced in a second step (CUDA only).

A layer's weight gradient is ``x^T @ dz``: a (in, out) result reduced over every row of the
minibatch. For the MLP on a GPU that is a tiny output (64 x 64, times actor and critic) with a
long reduction (32,768 rows at CartPole's 4,096 envs x 32 steps in 4 minibatches): one GEMM
covers it with a handful of output tiles, so a handful of the GPU's SMs do all of the work.
The first GPU run measured two such GEMMs at 84% of the update's kernel time and ~0.4% of the
GPU's float32 peak (issue 57). Split into blocks of :data:`SPLIT_BLOCK_ROWS` rows, each block's
partial product is an entry of one batched GEMM (32 blocks x 2 nets = 64 entries, each with its
own tiles), and a sum over the blocks finishes the reduction: two kernels instead of one, the
second over a few small (in, out) partials.

Where it applies (:func:`split_block_rows`): on CUDA, for minibatches of at least
:data:`SPLIT_MIN_ROWS` rows. Below that the reduction is short enough that the extra sum and the
partials' memory are not worth it, and on the CPU a GEMM's threads already split the rows
(the CPU path is the speed-critical one and stays exactly as it was). Neither figure has been
measured on a GPU yet: both are the first guess the GPU check is to confirm or move.

:func:`split_weight_grad` is the reduction, :class:`SplitBatchedLinear` the autograd node of a
stacked linear layer (``baddbmm``) whose backward uses it; the MLP's analytic ``backward``
calls :func:`weight_grad` directly. The tests hold both to the plain product and to autograd.
"""

from __future__ import annotations

from typing import Any

import torch

# Rows per block: 32,768-row minibatches become 32 blocks, 64 batch entries for actor and
# critic, about half the SMs of a large GPU before each entry's own tiles.
SPLIT_BLOCK_ROWS = 1024
# Minibatches shorter than this keep the one GEMM (at least 8 blocks to be worth a second step).
SPLIT_MIN_ROWS = 8 * SPLIT_BLOCK_ROWS


def split_block_rows(rows: int, device: torch.device) -> int:
    """Rows per block for weight gradients over ``rows`` rows on ``device``: 0 (one plain GEMM)
    off CUDA or below :data:`SPLIT_MIN_ROWS`, else :data:`SPLIT_BLOCK_ROWS`."""
    if device.type != "cuda" or rows < SPLIT_MIN_ROWS:
        return 0
    return SPLIT_BLOCK_ROWS


def split_weight_grad(
    x: torch.Tensor, dz: torch.Tensor, block_rows: int, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``x^T @ dz`` for stacked layers, reduced in row blocks then summed.

    Args:
        x: (G, N, I) layer inputs (any strides, an expanded batch dimension included).
        dz: (G, N, O) gradients of the layer's outputs.
        block_rows: rows per block (> 0). The ``N // block_rows`` whole blocks are one batched
            GEMM; the remaining rows, if any, are added with one more GEMM.
        out: optional (G, I, O) tensor to write into.

    Returns:
        (G, I, O), equal to ``torch.bmm(x.transpose(1, 2), dz)`` up to float rounding.
    """
    g, n, _ = x.shape
    blocks = n // block_rows
    whole = blocks * block_rows
    if blocks == 0:
        return torch.bmm(x.transpose(1, 2), dz, out=out)
    # (G, blocks, rows, I)^T @ (G, blocks, rows, O) -> (G, blocks, I, O): views where the rows
    # divide evenly (matmul copies a strided operand into a batch it can run).
    xb = x[:, :whole].unflatten(1, (blocks, block_rows))
    dzb = dz[:, :whole].unflatten(1, (blocks, block_rows))
    partial = torch.matmul(xb.transpose(2, 3), dzb)
    result = torch.sum(partial, 1, out=out)
    if whole < n:
        result.baddbmm_(x[:, whole:].transpose(1, 2), dz[:, whole:])
    return result


def weight_grad(
    x: torch.Tensor, dz: torch.Tensor, block_rows: int, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``x^T @ dz`` (G, I, O) for stacked layers: one ``bmm`` with ``block_rows`` 0, else
    :func:`split_weight_grad`."""
    if block_rows <= 0:
        return torch.bmm(x.transpose(1, 2), dz, out=out)
    return split_weight_grad(x, dz, block_rows, out)


class SplitBatchedLinear(torch.autograd.Function):
    """``baddbmm(bias, x, w)`` for stacked layers, whose weight gradient is reduced in row
    blocks (:func:`split_weight_grad`).

    Inputs: ``x`` (G, N, I), ``w`` (G, I, O), ``bias`` (G, 1, O), ``block_rows`` (int > 0).
    Output: (G, N, O). Gradients: ``dx = dy @ w^T``, ``dw`` split, ``dbias`` summed over rows.
    """

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, block_rows: int
    ) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        ctx.block_rows = block_rows
        return torch.baddbmm(bias, x, w)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, w = ctx.saved_tensors
        need_x, need_w, need_bias, _ = ctx.needs_input_grad
        dx = torch.bmm(dy, w.transpose(1, 2)) if need_x else None
        dw = split_weight_grad(x, dy, ctx.block_rows) if need_w else None
        dbias = dy.sum(1, keepdim=True) if need_bias else None
        return dx, dw, dbias, None


def batched_linear(
    x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, block_rows: int
) -> torch.Tensor:
    """``baddbmm(bias, x, w)`` (G, N, O) under autograd; with ``block_rows`` > 0, where a
    gradient will be taken, through :class:`SplitBatchedLinear` (its weight gradient split into
    row blocks; the forward is the same ``baddbmm``)."""
    if block_rows <= 0 or not (torch.is_grad_enabled() and w.requires_grad):
        return torch.baddbmm(bias, x, w)
    return SplitBatchedLinear.apply(x, w, bias, block_rows)
