"""A layer's pooled overview on a GPU: the context from flash attention, the maps
recomputed from its log-sum-exp tile by tile (``pooled_kernel``), never a T × T tensor.

``LongPass`` takes this path only when asked (``LongPass.device_pooling``) and only
where it means exactly what the blocked path means (``fits``): the weights (not
``value_norm``), a causal (q and k as long) or unmasked map with no soft-cap, score
bias, sinks or sliding window, the whole map pooled (nothing hidden, no region), no
other reader of the blocks (``watch``) and no full-resolution head average (the
rollout's); on CUDA with Triton importable (or on the CPU in Triton's interpreter
where asked: ``CPU_INTERPRETER``, which the tests and the benchmark's ``--interpret``
set).  Everything else goes the blocked way, every step through
``attention_with_steps``.

Precision.  The blocked path computes every step in float32.  Here the forward's
flash attention and the kernel read q, k and v rounded to 16 bits (float16 when every
value fits it, 4 times finer than bfloat16; else bfloat16), as a 16-bit model's own
SDPA forward does; the dot products accumulate in float32, the exponent and the pooling
are float32.  A pooled cell then differs from the float32 path's by the 16-bit rounding
of its scores: ``p · |Δs|``, |Δs| ≲ 2⁻¹⁰ × Σ|q_d·k_d|·scale for float16 (≲ 2⁻⁸ for
bfloat16), below 1/255 (the compact answer's step) for the weights that show; the
tests bound it.  The kept q and k stay float32, so a region or one head at full
resolution afterwards (``KeptLayer.gather``) is the float32 path's, and one head's
trace keeps every step in float32 through ``attention_with_steps``.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading

import torch

from ...blocked_attention import AttentionCall
from .map_grid import MapGrid, MapQuery
from .pooling import Region

# The largest tile (query rows × key columns) a program pools, and the smallest (tl.dot).
TILE_ROWS, TILE_COLS, TILE_MIN = 128, 64, 16
# The head dim is read in chunks of this many (a 128 × 64 tile of 8 warps then fits its
# registers: 255 and 68 bytes spilled at D = 128 on sm_90, against 584 bytes whole).
DOT_CHUNK = 32
# The kernel indexes q (H × T × D values) with 32-bit offsets: 32 heads of 128 at up to
# 524,287 tokens.
INT32_OFFSETS = 2**31
# float16 holds every q, k and v below this in magnitude (its largest value is 65,504).
FLOAT16_RANGE = 2.0**15


# The kernel on the CPU, in Triton's interpreter: only where asked (the tests, the
# benchmark's --interpret), with TRITON_INTERPRET=1 set before Triton is first imported.
CPU_INTERPRETER = False


class KernelFailed(RuntimeError):
    """Triton could not build or launch the kernel here (no C compiler for its launcher,
    an unsupported GPU...): this layer and every later one go the blocked way."""


# Held around each launch of the tuned kernel (see ``_launch``).
_LAUNCHING = threading.Lock()

# Why the kernel failed in this process (empty: it has not).
FAILED: list[str] = []
logger = logging.getLogger(__name__)


def kernel_available(device: torch.device) -> bool:
    """Whether the kernel can run on ``device``: CUDA with Triton, or the CPU in Triton's
    interpreter where asked (``CPU_INTERPRETER`` and ``TRITON_INTERPRET=1``); not after
    it failed once (``FAILED``)."""
    if FAILED or importlib.util.find_spec("triton") is None:
        return False
    if device.type == "cuda":
        return True
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"
    return device.type == "cpu" and CPU_INTERPRETER and interpreted


def fits(call: AttentionCall, query: MapQuery | None) -> bool:
    """Whether the kernel's overview of ``call`` is exactly what the blocked path gathers
    for ``query`` (see the module's docstring); the device aside."""
    if query is None or query.measure != "weights":
        return False
    if query.hidden is not None or query.hidden_keys is not None:
        return False
    T, S = int(call.query.shape[-2]), int(call.key.shape[-2])
    D, D_v = int(call.query.shape[-1]), int(call.value.shape[-1])
    plain = (
        call.attn_mask is None
        and call.score_bias is None
        and call.softcap is None
        and call.sinks is None
    )
    return (
        plain
        and (not call.is_causal or T == S)
        and query.region == Region(0, T, 0, S)
        and D == D_v
        and D % 8 == 0
        and D <= 256
        and call.query.shape[0] == 1
        and call.query.numel() < INT32_OFFSETS  # the kernel's offsets are 32-bit
    )


def attention_dtype(call: AttentionCall) -> torch.dtype:
    """The 16-bit type q, k and v are rounded to: float16 when every value fits, else
    bfloat16 (on the CPU: float32, which its flash attention takes)."""
    if call.query.device.type == "cpu":
        return torch.float32
    tensors = (call.query, call.key, call.value)
    largest = float(torch.stack([t.abs().amax() for t in tensors]).amax())  # one sync
    return torch.float16 if largest < FLOAT16_RANGE else torch.bfloat16


def flash_context(
    call: AttentionCall, q: torch.Tensor, k: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """The context (1, H, T, D) float32 and the log-sum-exp (H, T) float32 (natural log
    of each row's Σ exp(scale·q·k)) of ``call`` by the flash attention op of its device,
    from q (1, H, T, D) and k (1, H_kv, S, D) already in ``dtype``."""
    H, H_kv = int(q.shape[1]), int(k.shape[1])
    keys = k.repeat_interleave(H // H_kv, dim=1)
    values = call.value.to(dtype).repeat_interleave(H // H_kv, dim=1)
    scale = call.scale_factor
    if q.device.type == "cuda":
        out = torch.ops.aten._scaled_dot_product_flash_attention(
            q, keys, values, 0.0, call.is_causal, False, scale=scale
        )
    else:
        out = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, keys, values, 0.0, call.is_causal, scale=scale
        )
    context, lse = out[0], out[1]
    T = int(q.shape[2])
    if lse.shape[:2] != (1, H) or lse.shape[-1] < T:
        raise RuntimeError(f"flash attention's log-sum-exp is {tuple(lse.shape)}, not (1, H, T)")
    return context.float(), lse[0, :, :T].float()


def tiles(block: int, largest: int) -> tuple[int, bool]:
    """The largest tile side for pooling ``block``-wide cells: the largest power of two
    <= the block (so a tile touches at most 2 cells a side), within [TILE_MIN, largest];
    and whether it does (else each entry is pooled by its own atomic).  The autotuner
    tries this side and half of it (``pooled_kernel.pruned``)."""
    if block < TILE_MIN:
        return TILE_MIN, False
    return min(largest, 1 << (block.bit_length() - 1)), True


def pool_layer(
    query: torch.Tensor,
    key: torch.Tensor,
    lse: torch.Tensor,
    scale: float,
    causal: bool,
    grid: MapGrid,
) -> MapGrid:
    """``grid`` (a whole-map weights query, nothing hidden) filled with the maps of q
    (H, T, D), k (H_kv, S, D) and the forward's log-sum-exp (H, T), by ``pooled_kernel``.

    Every head is pooled (the average reads them all); the grid keeps its own."""
    H = int(query.shape[0])
    cells_r, cells_c = grid.spec.shape
    heads = torch.zeros(H, cells_r, cells_c, device=query.device)
    average = torch.zeros(cells_r, cells_c, device=query.device)
    q, k = query.contiguous(), key.contiguous()
    _launch(q, k, lse.contiguous(), heads, average, grid, scale, causal)
    if grid.spec.heads is not None:
        heads = heads.index_select(0, torch.tensor(grid.spec.heads, device=heads.device))
    grid.heads.copy_(heads)
    if grid.average is not None:
        grid.average.copy_(average)
    return grid


def _launch(
    q: torch.Tensor,
    k: torch.Tensor,
    lse: torch.Tensor,
    heads: torch.Tensor,
    average: torch.Tensor,
    grid: MapGrid,
    scale: float,
    causal: bool,
) -> None:
    """``pooled_kernel.pooled_maps_tuned`` over q (H, T, D), k (H_kv, S, D) and lse
    (H, T), contiguous, into ``heads`` (H, r, c) and ``average`` (r, c): ``grid``'s cells.
    Its tiles are the largest that fit the pooling blocks (``tiles``) or smaller, as the
    autotuner finds fastest on this GPU for the head dim and T's power-of-two bucket."""
    from .pooled_kernel import LOG2E, pooled_maps_tuned  # lazy: Triton only when used

    H, T, D = (int(n) for n in q.shape)
    S = int(k.shape[1])
    block_r, block_c = grid.spec.block
    cells_r, cells_c = grid.spec.shape
    rows, _ = tiles(block_r, TILE_ROWS)
    cols, _ = tiles(block_c, TILE_COLS)
    padded = max(TILE_MIN, 1 << (D - 1).bit_length())  # the head dim, a power of two

    def launch_grid(meta: dict[str, int]) -> tuple[int, int]:
        return _cdiv(T, meta["BM"]), _cdiv(S, meta["BN"])

    # One launch at a time: Triton's autotuner keeps a launch's arguments on itself while
    # it prunes and times its configs (two threads at once would read each other's).
    with _LAUNCHING:
        pooled_maps_tuned[launch_grid](
            q,
            k,
            lse,
            heads,
            average,
            T,
            S,
            D,
            q.stride(0),
            q.stride(1),
            k.stride(0),
            k.stride(1),
            lse.stride(0),
            cells_r,
            cells_c,
            block_r,
            block_c,
            max(T, S).bit_length(),  # T's bucket: the autotuner's key, with D and the caps
            rows,
            cols,
            scale * LOG2E,
            1.0 / H,
            H=H,
            GROUP=H // int(k.shape[0]),
            CAUSAL=causal,
            AVERAGE=grid.average is not None,
            EXACT_FP32=q.dtype == torch.float32,
            BD=padded,
            BK=min(DOT_CHUNK, padded),
        )


def _cdiv(n: int, d: int) -> int:
    """⌈n / d⌉."""
    return -(-n // d)


def pooled_attend(call: AttentionCall, grid: MapGrid) -> torch.Tensor:
    """The context (1, H, T, D) float32 of ``call`` (a ``fits`` one), its maps pooled into
    ``grid``: flash attention's context and log-sum-exp, then ``pool_layer``.  A
    ``KernelFailed`` (and ``FAILED`` says why) when either cannot run here."""
    try:
        dtype = attention_dtype(call)
        q, k = call.query.to(dtype), call.key.to(dtype)
        context, lse = flash_context(call, q, k, dtype)
        pool_layer(q[0], k[0], lse, call.scale_factor, call.is_causal, grid)
    except torch.cuda.OutOfMemoryError:
        raise
    except Exception as exc:  # Triton's build or launch, the flash op: the blocked path
        FAILED.append(f"{type(exc).__name__}: {exc}"[:500])
        logger.warning("the GPU overview's kernel failed (%s): the blocked path instead", FAILED[0])
        raise KernelFailed(FAILED[0]) from exc
    return context
