"""A linear layer whose 16-bit weight is read as float32 into one reused buffer.

Reading a whole 16-bit weight as float32 (``weight.float()``) allocates a new
float32 copy twice its size every call: for Llama-3.2-3B's shape 12.8 GB of
fresh memory per forward pass, and the kernel faulting in and zeroing those
pages cost about as much as the conversion itself (a 16-bit forward pass took
2x float32's time).  Here each thread converts into one float32 buffer of its
own, kept between calls (at most ``BUFFER_ELEMENTS``: 128 MB, a 3B or 8B
layer's largest weight or half of it), and multiplies from there; a weight
larger than the buffer (a vocabulary's head) goes through it in blocks of
rows.  Memory: the stored bytes plus one buffer per thread that runs a
16-bit model; speed: about 1.2x float32's (``bench/bench_big_models.py``).
"""

from __future__ import annotations

import threading

import torch
import torch.nn.functional as F

BUFFER_ELEMENTS = 32 << 20

_local = threading.local()


def _buffer(elements: int) -> torch.Tensor:
    """This thread's float32 buffer, at least ``elements`` long (grown, never shrunk)."""
    buffer: torch.Tensor | None = getattr(_local, "buffer", None)
    if buffer is None or buffer.numel() < elements:
        _local.buffer = None  # the old one freed before the new one is allocated
        buffer = torch.empty(elements, dtype=torch.float32)
        _local.buffer = buffer
    return buffer


def block_rows(in_features: int) -> int:
    """Rows of a weight with ``in_features`` columns that the buffer holds at once."""
    return max(BUFFER_ELEMENTS // max(in_features, 1), 1)


def float32_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """``F.linear(x, weight.float(), bias)`` for a float32 ``x`` on the CPU, through the
    thread's buffer (the module doc).  Shapes: x (..., in), weight (out, in), bias (out,).

    Anything else (a float32 weight, an ``x`` of another dtype, another device, a
    gradient to record: autograd would keep the buffer, which the next call
    overwrites) is ``F.linear`` with the weight upcast whole.
    """
    float_bias = None if bias is None else bias.float()
    if (
        weight.dtype == torch.float32
        or x.dtype != torch.float32
        or weight.device.type != "cpu"
        or x.device.type != "cpu"
        or (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad))
    ):
        return F.linear(x, weight.float(), float_bias)
    rows = block_rows(weight.shape[-1])
    if weight.shape[0] <= rows:
        held = _buffer(weight.numel())[: weight.numel()].view(weight.shape)
        return F.linear(x, held.copy_(weight), float_bias)
    flat = x.reshape(-1, x.shape[-1])
    out = torch.empty(flat.shape[0], weight.shape[0], dtype=torch.float32)
    buffer = _buffer(rows * weight.shape[-1])
    for start in range(0, weight.shape[0], rows):
        block = weight[start : start + rows]
        held = buffer[: block.numel()].view(block.shape).copy_(block)
        torch.mm(flat, held.t(), out=out[:, start : start + block.shape[0]])
    if float_bias is not None:
        out += float_bias
    return out.reshape(*x.shape[:-1], weight.shape[0])
