"""Attention maps made small enough to send: one region, block-pooled by its maximum.

A long text's map is too big to ship whole (T = 4,096: 16.8 M weights a head),
so a viewer asks for an overview (every map pooled to at most ``cells`` ×
``cells``) and then for one region at full resolution.  A pooled cell is the
**maximum** of its block: a sharp head (previous token, one attended word)
keeps its one-cell-wide line at full strength however far it is pooled,
where a block's mean would dim it by the block's width and make it look like
a uniform head.  (The /model page's thumbnails and the notebook views pool by
the maximum too.)  Masked cells are 0, so a block is 0 only when every cell
in it is masked or unattended.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

POOL_REDUCE = "maximum"  # what a pooled cell is, as the API says it


def block_size(length: int, cells: int) -> int:
    """The smallest block that covers ``length`` positions in at most ``cells`` blocks."""
    if length < 1 or cells < 1:
        raise ValueError(f"length and cells must be at least 1; found {length} and {cells}")
    return math.ceil(length / cells)


@dataclass(frozen=True)
class Region:
    """Rows ``[row_start, row_stop)`` and columns ``[col_start, col_stop)`` of a map."""

    row_start: int
    row_stop: int
    col_start: int
    col_stop: int

    def crop(self, maps: torch.Tensor) -> torch.Tensor:
        """Shapes: (..., Tq, Tk) -> (..., rows, cols); a view, no copy."""
        return maps[..., self.row_start : self.row_stop, self.col_start : self.col_stop]


def max_pool_blocks(maps: torch.Tensor, block_rows: int, block_cols: int) -> torch.Tensor:
    """Each ``block_rows`` × ``block_cols`` block's maximum; the last blocks may be partial.

    Shapes: (..., Tq, Tk) -> (..., ceil(Tq / block_rows), ceil(Tk / block_cols)).
    """
    if block_rows == 1 and block_cols == 1:
        return maps
    *lead, Tq, Tk = maps.shape
    flat = maps.reshape(-1, 1, Tq, Tk)  # (N, 1, Tq, Tk): max_pool2d's (batch, channel, H, W)
    pooled = F.max_pool2d(flat, (block_rows, block_cols), (block_rows, block_cols), ceil_mode=True)
    return pooled.reshape(*lead, *pooled.shape[-2:])


def pool_to(maps: torch.Tensor, cells: int) -> tuple[torch.Tensor, tuple[int, int]]:
    """``maps`` (..., Tq, Tk) max-pooled to at most ``cells`` × ``cells``, and the block
    (rows, cols) used: each axis gets the smallest block that fits it."""
    Tq, Tk = int(maps.shape[-2]), int(maps.shape[-1])
    block = (block_size(Tq, cells), block_size(Tk, cells))
    return max_pool_blocks(maps, *block), block
