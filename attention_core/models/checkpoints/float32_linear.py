"""A linear layer whose 16-bit weight is read as float32 a few rows at a time.

Reading a whole 16-bit weight as float32 (``weight.float()``) writes a new
float32 copy twice its size, every call: for Llama-3.2-3B's shape that is
12.8 GB of fresh memory per forward pass, and the kernel faulting in and
zeroing those pages cost as much as a third of the pass.  Here each block of
``BLOCK_BYTES`` of the weight is converted and multiplied at once, so the
float32 rows stay in the CPU's cache, the memory allocator reuses one small
buffer, and the weight's bytes are read from memory once, at their stored
size: about float32's speed at bfloat16's memory (``bench/bench_big_models.py``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# Float32 bytes of a block of rows: a few MB, about one core's share of the L2/L3 cache.
BLOCK_BYTES = 4 << 20
# Fewer rows than this and the matrix products get too thin to run at full speed.
MIN_ROWS = 256


def block_rows(in_features: int) -> int:
    return max(MIN_ROWS, BLOCK_BYTES // (4 * max(in_features, 1)))


def float32_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """``F.linear(x, weight.float(), bias)`` for a float32 ``x``, block by block (the
    module doc).  Shapes: x (..., in), weight (out, in), bias (out,).

    Anything else (a float32 weight, an ``x`` of another dtype, a gradient to record:
    the blocks write into one output, which autograd cannot follow) is ``F.linear``
    with the weight upcast whole, as before.
    """
    float_bias = None if bias is None else bias.float()
    rows = block_rows(weight.shape[-1])
    if (
        weight.dtype == torch.float32
        or x.dtype != torch.float32
        or weight.shape[0] <= rows
        or weight.device.type != "cpu"
        or (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad))
    ):
        return F.linear(x, weight.float(), float_bias)
    flat = x.reshape(-1, x.shape[-1])
    out = torch.empty(flat.shape[0], weight.shape[0], dtype=torch.float32, device=x.device)
    for start in range(0, weight.shape[0], rows):
        block = weight[start : start + rows].float()
        torch.mm(flat, block.t(), out=out[:, start : start + rows])
    if float_bias is not None:
        out += float_bias
    return out.reshape(*x.shape[:-1], weight.shape[0])
