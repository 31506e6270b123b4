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

Few tokens (at most ``FEW_ROWS`` rows of x, what a viewer's pass of 128
tokens has) go another way: the weight is read in blocks of about
``CACHED_ELEMENTS`` (4 MB as float32), each multiplied while it is still in
the cache, as ``block @ x.T`` (the weight on the left: MKL's faster shape
here).  On this 1-thread CPU, 16-bit weights at 128 tokens: 3072 -> 8192
61.5 ms vs 67.0 the whole-buffer way (float32 weights: 52.8), 8192 -> 3072
58.8 vs 68.9 (55.3); at 1,024 tokens the whole buffer is faster (one big
multiply; the conversion is a smaller share there).
"""

from __future__ import annotations

import threading

import torch
import torch.nn.functional as F

BUFFER_ELEMENTS = 32 << 20
FEW_ROWS = 128
CACHED_ELEMENTS = 1 << 20

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
    flat = x.reshape(-1, x.shape[-1])
    if flat.shape[0] <= FEW_ROWS:
        return _few_rows(flat, weight, float_bias).view(*x.shape[:-1], weight.shape[0])
    rows = block_rows(weight.shape[-1])
    if weight.shape[0] <= rows:
        held = _buffer(weight.numel())[: weight.numel()].view(weight.shape)
        return F.linear(x, held.copy_(weight), float_bias)
    out = torch.empty(flat.shape[0], weight.shape[0], dtype=torch.float32)
    buffer = _buffer(rows * weight.shape[-1])
    for start in range(0, weight.shape[0], rows):
        block = weight[start : start + rows]
        held = buffer[: block.numel()].view(block.shape).copy_(block)
        torch.mm(flat, held.t(), out=out[:, start : start + block.shape[0]])
    if float_bias is not None:
        out += float_bias
    return out.reshape(*x.shape[:-1], weight.shape[0])


def _few_rows(flat: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``flat @ weight.float().T + bias`` for few rows (the module doc), (n, in) -> (n, out):
    the weight through the buffer in cache-sized blocks, each as ``block @ flat.T``."""
    rows = max(CACHED_ELEMENTS // weight.shape[-1], 1)
    buffer = _buffer(rows * weight.shape[-1])
    flat_t = flat.t().contiguous()  # (in, n)
    out_t = torch.empty(weight.shape[0], flat.shape[0], dtype=torch.float32)  # (out, n)
    for start in range(0, weight.shape[0], rows):
        block = weight[start : start + rows]
        held = buffer[: block.numel()].view(block.shape).copy_(block)
        torch.mm(held, flat_t, out=out_t[start : start + block.shape[0]])
    out = out_t.t().contiguous()
    if bias is not None:
        out += bias
    return out
