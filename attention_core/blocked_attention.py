"""``attention_with_steps`` over a long input, a bounded block of query rows at a time.

A 4,096-token layer of 12 heads has 201 M scores; ``attention_with_steps``
keeps four tensors of them (scores, scaled, masked, weights): 3.2 GB at once.
``blocked_attention`` calls it on ``block_rows`` query rows at a time, with
only the keys some row of the block may see (a causal block of rows
``r0..r1`` reads keys ``0..r1``: half the scores of a whole causal map are
never computed; a sliding window's block skips the keys before its window
too), and hands each block's weights to ``on_block`` before the next block is
computed.  The context vectors are the blocks' own, concatenated: the keys
left out have weight exactly 0, so they would add nothing.  The softmax
itself stays in ``attention_with_steps``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import torch

from .attention import AttentionSteps, attention_with_steps, context_fuses

# (first row, first column, weights (..., H, rows, cols)) of one block of rows.
BlockSink = Callable[[int, int, torch.Tensor], None]

# Scores per block, over every head: ~16 MB a step tensor, ~80 MB for all of a block's steps.
DEFAULT_BLOCK_CELLS = 1 << 22
# On a GPU: ~512 MB a step tensor.  Launches, not memory, bound a GPU's blocks: at
# T = 32,768 with 32 heads, DEFAULT_BLOCK_CELLS is 4 rows a block, 8,192 blocks a layer,
# each a few dozen kernel launches.
GPU_BLOCK_CELLS = 1 << 27


def rows_per_block(
    heads: int,
    keys: int,
    cells: int = DEFAULT_BLOCK_CELLS,
    multiple: int = 1,
    device: torch.device | None = None,
) -> int:
    """Query rows whose ``heads`` × rows × ``keys`` scores fit in ``cells`` (at least
    ``GPU_BLOCK_CELLS`` on a GPU ``device``; at least ``multiple`` rows), rounded down to
    a multiple of ``multiple``."""
    if device is not None and device.type != "cpu":
        cells = max(cells, GPU_BLOCK_CELLS)
    rows = max(1, cells // max(1, heads * keys))
    return max(multiple, rows - rows % multiple)


def _rows_of(t: torch.Tensor, r0: int, r1: int) -> torch.Tensor:
    """Rows ``r0..r1`` of a tensor broadcast over (..., T, S) (a size-1 row axis stays)."""
    return t if t.shape[-2] == 1 else t[..., r0:r1, :]


def _cols_of(t: torch.Tensor, c0: int, c1: int) -> torch.Tensor:
    return t if t.shape[-1] == 1 else t[..., c0:c1]


def _visible_span(
    mask_rows: torch.Tensor | None, causal_stop: int | None, num_keys: int
) -> tuple[int, int]:
    """The columns [c0, c1) holding every key some row of the block may see."""
    c1 = num_keys if causal_stop is None else causal_stop
    if mask_rows is None:
        return 0, c1
    seen = mask_rows[..., :c1].reshape(-1, c1).any(dim=0).nonzero()  # (n, 1)
    if seen.numel() == 0:  # every row masked: the full call says why
        return 0, num_keys
    return int(seen[0, 0]), int(seen[-1, 0]) + 1


class BiasRule(ABC):
    """A score bias computed for the cells asked, never held whole: T5's relative positions
    (a table of buckets × heads, read by each cell's distance) make (H, T, S) floats
    otherwise, every head's whole map's worth (805 MB at 4,096 tokens and 12 heads)."""

    @property
    @abstractmethod
    def shape(self) -> tuple[int, int, int]:
        """(H, T, S): the bias it stands for."""

    @abstractmethod
    def block(self, rows: tuple[int, int], cols: tuple[int, int]) -> torch.Tensor:
        """(H, rows, cols) float32: rows [r0, r1) and columns [c0, c1) of every head."""

    @abstractmethod
    def heads(self, index: torch.Tensor) -> BiasRule:
        """The rule of the heads of ``index`` (0-based), in that order."""

    def full(self) -> torch.Tensor:
        """(H, T, S): the whole bias (a short call's, as ``attention_with_steps`` takes it)."""
        _, T, S = self.shape
        return self.block((0, T), (0, S))


ScoreBias = torch.Tensor | BiasRule


def bias_block(
    bias: ScoreBias | None, rows: tuple[int, int], cols: tuple[int, int]
) -> torch.Tensor | None:
    """Rows [r0, r1) and columns [c0, c1) of a score bias broadcast over (..., T, S)."""
    if bias is None:
        return None
    if isinstance(bias, BiasRule):
        return bias.block(rows, cols)
    return _cols_of(_rows_of(bias, *rows), *cols)


@dataclass(frozen=True)
class AttentionCall:
    """One attention call's inputs, as ``attention_with_steps`` takes them (no dropout).

    Shapes: query (..., H, T, D), key (..., H_kv, S, D), value (..., H_kv, S,
    D_v); ``attn_mask`` (boolean) and ``score_bias`` (a tensor or a ``BiasRule``)
    broadcastable to (..., H, T, S); ``sinks`` (H,).  A blocked pass receives one of
    these per layer.
    """

    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    attn_mask: torch.Tensor | None = None
    is_causal: bool = False
    scale: float | None = None
    enable_gqa: bool = False
    score_bias: ScoreBias | None = None
    softcap: float | None = None
    sinks: torch.Tensor | None = None

    @property
    def fuses_context(self) -> bool:
        """Whether the context alone can come from torch's fused kernel (``context_fuses``)."""
        return context_fuses(self.attn_mask, 0.0, self.score_bias, self.softcap, self.sinks)

    @property
    def scale_factor(self) -> float:
        """The scale applied: ``scale``, or ``1/sqrt(D)`` when it is None."""
        return 1.0 / math.sqrt(self.query.shape[-1]) if self.scale is None else float(self.scale)


def _block_steps(
    call: AttentionCall, rows: tuple[int, int], cols: tuple[int, int], keep_steps: bool
) -> AttentionSteps:
    """``attention_with_steps`` of ``call``'s query rows [r0, r1) over its keys [c0, c1).

    The block's mask, causal triangle (top-left aligned, as ``attention_with_steps``:
    row i sees keys 0..i) and score bias are cut to those rows and columns.
    """
    (r0, r1), (c0, c1) = rows, cols
    allowed = None
    if call.attn_mask is not None:
        allowed = _cols_of(_rows_of(call.attn_mask, r0, r1), c0, c1)
    if call.is_causal:
        causal = torch.ones(r1 - r0, c1 - c0, dtype=torch.bool).tril(r0 - c0)
        allowed = causal if allowed is None else allowed & causal
    bias = bias_block(call.score_bias, (r0, r1), (c0, c1))
    return attention_with_steps(
        call.query[..., r0:r1, :],
        call.key[..., c0:c1, :],
        call.value[..., c0:c1, :],
        attn_mask=allowed,
        scale=call.scale_factor,
        enable_gqa=call.enable_gqa,
        score_bias=bias,
        softcap=call.softcap,
        sinks=call.sinks,
        keep_steps=keep_steps,
    )


def blocked_attention(
    call: AttentionCall,
    *,
    block_rows: int | None = None,
    on_block: BlockSink | None = None,
    rows: tuple[int, int] | None = None,
) -> torch.Tensor:
    """``attention_with_steps(...).context_vec`` of ``call``, ``block_rows`` query rows at a time.

    Shapes: as ``AttentionCall`` -> context (..., H, T, D_v).  ``on_block(r0,
    c0, weights)`` gets each block's weights (..., H, rows, cols): rows ``r0..``
    of the map, columns ``c0..``; the columns outside [c0, c0 + cols) are
    exactly 0.  ``block_rows`` defaults to what keeps ``DEFAULT_BLOCK_CELLS``
    scores a block.  ``rows`` = [start, stop): only these query rows (a
    region's), context (..., H, stop - start, D_v).
    """
    # Contiguous once: a view (GPT-2's q/k/v split from one projection) would be copied by
    # every block's matmul (the keys up to the block's last row: ~6 MB a block at T = 4,096).
    q, k, v = call.query.contiguous(), call.key.contiguous(), call.value.contiguous()
    contiguous = replace(call, query=q, key=k, value=v)
    T, S = call.query.shape[-2], call.key.shape[-2]
    heads = call.query.shape[-3] if call.query.dim() >= 3 else 1
    step = block_rows or rows_per_block(heads, S, device=call.query.device)
    parts = []
    start, stop = rows if rows is not None else (0, T)
    for r0 in range(start, stop, step):
        r1 = min(stop, r0 + step)
        mask_rows = None if call.attn_mask is None else _rows_of(call.attn_mask, r0, r1)
        cols = _visible_span(mask_rows, r1 if call.is_causal else None, S)
        steps = _block_steps(contiguous, (r0, r1), cols, keep_steps=False)
        if on_block is not None:
            on_block(r0, cols[0], steps.attn_weights)
        parts.append(steps.context_vec)
        del steps  # this block's scores go before the next block's are made
    return torch.cat(parts, dim=-2)  # (..., H, T, D_v)


def steps_by_rows(
    call: AttentionCall, rows: tuple[int, int], block_rows: int
) -> Iterator[tuple[int, AttentionSteps]]:
    """Every step of ``call``'s query rows [start, stop), ``block_rows`` rows at a time,
    each block over every key (none skipped: a trace shows the masked cells' scores too).

    Shapes: as ``AttentionCall``; each block's steps (..., H, rows, S).  The mask,
    the causal triangle (row i sees keys 0..i) and the score bias are the block's rows.
    """
    S = call.key.shape[-2]
    start, stop = rows
    for r0 in range(start, stop, block_rows):
        r1 = min(stop, r0 + block_rows)
        yield r0, _block_steps(call, (r0, r1), (0, S), keep_steps=True)
