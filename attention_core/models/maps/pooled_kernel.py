"""The Triton kernel of ``gpu_pooled``: one layer's maps max-pooled into its grid, tile
by tile, from q, k and the forward's log-sum-exp; never a T × T tensor.

A program takes one tile of ``BM`` query rows × ``BN`` key columns and loops over the
heads: ``s = q·kᵀ`` (``tl.dot``, float32 accumulation), ``p = exp(s·scale − lse_row)``
(the softmax the forward took, each row's normalizer read back), the causal triangle and
the text's ends set to 0, then ``p`` max-pooled into the head's cells (``MapGrid``'s
cells: ``block = ceil(T / cells)``) by an atomic maximum.  The head average (the mean of
``p`` over every head, then pooled, as ``MapGrid`` pools it) sums ``p`` over the loop.

Two ways to pool a tile (``TWO_CELLS``): a tile no larger than a pooling block touches
at most 2 × 2 cells, reduced in registers to 4 numbers (4 atomics a tile and head);
smaller blocks (a fine grid) pool each entry by its own atomic.  Query head ``h`` reads
kv head ``h // group`` (grouped-query attention).  Only ``triton.language`` constructs
that compile for CUDA are used, so the same kernel runs in Triton's interpreter on the
CPU (``TRITON_INTERPRET=1``: the tests) and on a GPU.
"""

from __future__ import annotations

import os
from typing import Any

import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _pool_two_cells(
    out_ptr,
    p,
    r0,
    c0,
    rows,
    cols,
    cells_r,
    cells_c,
    block_r,
    block_c,
):
    """``p`` (BM, BN) at rows ``r0..``, columns ``c0..`` into the <= 2 × 2 cells it
    touches (a tile no larger than a block): 4 register reductions, 4 atomics."""
    cr = r0 // block_r
    cc = c0 // block_c
    first_r = (rows // block_r) == cr
    first_c = (cols // block_c) == cc
    upper = tl.max(tl.where(first_r[:, None], p, 0.0), axis=0)  # (BN,) row cell cr
    lower = tl.max(tl.where(first_r[:, None], 0.0, p), axis=0)  # (BN,) row cell cr + 1
    a = tl.max(tl.where(first_c, upper, 0.0), axis=0)
    b = tl.max(tl.where(first_c, 0.0, upper), axis=0)
    c = tl.max(tl.where(first_c, lower, 0.0), axis=0)
    d = tl.max(tl.where(first_c, 0.0, lower), axis=0)
    base = out_ptr + cr * cells_c + cc
    right = cc + 1 < cells_c
    below = cr + 1 < cells_r
    tl.atomic_max(base, a, mask=a > 0.0)
    tl.atomic_max(base + 1, b, mask=right & (b > 0.0))
    tl.atomic_max(base + cells_c, c, mask=below & (c > 0.0))
    tl.atomic_max(base + cells_c + 1, d, mask=below & right & (d > 0.0))


@triton.jit
def _pool_each(out_ptr, p, rows, cols, cells_c, block_r, block_c):
    """``p`` (BM, BN) into its cells one entry at a time (blocks smaller than the tile)."""
    cells = (rows // block_r)[:, None] * cells_c + (cols // block_c)[None, :]
    tl.atomic_max(out_ptr + cells, p, mask=p > 0.0)


# Sizes that change with the text: not specialized on (a new length, or pool, would
# build the kernel again); the head dim and q's row stride still are.
VARYING = [
    "T",
    "S",
    "stride_lh",
    "cells_r",
    "cells_c",
    "block_r",
    "block_c",
    "t_bucket",
    "rows_cap",
    "cols_cap",
]


@triton.jit(do_not_specialize=VARYING)
def pooled_maps_kernel(
    q_ptr,
    k_ptr,
    lse_ptr,
    heads_ptr,
    average_ptr,
    T,
    S,
    D,
    stride_qh,
    stride_qt,
    stride_kh,
    stride_ks,
    stride_lh,
    cells_r,
    cells_c,
    block_r,
    block_c,
    t_bucket,
    rows_cap,
    cols_cap,
    qk_scale,
    inv_heads,
    H: tl.constexpr,
    GROUP: tl.constexpr,
    CAUSAL: tl.constexpr,
    AVERAGE: tl.constexpr,
    TWO_CELLS: tl.constexpr,
    EXACT_FP32: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BD: tl.constexpr,
    BK: tl.constexpr,
):
    """Grid (cdiv(T, BM), cdiv(S, BN)).  q (H, T, D), k (H_kv, S, D) (last axis
    contiguous), lse (H, >= T) float32 natural-log, heads (H, cells_r, cells_c) and
    average (cells_r, cells_c) float32 zeros, filled by atomic maxima.  ``qk_scale`` is
    the softmax scale × log2(e).  ``t_bucket``, ``rows_cap`` and ``cols_cap`` are read by
    the autotuner only (``pooled_maps_tuned``: its key and its choice of tiles)."""
    r0 = tl.program_id(0) * BM
    c0 = tl.program_id(1) * BN
    if CAUSAL and c0 > r0 + BM - 1:
        return  # every key of the tile is after every row of it
    rows = r0 + tl.arange(0, BM)
    cols = c0 + tl.arange(0, BN)
    row_ok = rows < T
    col_ok = cols < S
    seen = row_ok[:, None] & col_ok[None, :]
    if CAUSAL:
        seen = seen & (cols[None, :] <= rows[:, None])
    total = tl.zeros((BM, BN), dtype=tl.float32)
    for h in range(H):
        s = tl.zeros((BM, BN), dtype=tl.float32)
        for d0 in tl.static_range(0, BD, BK):  # the head dim in chunks: fewer registers
            dims = d0 + tl.arange(0, BK)
            dim_ok = dims < D
            q = tl.load(
                q_ptr + h * stride_qh + rows[:, None] * stride_qt + dims[None, :],
                mask=row_ok[:, None] & dim_ok[None, :],
                other=0.0,
            )
            k = tl.load(
                k_ptr + (h // GROUP) * stride_kh + cols[:, None] * stride_ks + dims[None, :],
                mask=col_ok[:, None] & dim_ok[None, :],
                other=0.0,
            )
            if EXACT_FP32:
                s = tl.dot(q, tl.trans(k), s, input_precision="ieee")
            else:
                s = tl.dot(q, tl.trans(k), s)  # 16-bit inputs, float32 accumulation
        lse = tl.load(lse_ptr + h * stride_lh + rows, mask=row_ok, other=0.0)
        p = tl.exp2(s * qk_scale - lse[:, None] * 1.4426950408889634)
        p = tl.where(seen, p, 0.0)
        out = heads_ptr + h * cells_r * cells_c
        if TWO_CELLS:
            _pool_two_cells(out, p, r0, c0, rows, cols, cells_r, cells_c, block_r, block_c)
        else:
            _pool_each(out, p, rows, cols, cells_c, block_r, block_c)
        if AVERAGE:
            total += p
    if AVERAGE:
        mean = total * inv_heads
        if TWO_CELLS:
            _pool_two_cells(
                average_ptr, mean, r0, c0, rows, cols, cells_r, cells_c, block_r, block_c
            )
        else:
            _pool_each(average_ptr, mean, rows, cols, cells_c, block_r, block_c)


# The tiles, warps and pipeline stages the autotuner times on a GPU; ``pruned`` keeps
# those whose tiles fit the pooling blocks (``rows_cap`` × ``cols_cap``, from
# ``gpu_pooled.tiles``): the largest such tile and half as many rows, each with 4 or 8
# warps and 1 or 2 stages (at most 8 timed the first time a key is seen).
TILE_SIDES = (16, 32, 64, 128)
CONFIGS = [
    triton.Config({"BM": rows, "BN": cols}, num_warps=warps, num_stages=stages)
    for rows in TILE_SIDES
    for cols in TILE_SIDES[:3]
    for warps in (4, 8)
    for stages in (1, 2)
]


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def default_warps(rows: int, cols: int) -> int:
    """The warps of a tile when nothing is timed: 8 from 128 × 64 up, else 4."""
    return 8 if rows * cols >= 128 * 64 else 4


def pruned(configs: list[triton.Config], named_args: dict[str, Any], **_: Any) -> list[Any]:
    """The configs worth timing for this launch (see ``CONFIGS``); in Triton's
    interpreter (the CPU: nothing to time) the one the largest tile would use."""
    rows, cols = int(named_args["rows_cap"]), int(named_args["cols_cap"])
    if _interpreting():
        warps = default_warps(rows, cols)
        return [c for c in configs if _shape(c) == (rows, cols, warps, 1)]
    tiles = {(rows, cols), (max(16, rows // 2), cols)}
    return [c for c in configs if (c.kwargs["BM"], c.kwargs["BN"]) in tiles]


def _shape(config: triton.Config) -> tuple[int, int, int, int]:
    return config.kwargs["BM"], config.kwargs["BN"], config.num_warps, config.num_stages


def _two_cells(args: dict[str, Any]) -> bool:
    """Whether the chosen tile is no larger than a pooling block each way (so it touches
    at most 2 × 2 cells: ``_pool_two_cells``)."""
    return bool(args["BM"] <= args["block_r"] and args["BN"] <= args["block_c"])


# What ``gpu_pooled`` launches: ``pooled_maps_kernel`` with its tiles, warps and stages
# timed on the GPU the first time each (head dim, T's power-of-two bucket, tile caps)
# is seen, and ``TWO_CELLS`` set from the tile chosen.  The maps are written by atomic
# maxima, so timing runs that write them again leave the same grid.
pooled_maps_tuned = triton.autotune(
    configs=CONFIGS,
    key=["D", "t_bucket", "rows_cap", "cols_cap"],
    prune_configs_by={"early_config_prune": pruned},
)(triton.heuristics({"TWO_CELLS": _two_cells})(pooled_maps_kernel))
