"""One real head, step by step: the slice of a ``LayerTrace`` that one query head used.

The same steps the lessons show for a toy head (q, k, v, scores, scaled and
masked scores, weights, context), with a real model's numbers.  ``x`` is the
layer's attention input (after the layer's norm in pre-norm decoders); with
grouped-query attention the query head reads its own key/value head
``head // (H / H_kv)``; with RoPE, ``q`` and ``k`` are rotated, as attention
used them, and the projections before the rotation come along too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from ...attention import CoreSteps
from ...blocked_attention import (
    DEFAULT_BLOCK_CELLS,
    AttentionCall,
    rows_per_block,
    steps_by_rows,
)
from ...errors import SpecError
from ..base.outputs import AttentionInputs, LayerTrace
from ..maps.long_maps import KeptLayer


@dataclass(frozen=True)
class HeadTrace(CoreSteps, AttentionInputs):
    """Shapes (T queries, S keys, C model width, D head width): x (T, C); q (T, D);
    k, v (S, D); attn_scores, scaled_scores, masked_scores, attn_weights (T, S);
    context_vec (T, D); q_unrotated (T, D) and k_unrotated (S, D) with RoPE, else None.
    The optional steps of ``AttentionSteps``, None when the model has none:
    biased_scores, capped_scores (T, S) with ``softcap``; sink_weights (T,).
    """

    head: int  # 0-based query head
    kv_head: int
    causal: bool
    q_unrotated: torch.Tensor | None = None
    k_unrotated: torch.Tensor | None = None
    biased_scores: torch.Tensor | None = None
    capped_scores: torch.Tensor | None = None
    softcap: float | None = None
    sink_weights: torch.Tensor | None = None
    qk_norm: bool = False  # q and k went through the family's q/k norms


def head_trace(trace: LayerTrace, head: int, causal: bool) -> HeadTrace:
    """Query head ``head`` (0-based) of the first sequence in ``trace``.

    ``causal`` says whether the model masks later positions (decoders do).
    """
    num_heads, num_kv_heads = trace.q.shape[1], trace.k.shape[1]
    if not 0 <= head < num_heads:
        raise SpecError(
            f"head {head + 1} does not exist; this layer has heads 1 to {num_heads}",
            field="head",
        )
    kv_head = head // (num_heads // num_kv_heads)
    steps = trace.steps

    def pick(t: torch.Tensor | None, index: int) -> torch.Tensor | None:
        return None if t is None else t[0, index]  # (B, H, T, D) -> (T, D)

    return HeadTrace(
        layer=trace.layer,
        head=head,
        kv_head=kv_head,
        x=trace.x[0],  # (T, C)
        q=trace.q[0, head],
        k=trace.k[0, kv_head],
        v=trace.v[0, kv_head],
        attn_scores=steps.attn_scores[0, head],  # (T, S)
        scaled_scores=steps.scaled_scores[0, head],
        masked_scores=steps.masked_scores[0, head],
        attn_weights=steps.attn_weights[0, head],
        context_vec=steps.context_vec[0, head],  # (T, D)
        scale=steps.scale,
        causal=causal,
        q_unrotated=pick(trace.q_unrotated, head),
        k_unrotated=pick(trace.k_unrotated, kv_head),
        biased_scores=_head_of(steps.biased_scores, head),
        capped_scores=_head_of(steps.capped_scores, head),
        softcap=steps.softcap,
        sink_weights=_head_of(steps.sink_weights, head),
        qk_norm=trace.qk_norm,
    )


def _head_of(t: torch.Tensor | None, head: int) -> torch.Tensor | None:
    """One query head of an optional step: (B, H, T, S) -> (T, S), (B, H, T) -> (T,).

    A bias shared by the heads (broadcast over them) gives its one head."""
    if t is None:
        return None
    return t[0, head if t.shape[1] > 1 else 0]


@dataclass(frozen=True)
class TraceView:
    """What part of one head's (T, S) steps a trace answers: query rows [start, stop),
    key columns [start, stop), each map max-pooled in blocks of ``block`` (rows, cols)
    ((1, 1): full resolution).  The per-token vectors follow: x, q and the context over
    the rows, k and v over the columns, each block of tokens their mean."""

    rows: tuple[int, int]
    cols: tuple[int, int]
    block: tuple[int, int] = (1, 1)

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, cols) of each map answered."""
        (r0, r1), (c0, c1) = self.rows, self.cols
        return -(-(r1 - r0) // self.block[0]), -(-(c1 - c0) // self.block[1])


MAP_STEPS = (
    "attn_scores",
    "scaled_scores",
    "masked_scores",
    "attn_weights",
    "biased_scores",
    "capped_scores",
)


def _pooled_steps(
    call: AttentionCall, view: TraceView, block_cells: int
) -> dict[str, torch.Tensor | None]:
    """Each of ``MAP_STEPS`` (None where the call has no such step), the sink's weights
    ("sink") and the context ("ctx") over the view's rows, a bounded block of rows at a
    time: the maps cropped to the view's columns and max-pooled, the context mean-pooled."""
    S = int(call.key.shape[-2])
    step = rows_per_block(1, S, block_cells, multiple=view.block[0])
    (c0, c1), block = view.cols, view.block
    parts: dict[str, list[torch.Tensor]] = {name: [] for name in (*MAP_STEPS, "sink", "ctx")}
    for _, steps in steps_by_rows(call, view.rows, step):
        for name in MAP_STEPS:
            found = getattr(steps, name)
            if found is not None:
                parts[name].append(_max_pool(found[0, :, c0:c1], block))
        if steps.sink_weights is not None:
            parts["sink"].append(_max_pool(steps.sink_weights[0][:, None], (block[0], 1))[:, 0])
        parts["ctx"].append(mean_blocks(steps.context_vec[0], block[0]))
    return {name: torch.cat(found) if found else None for name, found in parts.items()}


def region_head_trace(
    trace: LayerTrace,
    kept: KeptLayer,
    head: int,
    causal: bool,
    view: TraceView,
    block_cells: int = DEFAULT_BLOCK_CELLS,
) -> HeadTrace:
    """Query head ``head`` (0-based) of one layer as ``view`` shows it, at any length.

    ``trace`` gives what attention read (x, q, k, v, before RoPE too; its steps are not
    read: a context-only pass leaves them empty); ``kept`` the layer's call as the pass
    kept it (mask, score bias, soft-cap, sinks).  The steps are recomputed for the
    view's rows a bounded block at a time, over every key, cropped to its columns and
    pooled block by block: no (T, S) map is made unless the view is the whole map.
    """
    H = kept.num_heads
    if not 0 <= head < H:
        raise SpecError(
            f"head {head + 1} does not exist; this layer has heads 1 to {H}", field="head"
        )
    kv_head = head // (H // kept.num_kv_heads)
    call = replace(kept.call([head]), value=trace.v[0, kv_head][None].float())
    maps = _pooled_steps(call, view, block_cells)
    (r0, r1), (c0, c1), block = view.rows, view.cols, view.block

    def rows_of(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else mean_blocks(t[r0:r1], block[0])

    def cols_of(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else mean_blocks(t[c0:c1], block[1])

    return HeadTrace(
        layer=trace.layer,
        head=head,
        kv_head=kv_head,
        x=mean_blocks(trace.x[0][r0:r1], block[0]),
        q=mean_blocks(trace.q[0, head][r0:r1], block[0]),
        k=mean_blocks(trace.k[0, kv_head][c0:c1], block[1]),
        v=mean_blocks(trace.v[0, kv_head][c0:c1], block[1]),
        attn_scores=_required(maps["attn_scores"]),
        scaled_scores=_required(maps["scaled_scores"]),
        masked_scores=_required(maps["masked_scores"]),
        attn_weights=_required(maps["attn_weights"]),
        context_vec=_required(maps["ctx"]),
        scale=kept.scale,
        causal=causal,
        q_unrotated=rows_of(None if trace.q_unrotated is None else trace.q_unrotated[0, head]),
        k_unrotated=cols_of(None if trace.k_unrotated is None else trace.k_unrotated[0, kv_head]),
        biased_scores=maps["biased_scores"],
        capped_scores=maps["capped_scores"],
        softcap=kept.softcap,
        sink_weights=maps["sink"],
        qk_norm=trace.qk_norm,
    )


def _required(t: torch.Tensor | None) -> torch.Tensor:
    if t is None:  # unreachable: every block has these steps
        raise RuntimeError("a step every attention call has is missing")
    return t


def _max_pool(t: torch.Tensor, block: tuple[int, int]) -> torch.Tensor:
    """(n, m) -> (⌈n / b_r⌉, ⌈m / b_c⌉): each cell its block's maximum (masked: -inf)."""
    if block == (1, 1):
        return t
    return F.max_pool2d(t[None], block, block, ceil_mode=True)[0]


def mean_blocks(t: torch.Tensor, size: int) -> torch.Tensor:
    """(n, D) -> (⌈n / size⌉, D): each block of ``size`` rows its mean (the last may be
    shorter)."""
    if size == 1:
        return t
    n = t.shape[0]
    cells = -(-n // size)
    sums = F.pad(t, (0, 0, 0, cells * size - n)).view(cells, size, -1).sum(1)
    counts = torch.full((cells, 1), float(size), dtype=t.dtype)
    counts[-1] = n - (cells - 1) * size
    return sums / counts
